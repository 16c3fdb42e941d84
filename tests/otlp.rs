//! OTLP push end to end: the real binary counting live software events
//! (root), pushing to a real VictoriaMetrics 1.112 over HTTP/protobuf and
//! to a gRPC receiver built on opentelemetry-proto's tonic service, with
//! TLS, a collector that dies or hangs, and shutdown.
//!
//! VictoriaMetrics comes from `scripts/fetch-servers.sh` (its path in
//! `PERF_EXPORTER_TEST_VICTORIA_METRICS`, as `scripts/test.sh` exports it;
//! without it the script is run here). A test that cannot get it fails.

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point, Metric};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- helpers

/// A real server's binary from `scripts/fetch-servers.sh`.
fn server_bin(key: &str) -> PathBuf {
    if let Ok(p) = std::env::var(format!("PERF_EXPORTER_TEST_{key}")) {
        let p = PathBuf::from(p);
        assert!(
            p.exists(),
            "PERF_EXPORTER_TEST_{key}={} does not exist",
            p.display()
        );
        return p;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-servers.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed: this test needs {key} (set PERF_EXPORTER_TEST_{key} or run scripts/test.sh)",
        script.display()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let p = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{} printed no {key}=", script.display()));
    PathBuf::from(p)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (by its pid) when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Proc {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Sends SIGTERM and waits up to `limit` for the exit.
    fn terminate(&mut self, limit: Duration) -> (std::process::ExitStatus, Duration) {
        let t0 = Instant::now();
        let ok = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM failed");
        loop {
            if let Some(st) = self.exited() {
                return (st, t0.elapsed());
            }
            assert!(
                t0.elapsed() < limit,
                "did not exit within {limit:?} of SIGTERM\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(bin: &Path, args: &[String], env: &[(&str, String)]) -> Proc {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let f = std::fs::File::create(&log).unwrap();
    let mut c = Command::new(bin);
    c.args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::from(f))
        .current_dir(dir.path());
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") || k == "K8S_NODE_NAME" {
            c.env_remove(k);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let child = c
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    Proc {
        child,
        log,
        _dir: dir,
    }
}

/// GET over HTTP/1.0 (no chunking): status and body.
fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: text/plain\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

fn urlencode(s: &str) -> String {
    let mut o = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// CPUs online on this host.
fn online_cpus() -> Vec<String> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let mut v = Vec::new();
    for part in s.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                v.extend((a..=b).map(|c| c.to_string()));
            }
            None => v.push(part.to_string()),
        }
    }
    v
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// The OTel `host.arch` of this machine.
fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        a => a,
    }
}

fn needs_root() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or("?")
        .to_string();
    assert_eq!(
        uid, "0",
        "this test counts system-wide with the live kernel: run it as root (scripts/test.sh)"
    );
}

// ------------------------------------------------------------- exporter

struct Exporter {
    proc: Proc,
    addr: Option<String>,
}

impl Exporter {
    /// Starts the binary on the embedded default config and waits until it
    /// answers (or, with `--otlp.only`, until it logs its OTLP settings).
    fn start(args: &[&str], env: &[(&str, String)]) -> Exporter {
        needs_root();
        let only = args.contains(&"--otlp.only");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut a: Vec<String> = vec!["--web.listen-address".into(), addr.clone()];
        a.extend(args.iter().map(|s| s.to_string()));
        let mut proc = spawn(Path::new(env!("CARGO_BIN_EXE_perf-exporter")), &a, env);
        let t0 = Instant::now();
        loop {
            if let Some(st) = proc.exited() {
                panic!("perf-exporter exited ({st}) at start:\n{}", proc.log());
            }
            let up = if only {
                proc.log().contains("OTLP push")
            } else {
                matches!(http_get(&addr, "/-/ready"), Ok((200, _)))
            };
            if up {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "perf-exporter did not start:\n{}",
                proc.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Exporter {
            proc,
            addr: (!only).then_some(addr),
        }
    }

    /// One scrape of /metrics and how long it took.
    fn scrape(&self) -> (String, Duration) {
        let addr = self.addr.as_ref().expect("a listener");
        let t0 = Instant::now();
        let (status, body) = http_get(addr, "/metrics").expect("scrape");
        assert_eq!(status, 200, "{body}");
        (body, t0.elapsed())
    }

    /// `perf_otlp_exports_total{result}` from a scrape.
    fn exports(&self) -> (f64, f64) {
        exports_in(&self.scrape().0)
    }
}

fn exports_in(text: &str) -> (f64, f64) {
    let get = |r: &str| {
        let p = format!("perf_otlp_exports_total{{result=\"{r}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&p))
            .unwrap_or_else(|| panic!("no {p} in:\n{text}"))
            .parse::<f64>()
            .unwrap()
    };
    (get("success"), get("failure"))
}

// ------------------------------------------------------- VictoriaMetrics

struct Vm {
    proc: Proc,
    addr: String,
}

impl Vm {
    fn start(extra: &[&str]) -> Vm {
        let bin = server_bin("VICTORIA_METRICS");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        // The data directory is relative to the process' own temporary
        // working directory, which goes away with it.
        let mut args = vec![
            "-storageDataPath=vmdata".to_string(),
            format!("-httpListenAddr={addr}"),
            "-search.latencyOffset=0s".to_string(),
            "-loggerLevel=WARN".to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let tls = extra.contains(&"-tls");
        let mut proc = spawn(&bin, &args, &[]);
        let t0 = Instant::now();
        loop {
            if let Some(st) = proc.exited() {
                panic!("victoria-metrics exited ({st}):\n{}", proc.log());
            }
            let up = if tls {
                TcpStream::connect(&addr).is_ok()
            } else {
                matches!(http_get(&addr, "/health"), Ok((200, _)))
            };
            if up {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "victoria-metrics did not start:\n{}",
                proc.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Vm { proc, addr }
    }

    /// `/api/v1/query` (uncached): each series' labels and value.
    fn query(&self, q: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let (status, body) = http_get(
            &self.addr,
            &format!("/api/v1/query?nocache=1&query={}", urlencode(q)),
        )
        .unwrap();
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{body}");
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let labels = r["metric"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect();
                let val = r["value"][1].as_str().unwrap().parse().unwrap();
                (labels, val)
            })
            .collect()
    }
}

/// Per-CPU values of a query's series.
fn by_cpu(rows: &[(BTreeMap<String, String>, f64)]) -> BTreeMap<String, f64> {
    rows.iter()
        .map(|(l, v)| (l.get("cpu").cloned().unwrap_or_default(), *v))
        .collect()
}

#[test]
fn otlp_http_push_to_victoriametrics() {
    let cpus = online_cpus();
    // With Prometheus naming VictoriaMetrics 1.112 applies the Prometheus
    // translation (unit suffix, `_total`, `_` in labels): the names come
    // back as ours. Without it, it keeps the OTel names and attribute keys.
    let vm = Vm::start(&["-opentelemetry.usePrometheusNaming"]);
    let vm_plain = Vm::start(&[]);
    let env = |vm: &Vm, gzip: bool| {
        let mut e = vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://{}/opentelemetry", vm.addr),
            ),
            ("OTEL_METRIC_EXPORT_INTERVAL", "1000".to_string()),
            ("OTEL_SERVICE_NAME", "perf-e2e".to_string()),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=e2e,team=perf%20team".to_string(),
            ),
            ("K8S_NODE_NAME", "node-e2e".to_string()),
        ];
        if gzip {
            e.push(("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip".to_string()));
        }
        e
    };
    let ex = Exporter::start(&[], &env(&vm, true));
    let ex_plain = Exporter::start(&[], &env(&vm_plain, false));

    let q_cs = "perf_context_switches_total";
    let q_clock = "perf_cpu_clock_seconds_total";
    wait_for(
        "context switches per CPU in VictoriaMetrics",
        Duration::from_secs(30),
        || vm.query(q_cs).len() == cpus.len() && vm.query(q_clock).len() == cpus.len(),
    );
    let first_cs = vm.query(q_cs);
    let first_clock = vm.query(q_clock);
    let host = hostname();
    for (labels, _) in first_cs.iter().chain(&first_clock) {
        assert!(cpus.contains(&labels["cpu"]), "{labels:?}");
        assert_eq!(labels["host_name"], host, "{labels:?}");
        assert_eq!(labels["host_arch"], host_arch(), "{labels:?}");
        assert_eq!(labels["k8s_node_name"], "node-e2e", "{labels:?}");
        assert_eq!(labels["service_name"], "perf-e2e", "{labels:?}");
        assert_eq!(labels["service_version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(labels["deployment_environment"], "e2e", "{labels:?}");
        assert_eq!(labels["team"], "perf team", "{labels:?}");
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
        if cpuinfo.contains("vendor_id") {
            assert!(!labels["host_cpu_vendor_id"].is_empty(), "{labels:?}");
            assert!(!labels["host_cpu_model_name"].is_empty(), "{labels:?}");
        }
    }
    // Two more pushes later (interval 1 s) the counters have increased.
    std::thread::sleep(Duration::from_millis(2500));
    let (c1, c2) = (by_cpu(&first_clock), by_cpu(&vm.query(q_clock)));
    for cpu in &cpus {
        assert!(
            c2[cpu] > c1[cpu],
            "cpu clock of CPU {cpu} did not increase: {c1:?} -> {c2:?}"
        );
    }
    let (s1, s2) = (by_cpu(&first_cs), by_cpu(&vm.query(q_cs)));
    for cpu in &cpus {
        assert!(
            s2[cpu] >= s1[cpu],
            "context switches of CPU {cpu} decreased: {s1:?} -> {s2:?}"
        );
    }
    assert!(
        s2.values().sum::<f64>() > s1.values().sum::<f64>(),
        "no context switch at all between two pushes: {s1:?} -> {s2:?}"
    );
    // Seconds of cpu clock: about one per second per CPU since start.
    assert!(c2.values().all(|v| *v > 1.0 && *v < 600.0), "{c2:?}");
    // Gauges arrive as gauges; every software counter of the default config.
    for m in [
        "perf_event_available",
        "perf_page_faults_total",
        "perf_cpu_migrations_total",
        "perf_group_enabled_seconds_total",
    ] {
        assert!(!vm.query(m).is_empty(), "{m} missing");
    }

    // Without Prometheus naming: the OTel names and attribute keys.
    wait_for(
        "OTel names in the second VictoriaMetrics",
        Duration::from_secs(30),
        || {
            vm_plain
                .query(r#"{__name__="perf.context.switches"}"#)
                .len()
                == cpus.len()
        },
    );
    let plain = vm_plain.query(r#"{__name__="perf.cpu.clock"}"#);
    assert_eq!(plain.len(), cpus.len(), "{plain:?}");
    for (labels, _) in &plain {
        assert_eq!(labels["host.name"], host);
        assert_eq!(labels["k8s.node.name"], "node-e2e");
        assert_eq!(labels["service.name"], "perf-e2e");
    }
    assert!(vm_plain.query("perf_context_switches_total").is_empty());

    // The push is counted on /metrics, next to the same counters.
    let (text, _) = ex.scrape();
    let (ok, failed) = exports_in(&text);
    assert!(ok >= 3.0 && failed == 0.0, "success {ok}, failure {failed}");
    assert!(
        text.contains("perf_context_switches_total{cpu=\"0\"}"),
        "{text}"
    );
    let (ok, failed) = ex_plain.exports();
    assert!(ok >= 3.0 && failed == 0.0, "success {ok}, failure {failed}");
    assert!(
        !ex.proc.log().contains("OTLP export failed"),
        "{}",
        ex.proc.log()
    );
}

// ------------------------------------------------------ gRPC receiver

/// What the receiver saw of one export.
#[derive(Debug, Clone)]
struct Received {
    token: Option<String>,
    encoding: Option<String>,
    req: ExportMetricsServiceRequest,
}

#[derive(Debug, Clone, Default)]
struct Sink(Arc<Mutex<Vec<Received>>>);

#[tonic::async_trait]
impl MetricsService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let md = request.metadata();
        let get = |k: &str| md.get(k).and_then(|v| v.to_str().ok()).map(str::to_string);
        let r = Received {
            token: get("x-test-token"),
            encoding: get("grpc-encoding"),
            req: request.into_inner(),
        };
        self.0.lock().unwrap().push(r);
        Ok(tonic::Response::new(ExportMetricsServiceResponse {
            partial_success: None,
        }))
    }
}

/// A gRPC OTLP receiver on its own thread; stops when dropped.
struct Receiver {
    addr: String,
    sink: Sink,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    fn start(tls: Option<tonic::transport::ServerTlsConfig>) -> Receiver {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let sink = Sink::default();
        let s2 = sink.clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                let incoming = tonic::transport::server::TcpIncoming::from(l);
                let mut b = tonic::transport::Server::builder();
                if let Some(t) = tls {
                    b = b.tls_config(t).unwrap();
                }
                b.add_service(
                    MetricsServiceServer::new(s2)
                        .accept_compressed(tonic::codec::CompressionEncoding::Gzip),
                )
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
            });
        });
        Receiver {
            addr,
            sink,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    fn received(&self) -> Vec<Received> {
        self.sink.0.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn str_attr(attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue], k: &str) -> Option<String> {
    attrs
        .iter()
        .find(|a| a.key == k)
        .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            _ => None,
        })
}

fn find_metric<'a>(r: &'a ExportMetricsServiceRequest, name: &str) -> Option<&'a Metric> {
    r.resource_metrics
        .iter()
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|sm| &sm.metrics)
        .find(|m| m.name == name)
}

/// A cumulative monotonic sum's values by `cpu`.
fn sum_by_cpu(m: &Metric) -> BTreeMap<String, f64> {
    let Some(metric::Data::Sum(s)) = &m.data else {
        panic!("{} is not a sum: {:?}", m.name, m.data)
    };
    assert!(s.is_monotonic, "{}", m.name);
    assert_eq!(s.aggregation_temporality, 2, "{} is not cumulative", m.name);
    s.data_points
        .iter()
        .map(|p| {
            let v = match p.value {
                Some(number_data_point::Value::AsDouble(d)) => d,
                Some(number_data_point::Value::AsInt(i)) => i as f64,
                None => panic!("no value"),
            };
            assert!(p.start_time_unix_nano > 0 && p.start_time_unix_nano < p.time_unix_nano);
            (str_attr(&p.attributes, "cpu").expect("cpu attribute"), v)
        })
        .collect()
}

#[test]
fn otlp_grpc_push_with_gzip_and_a_custom_header() {
    let cpus = online_cpus();
    let rx = Receiver::start(None);
    let ex = Exporter::start(
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", rx.addr)),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-test-token=s3cr%3Dt".into()),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip".into()),
            ("OTEL_METRIC_EXPORT_INTERVAL", "1000".into()),
            ("K8S_NODE_NAME", "node-grpc".into()),
        ],
    );
    wait_for("two gRPC exports", Duration::from_secs(20), || {
        rx.received().len() >= 2
    });
    let got = rx.received();
    for r in &got {
        assert_eq!(r.token.as_deref(), Some("s3cr=t"));
        assert_eq!(r.encoding.as_deref(), Some("gzip"));
    }
    let (a, b) = (&got[0].req, &got[got.len() - 1].req);
    assert_eq!(a.resource_metrics.len(), 1);
    let res = &a.resource_metrics[0].resource.as_ref().unwrap().attributes;
    assert_eq!(str_attr(res, "host.name"), Some(hostname()));
    assert_eq!(str_attr(res, "k8s.node.name").as_deref(), Some("node-grpc"));
    assert_eq!(
        str_attr(res, "service.name").as_deref(),
        Some("perf-exporter")
    );
    assert_eq!(str_attr(res, "host.arch").as_deref(), Some(host_arch()));
    let scope = a.resource_metrics[0].scope_metrics[0]
        .scope
        .as_ref()
        .unwrap();
    assert_eq!(scope.name, "perf-exporter");

    let cs = find_metric(a, "perf.context.switches").expect("perf.context.switches");
    assert_eq!(cs.unit, "{switch}");
    let clock = find_metric(a, "perf.cpu.clock").expect("perf.cpu.clock");
    assert_eq!(clock.unit, "s");
    assert!(
        clock.description.contains("cpu-clock"),
        "{}",
        clock.description
    );
    let (cs1, cl1) = (sum_by_cpu(cs), sum_by_cpu(clock));
    assert_eq!(cl1.keys().cloned().collect::<Vec<_>>(), cpus);
    assert_eq!(cs1.keys().cloned().collect::<Vec<_>>(), cpus);
    let cl2 = sum_by_cpu(find_metric(b, "perf.cpu.clock").unwrap());
    let cs2 = sum_by_cpu(find_metric(b, "perf.context.switches").unwrap());
    for c in &cpus {
        assert!(cl2[c] > cl1[c], "{cl1:?} -> {cl2:?}");
        assert!(cs2[c] >= cs1[c], "{cs1:?} -> {cs2:?}");
    }
    assert!(cs2.values().sum::<f64>() > cs1.values().sum::<f64>());
    let avail = find_metric(a, "perf.event.available").expect("perf.event.available");
    assert!(
        matches!(avail.data, Some(metric::Data::Gauge(_))),
        "{avail:?}"
    );
    let (ok, failed) = ex.exports();
    assert!(ok >= 2.0 && failed == 0.0, "{ok} {failed}");
}

#[test]
fn otlp_only_has_no_listener_flags_override_env_and_shutdown_flushes_once() {
    let rx = Receiver::start(None);
    let bogus = free_port();
    let mut ex = Exporter::start(
        &[
            "--otlp.only",
            "--otlp.protocol",
            "grpc",
            "--otlp.endpoint",
            &format!("http://{}", rx.addr),
            "--otlp.headers",
            "x-test-token=from-flag",
            "--otlp.compression",
            "none",
            "--otlp.interval",
            "1h",
        ],
        &[
            // Each of these is overridden by its flag.
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".into()),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{bogus}"),
            ),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-test-token=from-env,x-other=env".into(),
            ),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip".into()),
        ],
    );
    // No listener: the address given is not bound.
    let log = ex.proc.log();
    assert!(log.contains("--otlp.only: no HTTP listener"), "{log}");
    assert!(!log.contains("listening"), "{log}");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(rx.received().is_empty(), "pushed before the first interval");
    let (st, took) = ex.proc.terminate(Duration::from_secs(10));
    assert!(st.success(), "{st}\n{}", ex.proc.log());
    let got = rx.received();
    assert_eq!(got.len(), 1, "exactly one final push at shutdown");
    assert_eq!(got[0].token.as_deref(), Some("from-flag"));
    assert_eq!(
        got[0].encoding, None,
        "--otlp.compression none wins over the environment"
    );
    assert!(find_metric(&got[0].req, "perf.cpu.clock").is_some());
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(ex
        .proc
        .log()
        .contains("final OTLP export at shutdown succeeded"));
}

// ------------------------------------------------------------ failures

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Scrapes for `span`, every 100 ms: latencies and the last body.
fn scrape_for(ex: &Exporter, span: Duration) -> (Vec<Duration>, String) {
    let t0 = Instant::now();
    let mut lat = Vec::new();
    let mut last = String::new();
    while t0.elapsed() < span {
        let (body, d) = ex.scrape();
        lat.push(d);
        last = body;
        std::thread::sleep(Duration::from_millis(100));
    }
    (lat, last)
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
    let ex = Exporter::start(
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
    let (mut before, _) = scrape_for(&ex, Duration::from_secs(2));
    let (_, failed0) = ex.exports();
    assert_eq!(failed0, 0.0);
    // Kill the collector (SIGKILL, by pid).
    vm.proc.child.kill().unwrap();
    vm.proc.child.wait().unwrap();
    let (mut after, last) = scrape_for(&ex, Duration::from_secs(6));
    let (ok, failed) = exports_in(&last);
    assert!(
        failed >= 2.0,
        "failures not counted: success {ok}, failure {failed}"
    );
    assert_scrapes_unaffected(&mut before, &mut after);
    // The failure is logged, rate limited: once, not once per export.
    let log = ex.proc.log();
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
    let mut ex = Exporter::start(
        &["--otlp.timeout", "2s", "--otlp.interval", "300ms"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))],
    );
    let (mut before, _) = scrape_for(&ex, Duration::from_millis(1000));
    wait_for("a timed-out export", Duration::from_secs(15), || {
        ex.exports().1 >= 1.0
    });
    let (mut after, last) = scrape_for(&ex, Duration::from_secs(3));
    let (ok, failed) = exports_in(&last);
    assert_eq!(ok, 0.0);
    assert!(failed >= 1.0);
    assert_scrapes_unaffected(&mut before, &mut after);
    assert!(
        !held.lock().unwrap().is_empty(),
        "the exporter never connected"
    );
    assert!(ex.proc.log().contains("timed out"), "{}", ex.proc.log());
    // SIGTERM while an export hangs: one final push bounded by the
    // timeout (2 s), then exit.
    let (st, took) = ex.proc.terminate(Duration::from_secs(8));
    assert!(st.success(), "{st}");
    assert!(took < Duration::from_secs(4), "shutdown took {took:?}");
    assert!(
        ex.proc
            .log()
            .contains("final OTLP export at shutdown failed"),
        "{}",
        ex.proc.log()
    );
}

// ----------------------------------------------------------------- TLS

struct Pki {
    dir: tempfile::TempDir,
    ca_pem: String,
    server_cert: String,
    server_key: String,
}

impl Pki {
    fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "perf-exporter test CA");
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(names).unwrap();
            p.extended_key_usages = vec![usage];
            let c = p.signed_by(&key, &ca_cert, &ca_key).unwrap();
            (c.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf(
            vec!["localhost".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) =
            leaf(vec!["client".into()], ExtendedKeyUsagePurpose::ClientAuth);
        let dir = tempfile::tempdir().unwrap();
        let ca_pem = ca_cert.pem();
        for (n, c) in [
            ("ca.pem", &ca_pem),
            ("server.pem", &server_cert),
            ("server.key", &server_key),
            ("client.pem", &client_cert),
            ("client.key", &client_key),
        ] {
            std::fs::write(dir.path().join(n), c).unwrap();
        }
        Pki {
            dir,
            ca_pem,
            server_cert,
            server_key,
        }
    }

    fn path(&self, n: &str) -> String {
        self.dir.path().join(n).display().to_string()
    }
}

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
    let ex = Exporter::start(
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
        let bad = Exporter::start(&["--otlp.interval", "300ms"], &e);
        wait_for("a failed TLS export", Duration::from_secs(20), || {
            bad.exports().1 >= 1.0
        });
        assert_eq!(bad.exports().0, 0.0, "{}", bad.proc.log());
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
    let ex = Exporter::start(
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
    let bad = Exporter::start(
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
}

// ------------------------------------------------------- configuration

fn run_fail(args: &[&str], env: &[(&str, &str)]) -> String {
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, v.to_string())).collect();
    let mut a: Vec<String> = vec![
        "--web.listen-address".into(),
        format!("127.0.0.1:{}", free_port()),
    ];
    a.extend(args.iter().map(|s| s.to_string()));
    let mut p = spawn(Path::new(env!("CARGO_BIN_EXE_perf-exporter")), &a, &env);
    let t0 = Instant::now();
    let st = loop {
        if let Some(st) = p.exited() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "still running:\n{}",
            p.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!st.success(), "should fail:\n{}", p.log());
    p.log()
}

#[test]
fn otlp_configuration_errors_name_their_source() {
    let e = run_fail(
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    assert!(
        e.contains("OTEL_EXPORTER_OTLP_PROTOCOL: `http/json` is not supported"),
        "{e}"
    );
    let e = run_fail(&["--otlp.only"], &[("OTEL_SDK_DISABLED", "true")]);
    assert!(e.contains("OTEL_SDK_DISABLED=true"), "{e}");
    let e = run_fail(&["--otlp.only", "--otlp.timeout", "soon"], &[]);
    assert!(
        e.contains("--otlp.timeout: `soon` is not a duration"),
        "{e}"
    );
    let e = run_fail(
        &["--otlp.only", "--otlp.certificate", "/nonexistent/ca.pem"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:1")],
    );
    assert!(e.contains("--otlp.certificate /nonexistent/ca.pem"), "{e}");
    let e = run_fail(
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_HEADERS", "x"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
        ],
    );
    assert!(
        e.contains("OTEL_EXPORTER_OTLP_HEADERS: `x` is not `key=value`"),
        "{e}"
    );
}
