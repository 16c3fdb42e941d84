//! The `--otlp.*` flags as given and the environment they are read over:
//! the inputs every other file of the OTLP settings reads (a leaf of this
//! module, so that the settings, the table, the resource and the host
//! detection import it and not each other).

use std::path::PathBuf;

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
    /// `--otlp.profiles`: push profiles too (the development signal).
    pub profiles: bool,
    /// `--otlp.profiles-by`: what the profiles' samples are attributed to.
    pub profiles_by: crate::engine::sample::By,
}

/// An environment to read variables from (tests pass a map).
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment; empty values count as unset, as the spec says.
pub(crate) fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
/// A map as the environment (empty values count as unset).
pub(crate) fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    use std::collections::HashMap;
    let m: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| m.get(k).cloned().filter(|v| !v.trim().is_empty())
}
