//! The push of OTLP profiles (`--otlp.profiles`): one profile per
//! interval, sampled for the whole interval by the application's
//! [`TakeProfile`], converted ([`super::profiles::request`]) and sent
//! with the metrics' settings (endpoint, protocol, headers, TLS,
//! compression, timeout) on a thread of its own. Over gRPC it goes to the
//! profiles service of the generic endpoint (`--otlp.endpoint`,
//! `OTEL_EXPORTER_OTLP_ENDPOINT`), else of the metrics'; over HTTP to
//! `/v1development/profiles` under the generic endpoint, as the metrics
//! go to `/v1/metrics` under it, else to the metrics URL with its
//! `/v1/metrics` replaced (a metrics URL given whole that does not end
//! so is refused at start). A failure is
//! logged at most once a minute; a profile being sampled at shutdown is
//! dropped (it is not complete).

use super::parse::{redact_url, Protocol};
use super::profiles::{http_url, http_url_under, request, DEVELOPMENT_NOTE, HTTP_PATH};
use super::pusher::{spawn, Pusher};
use super::stats::FailureLog;
use super::transport::{ExportError, Transport};
use super::{OtlpError, OtlpSettings};
use crate::engine::sample::ProfileSample;
use crate::export::pprof::Meta;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A profile sampled for the duration asked, or why not. The future runs
/// on the push thread's runtime (dropped at shutdown: its samplers close).
pub(crate) type TakeProfile = Arc<
    dyn Fn(Duration) -> Pin<Box<dyn Future<Output = Result<(Meta, Vec<ProfileSample>), String>>>>
        + Send
        + Sync,
>;

/// Where profiles go: the generic endpoint when one is given (over HTTP
/// with [`HTTP_PATH`] under it, as the metrics take `/v1/metrics`), else
/// the metrics' own (over HTTP its `/v1/metrics` replaced); refused when
/// that metrics URL does not end in `/v1/metrics`. Returns the endpoint
/// as the transport takes it, and its URL.
fn profiles_endpoint(s: &OtlpSettings) -> Result<(String, reqwest::Url), OtlpError> {
    let invalid = |msg: String| OtlpError::Invalid {
        origin: "--otlp.profiles".into(),
        msg,
    };
    let endpoint = match (s.protocol, &s.base_endpoint) {
        (Protocol::Grpc, Some(base)) => base.clone(),
        (Protocol::Grpc, None) => s.endpoint.clone(),
        (Protocol::HttpProtobuf, Some(base)) => http_url_under(base).ok_or_else(|| {
            invalid(format!("{} is not a URL", redact_url(base)))
        })?,
        (Protocol::HttpProtobuf, None) => http_url(&s.endpoint).ok_or_else(|| {
            invalid(format!(
                "over http/protobuf the profiles URL is the metrics URL with /v1/metrics replaced by {HTTP_PATH}, and {} does not end in /v1/metrics: give the base URL with --otlp.endpoint (OTEL_EXPORTER_OTLP_ENDPOINT)",
                redact_url(&s.endpoint)
            ))
        })?,
    };
    let url = reqwest::Url::parse(&endpoint).map_err(|e| invalid(e.to_string()))?;
    Ok((endpoint, url))
}

/// Starts pushing a profile every `settings.interval`, each taken by
/// `take`. Says once that the signal is in development.
pub(crate) fn start(settings: OtlpSettings, take: TakeProfile) -> Result<Pusher, OtlpError> {
    let (to, url) = profiles_endpoint(&settings)?;
    let endpoint = redact_url(url.as_str());
    tracing::info!(%endpoint, interval_ms = settings.interval.as_millis() as u64, "{DEVELOPMENT_NOTE}");
    let bound = settings.shutdown_timeout();
    spawn("otlp-prof", bound, move |stop| {
        // The metrics' settings, towards the profiles endpoint (over
        // gRPC the channel's; over HTTP each request names its URL).
        let transport = Transport::build(&OtlpSettings {
            endpoint: to,
            ..settings.clone()
        })?;
        Ok(run(settings, url, endpoint, transport, take, stop))
    })
}

async fn run(
    settings: OtlpSettings,
    url: reqwest::Url,
    endpoint: String,
    mut transport: Transport,
    take: TakeProfile,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut log = FailureLog::new(Duration::from_secs(60));
    let mut succeeded_once = false;
    loop {
        let taken = tokio::select! {
            r = take(settings.interval) => r,
            _ = stop.changed() => break,
        };
        let r = match taken {
            Ok((meta, samples)) => {
                let req = request(&settings.resource, &meta, &samples);
                tokio::select! {
                    r = tokio::time::timeout(settings.timeout, transport.export_profiles(&url, req)) => {
                        r.unwrap_or(Err(ExportError::Timeout(settings.timeout, None)))
                            .map(|()| samples.len())
                            .map_err(|e| e.to_string())
                    }
                    _ = stop.changed() => break,
                }
            }
            Err(e) => {
                // Not at once again: wait an interval (samplers that
                // cannot open fail fast).
                tokio::select! {
                    () = tokio::time::sleep(settings.interval) => {}
                    _ = stop.changed() => break,
                }
                Err(format!("sampling failed: {e}"))
            }
        };
        match r {
            Ok(stacks) => {
                if let Some(n) = log.success() {
                    tracing::info!(%endpoint, failures = n, "OTLP profiles export recovered");
                } else if !succeeded_once {
                    tracing::info!(%endpoint, stacks, "first OTLP profiles export succeeded");
                }
                succeeded_once = true;
                tracing::debug!(stacks, "OTLP profiles export succeeded");
            }
            Err(error) => {
                if let Some(suppressed) = log.failure(Instant::now()) {
                    tracing::warn!(%endpoint, %error, suppressed, "OTLP profiles export failed (logged at most once a minute)");
                } else {
                    tracing::debug!(%error, "OTLP profiles export failed");
                }
            }
        }
    }
    tracing::debug!("OTLP profiles push stopped (a profile being sampled is dropped)");
}

#[cfg(test)]
mod tests {
    use super::super::settings::tests::on;
    use super::*;
    use crate::export::otlp::OtlpFlags;

    #[test]
    fn the_profiles_url_follows_the_metrics_one() {
        let url = |f: &OtlpFlags, env: &[(&str, &str)]| {
            profiles_endpoint(&on(f, env)).map(|(e, u)| (e, u.to_string()))
        };
        let base = OtlpFlags {
            endpoint: Some("http://c:4318/otlp/".into()),
            ..Default::default()
        };
        let p = "http://c:4318/otlp/v1development/profiles";
        assert_eq!(url(&base, &[]).unwrap(), (p.into(), p.into()));
        let grpc = OtlpFlags {
            protocol: Some("grpc".into()),
            ..base.clone()
        };
        assert_eq!(url(&grpc, &[]).unwrap().0, "http://c:4318/otlp/");
        // The metrics' own URL, given whole: profiles take the generic
        // endpoint when there is one...
        let signal = [("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://m:1/custom")];
        let generic = [signal[0], ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://g:4318")];
        let none = OtlpFlags::default();
        let u = url(&none, &generic).unwrap().1;
        assert_eq!(u, "https://g:4318/v1development/profiles");
        let grpc = OtlpFlags {
            protocol: Some("grpc".into()),
            ..Default::default()
        };
        assert_eq!(url(&grpc, &generic).unwrap().0, "https://g:4318");
        assert_eq!(url(&grpc, &signal).unwrap().0, "http://m:1/custom");
        // ... else the metrics URL with its path replaced, if it ends in
        // /v1/metrics.
        let m = [(
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "http://m:1/x/v1/metrics",
        )];
        assert_eq!(
            url(&none, &m).unwrap().1,
            "http://m:1/x/v1development/profiles"
        );
        let whole = OtlpFlags {
            metrics_endpoint: Some("http://u:pw@c:4318/custom".into()),
            ..Default::default()
        };
        let e = url(&whole, &[]).unwrap_err().to_string();
        assert!(e.starts_with("--otlp.profiles: over http/protobuf"), "{e}");
        assert!(
            e.contains("http://REDACTED@c:4318/custom") && !e.contains("pw"),
            "{e}"
        );
    }
}
