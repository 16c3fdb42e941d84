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
use tonic::codec::CompressionEncoding;
use tonic::metadata::{MetadataKey, MetadataMap};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// The gRPC transport.
pub(super) struct Grpc {
    client: MetricsServiceClient<Channel>,
    metadata: MetadataMap,
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
        let mut client = MetricsServiceClient::new(ep.connect_lazy());
        if s.compression == Compression::Gzip {
            client = client.send_compressed(CompressionEncoding::Gzip);
        }
        Ok(Grpc { client, metadata })
    }

    pub(super) async fn export(
        &mut self,
        req: ExportMetricsServiceRequest,
    ) -> Result<(), ExportError> {
        let mut r = tonic::Request::new(req);
        *r.metadata_mut() = self.metadata.clone();
        match self.client.export(r).await {
            Ok(_) => Ok(()),
            Err(st) => {
                let mut message = st.message().to_string();
                if let Some(src) = std::error::Error::source(&st) {
                    let e = ExportError::from_chain(src);
                    if !matches!(e, ExportError::Network(_)) {
                        return Err(e);
                    }
                    message = format!("{message}: {}", super::render(src));
                }
                Err(ExportError::Grpc {
                    code: format!("{:?}", st.code()),
                    message,
                })
            }
        }
    }
}
