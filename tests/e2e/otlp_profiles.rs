//! OTLP profiles end to end (`--otlp.profiles`, issue 31): the real
//! binary on the simulated PMU, whose samplers give each sample a call
//! chain (a kernel frame, then two user frames), pushes one profile per
//! interval, with the metrics' OTLP settings:
//!
//! * over gRPC, gzipped, to the test receiver of `tests/common/otlp.rs`;
//! * over HTTP/protobuf (`/v1development/profiles` next to
//!   `/v1/metrics`), gzipped, with a custom header, and over HTTPS with a
//!   custom CA and a client certificate, to an HTTP receiver of this
//!   file.
//!
//! Each receiver decodes the requests with the official definitions
//! (`opentelemetry-proto`'s `v1development` profiles service). The kernel
//! frame is named by a `kallsyms` in the procfs the test gives.

use crate::common;

use common::otlp::{simulated, str_attr, wait_for, Exporter, Pki, Receiver};
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::profiles::v1development::ProfilesDictionary;
use prost::Message as _;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The simulated kernel frame (`SIM_KERNEL_FRAME`) falls in the first.
const KALLSYMS: &str = "ffffffff81000000 T do_syscall_64\nffffffff81000800 T entry_SYSCALL_64\n";

/// The simulated period of `cycles` at 99 Hz (2e9 cycles/s ÷ 99).
const PERIOD: i64 = 2_000_000_000 / 99;

/// Whether index `i` is in a table of `n` entries.
fn within(i: i32, n: usize) -> bool {
    usize::try_from(i).is_ok_and(|i| i < n)
}

/// Every index of the dictionary's own entries is in range, and each
/// table starts with its zero value.
fn dictionary_is_consistent(d: &ProfilesDictionary) {
    let (s, a) = (d.string_table.len(), d.attribute_table.len());
    assert_eq!(d.string_table[0], "");
    assert_eq!(
        (
            d.mapping_table[0].filename_strindex,
            d.location_table[0].address,
            d.function_table[0].name_strindex,
            d.stack_table[0].location_indices.len(),
            d.attribute_table[0].key_strindex,
            d.link_table[0].trace_id.len(),
        ),
        (0, 0, 0, 0, 0, 0),
        "each table starts with its zero value"
    );
    assert!(d.attribute_table.iter().all(|x| within(x.key_strindex, s)));
    for m in &d.mapping_table {
        assert!(within(m.filename_strindex, s));
        assert!(m.attribute_indices.iter().all(|&i| within(i, a)));
    }
    for f in &d.function_table {
        assert!(within(f.name_strindex, s) && within(f.system_name_strindex, s));
    }
    for l in &d.location_table {
        assert!(within(l.mapping_index, d.mapping_table.len()));
        let fs = d.function_table.len();
        assert!(l.lines.iter().all(|x| within(x.function_index, fs)));
    }
    let ls = d.location_table.len();
    for st in &d.stack_table {
        assert!(st.location_indices.iter().all(|&i| within(i, ls)));
    }
}

/// The sample values by process name, checking each sample's indexes.
fn values_by_process(r: &ExportProfilesServiceRequest) -> BTreeMap<String, i64> {
    let d = r.dictionary.as_ref().expect("a dictionary");
    dictionary_is_consistent(d);
    let s = |i: i32| d.string_table[i as usize].as_str();
    let p = &r.resource_profiles[0].scope_profiles[0].profiles[0];
    let t = p.sample_type.expect("a sample type");
    assert_eq!(
        (s(t.type_strindex), s(t.unit_strindex)),
        ("cycles", "count")
    );
    assert!(p.duration_nano > 0 && p.time_unix_nano > 0);
    let mut by = BTreeMap::new();
    for x in &p.samples {
        assert!(within(x.stack_index, d.stack_table.len()));
        let mut name = None;
        for &i in &x.attribute_indices {
            assert!(within(i, d.attribute_table.len()));
            let kv = &d.attribute_table[i as usize];
            match (
                s(kv.key_strindex),
                kv.value.as_ref().and_then(|v| v.value.as_ref()),
            ) {
                ("process.executable.name", Some(Value::StringValue(n))) => name = Some(n.clone()),
                ("process.pid", Some(Value::IntValue(_))) => {}
                (k, v) => panic!("unexpected sample attribute {k}={v:?}"),
            }
        }
        // The innermost frame: the kernel's, named from kallsyms.
        let stack = &d.stack_table[x.stack_index as usize];
        assert_eq!(stack.location_indices.len(), 3, "kernel + two user frames");
        let leaf = &d.location_table[stack.location_indices[0] as usize];
        let f = &d.function_table[leaf.lines[0].function_index as usize];
        assert_eq!(s(f.name_strindex), "do_syscall_64");
        assert_eq!(
            s(d.mapping_table[leaf.mapping_index as usize].filename_strindex),
            "[kernel.kallsyms]"
        );
        assert_eq!(x.values.len(), 1);
        assert_eq!(x.values[0] % PERIOD, 0, "a whole number of periods");
        *by.entry(name.expect("a process attribute")).or_default() += x.values[0];
    }
    by
}

/// The exporter on the simulated PMU pushing profiles every second with
/// `env` (its procfs: the fixture's cpuinfo and [`KALLSYMS`]).
fn pushing(env: &[(&str, String)]) -> (Exporter, tempfile::TempDir) {
    let procfs = tempfile::tempdir().unwrap();
    let fixture = common::fixture_procfs("intel-skx");
    std::fs::copy(fixture.join("cpuinfo"), procfs.path().join("cpuinfo")).unwrap();
    std::fs::write(procfs.path().join("kallsyms"), KALLSYMS).unwrap();
    let mut args = common::fixture_procfs_args("intel-skx");
    args[1] = procfs.path().to_str().unwrap().to_string();
    args.extend(["--otlp.interval", "1s", "--otlp.profiles"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut env = env.to_vec();
    env.push(("K8S_NODE_NAME", "node-prof".into()));
    (simulated(&args, &env), procfs)
}

/// A pushed profile: the resource's node, the samples' indexes and the
/// simulated tasks' shares.
fn check_profile(r: &ExportProfilesServiceRequest) {
    let res = &r.resource_profiles[0].resource.as_ref().unwrap().attributes;
    assert_eq!(str_attr(res, "k8s.node.name").as_deref(), Some("node-prof"));
    let by = values_by_process(r);
    let total: i64 = by.values().sum();
    assert!(total >= 10 * PERIOD, "{by:?}");
    // The simulated tasks' weights: postgres 8/20, nginx 5/20.
    let share = |n: &str| by.get(n).copied().unwrap_or(0) as f64 / total as f64;
    assert!((share("postgres") - 0.40).abs() < 0.05, "{by:?}");
    assert!((share("nginx") - 0.25).abs() < 0.05, "{by:?}");
}

#[test]
fn otlp_profiles_decode_with_the_official_definitions() {
    let rx = Receiver::start(None);
    let (ex, _procfs) = pushing(&[
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", rx.addr)),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip".into()),
    ]);
    wait_for("two profiles", Duration::from_secs(30), || {
        rx.profiles().len() >= 2
    });
    let out = ex.proc.output();
    assert!(
        out.contains("the profiles signal is still in development"),
        "{out}"
    );
    for r in rx.profiles() {
        check_profile(&r);
    }
}

// ------------------------------------------------------ OTLP/HTTP

/// One request an [`HttpReceiver`] took: its head (request line and
/// headers) and, on the profiles path, its body decoded.
struct Taken {
    head: String,
    profile: Option<ExportProfilesServiceRequest>,
}

/// An OTLP/HTTP receiver (HTTP/1.1, one request per connection), over
/// TLS when given a rustls configuration: answers 200 to every POST and
/// decodes those to `.../v1development/profiles` (gunzipped when the
/// body says gzip) with the official definitions. Stops with the test
/// process.
struct HttpReceiver {
    addr: String,
    taken: Arc<Mutex<Vec<Taken>>>,
}

/// Reads one request (head and `Content-Length` body) from `c`.
fn read_request(c: &mut impl Read) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut b = [0u8; 16384];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        match c.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let len: usize = header(&head, "content-length")?.parse().ok()?;
    while buf.len() < end + 4 + len {
        match c.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
    Some((head, buf[end + 4..end + 4 + len].to_vec()))
}

/// A header's value in a request head (the name case-insensitive).
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// Takes one request on `c` into `taken` and answers it.
fn take(c: &mut (impl Read + Write), taken: &Mutex<Vec<Taken>>) {
    let Some((head, body)) = read_request(c) else {
        return;
    };
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let profile = path.ends_with("/v1development/profiles").then(|| {
        let raw = match header(&head, "content-encoding").as_deref() {
            Some("gzip") => {
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(&body[..])
                    .read_to_end(&mut out)
                    .expect("a gzip body");
                out
            }
            _ => body,
        };
        ExportProfilesServiceRequest::decode(&raw[..]).expect("a profiles request")
    });
    taken.lock().unwrap().push(Taken { head, profile });
    let _ = c.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    let _ = c.flush();
}

impl HttpReceiver {
    fn start(tls: Option<Arc<rustls::ServerConfig>>) -> HttpReceiver {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let taken = Arc::new(Mutex::new(Vec::new()));
        let t2 = taken.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                match &tls {
                    None => take(&mut &c, &t2),
                    Some(cfg) => {
                        let Ok(conn) = rustls::ServerConnection::new(cfg.clone()) else {
                            continue;
                        };
                        take(&mut rustls::StreamOwned::new(conn, c), &t2);
                    }
                }
            }
        });
        HttpReceiver { addr, taken }
    }

    /// The profiles taken so far, with the heads of their requests.
    fn profiles(&self) -> Vec<(String, ExportProfilesServiceRequest)> {
        let t = self.taken.lock().unwrap();
        t.iter()
            .filter_map(|x| Some((x.head.clone(), x.profile.clone()?)))
            .collect()
    }
}

/// A server configuration with the PKI's server certificate that asks
/// for a client certificate signed by its CA.
fn mutual_tls(pki: &Pki) -> Arc<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider.clone())
            .build()
            .unwrap();
    let chain = CertificateDer::pem_slice_iter(pki.server_cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(pki.server_key.as_bytes()).unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    Arc::new(cfg)
}

/// Waits for two profiles at `rx` and checks them, with the head each
/// came with.
fn two_profiles_over_http(rx: &HttpReceiver, ex: &mut Exporter) -> Vec<String> {
    wait_for("two profiles over HTTP", Duration::from_secs(30), || {
        if let Some(st) = ex.proc.exited() {
            panic!("perf-exporter exited ({st}):\n{}", ex.proc.output());
        }
        rx.profiles().len() >= 2
    });
    rx.profiles()
        .into_iter()
        .map(|(head, r)| {
            check_profile(&r);
            head
        })
        .collect()
}

#[test]
fn otlp_profiles_over_http_protobuf_with_gzip_and_a_custom_header_under_the_generic_endpoint() {
    let rx = HttpReceiver::start(None);
    let (mut ex, _procfs) = pushing(&[
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".into()),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://{}/otlp", rx.addr),
        ),
        // The metrics' own URL, given whole: profiles still go under the
        // generic endpoint.
        (
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            format!("http://{}/custom/metrics", rx.addr),
        ),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip".into()),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-test-token=s3cret".into()),
    ]);
    for head in two_profiles_over_http(&rx, &mut ex) {
        assert!(
            head.starts_with("POST /otlp/v1development/profiles HTTP/1.1\r\n"),
            "{head}"
        );
        assert_eq!(
            header(&head, "content-type").as_deref(),
            Some("application/x-protobuf")
        );
        assert_eq!(header(&head, "content-encoding").as_deref(), Some("gzip"));
        assert_eq!(header(&head, "x-test-token").as_deref(), Some("s3cret"));
    }
    // The metrics went to theirs, with the same settings.
    let t = rx.taken.lock().unwrap();
    assert!(
        t.iter().any(|x| x.head.starts_with("POST /custom/metrics ")
            && header(&x.head, "x-test-token").as_deref() == Some("s3cret")),
        "no metrics push"
    );
}

#[test]
fn otlp_profiles_over_https_with_a_custom_ca_and_a_client_certificate() {
    let pki = Pki::new();
    let rx = HttpReceiver::start(Some(mutual_tls(&pki)));
    let port = rx.addr.rsplit(':').next().unwrap().to_string();
    let endpoint = format!("https://localhost:{port}/otlp");
    let (mut ex, _procfs) = pushing(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
        (
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
            pki.path("client.pem"),
        ),
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", pki.path("client.key")),
    ]);
    for head in two_profiles_over_http(&rx, &mut ex) {
        assert!(
            head.starts_with("POST /otlp/v1development/profiles HTTP/1.1\r\n"),
            "{head}"
        );
    }
    drop(ex);
    // Without the client certificate the receiver refuses the handshake:
    // no profile, and the failure is logged.
    let before = rx.profiles().len();
    let (bad, _procfs) = pushing(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000".into()),
    ]);
    wait_for("a failed profiles export", Duration::from_secs(30), || {
        bad.proc.output().contains("OTLP profiles export failed")
    });
    assert_eq!(rx.profiles().len(), before, "{}", bad.proc.output());
}
