//! The OTLP push flags. Each overrides its OpenTelemetry environment
//! variable; [`crate::export::otlp::OtlpSettings`] resolves the two.

use crate::engine::sample::By;
use crate::export::otlp::OtlpFlags;
use std::path::PathBuf;

/// OTLP push. Each flag overrides its OpenTelemetry environment variable
/// (named in the help); push is on when an endpoint is set either way, or
/// with --otlp.only.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "OTLP push (flags override the OTEL_* environment variables)")]
pub(super) struct OtlpArgs {
    /// Base URL of the OTLP receiver; http/protobuf appends /v1/metrics (OTEL_EXPORTER_OTLP_ENDPOINT).
    #[arg(long = "otlp.endpoint", value_name = "URL")]
    endpoint: Option<String>,
    /// Full URL to push metrics to, used as is (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT).
    #[arg(long = "otlp.metrics-endpoint", value_name = "URL")]
    metrics_endpoint: Option<String>,
    /// http/protobuf (default) or grpc (OTEL_EXPORTER_OTLP_PROTOCOL).
    #[arg(long = "otlp.protocol", value_name = "PROTOCOL")]
    protocol: Option<String>,
    /// Extra headers, k=v,k2=v2 with percent-encoded values, merged over the environment's (OTEL_EXPORTER_OTLP_HEADERS).
    #[arg(long = "otlp.headers", value_name = "K=V,...")]
    headers: Option<String>,
    /// Time allowed for one export, e.g. 10s (OTEL_EXPORTER_OTLP_TIMEOUT, in ms).
    #[arg(long = "otlp.timeout", value_name = "DURATION", value_parser = duration_text)]
    timeout: Option<String>,
    /// gzip or none (OTEL_EXPORTER_OTLP_COMPRESSION).
    #[arg(long = "otlp.compression", value_name = "ALGO")]
    compression: Option<String>,
    /// Time between pushes, e.g. 60s (OTEL_METRIC_EXPORT_INTERVAL, in ms).
    #[arg(long = "otlp.interval", value_name = "DURATION", value_parser = duration_text)]
    interval: Option<String>,
    /// PEM CA bundle trusted for an https endpoint, instead of the system roots (OTEL_EXPORTER_OTLP_CERTIFICATE).
    #[arg(long = "otlp.certificate", value_name = "FILE")]
    certificate: Option<PathBuf>,
    /// PEM client certificate for mutual TLS (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE).
    #[arg(long = "otlp.client-certificate", value_name = "FILE")]
    client_certificate: Option<PathBuf>,
    /// PEM client key for mutual TLS (OTEL_EXPORTER_OTLP_CLIENT_KEY).
    #[arg(long = "otlp.client-key", value_name = "FILE")]
    client_key: Option<PathBuf>,
    /// service.name of the resource (OTEL_SERVICE_NAME; default perf-exporter).
    #[arg(long = "otlp.service-name", value_name = "NAME")]
    service_name: Option<String>,
    /// Resource attributes k=v,..., merged over the environment's (OTEL_RESOURCE_ATTRIBUTES).
    #[arg(long = "otlp.resource-attributes", value_name = "K=V,...")]
    resource_attributes: Option<String>,
    /// Push only: no HTTP listener (OTEL_SDK_DISABLED=true makes this an error).
    #[arg(long = "otlp.only")]
    only: bool,
    /// Push profiles too: call stacks of cycles (cpu-clock without a hardware PMU) at 99 Hz on every CPU, one profile per --otlp.interval, attributed as --otlp.profiles-by says, with the same endpoint and settings (gRPC: the profiles service; http/protobuf: /v1development/profiles). The OTLP profiles signal is still in development in the protocol: receivers must take v1development. Off by default; nothing is sampled without it.
    #[arg(long = "otlp.profiles")]
    profiles: bool,
    /// With --otlp.profiles: the attribute each sample carries besides process.pid: process (process.executable.name), cgroup (its path) or pod (k8s.pod.uid).
    #[arg(long = "otlp.profiles-by", default_value = "process", value_parser = ["process", "cgroup", "pod"])]
    profiles_by: String,
}

/// A duration flag checked by the one duration grammar; the OTLP settings
/// take its text (they parse the environment's milliseconds apart).
fn duration_text(s: &str) -> Result<String, String> {
    crate::duration::parse(s).map(|_| s.to_string())
}

impl OtlpArgs {
    pub(super) fn flags(self) -> OtlpFlags {
        OtlpFlags {
            endpoint: self.endpoint,
            metrics_endpoint: self.metrics_endpoint,
            protocol: self.protocol,
            headers: self.headers,
            timeout: self.timeout,
            compression: self.compression,
            interval: self.interval,
            certificate: self.certificate,
            client_certificate: self.client_certificate,
            client_key: self.client_key,
            service_name: self.service_name,
            resource_attributes: self.resource_attributes,
            only: self.only,
            profiles: self.profiles,
            profiles_by: match self.profiles_by.as_str() {
                "pod" => By::Pod,
                "cgroup" => By::Cgroup,
                _ => By::Process,
            },
        }
    }
}
