//! The OTLP side of the shared harness: processes started with a chosen
//! environment (the `OTEL_*` variables), `perf-exporter` with OTLP push,
//! VictoriaMetrics as an OTLP/HTTP receiver, a gRPC OTLP receiver of our
//! own (opentelemetry-proto's tonic service) that keeps every decoded
//! request, a throw-away PKI, and helpers to read the decoded requests.
//!
//! [`super::Server`] cannot set a child's environment, so [`Proc`] is the
//! variant of it that can; it uses the same port allocator, HTTP client
//! and binary lookup.

use super::{
    fixture, free_port, require_perf_privilege, server_binary, try_request, urlencode, EXPORTER,
};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point, Metric, NumberDataPoint};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Polls `f` every 50 ms until it holds; panics after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child process with its own environment, output in a log file,
/// killed (by its pid) and reaped when dropped.
pub struct Proc {
    pub child: Child,
    log: PathBuf,
    /// Its working directory (the log lives there).
    pub dir: tempfile::TempDir,
}

impl Proc {
    /// Starts `bin args` in a fresh temporary directory, without the
    /// test's own `OTEL_*`/`K8S_NODE_NAME` variables, with `env` added.
    pub fn spawn(bin: &Path, args: &[String], env: &[(&str, String)]) -> Proc {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("output.log");
        let out = File::create(&log).expect("create log");
        let err = out.try_clone().expect("clone log");
        let mut c = Command::new(bin);
        c.args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
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
        Proc { child, log, dir }
    }

    /// Everything it wrote so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Sends a signal by pid (`TERM`, `HUP`).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{sig} failed");
    }

    /// Sends SIGTERM and waits up to `limit` for the exit.
    pub fn terminate(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let t0 = Instant::now();
        self.signal("TERM");
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

    /// Waits up to `limit` for it to exit on its own; panics if it does not.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.exited() {
                return st;
            }
            assert!(Instant::now() < deadline, "still running:\n{}", self.log());
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

/// GET `path` on `addr`: status and body (an error as status 0).
pub fn get_text(addr: &str, path: &str) -> (u16, String) {
    match try_request("GET", addr, path, &[("Accept", "text/plain")], "") {
        Ok(r) => (r.status, r.body),
        Err(e) => (0, e),
    }
}

/// `perf-exporter` with OTLP push.
pub struct Exporter {
    pub proc: Proc,
    /// The listener, unless `--otlp.only`.
    pub addr: Option<String>,
}

impl Exporter {
    /// Starts the binary and waits until it answers `/-/ready` (or, with
    /// `--otlp.only`, until it logs its OTLP settings).
    pub fn start(args: &[&str], env: &[(&str, String)]) -> Exporter {
        let only = args.contains(&"--otlp.only");
        let addr = format!("127.0.0.1:{}", free_port());
        let mut a: Vec<String> = vec!["--web.listen-address".into(), addr.clone()];
        a.extend(args.iter().map(|s| s.to_string()));
        let mut proc = Proc::spawn(Path::new(EXPORTER), &a, env);
        wait_for("perf-exporter to start", Duration::from_secs(30), || {
            if let Some(st) = proc.exited() {
                panic!("perf-exporter exited ({st}) at start:\n{}", proc.log());
            }
            match only {
                true => proc.log().contains("OTLP push"),
                false => get_text(&addr, "/-/ready").0 == 200,
            }
        });
        Exporter {
            proc,
            addr: (!only).then_some(addr),
        }
    }

    /// One scrape of /metrics and how long it took.
    pub fn scrape(&self) -> (String, Duration) {
        let addr = self.addr.as_ref().expect("a listener");
        let t0 = Instant::now();
        let (status, body) = get_text(addr, "/metrics");
        assert_eq!(status, 200, "{body}\n{}", self.proc.log());
        (body, t0.elapsed())
    }

    /// `perf_otlp_exports_total{result}` from a scrape.
    pub fn exports(&self) -> (f64, f64) {
        exports_in(&self.scrape().0)
    }
}

/// The live exporter (root: it counts system-wide).
pub fn live(args: &[&str], env: &[(&str, String)]) -> Exporter {
    require_perf_privilege();
    Exporter::start(args, env)
}

/// The exporter on the simulated Skylake-SP.
pub fn simulated(args: &[&str], env: &[(&str, String)]) -> Exporter {
    let f = fixture("intel-skx");
    let mut a = vec![
        "--simulate",
        "--path.sysfs",
        f.to_str().expect("utf-8 path"),
    ];
    a.extend_from_slice(args);
    Exporter::start(&a, env)
}

/// `perf-exporter` fails at start; returns its output.
pub fn exporter_fails(args: &[&str], env: &[(&str, &str)]) -> String {
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, v.to_string())).collect();
    let mut a: Vec<String> = vec![
        "--web.listen-address".into(),
        format!("127.0.0.1:{}", free_port()),
    ];
    a.extend(args.iter().map(|s| s.to_string()));
    let mut p = Proc::spawn(Path::new(EXPORTER), &a, &env);
    let st = p.wait_exit(Duration::from_secs(20));
    assert!(!st.success(), "should fail:\n{}", p.log());
    p.log()
}

/// `perf_otlp_exports_total{result}` in an exposition.
pub fn exports_in(text: &str) -> (f64, f64) {
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

/// VictoriaMetrics 1.112, which takes OTLP/HTTP at
/// `/opentelemetry/v1/metrics`.
pub struct Vm {
    pub proc: Proc,
    pub addr: String,
}

impl Vm {
    /// Starts it with `extra` flags (`-tls` ones included) and waits until
    /// it is up.
    pub fn start(extra: &[&str]) -> Vm {
        let bin = server_binary("VICTORIA_METRICS");
        let addr = format!("127.0.0.1:{}", free_port());
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
        let mut proc = Proc::spawn(&bin, &args, &[]);
        wait_for("victoria-metrics to start", Duration::from_secs(30), || {
            if let Some(st) = proc.exited() {
                panic!("victoria-metrics exited ({st}):\n{}", proc.log());
            }
            match tls {
                true => TcpStream::connect(&addr).is_ok(),
                false => get_text(&addr, "/health").0 == 200,
            }
        });
        Vm { proc, addr }
    }

    /// `/api/v1/query` (uncached): each series' labels and value.
    pub fn query(&self, q: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let path = format!("/api/v1/query?nocache=1&query={}", urlencode(q));
        let (status, body) = get_text(&self.addr, &path);
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

    /// Every metric name stored.
    pub fn names(&self) -> Vec<String> {
        let (status, body) = get_text(&self.addr, "/api/v1/label/__name__/values?nocache=1");
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    }
}

/// What the gRPC receiver saw of one export.
#[derive(Debug, Clone)]
pub struct Received {
    /// The `x-test-token` metadata.
    pub token: Option<String>,
    /// The `grpc-encoding` metadata.
    pub encoding: Option<String>,
    /// The decoded request.
    pub req: ExportMetricsServiceRequest,
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
pub struct Receiver {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    sink: Sink,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// Starts it, with TLS when given.
    pub fn start(tls: Option<tonic::transport::ServerTlsConfig>) -> Receiver {
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

    /// Every export so far.
    pub fn received(&self) -> Vec<Received> {
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

/// A string attribute's value.
pub fn str_attr(attrs: &[KeyValue], k: &str) -> Option<String> {
    attrs
        .iter()
        .find(|a| a.key == k)
        .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            _ => None,
        })
}

/// The resource's attributes of a request.
pub fn resource_of(r: &ExportMetricsServiceRequest) -> &[KeyValue] {
    &r.resource_metrics[0].resource.as_ref().unwrap().attributes
}

/// A metric of a request, by name.
pub fn find_metric<'a>(r: &'a ExportMetricsServiceRequest, name: &str) -> Option<&'a Metric> {
    r.resource_metrics
        .iter()
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|sm| &sm.metrics)
        .find(|m| m.name == name)
}

/// The points of a cumulative monotonic sum.
pub fn sum_points(m: &Metric) -> &[NumberDataPoint] {
    let Some(metric::Data::Sum(s)) = &m.data else {
        panic!("{} is not a sum: {:?}", m.name, m.data)
    };
    assert!(s.is_monotonic, "{}", m.name);
    assert_eq!(s.aggregation_temporality, 2, "{} is not cumulative", m.name);
    &s.data_points
}

/// A point's value.
pub fn value_of(p: &NumberDataPoint) -> f64 {
    match p.value {
        Some(number_data_point::Value::AsDouble(d)) => d,
        Some(number_data_point::Value::AsInt(i)) => i as f64,
        None => panic!("no value"),
    }
}

/// A cumulative monotonic sum's values by `cpu`.
pub fn sum_by_cpu(m: &Metric) -> BTreeMap<String, f64> {
    sum_points(m)
        .iter()
        .map(|p| {
            assert!(p.start_time_unix_nano > 0 && p.start_time_unix_nano < p.time_unix_nano);
            (
                str_attr(&p.attributes, "cpu").expect("cpu attribute"),
                value_of(p),
            )
        })
        .collect()
}

/// A private CA with a server (`localhost`) and a client certificate, in
/// a temporary directory: `ca.pem`, `server.pem`, `server.key`,
/// `client.pem`, `client.key`.
pub struct Pki {
    dir: tempfile::TempDir,
    pub ca_pem: String,
    pub server_cert: String,
    pub server_key: String,
}

impl Pki {
    pub fn new() -> Pki {
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

    /// The path of one of its files.
    pub fn path(&self, n: &str) -> String {
        self.dir.path().join(n).display().to_string()
    }
}
