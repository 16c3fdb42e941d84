//! OTLP push when things go wrong, end to end: a collector that dies or
//! hangs (scrapes stay fast, failures are counted, shutdown is bounded),
//! redirects (never to another origin), secrets in the endpoint (never in
//! the log), and TLS (custom CA, client certificates, and what an
//! untrusted certificate says). The harness is `tests/common/otlp.rs`.

use crate::common;

use common::otlp::{
    exports_in, find_metric, live, simulated, wait_for, Exporter, Pki, Receiver, Vm,
};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ------------------------------------------------------------ failures

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Scrapes `n` times, 100 ms apart: the latencies.
fn scrapes(ex: &Exporter, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let (_, d) = ex.scrape();
            std::thread::sleep(Duration::from_millis(100));
            d
        })
        .collect()
}

/// Scrapes every 100 ms until `done` holds for the last body and at
/// least `min` scrapes were made: latencies and the last body. Panics
/// after `limit`.
fn scrape_until(
    ex: &Exporter,
    what: &str,
    min: usize,
    limit: Duration,
    done: impl Fn(&str) -> bool,
) -> (Vec<Duration>, String) {
    let deadline = Instant::now() + limit;
    let mut lat = Vec::new();
    loop {
        let (body, d) = ex.scrape();
        lat.push(d);
        if lat.len() >= min && done(&body) {
            return (lat, body);
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}; last scrape:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn assert_scrapes_unaffected(before: &mut [Duration], after: &mut [Duration]) {
    let (mb, ma) = (median(before), median(after));
    let max_b = *before.iter().max().unwrap();
    let max_a = *after.iter().max().unwrap();
    assert!(
        ma <= mb * 3 + Duration::from_millis(50),
        "median scrape {mb:?} before, {ma:?} after"
    );
    assert!(
        max_a <= (max_b * 5).max(Duration::from_millis(500)),
        "slowest scrape {max_b:?} before, {max_a:?} after"
    );
}

#[test]
fn otlp_collector_killed_mid_run_scrapes_stay_fast_and_failures_are_counted() {
    let mut vm = Vm::start(&[]);
    let ex = live(
        &[],
        &[
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://{}/opentelemetry", vm.addr),
            ),
            ("OTEL_METRIC_EXPORT_INTERVAL", "500".into()),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000".into()),
        ],
    );
    wait_for("two successful exports", Duration::from_secs(20), || {
        ex.exports().0 >= 2.0
    });
    let mut before = scrapes(&ex, 20);
    let (_, failed0) = ex.exports();
    assert_eq!(failed0, 0.0);
    // Kill the collector (SIGKILL, by pid).
    vm.proc.kill();
    let (mut after, _) = scrape_until(
        &ex,
        "two counted failures",
        20,
        Duration::from_secs(30),
        |body| exports_in(body).1 >= 2.0,
    );
    assert_scrapes_unaffected(&mut before, &mut after);
    // The failure is logged, rate limited: once, not once per export.
    let log = ex.proc.output();
    assert_eq!(log.matches("OTLP export failed").count(), 1, "{log}");
}

#[test]
fn otlp_hanging_collector_never_slows_scrapes_and_shutdown_is_bounded() {
    // A collector that accepts connections and never answers.
    let hole = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = hole.local_addr().unwrap().to_string();
    let held = Arc::new(Mutex::new(Vec::new()));
    let h2 = held.clone();
    std::thread::spawn(move || {
        for s in hole.incoming().flatten() {
            h2.lock().unwrap().push(s);
        }
    });
    let mut ex = live(
        &["--otlp.timeout", "2s", "--otlp.interval", "300ms"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))],
    );
    let mut before = scrapes(&ex, 10);
    wait_for("a timed-out export", Duration::from_secs(15), || {
        ex.exports().1 >= 1.0
    });
    // Scrapes while further exports hang (interval 300 ms, timeout 2 s).
    let (mut after, last) = scrape_until(
        &ex,
        "a second timed-out export",
        20,
        Duration::from_secs(20),
        |body| exports_in(body).1 >= 2.0,
    );
    let (ok, failed) = exports_in(&last);
    assert_eq!(ok, 0.0);
    assert!(failed >= 2.0);
    assert_scrapes_unaffected(&mut before, &mut after);
    assert!(
        !held.lock().unwrap().is_empty(),
        "the exporter never connected"
    );
    assert!(
        ex.proc.output().contains("timed out"),
        "{}",
        ex.proc.output()
    );
    // SIGTERM while an export hangs: one final push bounded by the
    // timeout (2 s), then exit.
    let (st, took) = ex.proc.terminate(Duration::from_secs(8));
    assert!(st.success(), "{st}");
    assert!(took < Duration::from_secs(4), "shutdown took {took:?}");
    assert!(
        ex.proc
            .output()
            .contains("final OTLP export at shutdown failed"),
        "{}",
        ex.proc.output()
    );
}

/// A minimal HTTP/1.1 server: answers each request with `respond(path)`
/// and keeps each request's head. Stops with the test process.
struct Http1 {
    addr: String,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Http1 {
    fn start(respond: impl Fn(&str) -> String + Send + 'static) -> Http1 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let h2 = heads.clone();
        std::thread::spawn(move || {
            for mut c in l.incoming().flatten() {
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = Vec::new();
                let mut b = [0u8; 4096];
                let end = loop {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => break None,
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                    }
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break Some(i);
                    }
                };
                let Some(end) = end else { continue };
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < end + 4 + len {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                    }
                }
                let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                h2.lock().unwrap().push(head);
                let _ = c.write_all(respond(&path).as_bytes());
            }
        });
        Http1 { addr, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn redirect_to(location: &str) -> String {
    format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

const OK: &str = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Issue 11: a redirect to another origin is not followed, the secret
/// header never reaches it, and the export counts as failed; a redirect
/// within the origin is followed. (The https-to-http downgrade is refused
/// by the same policy: `transport::http` unit tests.)
#[test]
fn otlp_follows_no_redirect_to_another_origin() {
    let elsewhere = Http1::start(|_| OK.to_string());
    let target = format!("http://{}/v1/metrics", elsewhere.addr);
    let collector = Http1::start(move |path| match path {
        "/same" => redirect_to("/ok"),
        "/ok" => OK.to_string(),
        _ => redirect_to(&target),
    });
    let env = |path: &str| {
        vec![
            (
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                format!("http://{}{path}", collector.addr),
            ),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret".to_string()),
        ]
    };
    let ex = simulated(&["--otlp.interval", "300ms"], &env("/v1/metrics"));
    wait_for("two failed exports", Duration::from_secs(20), || {
        ex.exports().1 >= 2.0
    });
    assert_eq!(
        ex.exports().0,
        0.0,
        "a refused redirect counted as a success"
    );
    assert!(
        elsewhere.heads().is_empty(),
        "followed: {:?}",
        elsewhere.heads()
    );
    let log = ex.proc.output();
    assert!(
        log.contains(&format!(
            "refused a redirect to http://{}/v1/metrics: another origin",
            elsewhere.addr
        )),
        "{log}"
    );
    let same = simulated(&["--otlp.interval", "300ms"], &env("/same"));
    wait_for(
        "an export through a same-origin redirect",
        Duration::from_secs(20),
        || same.exports().0 >= 1.0,
    );
    let heads = collector.heads();
    let ok = heads
        .iter()
        .find(|h| h.starts_with("POST /ok "))
        .expect("the redirect was followed");
    let ok = ok.to_ascii_lowercase();
    assert!(ok.contains("x-api-key: s3cret"), "{ok}");
    assert!(ok.contains("content-type: application/x-protobuf"), "{ok}");
    let agent = format!("user-agent: perf-exporter/{}", env!("CARGO_PKG_VERSION"));
    assert!(ok.contains(&agent), "{ok}");
}

/// Issue 11: userinfo and query values of the endpoint appear in no log
/// line (start-up, failure warnings, the final export).
#[test]
fn otlp_endpoint_secrets_never_reach_the_log() {
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut ex = simulated(
        &["--otlp.interval", "300ms", "--otlp.timeout", "1s"],
        &[(
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            format!("http://user:pw0rd@127.0.0.1:{closed}/v1/metrics?api_key=s3cret&tenant=hidden-tenant"),
        )],
    );
    wait_for("a logged export failure", Duration::from_secs(20), || {
        ex.proc.output().contains("OTLP export failed")
    });
    let (st, _) = ex.proc.terminate(Duration::from_secs(10));
    assert!(st.success(), "{st}");
    let log = ex.proc.output();
    assert!(
        log.contains("final OTLP export at shutdown failed"),
        "{log}"
    );
    for secret in ["pw0rd", "s3cret", "hidden-tenant", "user:"] {
        assert!(!log.contains(secret), "`{secret}` in the log:\n{log}");
    }
    let redacted =
        format!("http://REDACTED@127.0.0.1:{closed}/v1/metrics?api_key=REDACTED&tenant=REDACTED");
    assert!(log.matches(&redacted).count() >= 3, "{log}");
}

// ----------------------------------------------------------------- TLS

#[test]
fn otlp_grpc_over_tls_with_a_custom_ca_and_a_client_certificate() {
    let pki = Pki::new();
    let tls = tonic::transport::ServerTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(
            &pki.server_cert,
            &pki.server_key,
        ))
        .client_ca_root(tonic::transport::Certificate::from_pem(&pki.ca_pem));
    let rx = Receiver::start(Some(tls));
    let port = rx.addr.rsplit(':').next().unwrap().to_string();
    let endpoint = format!("https://localhost:{port}");
    let ex = live(
        &["--otlp.interval", "500ms"],
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
            (
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                pki.path("client.pem"),
            ),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", pki.path("client.key")),
        ],
    );
    wait_for("an export over TLS", Duration::from_secs(20), || {
        !rx.received().is_empty()
    });
    assert!(find_metric(&rx.received()[0].req, "perf.cpu.clock").is_some());
    wait_for("a counted success", Duration::from_secs(10), || {
        ex.exports().0 >= 1.0
    });

    // Without the CA the server is not trusted (the system roots do not
    // know it), and without a client certificate the server refuses.
    for env in [
        vec![
            (
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                pki.path("client.pem"),
            ),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", pki.path("client.key")),
        ],
        vec![("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem"))],
    ] {
        let mut e = env;
        e.push(("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()));
        e.push(("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()));
        e.push(("OTEL_EXPORTER_OTLP_TIMEOUT", "2000".into()));
        let bad = live(&["--otlp.interval", "300ms"], &e);
        wait_for("a failed TLS export", Duration::from_secs(20), || {
            bad.exports().1 >= 1.0
        });
        assert_eq!(bad.exports().0, 0.0, "{}", bad.proc.output());
        if !e
            .iter()
            .any(|(k, _)| *k == "OTEL_EXPORTER_OTLP_CERTIFICATE")
        {
            let log = bad.proc.output();
            assert!(log.contains("certificate problem"), "{log}");
        }
    }
}

#[test]
fn otlp_http_over_tls_with_a_custom_ca() {
    let pki = Pki::new();
    let vm = Vm::start(&[
        "-tls",
        &format!("-tlsCertFile={}", pki.path("server.pem")),
        &format!("-tlsKeyFile={}", pki.path("server.key")),
    ]);
    let port = vm.addr.rsplit(':').next().unwrap().to_string();
    let ex = live(
        &[
            "--otlp.interval",
            "500ms",
            "--otlp.certificate",
            &pki.path("ca.pem"),
        ],
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("https://localhost:{port}/opentelemetry"),
        )],
    );
    wait_for("two exports over TLS", Duration::from_secs(20), || {
        ex.exports().0 >= 2.0
    });
    assert_eq!(ex.exports().1, 0.0);
    // Without the CA: not trusted.
    let bad = live(
        &["--otlp.interval", "300ms", "--otlp.timeout", "2s"],
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("https://localhost:{port}/opentelemetry"),
        )],
    );
    wait_for("a failed export", Duration::from_secs(20), || {
        bad.exports().1 >= 1.0
    });
    assert_eq!(bad.exports().0, 0.0);
    // Issue 11: the failure says it is the certificate, and what to do.
    let log = bad.proc.output();
    assert!(
        log.contains(
            "certificate problem: the collector's certificate is not signed by a CA it trusts"
        ) && log.contains("--otlp.certificate"),
        "{log}"
    );
}
