//! Issue 11, item 5: a file read that never returns (a hung NFS or FUSE
//! mount, where `O_NONBLOCK` does not apply) must fail that reload within
//! `--config.read-timeout`, naming the file, while `/metrics` keeps
//! answering and the next reload goes ahead; at start-up it must fail the
//! start. The blocking read is the test hook of `bounded::watch::hang`,
//! which blocks inside the bounded read of exactly that file.

use super::super::opening::open_engine;
use super::*;
use crate::bounded::watch::hang;
use crate::web;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const ONE_SET: &str =
    "sets:\n  - name: sw\n    events:\n      - metric: perf_cpu_clock_seconds_total\n        event: cpu-clock\n";

/// Serving the simulated intel-skx fixture with a config file in `dir`.
fn sources(dir: &Path, limit: Duration) -> Sources {
    let cfg = dir.join("perf-exporter.yml");
    std::fs::write(&cfg, ONE_SET).expect("write the config");
    Sources {
        host: HostSettings {
            config_file: Some(cfg),
            ..HostSettings::simulated(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/intel-skx"),
                "/proc".into(),
            )
        },
        web_config_file: None,
        allow_downgrade: false,
        deadline: Deadline::new(limit),
    }
}

/// The status and body of `GET path`.
async fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("response");
    let status = out.lines().next().unwrap_or_default().to_string();
    (status, out)
}

/// The value of `perf_config_last_reload_successful` in a scrape.
fn reload_ok(body: &str) -> &str {
    body.lines()
        .find_map(|l| l.strip_prefix("perf_config_last_reload_successful "))
        .unwrap_or_else(|| panic!("no perf_config_last_reload_successful in\n{body}"))
}

#[test]
fn a_read_that_never_returns_fails_that_reload_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Long enough that the second reload, which does real work, is not
    // itself given up on while parallel tests load the machine (at 300 ms
    // it was, with `ReadTimeout::Stalled`).
    let limit = Duration::from_millis(1500);
    let src = sources(dir.path(), limit);
    let cfg = src.host.config_file.clone().expect("config");
    let p = prepare(&src).expect("start-up");
    let procfs = std::path::Path::new("/proc");
    let engine = open_engine(
        p.kernel.clone(),
        p.loaded.table.clone(),
        p.loaded.res,
        None,
        procfs,
    );
    let engine = Arc::new(Mutex::new(engine));
    let state = State::new(web::Options {
        config_name: cfg.display().to_string(),
        procfs: src.host.procfs.clone(),
        ..web::Options::for_tests(engine.clone())
    });
    let mut job = Job {
        guard: Guard::of(&WebConfig::default()),
        sources: src,
        table: p.loaded.table,
        ctx: p.host.ctx,
        kernel: p.kernel,
        engine,
        state: state.clone(),
    };
    let reloader = Reloader::start(move || job.run()).expect("reload thread");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let listener = web::bind("127.0.0.1:0", "/metrics").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(web::serve(listener, state, async {
            let _ = stopped.await;
        }));

        // The next read of the config file blocks until `held` is dropped.
        let held = hang::next_read_of(&cfg);
        let t0 = Instant::now();
        let e = reloader.reload().await.expect_err("the reload gives up");
        let waited = t0.elapsed();
        assert!(matches!(*e, ReloadError::ReadTimeout(_)), "{e}");
        let e = e.to_string();
        let named = format!(
            "reading {0} (the config file {0}) did not return within 1.5s (--config.read-timeout)",
            cfg.display()
        );
        assert!(e.starts_with(&named), "{e}");
        assert!(waited >= limit, "gave up after {waited:?}");
        // Not a timing claim: proof that the wait ended (it never did).
        assert!(waited < Duration::from_secs(10), "gave up after {waited:?}");
        let (status, body) = get(addr, "/metrics").await;
        assert!(status.contains(" 200 "), "{status}");
        assert_eq!(reload_ok(&body), "0");

        // The first read is still blocked; the next reload reads the file
        // on a helper of its own and succeeds.
        let summary = reloader.reload().await.expect("the next reload");
        assert!(summary.contains("1 of 1 metrics counted"), "{summary}");
        let (status, body) = get(addr, "/metrics").await;
        assert!(status.contains(" 200 "), "{status}");
        assert_eq!(reload_ok(&body), "1");
        assert!(body.contains("perf_cpu_clock_seconds_total"), "{body}");
        drop(held);
        let _ = stop.send(());
        server.await.expect("server");
    });
}

#[test]
fn a_read_that_never_returns_fails_the_start_up_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = sources(dir.path(), Duration::from_millis(200));
    let cfg = src.host.config_file.clone().expect("config");
    let _held = hang::next_read_of(&cfg);
    let s = src.clone();
    let e = src
        .deadline
        .run("start-up reads", move || prepare(&s))
        .map(|_| ())
        .expect_err("the start-up fails");
    let named = format!(
        "reading {0} (the config file {0}) did not return within 200ms",
        cfg.display()
    );
    assert!(e.to_string().starts_with(&named), "{e}");
}

#[test]
fn a_hung_pem_file_is_named_with_the_web_config_that_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut src = sources(dir.path(), Duration::from_millis(200));
    let p = prepare(&src).expect("start-up");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n",
    )
    .expect("write");
    let pem = dir.path().join("server.pem");
    std::fs::write(&pem, "").expect("write");
    src.web_config_file = Some(web.clone());
    let _held = hang::next_read_of(&pem);
    let (table, ctx, kernel) = (p.loaded.table, p.host.ctx, p.kernel);
    let s = src.clone();
    let e = src
        .deadline
        .run("reload-reads", move || {
            load(&s, &table, &ctx, kernel.as_ref())
        })
        .map(|_| ())
        .expect_err("the load gives up");
    let named = format!(
        "reading {} (the web config file {} or a file it names) did not return within 200ms",
        pem.display(),
        web.display()
    );
    assert!(e.to_string().starts_with(&named), "{e}");
}
