//! Building the TLS server config of a validated web config: the PEM
//! files read (bounded), the certificate and key checked against each
//! other, the client-certificate verifier (`client_auth_type`,
//! `client_allowed_sans`).

use super::super::x509::subject_alt_names;
use super::{provider, suite_name, ClientAuth, Pem, Tls, TlsSpec};
use crate::bounded::{read_bytes, PEM_BYTES};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
    SupportedCipherSuite,
};
use std::sync::Arc;

pub(super) enum BuildError {
    Io {
        file: String,
        source: std::io::Error,
    },
    Invalid(String),
}

fn read_pem(p: &Pem, what: &str) -> Result<(Vec<u8>, String), BuildError> {
    match p {
        Pem::Inline(s) => Ok((s.as_bytes().to_vec(), format!("inline `{what}`"))),
        Pem::File(f) => read_bytes(f, PEM_BYTES)
            .map(|t| (t, f.display().to_string()))
            .map_err(|source| BuildError::Io {
                file: f.display().to_string(),
                source,
            }),
    }
}

fn certs(p: &Pem, what: &str) -> Result<Vec<CertificateDer<'static>>, BuildError> {
    let (bytes, from) = read_pem(p, what)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| BuildError::Invalid(format!("{from}: not a PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(BuildError::Invalid(format!(
            "{from}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it"
        )));
    }
    Ok(certs)
}

pub(super) fn build_tls(t: &TlsSpec) -> Result<Tls, BuildError> {
    let inv = BuildError::Invalid;
    let chain = certs(&t.cert, "cert")?;
    let (key_bytes, key_from) = read_pem(&t.key, "key")?;
    let key = PrivateKeyDer::from_pem_slice(&key_bytes)
        .map_err(|e| inv(format!("{key_from}: no usable PEM private key: {e}")))?;

    let p = Arc::new(tls_provider(t));
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    if t.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if t.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let builder = ServerConfig::builder_with_provider(p.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| inv(format!("tls_server_config: {e}")))?;
    let base = client_base(t, &p)?;
    let verifier = base.map(|base| {
        Arc::new(ClientCerts {
            base,
            allowed: t.allowed_sans.clone(),
        }) as Arc<dyn ClientCertVerifier>
    });
    let builder = match verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut server = builder
        .with_single_cert(chain, key)
        .map_err(|e| inv(format!("tls_server_config: certificate and key: {e}")))?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    server.ignore_client_order = t.prefer_server_order;
    let versions = match (t.tls12, t.tls13) {
        (true, true) => "TLS 1.2-1.3",
        (true, false) => "TLS 1.2",
        _ => "TLS 1.3",
    };
    Ok(Tls {
        server: Arc::new(server),
        summary: format!(
            "{versions}, client_auth_type {}{}",
            t.client_auth.as_str(),
            if t.allowed_sans.is_some() {
                ", client_allowed_sans"
            } else {
                ""
            }
        ),
    })
}

/// The crypto provider narrowed to the configured cipher suites (TLS 1.3's
/// all kept) and curves.
fn tls_provider(t: &TlsSpec) -> CryptoProvider {
    let mut p = provider();
    if !t.cipher_suites.is_empty() {
        let mut suites: Vec<SupportedCipherSuite> = p
            .cipher_suites
            .iter()
            .filter(|s| matches!(s, SupportedCipherSuite::Tls13(_)))
            .copied()
            .collect();
        for name in &t.cipher_suites {
            if let Some(s) = p.cipher_suites.iter().find(|s| suite_name(s) == name) {
                suites.push(*s);
            }
        }
        p.cipher_suites = suites;
    }
    if !t.curves.is_empty() {
        let all = p.kx_groups.clone();
        p.kx_groups = t
            .curves
            .iter()
            .filter_map(|c| all.iter().find(|g| g.name() == *c).copied())
            .collect();
    }
    p
}

/// The base client-certificate verifier of `client_auth_type` (none for
/// `NoClientCert`).
fn client_base(t: &TlsSpec, p: &Arc<CryptoProvider>) -> Result<Option<Base>, BuildError> {
    let inv = BuildError::Invalid;
    let algs = p.signature_verification_algorithms;
    Ok(match t.client_auth {
        ClientAuth::NoClientCert => None,
        ClientAuth::RequestClientCert => Some(Base::Any {
            mandatory: false,
            algs,
        }),
        ClientAuth::RequireAnyClientCert => Some(Base::Any {
            mandatory: true,
            algs,
        }),
        ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert => {
            let ca = t.client_ca.as_ref().ok_or_else(|| {
                inv("tls_server_config: this client_auth_type needs client_ca_file".into())
            })?;
            let mut roots = RootCertStore::empty();
            let (_, from) = read_pem(ca, "client_ca")?;
            for c in certs(ca, "client_ca")? {
                roots
                    .add(c)
                    .map_err(|e| inv(format!("{from}: not a usable CA certificate: {e}")))?;
            }
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), p.clone());
            let b = if t.client_auth == ClientAuth::VerifyClientCertIfGiven {
                b.allow_unauthenticated()
            } else {
                b
            };
            Some(Base::Ca(b.build().map_err(|e| {
                inv(format!("tls_server_config: client CA: {e}"))
            })?))
        }
    })
}

/// The client-certificate verifier of every `client_auth_type` but
/// `NoClientCert`, with the `client_allowed_sans` check on top.
#[derive(Debug)]
struct ClientCerts {
    base: Base,
    /// `client_allowed_sans`: after the base verifier accepts a client
    /// certificate, one of its SANs must be in the list, exactly.
    allowed: Option<Vec<String>>,
}

#[derive(Debug)]
enum Base {
    /// `RequestClientCert` / `RequireAnyClientCert`: a client certificate
    /// is asked for (and required by the latter) but not checked against
    /// a CA; the handshake signature is still verified.
    Any {
        mandatory: bool,
        algs: WebPkiSupportedAlgorithms,
    },
    /// Checked against `client_ca_file` (webpki).
    Ca(Arc<dyn ClientCertVerifier>),
}

/// `verify_tls12_signature` and `verify_tls13_signature`: the same check
/// for each version, by the CA verifier or by rustls's function of the
/// same name.
macro_rules! handshake_signature {
    ($($method:ident),+) => {$(
        fn $method(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            match &self.base {
                Base::Any { algs, .. } => rustls::crypto::$method(message, cert, dss, algs),
                Base::Ca(v) => v.$method(message, cert, dss),
            }
        }
    )+};
}

impl ClientCertVerifier for ClientCerts {
    fn offer_client_auth(&self) -> bool {
        match &self.base {
            Base::Any { .. } => true,
            Base::Ca(v) => v.offer_client_auth(),
        }
    }

    fn client_auth_mandatory(&self) -> bool {
        match &self.base {
            Base::Any { mandatory, .. } => *mandatory,
            Base::Ca(v) => v.client_auth_mandatory(),
        }
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        match &self.base {
            Base::Any { .. } => &[],
            Base::Ca(v) => v.root_hint_subjects(),
        }
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let ok = match &self.base {
            Base::Any { .. } => ClientCertVerified::assertion(),
            Base::Ca(v) => v.verify_client_cert(end_entity, intermediates, now)?,
        };
        let Some(allowed) = &self.allowed else {
            return Ok(ok);
        };
        let sans = subject_alt_names(end_entity.as_ref())
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        if sans.iter().any(|s| allowed.contains(s)) {
            Ok(ok)
        } else {
            Err(rustls::Error::General(format!(
                "the client certificate's SANs {sans:?} match none of client_allowed_sans"
            )))
        }
    }

    handshake_signature!(verify_tls12_signature, verify_tls13_signature);

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        match &self.base {
            Base::Any { algs, .. } => algs.supported_schemes(),
            Base::Ca(v) => v.supported_verify_schemes(),
        }
    }
}
