//! `--web.config.file`: the web configuration format of the Prometheus
//! exporter-toolkit, so a file written for node_exporter works here:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt          # or `cert:` inline PEM
//!   key_file: server.key           # or `key:` inline PEM
//!   client_auth_type: RequireAndVerifyClientCert
//!   client_ca_file: clients-ca.crt # or `client_ca:` inline PEM
//!   client_allowed_sans: [prometheus.example.com]
//!   min_version: TLS12             # TLS10..TLS13 (rustls speaks 1.2 and 1.3)
//!   max_version: TLS13
//!   cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]   # TLS 1.2 only
//!   prefer_server_cipher_suites: true
//!   curve_preferences: [X25519, CurveP256]
//! http_server_config:
//!   http2: true                    # accepted; this server speaks HTTP/1.1
//!   headers:
//!     X-Content-Type-Options: nosniff
//! basic_auth_users:
//!   prometheus: $2y$10$...         # bcrypt hash
//! rate_limit:
//!   interval: 1s
//!   burst: 20
//! ```
//!
//! Relative file names are relative to the web config file's directory.
//! Parsing ([`WebConfigSpec::parse`], no I/O) is separate from building
//! the TLS server config ([`WebConfig::build`], which reads the
//! certificate files), so the parser can be fuzzed.
//!
//! Differences from exporter-toolkit, all refused or warned at start:
//! `TLS10`/`TLS11` as `min_version` serve TLS 1.2 at least (warning);
//! Go cipher suites and curves rustls lacks (CBC, RSA key exchange,
//! P-521) are dropped with a warning, unknown names refused; giving both
//! `cert` and `cert_file` (or `key`/`key_file`, `client_ca`/
//! `client_ca_file`) is refused; `VerifyClientCertIfGiven` and
//! `RequireAndVerifyClientCert` need a client CA (Go would fall back to the
//! system roots).

mod build;

use crate::bounded::{read_string, CONFIG_BYTES};
use build::{build_tls, BuildError};
use hyper::header::{HeaderName, HeaderValue};
use rustls::crypto::CryptoProvider;
use rustls::{NamedGroup, ServerConfig, SupportedCipherSuite};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A web config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    /// The file (or a file it names) could not be read.
    #[error("cannot read {file}: {err}")]
    Io {
        /// The file.
        file: String,
        /// The OS error (in the message, not a separate cause, so it is
        /// printed once).
        err: std::io::Error,
    },
    /// Invalid YAML, an unknown key, or a value of the wrong shape.
    #[error("{file}:{line}:{column}: {msg}")]
    Syntax {
        /// The web config file.
        file: String,
        /// 1-based line (0 when unknown).
        line: u64,
        /// 1-based column (0 when unknown).
        column: u64,
        /// What is wrong.
        msg: String,
    },
    /// Well-formed but not usable: what is wrong, and where.
    #[error("{file}: {msg}")]
    Invalid {
        /// The web config file.
        file: String,
        /// What is wrong.
        msg: String,
    },
}

/// A duration as Go's YAML writes it: `1s`, `500ms`, `1m30s`, or integer
/// nanoseconds.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum GoDuration {
    Nanos(u64),
    Text(String),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    tls_server_config: Option<RawTls>,
    #[serde(default)]
    http_server_config: Option<RawHttp>,
    #[serde(default)]
    basic_auth_users: Option<BTreeMap<String, String>>,
    #[serde(default)]
    rate_limit: Option<RawRateLimit>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    #[serde(default)]
    cert: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    client_ca: Option<String>,
    #[serde(default)]
    cert_file: Option<String>,
    #[serde(default)]
    key_file: Option<String>,
    #[serde(default)]
    client_auth_type: Option<String>,
    #[serde(default)]
    client_ca_file: Option<String>,
    #[serde(default)]
    client_allowed_sans: Option<Vec<String>>,
    #[serde(default)]
    min_version: Option<String>,
    #[serde(default)]
    max_version: Option<String>,
    #[serde(default)]
    cipher_suites: Option<Vec<String>>,
    #[serde(default)]
    prefer_server_cipher_suites: Option<bool>,
    #[serde(default)]
    curve_preferences: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    #[serde(default)]
    http2: Option<bool>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    #[serde(default)]
    interval: Option<GoDuration>,
    #[serde(default)]
    burst: Option<u64>,
}

/// exporter-toolkit's `client_auth_type` values (Go's `tls.ClientAuthType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert` (the default): no client certificate is asked for.
    NoClientCert,
    /// `RequestClientCert`: asked for, not required, not verified.
    RequestClientCert,
    /// `RequireAnyClientCert` (or `RequireClientCert`): required, not
    /// verified against a CA.
    RequireAnyClientCert,
    /// `VerifyClientCertIfGiven`: optional, verified when given.
    VerifyClientCertIfGiven,
    /// `RequireAndVerifyClientCert`: required and verified (mutual TLS).
    RequireAndVerifyClientCert,
}

impl ClientAuth {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "" | "NoClientCert" => ClientAuth::NoClientCert,
            "RequestClientCert" => ClientAuth::RequestClientCert,
            "RequireAnyClientCert" | "RequireClientCert" => ClientAuth::RequireAnyClientCert,
            "VerifyClientCertIfGiven" => ClientAuth::VerifyClientCertIfGiven,
            "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerifyClientCert,
            _ => return None,
        })
    }

    /// The name as written in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuth::NoClientCert => "NoClientCert",
            ClientAuth::RequestClientCert => "RequestClientCert",
            ClientAuth::RequireAnyClientCert => "RequireAnyClientCert",
            ClientAuth::VerifyClientCertIfGiven => "VerifyClientCertIfGiven",
            ClientAuth::RequireAndVerifyClientCert => "RequireAndVerifyClientCert",
        }
    }

    fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert
        )
    }
}

/// PEM material: a file to read, or the PEM text itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pem {
    /// `*_file`: a path (already joined to the config's directory).
    File(PathBuf),
    /// Inline PEM (`cert`, `key`, `client_ca`).
    Inline(String),
}

/// The TLS part, validated, before any file is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSpec {
    /// The server certificate chain.
    pub cert: Pem,
    /// Its private key.
    pub key: Pem,
    /// Client CA bundle.
    pub client_ca: Option<Pem>,
    /// Client certificate policy.
    pub client_auth: ClientAuth,
    /// `client_allowed_sans`.
    pub allowed_sans: Option<Vec<String>>,
    /// Serve TLS 1.2 (from `min_version`/`max_version`).
    pub tls12: bool,
    /// Serve TLS 1.3.
    pub tls13: bool,
    /// TLS 1.2 cipher suites in preference order (IANA names); empty: the
    /// rustls defaults.
    pub cipher_suites: Vec<String>,
    /// Key exchange groups in preference order (rustls names); empty: the
    /// defaults.
    pub curves: Vec<NamedGroup>,
    /// `prefer_server_cipher_suites` (default true).
    pub prefer_server_order: bool,
}

/// `rate_limit`: a token bucket of `burst` requests refilled one per
/// `interval`; excess requests get 429.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Time between two requests.
    pub interval: Duration,
    /// The bucket's size.
    pub burst: u32,
}

/// The whole file, validated, before any file it names is read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebConfigSpec {
    /// `tls_server_config`, when it turns TLS on.
    pub tls: Option<TlsSpec>,
    /// `basic_auth_users`: user -> bcrypt hash.
    pub users: BTreeMap<String, String>,
    /// `http_server_config.headers`, non-blank ones.
    pub headers: Vec<(String, String)>,
    /// `http_server_config.http2`.
    pub http2: bool,
    /// `rate_limit`, when its interval is not 0.
    pub rate_limit: Option<RateLimit>,
    /// Things accepted but not honoured as written.
    pub warnings: Vec<String>,
}

/// The headers exporter-toolkit lets a web config set, with the values it
/// allows (empty: any).
const EXTRA_HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// Cipher suite names Go's `tls.CipherSuites()` accepts; the ones rustls
/// lacks (CBC modes, RSA key exchange) are dropped with a warning.
const GO_CIPHER_SUITES: &[&str] = &[
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
];

fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

fn suite_name(s: &SupportedCipherSuite) -> &'static str {
    s.suite().as_str().unwrap_or("")
}

/// Parses a Go duration (`300ms`, `1.5h`, `2h45m`, `0`).
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let bad = || format!("`{t}` is not a duration (e.g. `1s`, `500ms`, `1m30s`)");
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.is_empty() {
        return Err(bad());
    }
    let mut rest = t;
    let mut secs = 0f64;
    while !rest.is_empty() {
        let n = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        if n == 0 {
            return Err(bad());
        }
        let v: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(rest.len(), |(i, _)| i);
        let scale = match &rest[..u] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[u..];
        secs += v * scale;
    }
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

/// The YAML parser's message without its own `error: line L column C: `
/// prefix (the error carries the location already).
fn strip_location(msg: &str) -> &str {
    let m = msg.strip_prefix("error: ").unwrap_or(msg);
    match m.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((loc, rest)) if loc.contains(" column ") => rest,
        _ => m,
    }
}

fn tls_version(s: &str) -> Option<u8> {
    match s {
        "TLS10" => Some(0),
        "TLS11" => Some(1),
        "TLS12" => Some(2),
        "TLS13" => Some(3),
        _ => None,
    }
}

fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|v| !v.is_empty())
}

impl WebConfigSpec {
    /// Parses and validates the text of a web config file. `file` names
    /// it in errors and anchors relative file names. No I/O.
    pub fn parse(text: &str, file: &Path) -> Result<Self, WebConfigError> {
        let name = file.display().to_string();
        let raw: RawFile = if text.trim().is_empty() {
            RawFile::default()
        } else {
            serde_saphyr::from_str::<Option<RawFile>>(text)
                .map_err(|e| {
                    let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
                    let full = e.to_string();
                    let first = full.lines().next().unwrap_or("invalid YAML");
                    WebConfigError::Syntax {
                        file: name.clone(),
                        line,
                        column,
                        msg: strip_location(first).to_string(),
                    }
                })?
                .unwrap_or_default()
        };
        let invalid = |msg: String| WebConfigError::Invalid {
            file: name.clone(),
            msg,
        };
        let dir = file.parent().unwrap_or(Path::new("."));
        let mut spec = WebConfigSpec {
            http2: true,
            ..Default::default()
        };

        if let Some(http) = raw.http_server_config {
            spec.http2 = http.http2.unwrap_or(true);
            for (k, v) in http.headers.unwrap_or_default() {
                let Some((_, allowed)) = EXTRA_HEADERS.iter().find(|(h, _)| *h == k) else {
                    return Err(invalid(format!(
                        "http_server_config.headers: HTTP header `{k}` can not be configured (allowed: {})",
                        EXTRA_HEADERS.iter().map(|(h, _)| *h).collect::<Vec<_>>().join(", ")
                    )));
                };
                if v.is_empty() {
                    continue; // "Unset if blank."
                }
                if !allowed.is_empty() && !allowed.contains(&v.as_str()) {
                    return Err(invalid(format!(
                        "http_server_config.headers: invalid value for {k}: expected one of {allowed:?}, got `{v}`"
                    )));
                }
                if HeaderValue::from_str(&v).is_err() {
                    return Err(invalid(format!(
                        "http_server_config.headers: `{v}` is not a valid value for {k}"
                    )));
                }
                spec.headers.push((k, v));
            }
        }

        for (user, hash) in raw.basic_auth_users.unwrap_or_default() {
            if user.contains(':') {
                return Err(invalid(format!(
                    "basic_auth_users: the user name `{user}` contains `:`, which basic auth cannot carry (the header is user:password); rename it"
                )));
            }
            let parts: bcrypt::HashParts = hash.parse().map_err(|e| {
                invalid(format!(
                    "basic_auth_users: the password of `{user}` is not a bcrypt hash ({e}); make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"
                ))
            })?;
            let cost = parts.get_cost();
            if !(MIN_BCRYPT_COST..=MAX_BCRYPT_COST).contains(&cost) {
                return Err(invalid(format!(
                    "basic_auth_users: the bcrypt cost of `{user}` is {cost}; it must be {MIN_BCRYPT_COST} to {MAX_BCRYPT_COST} (each step doubles the time of every uncached login, and {MAX_BCRYPT_COST} already takes seconds); make a new hash with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"
                )));
            }
            spec.users.insert(user, hash);
        }

        if let Some(rl) = raw.rate_limit {
            let interval = match rl.interval {
                None => Duration::ZERO,
                Some(GoDuration::Nanos(n)) => Duration::from_nanos(n),
                Some(GoDuration::Text(t)) => parse_go_duration(&t)
                    .map_err(|e| invalid(format!("rate_limit.interval: {e}")))?,
            };
            if !interval.is_zero() {
                let burst = rl.burst.unwrap_or(0);
                if burst == 0 {
                    return Err(invalid(
                        "rate_limit.burst must be at least 1 when rate_limit.interval is set (0 would refuse every request)".into(),
                    ));
                }
                spec.rate_limit = Some(RateLimit {
                    interval,
                    burst: u32::try_from(burst).unwrap_or(u32::MAX),
                });
            }
        }

        if let Some(t) = raw.tls_server_config {
            spec.tls = parse_tls(t, dir, &mut spec.warnings).map_err(invalid)?;
        }
        Ok(spec)
    }
}

fn parse_tls(t: RawTls, dir: &Path, warnings: &mut Vec<String>) -> Result<Option<TlsSpec>, String> {
    let enabled = [
        &t.cert,
        &t.key,
        &t.client_ca,
        &t.cert_file,
        &t.key_file,
        &t.client_ca_file,
        &t.client_auth_type,
    ]
    .iter()
    .any(|v| nonempty(v).is_some());
    if !enabled {
        // exporter-toolkit: no certificate, key, CA or client auth type
        // means plain HTTP, whatever else the section says.
        return Ok(None);
    }
    let cert = pem(dir, &t.cert, &t.cert_file, "cert", "cert_file")?
        .ok_or("tls_server_config: missing one of cert or cert_file")?;
    let key = pem(dir, &t.key, &t.key_file, "key", "key_file")?
        .ok_or("tls_server_config: missing one of key or key_file")?;
    let client_ca = pem(
        dir,
        &t.client_ca,
        &t.client_ca_file,
        "client_ca",
        "client_ca_file",
    )?;
    let client_auth = parse_client_auth(&t, client_ca.is_some())?;
    let (tls12, tls13) = parse_versions(&t, warnings)?;
    let cipher_suites =
        parse_cipher_suites(t.cipher_suites.unwrap_or_default(), tls12, tls13, warnings)?;
    let curves = parse_curves(t.curve_preferences.unwrap_or_default(), warnings)?;
    Ok(Some(TlsSpec {
        cert,
        key,
        client_ca,
        client_auth,
        allowed_sans: t.client_allowed_sans,
        tls12,
        tls13,
        cipher_suites,
        curves,
        prefer_server_order: t.prefer_server_cipher_suites.unwrap_or(true),
    }))
}

/// A PEM given inline (`what`) or as a file (`file_key`, relative to the
/// web config's directory), not both.
fn pem(
    dir: &Path,
    inline: &Option<String>,
    file: &Option<String>,
    what: &str,
    file_key: &str,
) -> Result<Option<Pem>, String> {
    match (nonempty(inline), nonempty(file)) {
        (Some(_), Some(_)) => Err(format!(
            "tls_server_config: give `{what}` or `{file_key}`, not both"
        )),
        (Some(p), None) => Ok(Some(Pem::Inline(p.to_string()))),
        (None, Some(f)) => Ok(Some(Pem::File(dir.join(f)))),
        (None, None) => Ok(None),
    }
}

/// `client_auth_type`, consistent with the client CA and the allowed SANs.
fn parse_client_auth(t: &RawTls, has_client_ca: bool) -> Result<ClientAuth, String> {
    let auth_s = t.client_auth_type.as_deref().unwrap_or("");
    let client_auth = ClientAuth::parse(auth_s).ok_or_else(|| {
        format!("tls_server_config.client_auth_type: invalid ClientAuth `{auth_s}` (NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert)")
    })?;
    if has_client_ca && client_auth == ClientAuth::NoClientCert {
        return Err(
            "tls_server_config: client CA's have been configured without a Client Auth Policy (set client_auth_type, e.g. RequireAndVerifyClientCert)".into(),
        );
    }
    if !has_client_ca && client_auth.verifies() {
        return Err(format!(
            "tls_server_config: client_auth_type {} needs client_ca_file (or client_ca) to verify client certificates against",
            client_auth.as_str()
        ));
    }
    if t.client_allowed_sans.is_some()
        && !matches!(
            client_auth,
            ClientAuth::RequireAnyClientCert | ClientAuth::RequireAndVerifyClientCert
        )
    {
        return Err("tls_server_config: client_allowed_sans requires client_auth_type to be one of RequireAnyClientCert or RequireAndVerifyClientCert".into());
    }
    Ok(client_auth)
}

/// `min_version` and `max_version`: whether TLS 1.2 and 1.3 are offered.
fn parse_versions(t: &RawTls, warnings: &mut Vec<String>) -> Result<(bool, bool), String> {
    let version = |v: &Option<String>, key: &str, default: u8| match nonempty(v) {
        None => Ok(default),
        Some(s) => tls_version(s).ok_or_else(|| {
            format!(
                "tls_server_config.{key}: unknown TLS version `{s}` (TLS10, TLS11, TLS12, TLS13)"
            )
        }),
    };
    let min = version(&t.min_version, "min_version", 2)?;
    let max = version(&t.max_version, "max_version", 3)?;
    if min > max {
        return Err("tls_server_config: min_version is above max_version".into());
    }
    if max < 2 {
        return Err("tls_server_config.max_version: this server (rustls) speaks TLS 1.2 and 1.3 only; max_version must be TLS12 or TLS13".into());
    }
    if min < 2 {
        warnings.push("tls_server_config.min_version: TLS 1.0 and 1.1 are not offered (rustls); clients need TLS 1.2 at least".into());
    }
    Ok((min <= 2, max >= 3))
}

/// `cipher_suites`: the TLS 1.2 suites rustls offers, in order, once each.
fn parse_cipher_suites(
    names: Vec<String>,
    tls12: bool,
    tls13: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<String>, String> {
    let p = provider();
    let mut cipher_suites = Vec::new();
    let listed_suites = !names.is_empty();
    for name in names {
        match p.cipher_suites.iter().find(|s| suite_name(s) == name) {
            Some(SupportedCipherSuite::Tls12(_)) => {
                if !cipher_suites.contains(&name) {
                    cipher_suites.push(name);
                }
            }
            // As in Go: the list configures TLS 1.2 only.
            Some(SupportedCipherSuite::Tls13(_)) => {}
            None if GO_CIPHER_SUITES.contains(&name.as_str()) => warnings.push(format!(
                "tls_server_config.cipher_suites: {name} is not offered by rustls (no CBC or RSA key exchange); ignored"
            )),
            None => {
                return Err(format!(
                    "tls_server_config.cipher_suites: unknown cipher `{name}` (rustls offers {})",
                    p.cipher_suites
                        .iter()
                        .filter(|s| matches!(s, SupportedCipherSuite::Tls12(_)))
                        .map(suite_name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        }
    }
    if tls12 && !tls13 && listed_suites && cipher_suites.is_empty() {
        return Err("tls_server_config.cipher_suites: none of the listed suites is offered by rustls, and TLS 1.3 is off (max_version TLS12)".into());
    }
    Ok(cipher_suites)
}

/// `curve_preferences`: the groups rustls offers, in order, once each.
fn parse_curves(names: Vec<String>, warnings: &mut Vec<String>) -> Result<Vec<NamedGroup>, String> {
    let mut curves = Vec::new();
    let listed_curves = !names.is_empty();
    for name in names {
        let group = match name.as_str() {
            "X25519" => NamedGroup::X25519,
            "CurveP256" => NamedGroup::secp256r1,
            "CurveP384" => NamedGroup::secp384r1,
            "CurveP521" => {
                warnings.push(
                    "tls_server_config.curve_preferences: CurveP521 is not offered by rustls (ring); ignored".into(),
                );
                continue;
            }
            other => {
                return Err(format!(
                    "tls_server_config.curve_preferences: unknown curve `{other}` (X25519, CurveP256, CurveP384, CurveP521)"
                ))
            }
        };
        if !curves.contains(&group) {
            curves.push(group);
        }
    }
    if listed_curves && curves.is_empty() {
        return Err(
            "tls_server_config.curve_preferences: none of the listed curves is offered by rustls"
                .into(),
        );
    }
    Ok(curves)
}

/// The served TLS configuration.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The rustls server config (certificate loaded, client verifier set).
    pub server: Arc<ServerConfig>,
    /// What the start-up log says about it.
    pub summary: String,
}

/// A usable web config: TLS loaded, users, headers, rate limit.
#[derive(Debug, Clone, Default)]
pub struct WebConfig {
    /// The file it came from (None: no `--web.config.file`).
    pub file: Option<PathBuf>,
    /// HTTPS, when configured.
    pub tls: Option<Tls>,
    /// `basic_auth_users`: user -> bcrypt hash. Empty: no auth.
    pub users: BTreeMap<String, String>,
    /// Headers added to every response.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Request rate limit.
    pub rate_limit: Option<RateLimit>,
    /// Accepted-but-not-as-written notes for the start-up log.
    pub warnings: Vec<String>,
}

/// The lowest bcrypt cost accepted: bcrypt's own minimum (Go's
/// `bcrypt.MinCost`).
pub const MIN_BCRYPT_COST: u32 = 4;

/// The highest bcrypt cost accepted. Go's bcrypt (and so
/// exporter-toolkit) stops at its format's limit, `bcrypt.MaxCost` = 31,
/// but that is a limit of the hash format, not of what a login on a
/// scrape path can afford: the work doubles with each step. On this
/// project's 2-core test machine cost 14 takes about 1 s (issue 11), so
/// 16 takes about 4 s and 31 about 36 hours, per uncached login, while
/// Prometheus gives a scrape 10 s by default. 16 is the highest cost
/// whose check still fits a default scrape timeout with room for the
/// scrape itself; the default of `htpasswd -B` and Go's `DefaultCost`
/// is 10.
pub const MAX_BCRYPT_COST: u32 = 16;

impl WebConfig {
    /// Reads, validates and builds a web config file.
    pub fn load(path: &Path) -> Result<Self, WebConfigError> {
        // Bounded: a FIFO or a device is refused at once instead of
        // blocking start-up or a reload, and so is a huge file.
        let text = read_string(path, CONFIG_BYTES).map_err(|err| WebConfigError::Io {
            file: path.display().to_string(),
            err,
        })?;
        let spec = WebConfigSpec::parse(&text, path)?;
        Self::build(spec, path)
    }

    /// Reads the files a validated spec names and builds the TLS config.
    pub fn build(spec: WebConfigSpec, path: &Path) -> Result<Self, WebConfigError> {
        let name = path.display().to_string();
        let tls = match &spec.tls {
            None => None,
            Some(t) => Some(build_tls(t).map_err(|e| match e {
                BuildError::Io { file, source } => WebConfigError::Io { file, err: source },
                BuildError::Invalid(msg) => WebConfigError::Invalid {
                    file: name.clone(),
                    msg,
                },
            })?),
        };
        let headers = spec
            .headers
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::from_bytes(k.as_bytes()).ok()?,
                    HeaderValue::from_str(v).ok()?,
                ))
            })
            .collect();
        Ok(WebConfig {
            file: Some(path.to_path_buf()),
            tls,
            users: spec.users,
            headers,
            rate_limit: spec.rate_limit,
            warnings: spec.warnings,
        })
    }

    /// One line for the start-up log (never secrets).
    pub fn describe(&self) -> String {
        let mut parts = vec![match &self.tls {
            Some(t) => format!("TLS on ({})", t.summary),
            None => "TLS off".to_string(),
        }];
        parts.push(if self.users.is_empty() {
            "basic auth off".into()
        } else {
            format!("basic auth for {} user(s)", self.users.len())
        });
        if !self.headers.is_empty() {
            let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
            parts.push(format!("headers {}", names.join(", ")));
        }
        if let Some(r) = self.rate_limit {
            // The flags' duration grammar (`100ms`, `1m30s`); finer than a
            // millisecond, Rust's own (`500µs`).
            let every = if r.interval.subsec_nanos() % 1_000_000 == 0 {
                crate::duration::render(r.interval)
            } else {
                format!("{:?}", r.interval)
            };
            parts.push(format!(
                "rate limit: bursts of {}, then one request per {every}",
                r.burst
            ));
        }
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests;
