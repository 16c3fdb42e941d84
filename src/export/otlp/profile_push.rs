//! The push of OTLP profiles (`--otlp.profiles`): one profile per
//! interval, sampled for the whole interval by the application's
//! [`TakeProfile`], converted ([`super::profiles::request`]) and sent
//! with the metrics' settings (endpoint, protocol, headers, TLS,
//! compression, timeout) on a thread of its own. Over gRPC it goes to the
//! profiles service of the same endpoint; over HTTP to the metrics URL
//! with `/v1/metrics` replaced by `/v1development/profiles`. A failure is
//! logged at most once a minute; a profile being sampled at shutdown is
//! dropped (it is not complete).

use super::parse::{redact_url, Protocol};
use super::profiles::{http_url, request, DEVELOPMENT_NOTE};
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

/// Where profiles go over HTTP: the settings' metrics URL with the
/// profiles path; refused when that URL does not end in `/v1/metrics`.
fn profiles_url(s: &OtlpSettings) -> Result<reqwest::Url, OtlpError> {
    let invalid = |msg: String| OtlpError::Invalid {
        origin: "--otlp.profiles".into(),
        msg,
    };
    let url = match s.protocol {
        Protocol::Grpc => s.endpoint.clone(),
        Protocol::HttpProtobuf => http_url(&s.endpoint).ok_or_else(|| {
            invalid(format!(
                "over http/protobuf the profiles URL is the metrics URL with /v1/metrics replaced by /v1development/profiles, and {} does not end in /v1/metrics: give the base URL with --otlp.endpoint (OTEL_EXPORTER_OTLP_ENDPOINT)",
                redact_url(&s.endpoint)
            ))
        })?,
    };
    reqwest::Url::parse(&url).map_err(|e| invalid(e.to_string()))
}

/// Starts pushing a profile every `settings.interval`, each taken by
/// `take`. Says once that the signal is in development.
pub(crate) fn start(settings: OtlpSettings, take: TakeProfile) -> Result<Pusher, OtlpError> {
    let url = profiles_url(&settings)?;
    let endpoint = redact_url(url.as_str());
    tracing::info!(%endpoint, interval_ms = settings.interval.as_millis() as u64, "{DEVELOPMENT_NOTE}");
    let bound = settings.shutdown_timeout();
    spawn("otlp-prof", bound, move |stop| {
        let transport = Transport::build(&settings)?;
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
        let base = OtlpFlags {
            endpoint: Some("http://c:4318/otlp".into()),
            ..Default::default()
        };
        let u = profiles_url(&on(&base, &[])).unwrap();
        assert_eq!(u.as_str(), "http://c:4318/otlp/v1development/profiles");
        let grpc = OtlpFlags {
            protocol: Some("grpc".into()),
            ..base.clone()
        };
        assert_eq!(
            profiles_url(&on(&grpc, &[])).unwrap().as_str(),
            "http://c:4318/otlp"
        );
        let whole = OtlpFlags {
            metrics_endpoint: Some("http://u:pw@c:4318/custom".into()),
            ..Default::default()
        };
        let e = profiles_url(&on(&whole, &[])).unwrap_err().to_string();
        assert!(e.starts_with("--otlp.profiles: over http/protobuf"), "{e}");
        assert!(
            e.contains("http://REDACTED@c:4318/custom") && !e.contains("pw"),
            "{e}"
        );
    }
}
