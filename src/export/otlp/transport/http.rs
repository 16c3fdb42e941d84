//! OTLP/HTTP with protobuf bodies: `POST` of the encoded request
//! (`Content-Type: application/x-protobuf`, gzip when asked), through a
//! reqwest client with rustls.
//!
//! Redirects are followed only within the endpoint's origin (scheme, host
//! and port): a redirect to another host or port, or from `https` to
//! `http`, is refused and the export counts as failed, so the custom
//! headers (API keys) never reach another origin and never travel in
//! clear text.

use super::super::parse::{redact, Compression};
use super::super::settings::OtlpSettings;
use super::super::OtlpError;
use super::tls::TlsMaterial;
use super::ExportError;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_ENCODING, CONTENT_TYPE};
use std::io::Write as _;

/// Redirects followed at most (within the origin).
const MAX_REDIRECTS: usize = 5;
/// Bytes of an error response's body quoted in the error.
const QUOTED_BODY: usize = 200;

/// A redirect the policy refused.
#[derive(Debug, thiserror::Error)]
#[error("refused a redirect to {to}: {why} (headers are never sent across origins)")]
pub(super) struct RedirectRefused {
    /// Where to (redacted).
    to: String,
    /// Why.
    why: &'static str,
}

/// Why a redirect from `first` (the endpoint) to `next`, after `hops`
/// redirects already, is not followed; `None` when it is.
fn refusal(first: &reqwest::Url, next: &reqwest::Url, hops: usize) -> Option<&'static str> {
    if first.scheme() == "https" && next.scheme() != "https" {
        Some("a downgrade from https to http")
    } else if first.origin() != next.origin() {
        Some("another origin")
    } else if hops > MAX_REDIRECTS {
        Some("too many redirects")
    } else {
        None
    }
}

/// Follows redirects within the endpoint's origin only.
fn same_origin_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let Some(first) = attempt.previous().first() else {
            return attempt.follow();
        };
        match refusal(first, attempt.url(), attempt.previous().len()) {
            None => attempt.follow(),
            Some(why) => {
                let mut to = attempt.url().clone();
                redact(&mut to);
                let to = to.to_string();
                attempt.error(RedirectRefused { to, why })
            }
        }
    })
}

fn build_err(what: &str, e: &(dyn std::error::Error + 'static)) -> OtlpError {
    OtlpError::Build(format!("HTTP client: {what}: {}", super::render(e)))
}

/// The HTTP transport.
pub(super) struct Http {
    client: reqwest::Client,
    url: reqwest::Url,
    gzip: bool,
}

/// A request that can be sent as an OTLP/HTTP body.
pub(super) trait Body: prost::Message {}
impl Body for ExportMetricsServiceRequest {}
impl Body for ExportProfilesServiceRequest {}

impl Http {
    pub(super) fn new(s: &OtlpSettings, tls: &TlsMaterial) -> Result<Http, OtlpError> {
        let url = reqwest::Url::parse(&s.endpoint).map_err(|e| OtlpError::Build(e.to_string()))?;
        let mut headers = HeaderMap::new();
        for (k, v) in &s.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| OtlpError::Build(format!("header `{k}`: {e}")))?;
            let mut value = HeaderValue::from_str(v)
                .map_err(|e| OtlpError::Build(format!("header `{k}`: {e}")))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let mut cb = reqwest::Client::builder()
            .timeout(s.timeout)
            .connect_timeout(s.timeout)
            .redirect(same_origin_policy())
            .user_agent(super::USER_AGENT)
            .default_headers(headers);
        if let Some(pem) = &tls.ca {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| build_err("CA bundle", &e))?;
            cb = cb.tls_certs_only(certs);
        }
        if let Some((cert, key)) = &tls.client {
            let mut both = cert.clone();
            both.push(b'\n');
            both.extend_from_slice(key);
            let id = reqwest::Identity::from_pem(&both)
                .map_err(|e| build_err("client certificate and key", &e))?;
            cb = cb.identity(id);
        }
        let client = cb.build().map_err(|e| build_err("building", &e))?;
        Ok(Http {
            client,
            url,
            gzip: s.compression == Compression::Gzip,
        })
    }

    fn body(&self, req: &impl Body) -> Result<Vec<u8>, ExportError> {
        let raw = req.encode_to_vec();
        if !self.gzip {
            return Ok(raw);
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&raw)
            .and_then(|()| gz.finish())
            .map_err(|e| ExportError::Encode(e.to_string()))
    }

    pub(super) async fn export(
        &self,
        req: &ExportMetricsServiceRequest,
    ) -> Result<(), ExportError> {
        self.post(self.url.clone(), req).await
    }

    /// Sends one profiles request to `url`, with the same client.
    pub(super) async fn export_profiles(
        &self,
        url: reqwest::Url,
        req: &ExportProfilesServiceRequest,
    ) -> Result<(), ExportError> {
        self.post(url, req).await
    }

    async fn post(&self, url: reqwest::Url, req: &impl Body) -> Result<(), ExportError> {
        let mut rb = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/x-protobuf")
            .body(self.body(req)?);
        if self.gzip {
            rb = rb.header(CONTENT_ENCODING, "gzip");
        }
        let resp = rb
            .send()
            .await
            .map_err(|e| ExportError::from_chain(&e.without_url()))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let body = resp.bytes().await.unwrap_or_default();
        let text = String::from_utf8_lossy(&body[..body.len().min(QUOTED_BODY)]);
        Err(ExportError::Rejected {
            status: status.as_u16(),
            body: text.trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_stay_within_the_origin() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        let https = u("https://c:4318/v1/metrics");
        assert_eq!(refusal(&https, &u("https://c:4318/other"), 1), None);
        assert_eq!(
            refusal(&https, &u("http://c:4318/v1/metrics"), 1),
            Some("a downgrade from https to http")
        );
        assert_eq!(
            refusal(&https, &u("https://evil:4318/v1/metrics"), 1),
            Some("another origin")
        );
        assert_eq!(
            refusal(&https, &u("https://c:4319/v1/metrics"), 1),
            Some("another origin")
        );
        let http = u("http://c:4318/v1/metrics");
        assert_eq!(
            refusal(&http, &u("https://c:4318/v1/metrics"), 1),
            Some("another origin")
        );
        assert_eq!(
            refusal(&http, &u("http://c:4318/x"), MAX_REDIRECTS + 1),
            Some("too many redirects")
        );
        let e = RedirectRefused {
            to: "http://REDACTED@evil/".into(),
            why: "another origin",
        };
        assert_eq!(
            e.to_string(),
            "refused a redirect to http://REDACTED@evil/: another origin (headers are never sent across origins)"
        );
    }
}
