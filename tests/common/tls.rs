//! A test PKI (rcgen), an HTTPS client (rustls) and basic-auth headers.

use super::{parse_response, Response};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A test certificate authority, and the server and client certificates
/// it signs, in a temporary directory: `ca.pem`, `server.pem` and
/// `server.key` (for `localhost` and 127.0.0.1), `client.pem` and
/// `client.key` (for `client`); more with [`Pki::leaf`] and
/// [`Pki::write`].
pub(crate) struct Pki {
    /// Where the PEM files are.
    pub dir: tempfile::TempDir,
    /// The CA certificate.
    pub ca_pem: String,
    /// The server certificate (`server.pem`).
    pub server_cert: String,
    /// Its key (`server.key`).
    pub server_key: String,
    ca_cert: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    /// A fresh CA and its files.
    pub(crate) fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "perf-exporter test CA");
        let ca_cert = ca.self_signed(&ca_key).expect("CA cert");
        let dir = tempfile::tempdir().expect("tempdir");
        let ca_pem = ca_cert.pem();
        let mut pki = Pki {
            dir,
            ca_pem,
            server_cert: String::new(),
            server_key: String::new(),
            ca_cert,
            ca_key,
        };
        let (c, k) = pki.leaf(
            &["localhost", "127.0.0.1"],
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        );
        pki.write("server.pem", &c);
        pki.write("server.key", &k);
        (pki.server_cert, pki.server_key) = (c, k);
        let (c, k) = pki.client("client");
        pki.write("client.pem", &c);
        pki.write("client.key", &k);
        pki.write("ca.pem", &pki.ca_pem.clone());
        pki
    }

    /// A certificate for `names` signed by the CA: (cert PEM, key PEM).
    pub(crate) fn leaf(
        &self,
        names: &[&str],
        usage: rcgen::ExtendedKeyUsagePurpose,
    ) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut p =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .expect("params");
        p.extended_key_usages = vec![usage];
        let c = p
            .signed_by(&key, &self.ca_cert, &self.ca_key)
            .expect("sign");
        (c.pem(), key.serialize_pem())
    }

    /// A client certificate for `san` signed by the CA.
    pub(crate) fn client(&self, san: &str) -> (String, String) {
        self.leaf(&[san], rcgen::ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A self-signed client certificate (no CA vouches for it).
    pub(crate) fn self_signed_client(san: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::new(vec![san.to_string()]).expect("params");
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let c = p.self_signed(&key).expect("self-sign");
        (c.pem(), key.serialize_pem())
    }

    /// Writes a file into the PKI dir.
    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("write PKI file");
        p
    }

    /// A file's path in the PKI dir.
    pub(crate) fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// One HTTPS/1.1 request over a fresh TLS connection to `addr`,
/// verifying the server as `localhost` against `ca_pem`, optionally
/// presenting a client certificate (cert PEM, key PEM).
pub(crate) fn tls_request(
    addr: &str,
    ca_pem: &str,
    client: Option<(&str, &str)>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Response, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let cfg = match client {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| e.to_string())?;
            b.with_client_auth_cert(chain, key)
                .map_err(|e| e.to_string())?
        }
        None => b.with_no_client_auth(),
    };
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name).map_err(|e| e.to_string())?;
    let sock = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let t = Some(Duration::from_secs(10));
    sock.set_read_timeout(t).map_err(|e| e.to_string())?;
    sock.set_write_timeout(t).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    tls.write_all(req.as_bytes())
        .map_err(|e| format!("TLS write: {e}"))?;
    let mut raw = Vec::new();
    match tls.read_to_end(&mut raw) {
        Ok(_) => {}
        // A peer closing without close_notify after a full response.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(format!("TLS read: {e}")),
    }
    parse_response(&raw)
}

/// `Authorization: Basic ...` for user and password.
pub(crate) fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}
