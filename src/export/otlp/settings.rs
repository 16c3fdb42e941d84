//! Settings from `--otlp.*` flags over the OpenTelemetry environment
//! variables: a table of settings (flag, variables most specific first)
//! and one small resolver per setting.
//!
//! Each setting is taken from, in order: the flag, the metrics-specific
//! variable (`OTEL_EXPORTER_OTLP_METRICS_*`), the generic one
//! (`OTEL_EXPORTER_OTLP_*`), the spec's default. Empty variables count as
//! unset. Headers and resource attributes merge the flag over the
//! variable, key by key.

pub(crate) use super::flags::{process_env, Env, OtlpFlags};
use super::parse::{
    metrics_endpoint, parse_compression, parse_headers, parse_millis, parse_protocol, Compression,
    Protocol,
};
use super::table::{
    invalid, Given, Inputs, Setting, CERTIFICATE, CLIENT_CERTIFICATE, CLIENT_KEY, COMPRESSION,
    ENDPOINT, HEADERS, INTERVAL, METRICS_ENDPOINT, PROTOCOL, TIMEOUT,
};
use super::{resource, OtlpError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// TLS material (files, read when the exporter is built).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    /// CA bundle that replaces the system roots, and where it was set.
    pub ca: Option<(PathBuf, String)>,
    /// Client certificate and key (mutual TLS), and where they were set.
    pub client: Option<(PathBuf, PathBuf, String)>,
}

/// Everything the push needs, resolved from flags and environment. Its
/// `Debug` redacts the endpoint's secrets and the header values.
#[derive(Clone, PartialEq)]
pub(crate) struct OtlpSettings {
    /// The URL requests go to. It may hold secrets (userinfo, query
    /// values): log [`super::describe`], which redacts them, never this.
    pub endpoint: String,
    /// The generic endpoint as given (`--otlp.endpoint`,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`), when there is one: the base of the
    /// other signals (profiles), whatever the metrics' own endpoint. It
    /// may hold secrets, as `endpoint`.
    pub base_endpoint: Option<String>,
    /// The transport.
    pub protocol: Protocol,
    /// Extra request headers (gRPC metadata).
    pub headers: Vec<(String, String)>,
    /// Time allowed for one export.
    pub timeout: Duration,
    /// Body compression.
    pub compression: Compression,
    /// Time between pushes.
    pub interval: Duration,
    /// TLS files.
    pub tls: TlsFiles,
    /// Resource attributes, in order, service.name first.
    pub resource: Vec<(String, String)>,
    /// No HTTP listener.
    pub only: bool,
}

fn path_flag(p: &Option<PathBuf>) -> Option<&str> {
    p.as_deref().and_then(Path::to_str)
}

/// `OTEL_SDK_DISABLED=true` (case-insensitive).
fn disabled(i: &Inputs<'_>) -> bool {
    (i.env)("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The signal-specific and the generic endpoint as given. A generic flag
/// beats the signal-specific variable.
fn endpoints(i: &Inputs<'_>) -> (Option<Given>, Option<Given>) {
    let f = i.flags;
    let signal = match (&f.metrics_endpoint, &f.endpoint) {
        (Some(m), _) => i.get(&METRICS_ENDPOINT, Some(m)),
        (None, Some(_)) => None,
        (None, None) => i.var(&METRICS_ENDPOINT),
    };
    (signal, i.get(&ENDPOINT, f.endpoint.as_deref()))
}

fn protocol(i: &Inputs<'_>) -> Result<Protocol, OtlpError> {
    i.get(&PROTOCOL, i.flags.protocol.as_deref())
        .map_or(Ok(Protocol::HttpProtobuf), |g| {
            g.parse(parse_protocol, parse_protocol)
        })
}

fn endpoint(
    signal: Option<&Given>,
    generic: Option<&Given>,
    protocol: Protocol,
) -> Result<String, OtlpError> {
    let origin = signal.or(generic).map_or("default endpoint", |g| g.origin);
    metrics_endpoint(
        generic.map(|g| g.value.trim()),
        signal.map(|g| g.value.trim()),
        protocol,
    )
    .map_err(|e| invalid(origin, e))
}

/// The variable's headers (the metrics variable replaces the generic
/// one), then the flag's over them, key by key.
fn headers(i: &Inputs<'_>) -> Result<Vec<(String, String)>, OtlpError> {
    let mut out = match i.var(&HEADERS) {
        Some(g) => g.parse(parse_headers, parse_headers)?,
        None => Vec::new(),
    };
    if let Some(f) = i
        .get(&HEADERS, i.flags.headers.as_deref())
        .filter(|g| g.from_flag)
    {
        for (k, v) in f.parse(parse_headers, parse_headers)? {
            out.retain(|(hk, _)| *hk != k);
            out.push((k, v));
        }
    }
    Ok(out)
}

/// Flags take a duration with a unit (`10s`); the variables integer
/// milliseconds, as the OTel spec says.
fn duration(
    i: &Inputs<'_>,
    s: &Setting,
    flag: Option<&str>,
    default: Duration,
) -> Result<Duration, OtlpError> {
    i.get(s, flag).map_or(Ok(default), |g| {
        g.parse(crate::duration::parse, parse_millis)
    })
}

fn timeout(i: &Inputs<'_>) -> Result<Duration, OtlpError> {
    let f = i.flags.timeout.as_deref();
    duration(i, &TIMEOUT, f, Duration::from_secs(10))
}

fn interval(i: &Inputs<'_>) -> Result<Duration, OtlpError> {
    let f = i.flags.interval.as_deref();
    duration(i, &INTERVAL, f, Duration::from_secs(60))
}

fn compression(i: &Inputs<'_>) -> Result<Compression, OtlpError> {
    i.get(&COMPRESSION, i.flags.compression.as_deref())
        .map_or(Ok(Compression::None), |g| {
            g.parse(parse_compression, parse_compression)
        })
}

fn tls(i: &Inputs<'_>) -> Result<TlsFiles, OtlpError> {
    let f = i.flags;
    let path = |g: Given| (PathBuf::from(g.value), g.origin.to_string());
    let ca = i.get(&CERTIFICATE, path_flag(&f.certificate)).map(path);
    let cert = i.get(&CLIENT_CERTIFICATE, path_flag(&f.client_certificate));
    let key = i.get(&CLIENT_KEY, path_flag(&f.client_key));
    let client = match (cert.map(path), key.map(path)) {
        (Some((c, o)), Some((k, _))) => Some((c, k, o)),
        (None, None) => None,
        (Some((_, o)), None) | (None, Some((_, o))) => {
            return Err(invalid(
                &o,
                "a client certificate needs a client key and vice versa",
            ))
        }
    };
    Ok(TlsFiles { ca, client })
}

impl OtlpSettings {
    /// Resolves the settings from flags over environment variables.
    /// Returns `None` when push is off (no endpoint configured and no
    /// `--otlp.only`, or `OTEL_SDK_DISABLED=true`). `procfs` is where host
    /// attributes are read (`cpuinfo`, the hostname; the machine id next
    /// to it).
    pub(crate) fn resolve(
        flags: &OtlpFlags,
        env: Env<'_>,
        procfs: &Path,
    ) -> Result<Option<OtlpSettings>, OtlpError> {
        let i = Inputs { flags, env };
        let (signal, generic) = endpoints(&i);
        if disabled(&i) {
            return match flags.only {
                true => Err(OtlpError::DisabledButOnly),
                false => Ok(None),
            };
        }
        if signal.is_none() && generic.is_none() && !flags.only {
            return Ok(None);
        }
        let protocol = protocol(&i)?;
        Ok(Some(OtlpSettings {
            endpoint: endpoint(signal.as_ref(), generic.as_ref(), protocol)?,
            base_endpoint: generic.map(|g| g.value.trim().to_string()),
            protocol,
            headers: headers(&i)?,
            timeout: timeout(&i)?,
            compression: compression(&i)?,
            interval: interval(&i)?,
            tls: tls(&i)?,
            resource: resource::resolve(&i, procfs)?,
            only: flags.only,
        }))
    }

    /// The final flush at shutdown is bounded by the timeout, at most 5 s.
    pub(crate) fn shutdown_timeout(&self) -> Duration {
        self.timeout.min(Duration::from_secs(5))
    }
}

#[cfg(test)]
pub(super) mod tests {
    pub(crate) use super::super::flags::env_of;
    use super::*;

    pub(crate) fn resolve(
        flags: &OtlpFlags,
        pairs: &[(&str, &str)],
    ) -> Result<Option<OtlpSettings>, OtlpError> {
        let e = env_of(pairs);
        OtlpSettings::resolve(flags, &e, Path::new("/nonexistent-procfs"))
    }

    pub(crate) fn on(flags: &OtlpFlags, pairs: &[(&str, &str)]) -> OtlpSettings {
        resolve(flags, pairs).unwrap().expect("push on")
    }

    pub(crate) fn only() -> OtlpFlags {
        OtlpFlags {
            only: true,
            ..Default::default()
        }
    }

    #[test]
    fn off_without_an_endpoint_and_defaults_with_only() {
        assert!(resolve(&OtlpFlags::default(), &[]).unwrap().is_none());
        let s = on(&only(), &[]);
        assert_eq!(s.endpoint, "http://localhost:4318/v1/metrics");
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
        assert_eq!(s.timeout, Duration::from_secs(10));
        assert_eq!(s.interval, Duration::from_secs(60));
        assert_eq!(s.compression, Compression::None);
        assert!(s.headers.is_empty());
        assert!(s.only);
        let g = on(&only(), &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert_eq!(g.endpoint, "http://localhost:4317");
    }

    #[test]
    fn sdk_disabled() {
        let env = [
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        ];
        assert!(resolve(&OtlpFlags::default(), &env).unwrap().is_none());
        assert!(matches!(
            resolve(&only(), &env),
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
    fn endpoint_precedence() {
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://generic:4318"),
            (
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "http://signal:4318/m",
            ),
        ];
        let d = OtlpFlags::default();
        assert_eq!(on(&d, &env).endpoint, "http://signal:4318/m");
        assert_eq!(on(&d, &env[..1]).endpoint, "http://generic:4318/v1/metrics");
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
        assert!(resolve(&d, &[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])
            .unwrap()
            .is_none());
        let e = resolve(&d, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT: "), "{e}");
    }

    #[test]
    fn protocol_precedence() {
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
    fn headers_merge() {
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
        let bad = OtlpFlags {
            headers: Some("x".into()),
            ..Default::default()
        };
        let e = resolve(&bad, &env).unwrap_err().to_string();
        assert!(e.starts_with("--otlp.headers: "), "{e}");
    }

    #[test]
    fn durations() {
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
        let f = OtlpFlags {
            timeout: Some("5".into()),
            ..only()
        };
        let e = resolve(&f, &[]).unwrap_err().to_string();
        assert!(e.starts_with("--otlp.timeout: "), "{e}");
    }

    #[test]
    fn compression_precedence() {
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
    }
}
