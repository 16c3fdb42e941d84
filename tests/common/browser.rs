//! A headless Chromium (Debian's `chromium`) driven over the DevTools
//! protocol: open a page in a tab, evaluate expressions in it, take
//! screenshots (kept under `$PERF_EXPORTER_TEST_ARTIFACTS`, or the
//! target's test directory). Used by the live page's tests
//! (`tests/e2e/live_view.rs`, `tests/live/flame.rs`).

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

/// A headless Chromium with the DevTools protocol on a loopback port.
pub(crate) struct Browser {
    child: Child,
    port: u16,
    /// The browser's DevTools path (`/devtools/browser/<id>`).
    path: String,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    pub(crate) fn start() -> Browser {
        super::require_tool("chromium");
        let profile = tempfile::tempdir().expect("tempdir");
        let child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1200,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        // Chromium writes the port it chose to DevToolsActivePort.
        let file = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let (port, path) = loop {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let mut lines = text.lines();
            if let (Some(Ok(port)), Some(path)) =
                (lines.next().map(|l| l.trim().parse()), lines.next())
            {
                break (port, path.trim().to_string());
            }
            assert!(
                Instant::now() < deadline,
                "chromium did not start within 30s"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        Browser {
            child,
            port,
            path,
            _profile: profile,
        }
    }

    /// Opens `url` in a new tab (through the browser's own DevTools
    /// endpoint, `Target.createTarget`) and connects to the tab.
    pub(crate) async fn open(&self, url: &str) -> Tab {
        let browser = format!("ws://127.0.0.1:{}{}", self.port, self.path);
        let (ws, _) = tokio_tungstenite::connect_async(browser)
            .await
            .expect("DevTools browser connect");
        let mut b = Tab { ws, id: 0 };
        let r = b.call("Target.createTarget", json!({ "url": url })).await;
        let target = r["targetId"].as_str().expect("targetId").to_string();
        let page = format!("ws://127.0.0.1:{}/devtools/page/{target}", self.port);
        let (ws, _) = tokio_tungstenite::connect_async(page)
            .await
            .expect("DevTools page connect");
        Tab { ws, id: 0 }
    }
}

/// One DevTools session on a tab.
pub(crate) struct Tab {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    id: u64,
}

impl Tab {
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let msg = json!({"id": self.id, "method": method, "params": params});
        self.ws
            .send(Message::Text(msg.to_string().into()))
            .await
            .expect("DevTools send");
        loop {
            let m = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .expect("DevTools answer within 30s")
                .expect("DevTools open")
                .expect("DevTools message");
            if let Message::Text(t) = m {
                let v: Value = serde_json::from_str(&t).expect("DevTools JSON");
                if v["id"] == json!(self.id) {
                    return v["result"].clone();
                }
            }
        }
    }

    /// Evaluates `expr` in the page (which must return a JSON string).
    pub(crate) async fn eval(&mut self, expr: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true}),
            )
            .await;
        let s = r["result"]["value"].as_str().unwrap_or("null");
        serde_json::from_str(s).unwrap_or(Value::Null)
    }

    /// Saves a screenshot; returns its path.
    pub(crate) async fn screenshot(&mut self, name: &str) -> PathBuf {
        use base64::Engine as _;
        let r = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap_or(""))
            .expect("base64 PNG");
        let dir = std::env::var_os("PERF_EXPORTER_TEST_ARTIFACTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
            .join("live_view");
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        path
    }
}

/// The current-thread runtime the DevTools sessions run on.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}
