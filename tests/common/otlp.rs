//! The OTLP side of the shared harness: `perf-exporter` with OTLP push
//! (the `OTEL_*` variables set per process: [`super::Proc`] clears the
//! test's own), VictoriaMetrics as an OTLP/HTTP receiver, a gRPC OTLP
//! receiver of our own (opentelemetry-proto's tonic service) that keeps
//! every decoded request, and helpers to read the decoded requests. The
//! PKI is [`super::Pki`].

use super::EXPORTER;
use super::{fixture, require_perf_privilege, server_binary, try_request, urlencode, Proc};
pub(crate) use super::{wait_for, Pki};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_server::{
    ProfilesService, ProfilesServiceServer,
};
use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point, Metric, NumberDataPoint};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// GET `path` on `addr`: status and body (an error as status 0).
pub(crate) fn get_text(addr: &str, path: &str) -> (u16, String) {
    match try_request("GET", addr, path, &[("Accept", "text/plain")], "") {
        Ok(r) => (r.status, r.body),
        Err(e) => (0, e),
    }
}

/// `perf-exporter args` with `env`, in its own directory.
fn exporter_proc(args: &[&str], env: &[(&str, String)]) -> Proc {
    let mut b = Proc::builder(EXPORTER)
        .name("perf-exporter")
        .args(args)
        .listen("--web.listen-address")
        .in_own_dir();
    for (k, v) in env {
        b = b.env(k, v);
    }
    b.spawn()
}

/// `perf-exporter` with OTLP push.
pub(crate) struct Exporter {
    pub proc: Proc,
    /// The listener, unless `--otlp.only`.
    pub addr: Option<String>,
}

impl Exporter {
    /// Starts the binary and waits until it answers `/-/ready` (or, with
    /// `--otlp.only`, until it logs that its push started).
    pub(crate) fn start(args: &[&str], env: &[(&str, String)]) -> Exporter {
        let only = args.contains(&"--otlp.only");
        let mut proc = exporter_proc(args, env);
        let addr = proc.addr.clone();
        wait_for("perf-exporter to start", Duration::from_secs(30), || {
            if let Some(st) = proc.exited() {
                panic!("perf-exporter exited ({st}) at start:\n{}", proc.output());
            }
            match only {
                // The pusher is up (a SIGTERM before then ends the
                // start-up with no final push).
                true => proc.output().contains("msg=\"OTLP push started\""),
                false => get_text(&addr, "/-/ready").0 == 200,
            }
        });
        Exporter {
            proc,
            addr: (!only).then_some(addr),
        }
    }

    /// One scrape of /metrics and how long it took.
    pub(crate) fn scrape(&self) -> (String, Duration) {
        let addr = self.addr.as_ref().expect("a listener");
        let t0 = Instant::now();
        let (status, body) = get_text(addr, "/metrics");
        assert_eq!(status, 200, "{body}\n{}", self.proc.output());
        (body, t0.elapsed())
    }

    /// `perf_otlp_exports_total{result}` from a scrape.
    pub(crate) fn exports(&self) -> (f64, f64) {
        exports_in(&self.scrape().0)
    }
}

/// The live exporter (root: it counts system-wide).
pub(crate) fn live(args: &[&str], env: &[(&str, String)]) -> Exporter {
    require_perf_privilege();
    Exporter::start(args, env)
}

/// The exporter on the simulated Skylake-SP.
pub(crate) fn simulated(args: &[&str], env: &[(&str, String)]) -> Exporter {
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
pub(crate) fn exporter_fails(args: &[&str], env: &[(&str, &str)]) -> String {
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, v.to_string())).collect();
    let mut p = exporter_proc(args, &env);
    let st = p
        .wait_exit(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("still running:\n{}", p.output()));
    assert!(!st.success(), "should fail:\n{}", p.output());
    p.output()
}

/// `perf_otlp_exports_total{result}` in an exposition.
pub(crate) fn exports_in(text: &str) -> (f64, f64) {
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
pub(crate) struct Vm {
    pub proc: Proc,
    pub addr: String,
}

impl Vm {
    /// Starts it with `extra` flags (`-tls` ones included) and waits until
    /// it is up.
    pub(crate) fn start(extra: &[&str]) -> Vm {
        // The data directory is relative to the process' own temporary
        // working directory, which goes away with it.
        let tls = extra.contains(&"-tls");
        let mut proc = Proc::builder(server_binary("VICTORIA_METRICS"))
            .name("victoria-metrics")
            .args([
                "-storageDataPath=vmdata",
                "-search.latencyOffset=0s",
                "-loggerLevel=WARN",
            ])
            .args(extra)
            .listen("-httpListenAddr")
            .in_own_dir()
            .spawn();
        let addr = proc.addr.clone();
        wait_for("victoria-metrics to start", Duration::from_secs(30), || {
            if let Some(st) = proc.exited() {
                panic!("victoria-metrics exited ({st}):\n{}", proc.output());
            }
            match tls {
                true => TcpStream::connect(&addr).is_ok(),
                false => get_text(&addr, "/health").0 == 200,
            }
        });
        Vm { proc, addr }
    }

    /// `/api/v1/query` (uncached): each series' labels and value.
    pub(crate) fn query(&self, q: &str) -> Vec<(BTreeMap<String, String>, f64)> {
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
    pub(crate) fn names(&self) -> Vec<String> {
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
pub(crate) struct Received {
    /// The `x-test-token` metadata.
    pub token: Option<String>,
    /// The `grpc-encoding` metadata.
    pub encoding: Option<String>,
    /// The decoded request.
    pub req: ExportMetricsServiceRequest,
}

#[derive(Debug, Clone, Default)]
struct Sink(Arc<Mutex<Vec<Received>>>);

/// The profiles service (the protocol's development signal): each
/// request decoded by the official definitions, kept.
#[derive(Debug, Clone, Default)]
struct ProfilesSink(Arc<Mutex<Vec<ExportProfilesServiceRequest>>>);

#[tonic::async_trait]
impl ProfilesService for ProfilesSink {
    async fn export(
        &self,
        request: tonic::Request<ExportProfilesServiceRequest>,
    ) -> Result<tonic::Response<ExportProfilesServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportProfilesServiceResponse {
            partial_success: None,
        }))
    }
}

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
pub(crate) struct Receiver {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    sink: Sink,
    profiles: ProfilesSink,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// Starts it, with TLS when given.
    pub(crate) fn start(tls: Option<tonic::transport::ServerTlsConfig>) -> Receiver {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let sink = Sink::default();
        let s2 = sink.clone();
        let profiles = ProfilesSink::default();
        let p2 = profiles.clone();
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
                .add_service(
                    ProfilesServiceServer::new(p2)
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
            profiles,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    /// Every export so far.
    pub(crate) fn received(&self) -> Vec<Received> {
        self.sink.0.lock().unwrap().clone()
    }

    /// Every profiles export so far.
    #[allow(dead_code)] // not every suite that includes this pushes profiles
    pub(crate) fn profiles(&self) -> Vec<ExportProfilesServiceRequest> {
        self.profiles.0.lock().unwrap().clone()
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
pub(crate) fn str_attr(attrs: &[KeyValue], k: &str) -> Option<String> {
    attrs
        .iter()
        .find(|a| a.key == k)
        .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            _ => None,
        })
}

/// The resource's attributes of a request.
pub(crate) fn resource_of(r: &ExportMetricsServiceRequest) -> &[KeyValue] {
    &r.resource_metrics[0].resource.as_ref().unwrap().attributes
}

/// A metric of a request, by name.
pub(crate) fn find_metric<'a>(
    r: &'a ExportMetricsServiceRequest,
    name: &str,
) -> Option<&'a Metric> {
    r.resource_metrics
        .iter()
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|sm| &sm.metrics)
        .find(|m| m.name == name)
}

/// The points of a cumulative monotonic sum.
pub(crate) fn sum_points(m: &Metric) -> &[NumberDataPoint] {
    let Some(metric::Data::Sum(s)) = &m.data else {
        panic!("{} is not a sum: {:?}", m.name, m.data)
    };
    assert!(s.is_monotonic, "{}", m.name);
    assert_eq!(s.aggregation_temporality, 2, "{} is not cumulative", m.name);
    &s.data_points
}

/// A point's value.
pub(crate) fn value_of(p: &NumberDataPoint) -> f64 {
    match p.value {
        Some(number_data_point::Value::AsDouble(d)) => d,
        Some(number_data_point::Value::AsInt(i)) => i as f64,
        None => panic!("no value"),
    }
}

/// A cumulative monotonic sum's values by `cpu`.
pub(crate) fn sum_by_cpu(m: &Metric) -> BTreeMap<String, f64> {
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
