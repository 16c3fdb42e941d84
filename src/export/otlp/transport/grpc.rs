//! OTLP/gRPC: `opentelemetry-proto`'s `MetricsService` client on a tonic
//! channel (rustls when the endpoint is `https`), the headers as request
//! metadata, gzip when asked. gRPC follows no redirects.

use super::super::parse::Compression;
use super::super::settings::OtlpSettings;
use super::super::OtlpError;
use super::tls::TlsMaterial;
use super::ExportError;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{MetadataKey, MetadataMap};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// The gRPC transport.
pub(super) struct Grpc {
    client: MetricsServiceClient<Channel>,
    metadata: MetadataMap,
    /// The channel, for the profiles service.
    channel: Channel,
    gzip: bool,
}

fn build_err(what: &str, e: impl std::fmt::Display) -> OtlpError {
    OtlpError::Build(format!("gRPC {what}: {e}"))
}

impl Grpc {
    /// Must run inside a tokio runtime (the channel lives on it).
    pub(super) fn new(s: &OtlpSettings, tls: &TlsMaterial) -> Result<Grpc, OtlpError> {
        let redacted = super::super::parse::redact_url(&s.endpoint);
        let mut ep = Endpoint::from_shared(s.endpoint.clone())
            .map_err(|e| build_err(&format!("endpoint {redacted}"), e))?
            .timeout(s.timeout)
            .connect_timeout(s.timeout)
            .user_agent(super::USER_AGENT)
            .map_err(|e| build_err("user agent", e))?;
        if s.endpoint.starts_with("https://") {
            let mut cfg = match &tls.ca {
                Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
                None => ClientTlsConfig::new().with_native_roots(),
            };
            if let Some((cert, key)) = &tls.client {
                cfg = cfg.identity(Identity::from_pem(cert, key));
            }
            ep = ep.tls_config(cfg).map_err(|e| build_err("TLS", e))?;
        }
        let mut metadata = MetadataMap::new();
        for (k, v) in &s.headers {
            let key = MetadataKey::from_bytes(k.as_bytes())
                .map_err(|e| build_err(&format!("header `{k}`"), e))?;
            let val = v
                .parse()
                .map_err(|e| build_err(&format!("header `{k}`"), e))?;
            metadata.insert(key, val);
        }
        let channel = ep.connect_lazy();
        let mut client = MetricsServiceClient::new(channel.clone());
        let gzip = s.compression == Compression::Gzip;
        if gzip {
            client = client.send_compressed(CompressionEncoding::Gzip);
        }
        Ok(Grpc {
            client,
            metadata,
            channel,
            gzip,
        })
    }

    pub(super) async fn export(
        &mut self,
        req: ExportMetricsServiceRequest,
    ) -> Result<(), ExportError> {
        let mut r = tonic::Request::new(req);
        *r.metadata_mut() = self.metadata.clone();
        self.client.export(r).await.map(drop).map_err(status_error)
    }

    /// Sends one profiles request (the development profiles service), on
    /// the same channel, with the same metadata and compression.
    pub(super) async fn export_profiles(
        &mut self,
        req: ExportProfilesServiceRequest,
    ) -> Result<(), ExportError> {
        let mut client = ProfilesServiceClient::new(self.channel.clone());
        if self.gzip {
            client = client.send_compressed(CompressionEncoding::Gzip);
        }
        let mut r = tonic::Request::new(req);
        *r.metadata_mut() = self.metadata.clone();
        client.export(r).await.map(drop).map_err(status_error)
    }
}

/// What a gRPC status says went wrong.
fn status_error(st: tonic::Status) -> ExportError {
    let mut message = st.message().to_string();
    if let Some(src) = std::error::Error::source(&st) {
        let e = ExportError::from_chain(src);
        if !matches!(e, ExportError::Network(_)) {
            return e;
        }
        message = format!("{message}: {}", super::render(src));
    }
    ExportError::Grpc {
        code: format!("{:?}", st.code()),
        message,
    }
}
