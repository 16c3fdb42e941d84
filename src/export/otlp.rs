//! OTLP push of the engine's counters (HTTP/protobuf and gRPC), through
//! `opentelemetry`, `opentelemetry_sdk` and `opentelemetry-otlp`.
//!
//! # Configuration
//!
//! [`OtlpSettings::resolve`] reads the OpenTelemetry environment variables
//! and lets `--otlp.*` flags override them. Each setting is taken from, in
//! order: the flag, the metrics-specific variable
//! (`OTEL_EXPORTER_OTLP_METRICS_*`), the generic one
//! (`OTEL_EXPORTER_OTLP_*`), the spec's default. Empty variables count as
//! unset. The settings are parsed here, not by `opentelemetry-otlp`: the
//! Rust SDK picks the transport in code, so the protocol must be known
//! before an exporter is built, and every value is then handed to the
//! exporter builder explicitly. (`opentelemetry-otlp` also reads some of
//! these variables on its own, and would add environment headers over the
//! flag's or fall back to the environment's compression when the flag
//! says `none`; [`scrub_exporter_env`] removes them after they are parsed.)
//!
//! * Endpoint: `--otlp.metrics-endpoint` and
//!   `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` are used as they are;
//!   `--otlp.endpoint` and `OTEL_EXPORTER_OTLP_ENDPOINT` are a base URL to
//!   which `/v1/metrics` is appended for http/protobuf (gRPC uses it as
//!   is). Defaults: `http://localhost:4318/v1/metrics`,
//!   `http://localhost:4317`.
//! * Push is on when an endpoint is configured or with `--otlp.only` (no
//!   HTTP listener then); `OTEL_SDK_DISABLED=true` turns it off.
//! * Protocol `http/protobuf` (default) or `grpc`; headers `k=v,k2=v2` with
//!   percent-encoded values; timeout and interval in milliseconds;
//!   compression `gzip` or `none`; TLS from the endpoint's `https` scheme,
//!   with `OTEL_EXPORTER_OTLP_CERTIFICATE` (a PEM CA bundle that then is the
//!   only trust root, as in the Go SDK) and optional client certificate and
//!   key; resource from `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME`
//!   over detected host attributes.
//!
//! # One collection per export
//!
//! The SDK's `PeriodicReader` runs its own timer thread and calls each
//! observable instrument's callback in turn; left alone, every callback
//! would have to read perf itself (one read per instrument) or guess
//! which callbacks belong to the same collection. Instead the push loop
//! here owns the cycle: at each interval it calls the engine's `collect`
//! **once** (one `read()` per perf group, the same reads a scrape makes),
//! stores the [`Snapshot`] for that cycle, asks a `ManualReader` to
//! collect (every instrument's callback only looks its samples up in that
//! snapshot), and hands the result to the OTLP `MetricExporter`. The
//! reader is the SDK's own `ManualReader` (public with the
//! `experimental_metrics_custom_reader` feature), so aggregation,
//! temporality and the data model stay the SDK's.
//!
//! The loop runs on its own thread with its own single-threaded tokio
//! runtime: an unreachable or slow collector only ever delays that thread,
//! never `/metrics`, which shares nothing with it but the engine's mutex
//! (held for one collection).
//!
//! # Data model
//!
//! Counters become cumulative monotonic sums, snapshot events gauges.
//! Names and units follow the OTel conventions and map back to the
//! Prometheus names under the Prometheus translation (see [`otel_metric`]):
//! `perf_cpu_cycles_total` is `perf.cpu.cycles` in `{cycle}`,
//! `perf_dram_read_bytes_total` is `perf.dram.read` in `By`,
//! `perf_cpu_clock_seconds_total` is `perf.cpu.clock` in `s`. Labels
//! (`cpu`, `pmu`, `socket`, …) become attributes.

use crate::snapshot::{Family, Kind, Sample, Snapshot};
use opentelemetry::metrics::{AsyncInstrument, Meter, MeterProvider as _};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    Instrument, InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Stream, Temporality,
};
use opentelemetry_sdk::Resource;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Errors of the OTLP exporter: configuration and start-up.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// A setting has a value that is not valid.
    #[error("{origin}: {msg}")]
    Invalid {
        /// The flag or environment variable it came from.
        origin: String,
        /// What is wrong.
        msg: String,
    },
    /// `--otlp.only` while `OTEL_SDK_DISABLED=true`.
    #[error("--otlp.only but OTEL_SDK_DISABLED=true: nothing to export to and no listener")]
    DisabledButOnly,
    /// A certificate or key file cannot be read or parsed.
    #[error("{origin} {path}: {msg}")]
    Tls {
        /// The flag or environment variable it came from.
        origin: String,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// The exporter could not be built.
    #[error("cannot build the OTLP exporter: {0}")]
    Build(String),
    /// The push thread or its runtime could not start.
    #[error("cannot start the OTLP push thread: {0}")]
    Start(String),
}

fn invalid(origin: &str, msg: impl Into<String>) -> OtlpError {
    OtlpError::Invalid {
        origin: origin.to_string(),
        msg: msg.into(),
    }
}

/// The transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies (the spec's default).
    HttpProtobuf,
    /// OTLP/gRPC.
    Grpc,
}

impl Protocol {
    /// The spec's name of the protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::Grpc => "grpc",
        }
    }
}

/// Parses `OTEL_EXPORTER_OTLP_PROTOCOL` values.
pub fn parse_protocol(s: &str) -> Result<Protocol, String> {
    match s.trim() {
        "http/protobuf" => Ok(Protocol::HttpProtobuf),
        "grpc" => Ok(Protocol::Grpc),
        "http/json" => Err("`http/json` is not supported; use `http/protobuf` or `grpc`".into()),
        other => Err(format!(
            "`{other}` is not a protocol (`http/protobuf`, `grpc`)"
        )),
    }
}

/// Body compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// None.
    None,
    /// gzip (HTTP `Content-Encoding`, gRPC `grpc-encoding`).
    Gzip,
}

/// Parses `OTEL_EXPORTER_OTLP_COMPRESSION` values.
pub fn parse_compression(s: &str) -> Result<Compression, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "gzip" => Ok(Compression::Gzip),
        "none" => Ok(Compression::None),
        other => Err(format!("`{other}` is not a compression (`gzip`, `none`)")),
    }
}

/// Parses a duration given in integer milliseconds, as the OTel
/// environment variables give them (`OTEL_EXPORTER_OTLP_TIMEOUT=10000`).
/// Zero is refused: it would mean "no time at all".
pub fn parse_millis(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let ms: u64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number of milliseconds"))?;
    if ms == 0 {
        return Err("must be greater than 0".into());
    }
    Ok(Duration::from_millis(ms))
}

/// Percent-decodes `%XX` sequences (as in W3C baggage, which
/// `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_RESOURCE_ATTRIBUTES` use).
pub fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent-encoding in `{s}`"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{s}` does not decode to UTF-8"))
}

/// Parses a `key=value,key2=value2` list with percent-encoded values
/// (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_RESOURCE_ATTRIBUTES`). Whitespace
/// around keys and values is trimmed; empty members are skipped; a later
/// duplicate key wins.
pub fn parse_key_values(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for member in s.split(',') {
        let member = member.trim();
        if member.is_empty() {
            continue;
        }
        let (k, v) = member
            .split_once('=')
            .ok_or_else(|| format!("`{member}` is not `key=value`"))?;
        let k = percent_decode(k.trim())?;
        if k.is_empty() {
            return Err(format!("`{member}` has an empty key"));
        }
        let v = percent_decode(v.trim())?;
        out.retain(|(ok, _)| *ok != k);
        out.push((k, v));
    }
    Ok(out)
}

/// Parses `OTEL_EXPORTER_OTLP_HEADERS`: [`parse_key_values`], then checks
/// that each is a valid HTTP header (names lowercased, as gRPC metadata
/// requires).
pub fn parse_headers(s: &str) -> Result<Vec<(String, String)>, String> {
    let kv = parse_key_values(s)?;
    kv.into_iter()
        .map(|(k, v)| {
            let k = k.to_ascii_lowercase();
            reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("`{k}` is not a valid header name"))?;
            reqwest::header::HeaderValue::from_str(&v)
                .map_err(|_| format!("the value of header `{k}` is not a valid header value"))?;
            Ok((k, v))
        })
        .collect()
}

/// The default http/protobuf endpoint.
pub const DEFAULT_HTTP_ENDPOINT: &str = "http://localhost:4318";
/// The default gRPC endpoint.
pub const DEFAULT_GRPC_ENDPOINT: &str = "http://localhost:4317";

/// Checks that an endpoint is an absolute `http://` or `https://` URL.
fn check_url(s: &str) -> Result<reqwest::Url, String> {
    let u = reqwest::Url::parse(s).map_err(|e| format!("`{s}` is not a URL: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(format!("`{s}`: the scheme must be http or https"));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{s}` has no host"));
    }
    Ok(u)
}

/// The URL to export to, per the OTLP exporter spec: a signal-specific
/// endpoint is used as it is; the generic one gets `/v1/metrics` appended
/// to its path for http/protobuf (after a trailing `/` is dropped) and is
/// used as it is for gRPC.
pub fn metrics_endpoint(
    generic: Option<&str>,
    signal: Option<&str>,
    protocol: Protocol,
) -> Result<String, String> {
    if let Some(s) = signal {
        check_url(s)?;
        return Ok(s.to_string());
    }
    match protocol {
        Protocol::Grpc => {
            let s = generic.unwrap_or(DEFAULT_GRPC_ENDPOINT);
            check_url(s)?;
            Ok(s.to_string())
        }
        Protocol::HttpProtobuf => {
            let s = generic.unwrap_or(DEFAULT_HTTP_ENDPOINT);
            let mut u = check_url(s)?;
            let path = format!("{}/v1/metrics", u.path().trim_end_matches('/'));
            u.set_path(&path);
            Ok(u.to_string())
        }
    }
}

/// The `--otlp.*` flags, as given (None: not given).
#[derive(Debug, Clone, Default)]
pub struct OtlpFlags {
    /// `--otlp.endpoint`: base URL (like `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub endpoint: Option<String>,
    /// `--otlp.metrics-endpoint`: full URL (like `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`).
    pub metrics_endpoint: Option<String>,
    /// `--otlp.protocol`.
    pub protocol: Option<String>,
    /// `--otlp.headers`: `k=v,k2=v2`, merged over the environment's, key by key.
    pub headers: Option<String>,
    /// `--otlp.timeout`.
    pub timeout: Option<String>,
    /// `--otlp.compression`.
    pub compression: Option<String>,
    /// `--otlp.interval`.
    pub interval: Option<String>,
    /// `--otlp.certificate`: PEM CA bundle.
    pub certificate: Option<PathBuf>,
    /// `--otlp.client-certificate`: PEM client certificate.
    pub client_certificate: Option<PathBuf>,
    /// `--otlp.client-key`: PEM client key.
    pub client_key: Option<PathBuf>,
    /// `--otlp.service-name`.
    pub service_name: Option<String>,
    /// `--otlp.resource-attributes`: `k=v,...`, merged over the environment's.
    pub resource_attributes: Option<String>,
    /// `--otlp.only`: push only, no HTTP listener.
    pub only: bool,
}

/// TLS material (files, read when the exporter is built).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA bundle that replaces the system roots, and where it was set.
    pub ca: Option<(PathBuf, String)>,
    /// Client certificate and key (mutual TLS), and where they were set.
    pub client: Option<(PathBuf, PathBuf, String)>,
}

/// Everything the push needs, resolved from flags and environment.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpSettings {
    /// The URL requests go to.
    pub endpoint: String,
    /// The transport.
    pub protocol: Protocol,
    /// Extra request headers (gRPC metadata).
    pub headers: Vec<(String, String)>,
    /// Time allowed for one export, retries included.
    pub timeout: Duration,
    /// Body compression.
    pub compression: Compression,
    /// Time between pushes.
    pub interval: Duration,
    /// TLS files.
    pub tls: TlsFiles,
    /// Resource attributes, in order, service.name included.
    pub resource: Vec<(String, String)>,
    /// No HTTP listener.
    pub only: bool,
}

/// An environment to read variables from (tests pass a map).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment; empty values count as unset, as the spec says.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The exporter variables [`scrub_exporter_env`] removes.
pub const EXPORTER_ENV: &[&str] = &[
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
    "OTEL_EXPORTER_OTLP_INSECURE",
    "OTEL_EXPORTER_OTLP_METRICS_INSECURE",
];

/// Removes the `OTEL_EXPORTER_OTLP_*` variables that `opentelemetry-otlp`
/// would otherwise read on its own and merge over the settings resolved
/// here (headers from the environment over the flag's, the environment's
/// compression when the flag says `none`).
///
/// Call it once, after [`OtlpSettings::resolve`] and before any thread is
/// started (changing the environment is not thread-safe).
pub fn scrub_exporter_env() {
    for v in EXPORTER_ENV {
        std::env::remove_var(v);
    }
}

/// The first of: the flag, then the environment variables in order.
/// Returns the value and where it came from.
fn pick(
    flag: Option<&str>,
    flag_name: &str,
    env: Env<'_>,
    vars: &[&str],
) -> Option<(String, String)> {
    if let Some(f) = flag {
        return Some((f.to_string(), flag_name.to_string()));
    }
    vars.iter()
        .find_map(|v| env(v).map(|val| (val, v.to_string())))
}

fn pick_path(
    flag: Option<&Path>,
    flag_name: &str,
    env: Env<'_>,
    vars: &[&str],
) -> Option<(PathBuf, String)> {
    pick(flag.and_then(Path::to_str), flag_name, env, vars).map(|(v, o)| (PathBuf::from(v), o))
}

impl OtlpSettings {
    /// Resolves the settings from flags over environment variables.
    /// Returns `None` when push is off (no endpoint configured and no
    /// `--otlp.only`, or `OTEL_SDK_DISABLED=true`). `procfs` is where host
    /// attributes are read (`cpuinfo`, the hostname).
    pub fn resolve(
        flags: &OtlpFlags,
        env: Env<'_>,
        procfs: &Path,
    ) -> Result<Option<OtlpSettings>, OtlpError> {
        let disabled = env("OTEL_SDK_DISABLED")
            .map(|v| v.trim().eq_ignore_ascii_case("true"))
            .unwrap_or(false);
        let signal_ep = flags
            .metrics_endpoint
            .as_deref()
            .map(|v| (v.to_string(), "--otlp.metrics-endpoint".to_string()))
            .or_else(|| {
                if flags.endpoint.is_some() {
                    None
                } else {
                    env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
                        .map(|v| (v, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT".to_string()))
                }
            });
        let generic_ep = pick(
            flags.endpoint.as_deref(),
            "--otlp.endpoint",
            env,
            &["OTEL_EXPORTER_OTLP_ENDPOINT"],
        );
        if disabled {
            if flags.only {
                return Err(OtlpError::DisabledButOnly);
            }
            return Ok(None);
        }
        if signal_ep.is_none() && generic_ep.is_none() && !flags.only {
            return Ok(None);
        }

        let protocol = match pick(
            flags.protocol.as_deref(),
            "--otlp.protocol",
            env,
            &[
                "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ],
        ) {
            Some((v, o)) => parse_protocol(&v).map_err(|e| invalid(&o, e))?,
            None => Protocol::HttpProtobuf,
        };
        let endpoint = {
            let origin = signal_ep
                .as_ref()
                .or(generic_ep.as_ref())
                .map_or("default endpoint".to_string(), |(_, o)| o.clone());
            metrics_endpoint(
                generic_ep.as_ref().map(|(v, _)| v.trim()),
                signal_ep.as_ref().map(|(v, _)| v.trim()),
                protocol,
            )
            .map_err(|e| invalid(&origin, e))?
        };

        let mut headers = match pick(
            None,
            "",
            env,
            &[
                "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
                "OTEL_EXPORTER_OTLP_HEADERS",
            ],
        ) {
            Some((v, o)) => parse_headers(&v).map_err(|e| invalid(&o, e))?,
            None => Vec::new(),
        };
        if let Some(f) = &flags.headers {
            for (k, v) in parse_headers(f).map_err(|e| invalid("--otlp.headers", e))? {
                headers.retain(|(hk, _)| *hk != k);
                headers.push((k, v));
            }
        }

        let timeout = match &flags.timeout {
            Some(f) => crate::duration::parse(f).map_err(|e| invalid("--otlp.timeout", e))?,
            None => match pick(
                None,
                "",
                env,
                &[
                    "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
                    "OTEL_EXPORTER_OTLP_TIMEOUT",
                ],
            ) {
                Some((v, o)) => parse_millis(&v).map_err(|e| invalid(&o, e))?,
                None => Duration::from_secs(10),
            },
        };
        let interval = match &flags.interval {
            Some(f) => crate::duration::parse(f).map_err(|e| invalid("--otlp.interval", e))?,
            None => match env("OTEL_METRIC_EXPORT_INTERVAL") {
                Some(v) => {
                    parse_millis(&v).map_err(|e| invalid("OTEL_METRIC_EXPORT_INTERVAL", e))?
                }
                None => Duration::from_secs(60),
            },
        };
        let compression = match pick(
            flags.compression.as_deref(),
            "--otlp.compression",
            env,
            &[
                "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
                "OTEL_EXPORTER_OTLP_COMPRESSION",
            ],
        ) {
            Some((v, o)) => parse_compression(&v).map_err(|e| invalid(&o, e))?,
            None => Compression::None,
        };

        let ca = pick_path(
            flags.certificate.as_deref(),
            "--otlp.certificate",
            env,
            &[
                "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE",
                "OTEL_EXPORTER_OTLP_CERTIFICATE",
            ],
        );
        let cert = pick_path(
            flags.client_certificate.as_deref(),
            "--otlp.client-certificate",
            env,
            &[
                "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE",
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
            ],
        );
        let key = pick_path(
            flags.client_key.as_deref(),
            "--otlp.client-key",
            env,
            &[
                "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY",
                "OTEL_EXPORTER_OTLP_CLIENT_KEY",
            ],
        );
        let client = match (cert, key) {
            (Some((c, co)), Some((k, _))) => Some((c, k, co)),
            (None, None) => None,
            (Some((_, o)), None) | (None, Some((_, o))) => {
                return Err(invalid(
                    &o,
                    "a client certificate needs a client key and vice versa",
                ))
            }
        };

        let mut resource: Vec<(String, String)> = detect_host(procfs, env);
        let mut set = |k: String, v: String| {
            resource.retain(|(rk, _)| *rk != k);
            resource.push((k, v));
        };
        if let Some(v) = env("OTEL_RESOURCE_ATTRIBUTES") {
            for (k, v) in
                parse_key_values(&v).map_err(|e| invalid("OTEL_RESOURCE_ATTRIBUTES", e))?
            {
                set(k, v);
            }
        }
        if let Some(f) = &flags.resource_attributes {
            for (k, v) in
                parse_key_values(f).map_err(|e| invalid("--otlp.resource-attributes", e))?
            {
                set(k, v);
            }
        }
        let service = flags
            .service_name
            .clone()
            .or_else(|| env("OTEL_SERVICE_NAME"))
            .or_else(|| {
                resource
                    .iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v.clone())
            })
            .unwrap_or_else(|| "perf-exporter".to_string());
        resource.retain(|(k, _)| k != "service.name");
        resource.insert(0, ("service.name".into(), service.trim().to_string()));
        if !resource.iter().any(|(k, _)| k == "service.version") {
            resource.insert(
                1,
                ("service.version".into(), env!("CARGO_PKG_VERSION").into()),
            );
        }

        Ok(Some(OtlpSettings {
            endpoint,
            protocol,
            headers,
            timeout,
            compression,
            interval,
            tls: TlsFiles { ca, client },
            resource,
            only: flags.only,
        }))
    }

    /// The final flush at shutdown is bounded by the timeout, at most 5 s.
    pub fn shutdown_timeout(&self) -> Duration {
        self.timeout.min(Duration::from_secs(5))
    }
}

/// The OTel `host.arch` value of a Rust target architecture.
pub fn host_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm32",
        "x86" => "x86",
        "powerpc64" => "ppc64",
        "powerpc" => "ppc32",
        other => other,
    }
}

/// `(vendor id, model name)` from `/proc/cpuinfo` text: `vendor_id` and
/// `model name` on x86; the `CPU implementer` code on Arm (which has no
/// model name there).
pub fn parse_cpuinfo(text: &str) -> (Option<String>, Option<String>) {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    };
    (
        field("vendor_id").or_else(|| field("CPU implementer")),
        field("model name"),
    )
}

/// Host resource attributes: `host.name`, `host.arch`,
/// `host.cpu.vendor.id`, `host.cpu.model.name`, and `k8s.node.name` from
/// `K8S_NODE_NAME` (the Helm chart sets it from the downward API).
pub fn detect_host(procfs: &Path, env: Env<'_>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let host = std::fs::read_to_string(procfs.join("sys/kernel/hostname"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| env("HOSTNAME"));
    if let Some(h) = host {
        out.push(("host.name".to_string(), h));
    }
    out.push((
        "host.arch".to_string(),
        host_arch(std::env::consts::ARCH).to_string(),
    ));
    if let Ok(ci) = std::fs::read_to_string(procfs.join("cpuinfo")) {
        let (vendor, model) = parse_cpuinfo(&ci);
        if let Some(v) = vendor {
            out.push(("host.cpu.vendor.id".to_string(), v));
        }
        if let Some(m) = model {
            out.push(("host.cpu.model.name".to_string(), m));
        }
    }
    if let Some(n) = env("K8S_NODE_NAME") {
        out.push(("k8s.node.name".to_string(), n.trim().to_string()));
    }
    out
}

/// Unit suffixes of Prometheus names and their UCUM units, as the
/// Prometheus translation of OTLP maps them.
const UNIT_SUFFIXES: &[(&str, &str)] = &[
    ("_bytes", "By"),
    ("_seconds", "s"),
    ("_joules", "J"),
    ("_celsius", "Cel"),
    ("_watts", "W"),
    ("_hertz", "Hz"),
    ("_volts", "V"),
];

/// The singular of a counted word, for a `{annotation}` unit.
fn singular(w: &str) -> String {
    match w {
        "tsc" => return "tick".into(),
        "aperf" | "mperf" => return "cycle".into(),
        _ => {}
    }
    for suf in ["sses", "shes", "ches", "xes"] {
        if w.ends_with(suf) {
            return w[..w.len() - 2].to_string();
        }
    }
    if let Some(s) = w.strip_suffix("ies") {
        return format!("{s}y");
    }
    match w.strip_suffix('s') {
        Some(s) if !s.ends_with('s') && !s.is_empty() => s.to_string(),
        _ => w.to_string(),
    }
}

/// The OTel name and UCUM unit of a Prometheus-named family.
///
/// `_total` is dropped from counters; a base-unit suffix becomes the unit
/// (`_bytes` `By`, `_seconds` `s`, `_joules` `J`, `_celsius` `Cel`, …);
/// other counters are counts of something and get an annotation unit from
/// the last word (`{cycle}`, `{instruction}`, `{miss}`), which the
/// Prometheus translation drops; `_` becomes `.`. A gauge ending in
/// `_ratio` gets unit `1`. So the translation (words joined with `_`, the
/// unit's suffix, `_total` for monotonic sums, `_ratio` for gauges in `1`)
/// gives back the Prometheus name for every name that follows the
/// conventions (counters end in `_total`).
pub fn otel_metric(prom: &str, kind: Kind) -> (String, String) {
    let dots = |s: &str| s.replace([':', '_'], ".");
    let mut base = prom;
    if kind == Kind::Counter {
        base = base.strip_suffix("_total").unwrap_or(base);
    }
    for (suffix, unit) in UNIT_SUFFIXES {
        if let Some(b) = base.strip_suffix(suffix) {
            if !b.is_empty() {
                return (dots(b), (*unit).to_string());
            }
        }
    }
    if kind == Kind::Gauge {
        if let Some(b) = base.strip_suffix("_ratio").filter(|b| !b.is_empty()) {
            return (dots(b), "1".into());
        }
        return (dots(base), String::new());
    }
    let last = base.rsplit(['_', ':']).next().unwrap_or(base);
    (dots(base), format!("{{{}}}", singular(last)))
}

/// Export results, for `perf_otlp_exports_total{result}` on `/metrics`.
#[derive(Debug, Default)]
pub struct ExportStats {
    success: AtomicU64,
    failure: AtomicU64,
}

impl ExportStats {
    /// Counts one export.
    pub fn record(&self, ok: bool) {
        let c = if ok { &self.success } else { &self.failure };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// `(successes, failures)` so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.success.load(Ordering::Relaxed),
            self.failure.load(Ordering::Relaxed),
        )
    }

    /// The `perf_otlp_exports_total` family.
    pub fn family(&self) -> Family {
        let (ok, failed) = self.counts();
        Family {
            name: "perf_otlp_exports_total".into(),
            help: "OTLP metric exports by result (a failure is an export that got an error or timed out).".into(),
            kind: Kind::Counter,
            samples: vec![
                Sample {
                    labels: vec![("result", "success".into())].into(),
                    value: ok as f64,
                    start_unix_nanos: 0,
                },
                Sample {
                    labels: vec![("result", "failure".into())].into(),
                    value: failed as f64,
                    start_unix_nanos: 0,
                },
            ],
        }
    }
}

/// Rate limiting of export-failure logs: the first failure is logged at
/// once, then at most one line per period with the number of failures in
/// between; the first success after failures is logged once.
#[derive(Debug)]
pub struct FailureLog {
    period: Duration,
    last: Option<Instant>,
    suppressed: u64,
    failing: u64,
}

impl FailureLog {
    /// A limiter that logs at most once per `period`.
    pub fn new(period: Duration) -> Self {
        FailureLog {
            period,
            last: None,
            suppressed: 0,
            failing: 0,
        }
    }

    /// A failure at `now`: `Some(failures not logged since the last line)`
    /// when this one is to be logged.
    pub fn failure(&mut self, now: Instant) -> Option<u64> {
        self.failing += 1;
        match self.last {
            Some(t) if now.saturating_duration_since(t) < self.period => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }

    /// A success: `Some(consecutive failures before it)` when it ends a
    /// run of failures.
    pub fn success(&mut self) -> Option<u64> {
        self.suppressed = 0;
        self.last = None;
        (self.failing > 0).then(|| std::mem::take(&mut self.failing))
    }
}

/// Collects one engine snapshot (the same collection a scrape makes).
pub type Collect = Arc<dyn Fn() -> Snapshot + Send + Sync>;

/// The samples of the current export cycle, by OTel name. Instrument
/// callbacks only read it.
#[derive(Debug, Default)]
struct Cycle {
    samples: Mutex<Arc<HashMap<String, Vec<Sample>>>>,
}

impl Cycle {
    fn set(&self, v: HashMap<String, Vec<Sample>>) {
        match self.samples.lock() {
            Ok(mut g) => *g = Arc::new(v),
            Err(p) => *p.into_inner() = Arc::new(v),
        }
    }

    fn get(&self) -> Arc<HashMap<String, Vec<Sample>>> {
        match self.samples.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

/// Lets the push loop keep the `ManualReader` it gave the meter provider.
#[derive(Debug, Clone)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

fn read_file(path: &Path, origin: &str) -> Result<Vec<u8>, OtlpError> {
    std::fs::read(path).map_err(|e| OtlpError::Tls {
        origin: origin.to_string(),
        path: path.to_path_buf(),
        msg: e.to_string(),
    })
}

fn tls_err(path: &Path, origin: &str, msg: impl std::fmt::Display) -> OtlpError {
    OtlpError::Tls {
        origin: origin.to_string(),
        path: path.to_path_buf(),
        msg: msg.to_string(),
    }
}

/// Reads and checks the TLS files: `(CA PEM, (cert PEM, key PEM))`.
#[allow(clippy::type_complexity)]
fn load_tls(tls: &TlsFiles) -> Result<(Option<Vec<u8>>, Option<(Vec<u8>, Vec<u8>)>), OtlpError> {
    let ca = match &tls.ca {
        Some((p, o)) => {
            let pem = read_file(p, o)?;
            let certs =
                reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| tls_err(p, o, e))?;
            if certs.is_empty() {
                return Err(tls_err(p, o, "no PEM certificate in the file"));
            }
            Some(pem)
        }
        None => None,
    };
    let client = match &tls.client {
        Some((c, k, o)) => {
            let cert = read_file(c, o)?;
            let key = read_file(k, o)?;
            let mut both = cert.clone();
            both.push(b'\n');
            both.extend_from_slice(&key);
            reqwest::Identity::from_pem(&both)
                .map_err(|e| tls_err(c, o, format!("client certificate and key: {e}")))?;
            Some((cert, key))
        }
        None => None,
    };
    Ok((ca, client))
}

/// Builds the OTLP exporter for the settings. Must run inside a tokio
/// runtime (the gRPC channel and the HTTP client live on it).
fn build_exporter(s: &OtlpSettings) -> Result<opentelemetry_otlp::MetricExporter, OtlpError> {
    // One rustls crypto provider for the process (ring; no aws-lc, no
    // OpenSSL). An error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (ca, client) = load_tls(&s.tls)?;
    let builder =
        opentelemetry_otlp::MetricExporter::builder().with_temporality(Temporality::Cumulative);
    let gzip = s.compression == Compression::Gzip;
    let exporter = match s.protocol {
        Protocol::HttpProtobuf => {
            let mut cb = reqwest::Client::builder()
                .timeout(s.timeout)
                .connect_timeout(s.timeout);
            if let Some(pem) = &ca {
                let certs = reqwest::Certificate::from_pem_bundle(pem)
                    .map_err(|e| OtlpError::Build(e.to_string()))?;
                cb = cb.tls_certs_only(certs);
            }
            if let Some((cert, key)) = &client {
                let mut both = cert.clone();
                both.push(b'\n');
                both.extend_from_slice(key);
                let id = reqwest::Identity::from_pem(&both)
                    .map_err(|e| OtlpError::Build(e.to_string()))?;
                cb = cb.identity(id);
            }
            let http = cb
                .build()
                .map_err(|e| OtlpError::Build(format!("HTTP client: {e}")))?;
            // `with_headers` percent-decodes values once more; ours are
            // decoded already, so a literal `%` is re-encoded.
            let headers: HashMap<String, String> = s
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.replace('%', "%25")))
                .collect();
            let mut b = builder
                .with_http()
                .with_http_client(http)
                .with_endpoint(s.endpoint.clone())
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_timeout(s.timeout)
                .with_headers(headers);
            if gzip {
                b = b.with_compression(opentelemetry_otlp::Compression::Gzip);
            }
            b.build()
        }
        Protocol::Grpc => {
            let mut ep = tonic::transport::Endpoint::from_shared(s.endpoint.clone())
                .map_err(|e| OtlpError::Build(format!("endpoint {}: {e}", s.endpoint)))?
                .timeout(s.timeout)
                .connect_timeout(s.timeout);
            if s.endpoint.starts_with("https://") {
                let mut tls = tonic::transport::ClientTlsConfig::new();
                tls = match &ca {
                    Some(pem) => tls.ca_certificate(tonic::transport::Certificate::from_pem(pem)),
                    None => tls.with_native_roots(),
                };
                if let Some((cert, key)) = &client {
                    tls = tls.identity(tonic::transport::Identity::from_pem(cert, key));
                }
                ep = ep
                    .tls_config(tls)
                    .map_err(|e| OtlpError::Build(format!("TLS: {e}")))?;
            }
            let channel = ep.connect_lazy();
            let mut md = tonic::metadata::MetadataMap::new();
            for (k, v) in &s.headers {
                let key = tonic::metadata::MetadataKey::from_bytes(k.as_bytes())
                    .map_err(|e| OtlpError::Build(format!("header `{k}`: {e}")))?;
                let val = v
                    .parse()
                    .map_err(|e| OtlpError::Build(format!("header `{k}`: {e}")))?;
                md.insert(key, val);
            }
            let mut b = builder
                .with_tonic()
                .with_channel(channel)
                .with_metadata(md)
                .with_timeout(s.timeout);
            if gzip {
                b = b.with_compression(opentelemetry_otlp::Compression::Gzip);
            }
            b.build()
        }
    };
    exporter.map_err(|e| OtlpError::Build(e.to_string()))
}

/// The push loop's state: the SDK pipeline and the exporter.
struct PushLoop {
    settings: OtlpSettings,
    collect: Collect,
    stats: Arc<ExportStats>,
    provider: SdkMeterProvider,
    meter: Meter,
    reader: SharedReader,
    exporter: opentelemetry_otlp::MetricExporter,
    cycle: Arc<Cycle>,
    /// Prometheus name -> OTel name of the instruments registered so far.
    instruments: HashMap<String, String>,
    otel_names: HashSet<String>,
    log: FailureLog,
    succeeded_once: bool,
}

impl PushLoop {
    fn new(
        settings: OtlpSettings,
        collect: Collect,
        stats: Arc<ExportStats>,
    ) -> Result<Self, OtlpError> {
        let exporter = build_exporter(&settings)?;
        let reader = SharedReader(Arc::new(
            ManualReader::builder()
                .with_temporality(Temporality::Cumulative)
                .build(),
        ));
        let resource = Resource::builder_empty()
            .with_attributes(
                settings
                    .resource
                    .iter()
                    .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
            )
            .build();
        // Per-CPU series of every set on large hosts exceed the SDK's
        // default limit of 2000 series per instrument.
        let view = |_: &Instrument| {
            Stream::builder()
                .with_cardinality_limit(1 << 16)
                .build()
                .ok()
        };
        let provider = SdkMeterProvider::builder()
            .with_reader(reader.clone())
            .with_resource(resource)
            .with_view(view)
            .build();
        let meter = provider.meter_with_scope(
            InstrumentationScope::builder("perf-exporter")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        );
        Ok(PushLoop {
            settings,
            collect,
            stats,
            provider,
            meter,
            reader,
            exporter,
            cycle: Arc::new(Cycle::default()),
            instruments: HashMap::new(),
            otel_names: HashSet::new(),
            log: FailureLog::new(Duration::from_secs(60)),
            succeeded_once: false,
        })
    }

    /// Registers an observable instrument for each family not seen yet.
    fn register(&mut self, snap: &Snapshot) {
        for f in &snap.families {
            if self.instruments.contains_key(&f.name) {
                continue;
            }
            let (name, unit) = otel_metric(&f.name, f.kind);
            if !self.otel_names.insert(name.clone()) {
                tracing::warn!(metric = %f.name, otel = %name, "two metrics map to the same OTel name; the second is not pushed");
                self.instruments.insert(f.name.clone(), String::new());
                continue;
            }
            self.instruments.insert(f.name.clone(), name.clone());
            let cycle = self.cycle.clone();
            let key = name.clone();
            let observe = move |o: &dyn AsyncInstrument<f64>| {
                let cur = cycle.get();
                for s in cur.get(&key).map(Vec::as_slice).unwrap_or_default() {
                    let attrs: Vec<KeyValue> = s
                        .labels
                        .iter()
                        .map(|(k, v)| KeyValue::new(*k, v.clone()))
                        .collect();
                    o.observe(s.value, &attrs);
                }
            };
            match f.kind {
                Kind::Counter => {
                    self.meter
                        .f64_observable_counter(name)
                        .with_unit(unit)
                        .with_description(f.help.clone())
                        .with_callback(observe)
                        .build();
                }
                Kind::Gauge => {
                    self.meter
                        .f64_observable_gauge(name)
                        .with_unit(unit)
                        .with_description(f.help.clone())
                        .with_callback(observe)
                        .build();
                }
            }
        }
    }

    /// One engine collection, then the reader's collection: every
    /// instrument's callback reads that one snapshot.
    fn gather(&mut self) -> Result<ResourceMetrics, String> {
        let snap = (self.collect)();
        self.register(&snap);
        let by_name: HashMap<String, Vec<Sample>> = snap
            .families
            .into_iter()
            .filter_map(|f| {
                let n = self.instruments.get(&f.name)?;
                (!n.is_empty()).then(|| (n.clone(), f.samples))
            })
            .collect();
        self.cycle.set(by_name);
        let mut rm = ResourceMetrics::default();
        let collected = self.reader.collect(&mut rm);
        self.cycle.set(HashMap::new());
        collected.map_err(|e| format!("collecting: {e}"))?;
        Ok(rm)
    }

    /// One export cycle: [`Self::gather`], then the export, bounded by
    /// `timeout`.
    async fn cycle(&mut self, timeout: Duration) -> Result<(), String> {
        let rm = self.gather()?;
        let t0 = tokio::time::Instant::now();
        let timed_out = || format!("timed out after {}ms", timeout.as_millis());
        match tokio::time::timeout(timeout, self.exporter.export(&rm)).await {
            Ok(Ok(())) => Ok(()),
            // The HTTP client's and the exporter's own deadlines are the
            // same timeout and may fire first, with vaguer errors
            // ("network error"): say what happened.
            Ok(Err(e)) if t0.elapsed() + Duration::from_millis(100) >= timeout => {
                Err(format!("{} ({e})", timed_out()))
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(timed_out()),
        }
    }

    fn record(&mut self, r: Result<(), String>) {
        self.stats.record(r.is_ok());
        match r {
            Ok(()) => {
                if let Some(n) = self.log.success() {
                    tracing::info!(endpoint = %self.settings.endpoint, failures = n, "OTLP export recovered");
                } else if !self.succeeded_once {
                    tracing::info!(endpoint = %self.settings.endpoint, "first OTLP export succeeded");
                }
                self.succeeded_once = true;
                tracing::debug!("OTLP export succeeded");
            }
            Err(e) => {
                if let Some(suppressed) = self.log.failure(Instant::now()) {
                    tracing::warn!(endpoint = %self.settings.endpoint, error = %e, suppressed, "OTLP export failed (logged at most once a minute; see perf_otlp_exports_total)");
                } else {
                    tracing::debug!(error = %e, "OTLP export failed");
                }
            }
        }
    }

    async fn run(mut self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let interval = self.settings.interval;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                _ = tick.tick() => {}
            }
            let timeout = self.settings.timeout;
            let r = tokio::select! {
                r = self.cycle(timeout) => Some(r),
                _ = stop.changed() => None,
            };
            match r {
                Some(r) => self.record(r),
                None => break,
            }
        }
        // One final push of the latest counts, bounded.
        let bound = self.settings.shutdown_timeout();
        let r = self.cycle(bound).await;
        match &r {
            Ok(()) => tracing::info!("final OTLP export at shutdown succeeded"),
            Err(e) => tracing::warn!(error = %e, "final OTLP export at shutdown failed"),
        }
        self.stats.record(r.is_ok());
        let _ = self.exporter.shutdown_with_timeout(bound);
        let _ = self.provider.shutdown_with_timeout(bound);
    }
}

/// The running push: a thread with its own runtime.
#[derive(Debug)]
pub struct Pusher {
    stop: tokio::sync::watch::Sender<bool>,
    done: std::sync::mpsc::Receiver<()>,
    bound: Duration,
}

impl Pusher {
    /// Builds the exporter and starts pushing every interval, on a thread
    /// of its own. Fails when the exporter cannot be built (bad TLS files,
    /// endpoint). `collect` is called once per export.
    pub fn start(
        settings: OtlpSettings,
        collect: Collect,
        stats: Arc<ExportStats>,
    ) -> Result<Pusher, OtlpError> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), OtlpError>>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let bound = settings.shutdown_timeout();
        std::thread::Builder::new()
            .name("otlp-push".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(OtlpError::Start(e.to_string())));
                        return;
                    }
                };
                rt.block_on(async move {
                    match PushLoop::new(settings, collect, stats) {
                        Ok(p) => {
                            let _ = ready_tx.send(Ok(()));
                            p.run(stop_rx).await;
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                });
                let _ = done_tx.send(());
            })
            .map_err(|e| OtlpError::Start(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Pusher {
                stop: stop_tx,
                done: done_rx,
                bound,
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(OtlpError::Start("the push thread exited".into())),
        }
    }

    /// Stops the push: cancels an export in flight, pushes once more
    /// (bounded by [`OtlpSettings::shutdown_timeout`]) and waits for that.
    pub fn shutdown(self) {
        let _ = self.stop.send(true);
        let wait = self.bound + Duration::from_secs(1);
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = self.done.recv_timeout(wait) {
            tracing::warn!(
                waited_ms = wait.as_millis() as u64,
                "the final OTLP export did not finish in time; exiting anyway"
            );
        }
    }
}

/// A one-line description of the settings for the start-up log (header
/// names only: values may be secrets).
pub fn describe(s: &OtlpSettings) -> String {
    let names: Vec<&str> = s.headers.iter().map(|(k, _)| k.as_str()).collect();
    let res: BTreeMap<&str, &str> = s
        .resource
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    format!(
        "endpoint={} protocol={} interval={}ms timeout={}ms compression={} headers=[{}] ca={} client_cert={} resource={:?}",
        s.endpoint,
        s.protocol.as_str(),
        s.interval.as_millis(),
        s.timeout.as_millis(),
        match s.compression {
            Compression::Gzip => "gzip",
            Compression::None => "none",
        },
        names.join(","),
        s.tls.ca.as_ref().map_or("system".into(), |(p, _)| p.display().to_string()),
        s.tls.client.is_some(),
        res
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| m.get(k).cloned().filter(|v| !v.trim().is_empty())
    }

    fn resolve(
        flags: &OtlpFlags,
        pairs: &[(&str, &str)],
    ) -> Result<Option<OtlpSettings>, OtlpError> {
        let e = env_of(pairs);
        OtlpSettings::resolve(flags, &e, Path::new("/nonexistent-procfs"))
    }

    fn on(flags: &OtlpFlags, pairs: &[(&str, &str)]) -> OtlpSettings {
        resolve(flags, pairs).unwrap().expect("push on")
    }

    #[test]
    fn off_without_an_endpoint_and_defaults_with_only() {
        assert!(resolve(&OtlpFlags::default(), &[]).unwrap().is_none());
        let s = on(
            &OtlpFlags {
                only: true,
                ..Default::default()
            },
            &[],
        );
        assert_eq!(s.endpoint, "http://localhost:4318/v1/metrics");
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
        assert_eq!(s.timeout, Duration::from_secs(10));
        assert_eq!(s.interval, Duration::from_secs(60));
        assert_eq!(s.compression, Compression::None);
        assert!(s.headers.is_empty());
        assert!(s.only);
        let g = on(
            &OtlpFlags {
                only: true,
                ..Default::default()
            },
            &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
        );
        assert_eq!(g.endpoint, "http://localhost:4317");
    }

    #[test]
    fn sdk_disabled() {
        let env = [
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        ];
        assert!(resolve(&OtlpFlags::default(), &env).unwrap().is_none());
        let only = OtlpFlags {
            only: true,
            ..Default::default()
        };
        assert!(matches!(
            resolve(&only, &env),
            Err(OtlpError::DisabledButOnly)
        ));
        let s = on(
            &OtlpFlags::default(),
            &[
                ("OTEL_SDK_DISABLED", "false"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ],
        );
        assert_eq!(s.endpoint, "http://c:4318/v1/metrics");
    }

    #[test]
    fn endpoint_path_rules() {
        let h = Protocol::HttpProtobuf;
        assert_eq!(
            metrics_endpoint(Some("http://c:4318"), None, h).unwrap(),
            "http://c:4318/v1/metrics"
        );
        assert_eq!(
            metrics_endpoint(Some("http://c:4318/"), None, h).unwrap(),
            "http://c:4318/v1/metrics"
        );
        assert_eq!(
            metrics_endpoint(Some("https://vm:8428/opentelemetry"), None, h).unwrap(),
            "https://vm:8428/opentelemetry/v1/metrics"
        );
        assert_eq!(
            metrics_endpoint(Some("http://c:4318"), Some("http://d:9/custom"), h).unwrap(),
            "http://d:9/custom"
        );
        // A signal-specific endpoint is used as is, even without a path.
        assert_eq!(
            metrics_endpoint(None, Some("http://d:9"), h).unwrap(),
            "http://d:9"
        );
        let g = Protocol::Grpc;
        assert_eq!(
            metrics_endpoint(Some("http://c:4317"), None, g).unwrap(),
            "http://c:4317"
        );
        assert!(metrics_endpoint(Some("c:4317"), None, g).is_err());
        assert!(metrics_endpoint(Some("ftp://c"), None, h).is_err());
        assert!(metrics_endpoint(Some("not a url"), None, h).is_err());
    }

    #[test]
    fn endpoint_precedence() {
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://generic:4318"),
            (
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "http://signal:4318/m",
            ),
        ];
        assert_eq!(
            on(&OtlpFlags::default(), &env).endpoint,
            "http://signal:4318/m"
        );
        assert_eq!(
            on(
                &OtlpFlags::default(),
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://generic:4318")]
            )
            .endpoint,
            "http://generic:4318/v1/metrics"
        );
        // A flag beats both variables.
        let f = OtlpFlags {
            endpoint: Some("http://flag:4318".into()),
            ..Default::default()
        };
        assert_eq!(on(&f, &env).endpoint, "http://flag:4318/v1/metrics");
        let f = OtlpFlags {
            metrics_endpoint: Some("http://flag:1/x".into()),
            endpoint: Some("http://other:4318".into()),
            ..Default::default()
        };
        assert_eq!(on(&f, &env).endpoint, "http://flag:1/x");
        // Empty variables are unset.
        assert!(resolve(
            &OtlpFlags::default(),
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]
        )
        .unwrap()
        .is_none());
        let e = resolve(
            &OtlpFlags::default(),
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")],
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT: "), "{e}");
    }

    #[test]
    fn protocol() {
        assert_eq!(parse_protocol("grpc"), Ok(Protocol::Grpc));
        assert_eq!(parse_protocol("http/protobuf"), Ok(Protocol::HttpProtobuf));
        assert!(parse_protocol("http/json")
            .unwrap_err()
            .contains("not supported"));
        assert!(parse_protocol("GRPC").is_err());
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc"),
        ];
        let s = on(&OtlpFlags::default(), &env);
        assert_eq!(s.protocol, Protocol::Grpc);
        assert_eq!(s.endpoint, "http://c:4317");
        let f = OtlpFlags {
            protocol: Some("http/protobuf".into()),
            ..Default::default()
        };
        assert_eq!(on(&f, &env).protocol, Protocol::HttpProtobuf);
        let e = resolve(
            &OtlpFlags::default(),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("OTEL_EXPORTER_OTLP_PROTOCOL: `thrift`"),
            "{e}"
        );
    }

    #[test]
    fn headers() {
        assert_eq!(
            parse_headers("api-key=s3cr%3Dt, X-Scope-OrgID = team%20a ,,").unwrap(),
            vec![
                ("api-key".to_string(), "s3cr=t".to_string()),
                ("x-scope-orgid".to_string(), "team a".to_string())
            ]
        );
        assert_eq!(
            parse_headers("a=1,a=2").unwrap(),
            vec![("a".to_string(), "2".to_string())]
        );
        assert_eq!(
            parse_headers("auth=Basic dXNlcjpwYXNz").unwrap(),
            vec![("auth".to_string(), "Basic dXNlcjpwYXNz".to_string())]
        );
        assert!(parse_headers("novalue").is_err());
        assert!(parse_headers("=v").is_err());
        assert!(parse_headers("k=%zz").is_err());
        assert!(parse_headers("k=%4").is_err());
        assert!(parse_headers("bad key=v").is_err());
        assert!(parse_headers("k=a%0Ab").is_err());
        // The metrics variable replaces the generic one; the flag merges
        // over it key by key.
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=generic"),
            ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "a=signal,b=2"),
        ];
        assert_eq!(
            on(&OtlpFlags::default(), &env).headers,
            vec![("a".into(), "signal".into()), ("b".into(), "2".into())]
        );
        let f = OtlpFlags {
            headers: Some("b=flag,c=3".into()),
            ..Default::default()
        };
        assert_eq!(
            on(&f, &env).headers,
            vec![
                ("a".into(), "signal".into()),
                ("b".into(), "flag".into()),
                ("c".into(), "3".into())
            ]
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_millis("2500"), Ok(Duration::from_millis(2500)));
        assert!(parse_millis("0").is_err());
        assert!(parse_millis("10s").is_err());
        assert!(parse_millis("-1").is_err());
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
            ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "3000"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "15000"),
        ];
        let s = on(&OtlpFlags::default(), &env);
        assert_eq!(s.timeout, Duration::from_secs(3));
        assert_eq!(s.interval, Duration::from_secs(15));
        let f = OtlpFlags {
            timeout: Some("500ms".into()),
            interval: Some("5s".into()),
            ..Default::default()
        };
        let s = on(&f, &env);
        assert_eq!(s.timeout, Duration::from_millis(500));
        assert_eq!(s.interval, Duration::from_secs(5));
        assert_eq!(s.shutdown_timeout(), Duration::from_millis(500));
        let e = resolve(
            &OtlpFlags::default(),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_METRIC_EXPORT_INTERVAL", "1m"),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("OTEL_METRIC_EXPORT_INTERVAL: "), "{e}");
    }

    #[test]
    fn compression() {
        assert_eq!(parse_compression("gzip"), Ok(Compression::Gzip));
        assert_eq!(parse_compression("none"), Ok(Compression::None));
        assert!(parse_compression("zstd").is_err());
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ];
        assert_eq!(
            on(&OtlpFlags::default(), &env).compression,
            Compression::Gzip
        );
        let f = OtlpFlags {
            compression: Some("none".into()),
            ..Default::default()
        };
        assert_eq!(on(&f, &env).compression, Compression::None);
    }

    #[test]
    fn tls_settings() {
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4318"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"),
        ];
        let s = on(&OtlpFlags::default(), &env);
        assert_eq!(
            s.tls.ca,
            Some((
                PathBuf::from("/etc/ca.pem"),
                "OTEL_EXPORTER_OTLP_CERTIFICATE".to_string()
            ))
        );
        assert!(s.tls.client.is_none());
        let f = OtlpFlags {
            certificate: Some("/flag/ca.pem".into()),
            client_certificate: Some("/c.pem".into()),
            client_key: Some("/k.pem".into()),
            ..Default::default()
        };
        let s = on(&f, &env);
        assert_eq!(s.tls.ca.unwrap().0, PathBuf::from("/flag/ca.pem"));
        let (c, k, _) = s.tls.client.unwrap();
        assert_eq!((c, k), (PathBuf::from("/c.pem"), PathBuf::from("/k.pem")));
        let half = OtlpFlags {
            client_certificate: Some("/c.pem".into()),
            ..Default::default()
        };
        assert!(resolve(&half, &env).is_err());
        // Unreadable files fail when the exporter is built.
        let e = load_tls(&TlsFiles {
            ca: Some(("/nonexistent/ca.pem".into(), "--otlp.certificate".into())),
            client: None,
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("--otlp.certificate /nonexistent/ca.pem: "),
            "{e}"
        );
    }

    #[test]
    fn resource_attributes() {
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=prod,service.name=from-attrs,team=a%2Cb",
            ),
            ("K8S_NODE_NAME", "node-7"),
            ("HOSTNAME", "box"),
        ];
        let s = on(&OtlpFlags::default(), &env);
        let get = |s: &OtlpSettings, k: &str| {
            s.resource
                .iter()
                .find(|(rk, _)| rk == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get(&s, "service.name").as_deref(), Some("from-attrs"));
        assert_eq!(
            get(&s, "service.version").as_deref(),
            Some(env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(get(&s, "deployment.environment").as_deref(), Some("prod"));
        assert_eq!(get(&s, "team").as_deref(), Some("a,b"));
        assert_eq!(get(&s, "k8s.node.name").as_deref(), Some("node-7"));
        assert_eq!(get(&s, "host.name").as_deref(), Some("box"));
        assert_eq!(
            get(&s, "host.arch").as_deref(),
            Some(host_arch(std::env::consts::ARCH))
        );
        // OTEL_SERVICE_NAME beats service.name in the attributes; the flag
        // beats both.
        let mut env2 = env.to_vec();
        env2.push(("OTEL_SERVICE_NAME", "svc"));
        assert_eq!(
            get(&on(&OtlpFlags::default(), &env2), "service.name").as_deref(),
            Some("svc")
        );
        let f = OtlpFlags {
            service_name: Some("flag-svc".into()),
            resource_attributes: Some("team=c".into()),
            ..Default::default()
        };
        let s = on(&f, &env2);
        assert_eq!(get(&s, "service.name").as_deref(), Some("flag-svc"));
        assert_eq!(get(&s, "team").as_deref(), Some("c"));
        assert_eq!(
            s.resource
                .iter()
                .filter(|(k, _)| k == "service.name")
                .count(),
            1
        );
        let none = on(
            &OtlpFlags::default(),
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")],
        );
        assert_eq!(get(&none, "service.name").as_deref(), Some("perf-exporter"));
        assert_eq!(get(&none, "k8s.node.name"), None);
        assert!(resolve(
            &OtlpFlags::default(),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_RESOURCE_ATTRIBUTES", "novalue")
            ]
        )
        .is_err());
    }

    #[test]
    fn host_detection_from_procfs() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sys/kernel")).unwrap();
        std::fs::write(d.path().join("sys/kernel/hostname"), "node-a\n").unwrap();
        std::fs::write(
            d.path().join("cpuinfo"),
            "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n",
        )
        .unwrap();
        let env = env_of(&[]);
        let h = detect_host(d.path(), &env);
        assert_eq!(h[0], ("host.name".into(), "node-a".into()));
        assert!(h.contains(&("host.cpu.vendor.id".into(), "GenuineIntel".into())));
        assert!(h.contains(&(
            "host.cpu.model.name".into(),
            "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz".into()
        )));
        assert_eq!(
            parse_cpuinfo(
                "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
            ),
            (Some("0x41".into()), None)
        );
        assert_eq!(host_arch("x86_64"), "amd64");
        assert_eq!(host_arch("aarch64"), "arm64");
    }

    /// The Prometheus translation of an OTLP metric (what the OTel
    /// Collector's Prometheus exporter and Prometheus' own OTLP receiver do
    /// with suffixes on): non-alphanumerics to `_`, the unit's suffix
    /// unless the name has it, `_total` for monotonic sums, `_ratio` for
    /// gauges in `1`; `{annotations}` dropped.
    fn prometheus_name(name: &str, unit: &str, kind: Kind) -> String {
        let mut words: Vec<String> = name
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        let unit_word = match unit {
            "By" => Some("bytes"),
            "s" => Some("seconds"),
            "J" => Some("joules"),
            "Cel" => Some("celsius"),
            "W" => Some("watts"),
            "Hz" => Some("hertz"),
            "V" => Some("volts"),
            _ => None,
        };
        if let Some(u) = unit_word {
            if words.last().map(String::as_str) != Some(u) {
                words.push(u.into());
            }
        }
        if kind == Kind::Counter {
            words.retain(|w| w != "total");
            words.push("total".into());
        }
        if kind == Kind::Gauge && unit == "1" {
            words.push("ratio".into());
        }
        words.join("_")
    }

    #[test]
    fn names_and_units() {
        let c = Kind::Counter;
        assert_eq!(
            otel_metric("perf_cpu_cycles_total", c),
            ("perf.cpu.cycles".into(), "{cycle}".into())
        );
        assert_eq!(
            otel_metric("perf_dram_read_bytes_total", c),
            ("perf.dram.read".into(), "By".into())
        );
        assert_eq!(
            otel_metric("perf_cpu_clock_seconds_total", c),
            ("perf.cpu.clock".into(), "s".into())
        );
        assert_eq!(
            otel_metric("perf_instructions_total", c),
            ("perf.instructions".into(), "{instruction}".into())
        );
        assert_eq!(
            otel_metric("perf_context_switches_total", c),
            ("perf.context.switches".into(), "{switch}".into())
        );
        assert_eq!(
            otel_metric("perf_cache_misses_total", c),
            ("perf.cache.misses".into(), "{miss}".into())
        );
        assert_eq!(
            otel_metric("perf_energy_package_joules_total", c),
            ("perf.energy.package".into(), "J".into())
        );
        assert_eq!(
            otel_metric("perf_msr_tsc_total", c),
            ("perf.msr.tsc".into(), "{tick}".into())
        );
        assert_eq!(
            otel_metric("perf_cpu_thermal_margin_celsius", Kind::Gauge),
            ("perf.cpu.thermal.margin".into(), "Cel".into())
        );
        assert_eq!(
            otel_metric("perf_event_available", Kind::Gauge),
            ("perf.event.available".into(), "".into())
        );
        assert_eq!(
            otel_metric("perf_x_ratio", Kind::Gauge),
            ("perf.x".into(), "1".into())
        );
    }

    #[test]
    fn every_default_metric_round_trips_through_the_prometheus_translation() {
        let cfg = crate::config::Config::default_config();
        let mut names: Vec<(String, Kind)> = cfg
            .sets
            .iter()
            .flat_map(|s| &s.events)
            .map(|e| {
                let k = if e.metric.value.ends_with("_total") {
                    Kind::Counter
                } else {
                    Kind::Gauge
                };
                (e.metric.value.clone(), k)
            })
            .collect();
        assert!(names.len() > 20);
        for (n, k) in [
            ("perf_event_available", Kind::Gauge),
            ("perf_group_enabled_seconds_total", Kind::Counter),
            ("perf_group_running_seconds_total", Kind::Counter),
            ("perf_read_errors_total", Kind::Counter),
            ("perf_x_ratio", Kind::Gauge),
        ] {
            names.push((n.into(), k));
        }
        for (n, k) in names {
            let (o, u) = otel_metric(&n, k);
            assert_eq!(prometheus_name(&o, &u, k), n, "{o} {u}");
            assert!(o.starts_with("perf."), "{o}");
            assert!(u.len() <= 63 && u.is_ascii());
        }
    }

    #[test]
    fn failure_log_rate_limits() {
        let t0 = Instant::now();
        let s = |n| t0 + Duration::from_secs(n);
        let mut l = FailureLog::new(Duration::from_secs(60));
        assert_eq!(l.failure(s(0)), Some(0));
        assert_eq!(l.failure(s(10)), None);
        assert_eq!(l.failure(s(59)), None);
        assert_eq!(l.failure(s(60)), Some(2));
        assert_eq!(l.failure(s(61)), None);
        assert_eq!(l.success(), Some(5));
        assert_eq!(l.success(), None);
        assert_eq!(l.failure(s(62)), Some(0));
    }

    #[test]
    fn export_stats_family() {
        let st = ExportStats::default();
        st.record(true);
        st.record(false);
        st.record(false);
        let f = st.family();
        assert_eq!(f.name, "perf_otlp_exports_total");
        assert_eq!(f.kind, Kind::Counter);
        assert_eq!(
            f.samples[0].labels,
            vec![("result", "success".to_string())].into()
        );
        assert_eq!(f.samples[0].value, 1.0);
        assert_eq!(f.samples[1].value, 2.0);
    }

    #[tokio::test]
    async fn one_engine_collection_serves_every_instrument() {
        use crate::engine::Engine;
        use crate::perf::sim::SimKernel;
        use crate::pmu::PmuTable;
        use crate::probe::prober;
        use crate::resolve::chain::resolve_config;
        use crate::resolve::Context;
        use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
        use std::sync::atomic::AtomicUsize;

        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/intel-skx");
        let table = PmuTable::discover(&root).unwrap();
        let k = Arc::new(SimKernel::with_manual_clock(table.clone()));
        let cfg = crate::config::Config::default_config();
        let res = {
            let p = prober(k.as_ref());
            resolve_config(&cfg, &table, &Context::default(), Some(&p))
        };
        let engine = Mutex::new(Engine::new(k.clone(), table, res));
        let calls = Arc::new(AtomicUsize::new(0));
        let last = Arc::new(Mutex::new(Snapshot::default()));
        let (c2, l2) = (calls.clone(), last.clone());
        let collect: Collect = Arc::new(move || {
            c2.fetch_add(1, Ordering::SeqCst);
            k.advance(1_000_000_000);
            let s = engine.lock().unwrap().collect();
            *l2.lock().unwrap() = s.clone();
            s
        });
        let settings = on(
            &OtlpFlags {
                only: true,
                ..Default::default()
            },
            &[],
        );
        let mut p = PushLoop::new(settings, collect, Arc::new(ExportStats::default())).unwrap();
        for round in 1..=3 {
            let rm = p.gather().unwrap();
            assert_eq!(
                calls.load(Ordering::SeqCst),
                round,
                "one collection per export"
            );
            let snap = last.lock().unwrap().clone();
            let metrics: Vec<_> = rm.scope_metrics().flat_map(|s| s.metrics()).collect();
            let pushed: Vec<&Family> = snap
                .families
                .iter()
                .filter(|f| !f.samples.is_empty())
                .collect();
            assert!(pushed.len() > 20, "{}", pushed.len());
            assert_eq!(metrics.len(), pushed.len());
            for f in pushed {
                let (name, unit) = otel_metric(&f.name, f.kind);
                let m = metrics
                    .iter()
                    .find(|m| m.name() == name)
                    .unwrap_or_else(|| panic!("{name} not collected"));
                assert_eq!(m.unit(), unit);
                // Every sample of the snapshot, with its labels, and no other.
                let mut want: Vec<(Vec<(String, String)>, f64)> = f
                    .samples
                    .iter()
                    .map(|s| {
                        let mut l: Vec<(String, String)> = s
                            .labels
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.clone()))
                            .collect();
                        l.sort();
                        (l, s.value)
                    })
                    .collect();
                let attrs = |a: &mut dyn Iterator<Item = &KeyValue>| {
                    let mut l: Vec<(String, String)> = a
                        .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                        .collect();
                    l.sort();
                    l
                };
                let mut got: Vec<(Vec<(String, String)>, f64)> = match (m.data(), f.kind) {
                    (AggregatedMetrics::F64(MetricData::Sum(s)), Kind::Counter) => {
                        assert!(s.is_monotonic());
                        assert_eq!(s.temporality(), Temporality::Cumulative);
                        s.data_points()
                            .map(|d| (attrs(&mut d.attributes()), d.value()))
                            .collect()
                    }
                    (AggregatedMetrics::F64(MetricData::Gauge(g)), Kind::Gauge) => g
                        .data_points()
                        .map(|d| (attrs(&mut d.attributes()), d.value()))
                        .collect(),
                    (d, k) => panic!("{name}: {k:?} pushed as {d:?}"),
                };
                want.sort_by(|a, b| a.0.cmp(&b.0));
                got.sort_by(|a, b| a.0.cmp(&b.0));
                assert_eq!(got, want, "{name}");
            }
        }
        let rm = p.gather().unwrap();
        let dram = rm
            .scope_metrics()
            .flat_map(|s| s.metrics())
            .find(|m| m.name() == "perf.dram.read")
            .expect("uncore DRAM reads on the simulated Skylake-SP");
        assert_eq!(dram.unit(), "By");
        let AggregatedMetrics::F64(MetricData::Sum(s)) = dram.data() else {
            panic!("{:?}", dram.data())
        };
        let keys: HashSet<String> = s
            .data_points()
            .flat_map(|d| d.attributes().map(|kv| kv.key.to_string()))
            .collect();
        assert!(keys.contains("pmu") && keys.contains("socket"), "{keys:?}");
    }
}
