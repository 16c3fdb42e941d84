//! Transports, one module per protocol (as `opentelemetry-otlp` has
//! `exporter/{http,tonic}`): [`http`] (OTLP/HTTP with protobuf bodies,
//! through reqwest) and [`grpc`] (OTLP/gRPC, through tonic and
//! `opentelemetry-proto`'s client), and the TLS material both read
//! ([`tls`]). Failures are [`ExportError`]s that say what went wrong in
//! the user's terms: a certificate problem, a refused redirect, a status.

mod grpc;
mod http;
mod tls;

use super::parse::Protocol;
use super::{OtlpError, OtlpSettings};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use std::error::Error as StdError;
use std::time::Duration;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum ExportError {
    /// The export took longer than the timeout.
    #[error("timed out after {}ms{}", .0.as_millis(), .1.as_ref().map(|e| format!(" ({e})")).unwrap_or_default())]
    Timeout(Duration, Option<Box<ExportError>>),
    /// The collector answered with an HTTP error status.
    #[error("the collector answered HTTP {status}{}", if .body.is_empty() { String::new() } else { format!(": {}", .body) })]
    Rejected {
        /// The status code.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The collector answered with a gRPC error status.
    #[error("the collector answered gRPC status {code}: {message}")]
    Grpc {
        /// The status code's name.
        code: String,
        /// Its message.
        message: String,
    },
    /// The TLS handshake failed (see [`tls::problem`]).
    #[error("TLS: {0}")]
    Tls(String),
    /// The collector redirected where we do not follow.
    #[error("{0}")]
    Redirect(String),
    /// Connection or protocol failure.
    #[error("network error: {0}")]
    Network(String),
    /// The request could not be encoded.
    #[error("encoding the request: {0}")]
    Encode(String),
}

impl ExportError {
    /// Classifies a transport error by its source chain: a TLS problem, a
    /// refused redirect, else the chain's messages.
    fn from_chain(e: &(dyn StdError + 'static)) -> ExportError {
        if let Some(p) = tls::problem(e) {
            return ExportError::Tls(p);
        }
        if let Some(r) = chain(e).find_map(|e| e.downcast_ref::<http::RedirectRefused>()) {
            return ExportError::Redirect(r.to_string());
        }
        ExportError::Network(render(e))
    }
}

/// An error and its sources, outermost first. An `io::Error` that wraps
/// another error shows that error as its source (std's `source` skips
/// it).
fn chain<'a>(
    e: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&e| match e.downcast_ref::<std::io::Error>() {
        Some(io) => io
            .get_ref()
            .map(|i| i as &(dyn StdError + 'static))
            .or_else(|| e.source()),
        None => e.source(),
    })
}

/// The messages of an error chain, joined with `: `, each once.
fn render(e: &(dyn StdError + 'static)) -> String {
    let mut out: Vec<String> = Vec::new();
    for m in chain(e).map(|e| e.to_string()) {
        if !out.iter().any(|o| o.contains(&m)) {
            out.push(m);
        }
    }
    out.join(": ")
}

/// The `User-Agent` of every export, as the OTLP exporter spec asks.
const USER_AGENT: &str = concat!("perf-exporter/", env!("CARGO_PKG_VERSION"));

/// The transport of the settings' protocol.
pub(super) struct Transport(Inner);

enum Inner {
    Http(http::Http),
    Grpc(Box<grpc::Grpc>),
}

impl Transport {
    /// Reads the TLS files and builds the client. The gRPC channel
    /// connects lazily, on the tokio runtime this runs on.
    pub(super) fn build(s: &OtlpSettings) -> Result<Transport, OtlpError> {
        // One rustls crypto provider for the process (ring; no aws-lc, no
        // OpenSSL). An error only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let material = tls::load(&s.tls)?;
        Ok(Transport(match s.protocol {
            Protocol::HttpProtobuf => Inner::Http(http::Http::new(s, &material)?),
            Protocol::Grpc => Inner::Grpc(Box::new(grpc::Grpc::new(s, &material)?)),
        }))
    }

    /// Sends one request.
    pub(super) async fn export(
        &mut self,
        req: ExportMetricsServiceRequest,
    ) -> Result<(), ExportError> {
        match &mut self.0 {
            Inner::Http(h) => h.export(&req).await,
            Inner::Grpc(g) => g.export(req).await,
        }
    }

    /// Sends one profiles request: over HTTP to `http_url` (the profiles
    /// URL), over gRPC to the profiles service of the same channel.
    pub(super) async fn export_profiles(
        &mut self,
        http_url: &reqwest::Url,
        req: ExportProfilesServiceRequest,
    ) -> Result<(), ExportError> {
        match &mut self.0 {
            Inner::Http(h) => h.export_profiles(http_url.clone(), &req).await,
            Inner::Grpc(g) => g.export_profiles(req).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_shows_the_error_it_wraps() {
        let inner = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, inner);
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect)")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(io);
        let msg = ExportError::from_chain(&e).to_string();
        assert!(msg.starts_with("TLS: "), "{msg}");
        assert!(msg.contains("not signed by a CA it trusts"), "{msg}");
        assert!(msg.contains("--otlp.certificate"), "{msg}");
        let plain = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(
            ExportError::from_chain(&Outer(plain)).to_string(),
            "network error: client error (Connect): refused"
        );
    }
}
