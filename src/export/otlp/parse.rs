//! Value parsers for the OTLP settings: protocol, compression, integer
//! milliseconds, `key=value` lists with percent-encoded values, headers,
//! endpoint URLs (and their redaction for logs).

use std::time::Duration;

/// The transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// OTLP/HTTP with protobuf bodies (the spec's default).
    HttpProtobuf,
    /// OTLP/gRPC.
    Grpc,
}

impl Protocol {
    /// The spec's name of the protocol.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::Grpc => "grpc",
        }
    }
}

/// Parses `OTEL_EXPORTER_OTLP_PROTOCOL` values.
pub(super) fn parse_protocol(s: &str) -> Result<Protocol, String> {
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
pub(crate) enum Compression {
    /// None.
    None,
    /// gzip (HTTP `Content-Encoding`, gRPC `grpc-encoding`).
    Gzip,
}

impl Compression {
    /// The spec's name of the compression.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::None => "none",
        }
    }
}

/// Parses `OTEL_EXPORTER_OTLP_COMPRESSION` values.
pub(super) fn parse_compression(s: &str) -> Result<Compression, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "gzip" => Ok(Compression::Gzip),
        "none" => Ok(Compression::None),
        other => Err(format!("`{other}` is not a compression (`gzip`, `none`)")),
    }
}

/// Parses a duration given in integer milliseconds, as the OTel
/// environment variables give them (`OTEL_EXPORTER_OTLP_TIMEOUT=10000`).
/// Zero is refused: it would mean "no time at all".
pub(super) fn parse_millis(s: &str) -> Result<Duration, String> {
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
fn percent_decode(s: &str) -> Result<String, String> {
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
pub(super) fn parse_key_values(s: &str) -> Result<Vec<(String, String)>, String> {
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
pub(super) fn parse_headers(s: &str) -> Result<Vec<(String, String)>, String> {
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
const DEFAULT_HTTP_ENDPOINT: &str = "http://localhost:4318";
/// The default gRPC endpoint.
const DEFAULT_GRPC_ENDPOINT: &str = "http://localhost:4317";

/// Checks that an endpoint is an absolute `http://` or `https://` URL.
fn check_url(s: &str) -> Result<reqwest::Url, String> {
    let u = reqwest::Url::parse(s).map_err(|e| format!("`{s}` is not a URL: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(format!(
            "`{}`: the scheme must be http or https",
            redact_url(s)
        ));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{}` has no host", redact_url(s)));
    }
    Ok(u)
}

/// The URL to export to, per the OTLP exporter spec: a signal-specific
/// endpoint is used as it is; the generic one gets `/v1/metrics` appended
/// to its path for http/protobuf (after a trailing `/` is dropped) and is
/// used as it is for gRPC.
pub(super) fn metrics_endpoint(
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

/// What replaces a secret in a logged URL.
const REDACTED: &str = "REDACTED";

/// An endpoint as it may be logged: userinfo (`user:pw@`) becomes
/// `REDACTED@`, every query value `REDACTED` (keys stay, to tell which
/// parameter is set), the fragment goes. Text that is not a URL is
/// returned as it is.
pub(super) fn redact_url(s: &str) -> String {
    let Ok(mut u) = reqwest::Url::parse(s) else {
        return s.to_string();
    };
    redact(&mut u);
    u.to_string()
}

/// [`redact_url`] in place.
pub(super) fn redact(u: &mut reqwest::Url) {
    if !u.username().is_empty() || u.password().is_some() {
        let _ = u.set_password(None);
        let _ = u.set_username(REDACTED);
    }
    if u.query().is_some() {
        let keys: Vec<String> = u.query_pairs().map(|(k, _)| k.into_owned()).collect();
        u.query_pairs_mut()
            .clear()
            .extend_pairs(keys.iter().map(|k| (k.as_str(), REDACTED)));
    }
    u.set_fragment(None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol() {
        assert_eq!(parse_protocol("grpc"), Ok(Protocol::Grpc));
        assert_eq!(parse_protocol("http/protobuf"), Ok(Protocol::HttpProtobuf));
        assert!(parse_protocol("http/json")
            .unwrap_err()
            .contains("not supported"));
        assert!(parse_protocol("GRPC").is_err());
    }

    #[test]
    fn compression() {
        assert_eq!(parse_compression("gzip"), Ok(Compression::Gzip));
        assert_eq!(parse_compression("none"), Ok(Compression::None));
        assert!(parse_compression("zstd").is_err());
    }

    #[test]
    fn millis() {
        assert_eq!(parse_millis("2500"), Ok(Duration::from_millis(2500)));
        assert!(parse_millis("0").is_err());
        assert!(parse_millis("10s").is_err());
        assert!(parse_millis("-1").is_err());
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
    fn redaction_hides_userinfo_and_query_values() {
        assert_eq!(
            redact_url("https://user:pw@c:4318/v1/metrics?api_key=s3cret&x=1#frag"),
            "https://REDACTED@c:4318/v1/metrics?api_key=REDACTED&x=REDACTED"
        );
        assert_eq!(
            redact_url("http://token@c/v1/metrics"),
            "http://REDACTED@c/v1/metrics"
        );
        assert_eq!(
            redact_url("http://c:4318/v1/metrics"),
            "http://c:4318/v1/metrics"
        );
        let e = metrics_endpoint(None, Some("ftp://u:pw@c/?k=v"), Protocol::Grpc).unwrap_err();
        assert!(!e.contains("pw") && !e.contains("=v"), "{e}");
    }
}
