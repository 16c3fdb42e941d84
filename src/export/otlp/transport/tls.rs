//! TLS material for both transports: the CA bundle and the client
//! certificate and key, read once when the exporter is built and checked
//! then (a key that does not belong to its certificate is refused with
//! that reason); and the user's words for a failed handshake.

use super::super::settings::TlsFiles;
use super::super::OtlpError;
use super::chain;
use crate::bounded::{read_bytes, PEM_BYTES};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::error::Error as StdError;
use std::path::Path;

/// The PEM bytes of the TLS files.
#[derive(Debug, Default)]
pub(super) struct TlsMaterial {
    /// CA bundle, the only trust roots when given.
    pub(super) ca: Option<Vec<u8>>,
    /// Client certificate (chain) and key.
    pub(super) client: Option<(Vec<u8>, Vec<u8>)>,
}

fn tls_err(path: &Path, origin: &str, msg: impl std::fmt::Display) -> OtlpError {
    OtlpError::Tls {
        origin: origin.to_string(),
        path: path.to_path_buf(),
        msg: msg.to_string(),
    }
}

/// Reads a PEM file, bounded ([`crate::bounded`]: a FIFO would block the
/// start for ever; a device or a huge file is refused too).
fn read_pem(path: &Path, origin: &str) -> Result<Vec<u8>, OtlpError> {
    read_bytes(path, PEM_BYTES).map_err(|e| tls_err(path, origin, e))
}

/// The certificates of a PEM file; at least one.
fn certificates(
    pem: &[u8],
    path: &Path,
    origin: &str,
) -> Result<Vec<CertificateDer<'static>>, OtlpError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_err(path, origin, format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(tls_err(path, origin, "no PEM certificate in the file"));
    }
    Ok(certs)
}

/// Checks that the key is a private key for the certificate's public key.
fn check_client_pair(
    cert_pem: &[u8],
    key_pem: &[u8],
    files: (&Path, &Path),
    origin: &str,
) -> Result<(), OtlpError> {
    let (c, k) = files;
    let certs = certificates(cert_pem, c, origin)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| {
        tls_err(
            c,
            origin,
            format!("the client key {}: no PEM private key ({e})", k.display()),
        )
    })?;
    let provider = rustls::crypto::ring::default_provider();
    match rustls::sign::CertifiedKey::from_der(certs, key, &provider) {
        Ok(_) => Ok(()),
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => Err(tls_err(
            c,
            origin,
            format!(
                "the client key {} does not belong to this certificate (their public keys differ); give the key the certificate was issued for",
                k.display()
            ),
        )),
        Err(e) => Err(tls_err(c, origin, format!("client certificate and key {}: {e}", k.display()))),
    }
}

/// Reads and checks the TLS files.
pub(super) fn load(tls: &TlsFiles) -> Result<TlsMaterial, OtlpError> {
    let ca = match &tls.ca {
        Some((p, o)) => {
            let pem = read_pem(p, o)?;
            certificates(&pem, p, o)?;
            Some(pem)
        }
        None => None,
    };
    let client = match &tls.client {
        Some((c, k, o)) => {
            let cert = read_pem(c, o)?;
            let key = read_pem(k, o)?;
            check_client_pair(&cert, &key, (c, k), o)?;
            Some((cert, key))
        }
        None => None,
    };
    Ok(TlsMaterial { ca, client })
}

/// What a failed handshake in an error chain means, and what to do, if
/// the chain holds a rustls error.
pub(super) fn problem(e: &(dyn StdError + 'static)) -> Option<String> {
    use rustls::CertificateError as C;
    let r = chain(e).find_map(|e| e.downcast_ref::<rustls::Error>())?;
    let ca_hint =
        "give the CA that signed it with --otlp.certificate (OTEL_EXPORTER_OTLP_CERTIFICATE)";
    Some(match r {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer | C::BadSignature | C::UnhandledCriticalExtension => format!(
                "certificate problem: the collector's certificate is not signed by a CA it trusts ({c:?}); {ca_hint}"
            ),
            C::NotValidForName | C::NotValidForNameContext { .. } => format!(
                "certificate problem: the collector's certificate is not valid for the endpoint's host name ({c:?}); use a name the certificate is issued for"
            ),
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. } => format!(
                "certificate problem: the collector's certificate is outside its validity period ({c:?}); renew it, or check this host's clock"
            ),
            other => format!("certificate problem: the collector's certificate was refused ({other:?}); {ca_hint}"),
        },
        rustls::Error::AlertReceived(a) => format!(
            "the collector refused the handshake (alert {a:?}): it may require a client certificate (--otlp.client-certificate and --otlp.client-key) or not trust the one given"
        ),
        other => format!("handshake failed: {other}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pki() -> (tempfile::TempDir, [std::path::PathBuf; 3]) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["client".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let other = rcgen::KeyPair::generate().unwrap();
        let d = tempfile::tempdir().unwrap();
        let paths = ["c.pem", "k.pem", "other.pem"].map(|n| d.path().join(n));
        std::fs::write(&paths[0], cert.pem()).unwrap();
        std::fs::write(&paths[1], key.serialize_pem()).unwrap();
        std::fs::write(&paths[2], other.serialize_pem()).unwrap();
        (d, paths)
    }

    fn client(c: &Path, k: &Path) -> TlsFiles {
        TlsFiles {
            ca: None,
            client: Some((c.into(), k.into(), "--otlp.client-certificate".into())),
        }
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_with_that_reason() {
        let (_d, [c, k, other]) = pki();
        let m = load(&client(&c, &k)).unwrap();
        assert!(m.client.is_some());
        let e = load(&client(&c, &other)).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--otlp.client-certificate {}: the client key {} does not belong to this certificate", c.display(), other.display())),
            "{e}"
        );
        let e = load(&client(&c, &c)).unwrap_err().to_string();
        assert!(e.contains("no PEM private key"), "{e}");
    }

    #[test]
    fn unreadable_and_odd_files() {
        let (d, [c, ..]) = pki();
        let ca = |p: &Path| TlsFiles {
            ca: Some((p.into(), "--otlp.certificate".into())),
            client: None,
        };
        assert!(load(&ca(&c)).unwrap().ca.is_some());
        let e = load(&ca(Path::new("/nonexistent/ca.pem")))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--otlp.certificate /nonexistent/ca.pem: "),
            "{e}"
        );
        let e = load(&ca(d.path())).unwrap_err().to_string();
        assert!(
            e.ends_with("not a regular file (a directory): refused"),
            "{e}"
        );
        // A FIFO is refused at once, not read for ever.
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {}", fifo.display());
        let e = load(&ca(&fifo)).unwrap_err().to_string();
        assert!(e.ends_with("not a regular file (a FIFO): refused"), "{e}");
        let junk = d.path().join("junk.pem");
        std::fs::write(&junk, "hello").unwrap();
        let e = load(&ca(&junk)).unwrap_err().to_string();
        assert!(e.ends_with("no PEM certificate in the file"), "{e}");
    }
}
