//! Helpers for the hardening tests (TLS and auth, limits, reload, faults,
//! load): a child process that is not necessarily plain HTTP or started
//! directly (TLS, `setpriv`, `prlimit`), signals, a test PKI, a TLS
//! client, a keep-alive HTTP client and a strict text-format validator.
//!
//! Used with `mod common;` (ports, the response parser).
#![allow(dead_code)]

use crate::common::{free_port, parse_response, Response, EXPORTER};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A started process with its output in a log file. Killed on drop.
#[derive(Debug)]
pub struct Proc {
    /// What it is, for messages.
    pub name: String,
    /// `127.0.0.1:PORT` it was told to listen on.
    pub addr: String,
    child: Child,
    log: PathBuf,
    exited: Option<ExitStatus>,
    _dir: tempfile::TempDir,
}

impl Proc {
    /// Runs `wrapper.. program args.. --web.listen-address=127.0.0.1:PORT`
    /// (`wrapper` is e.g. `setpriv ... --` or `prlimit ... --`, or empty).
    pub fn spawn(wrapper: &[&str], program: &Path, args: &[&str]) -> Proc {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("output.log");
        let out = File::create(&log).expect("log file");
        let err = out.try_clone().expect("clone log");
        let addr = format!("127.0.0.1:{}", free_port());
        let mut cmd = match wrapper.split_first() {
            Some((w, rest)) => {
                let mut c = Command::new(w);
                c.args(rest).arg(program);
                c
            }
            None => Command::new(program),
        };
        cmd.args(args)
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {wrapper:?} {}: {e}", program.display()));
        Proc {
            name: format!("{} {}", wrapper.join(" "), program.display()),
            addr,
            child,
            log,
            exited: None,
            _dir: dir,
        }
    }

    /// `perf-exporter args..` directly.
    pub fn exporter(args: &[&str]) -> Proc {
        Proc::spawn(&[], Path::new(EXPORTER), args)
    }

    /// Everything it wrote so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (and how).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().expect("try_wait");
        }
        self.exited
    }

    /// Waits until its output contains `needle`; panics with the output
    /// when it exits first or `timeout` passes.
    pub fn wait_log(&mut self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.output().contains(needle) {
                return;
            }
            if let Some(s) = self.exited() {
                panic!(
                    "{} exited ({s}) before logging {needle:?}; its output:\n{}",
                    self.name,
                    self.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} did not log {needle:?} within {timeout:?}; its output:\n{}",
                self.name,
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the plain-HTTP `/-/ready` answers 200.
    pub fn wait_ready(&mut self) {
        self.wait_log("counters open", Duration::from_secs(15));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(r) = crate::common::try_request("GET", &self.addr, "/-/ready", &[], "") {
                if r.status == 200 {
                    return;
                }
            }
            if let Some(s) = self.exited() {
                panic!("{} exited ({s}); its output:\n{}", self.name, self.output());
            }
            assert!(
                Instant::now() < deadline,
                "{} not ready; its output:\n{}",
                self.name,
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the exit, up to `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends a signal by name (`HUP`, `TERM`) with kill(1).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{sig} {} failed", self.pid());
    }

    /// A plain-HTTP request; panics (with the output) when it fails.
    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        crate::common::try_request(method, &self.addr, path, headers, "").unwrap_or_else(|e| {
            panic!(
                "{method} {path} on {} failed: {e}; its output:\n{}",
                self.name,
                self.output()
            )
        })
    }

    /// GET over plain HTTP.
    pub fn get(&self, path: &str) -> Response {
        self.request("GET", path, &[])
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A test certificate authority, and the server and client certificates
/// it signs (all in a temp dir).
pub struct Pki {
    /// Where the PEM files are.
    pub dir: tempfile::TempDir,
    /// The CA certificate.
    pub ca_pem: String,
    ca_cert: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    /// A fresh CA, with `server.pem`/`server.key` for localhost and
    /// 127.0.0.1 and `ca.pem` written.
    pub fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "perf-exporter hardening test CA");
        let ca_cert = ca.self_signed(&ca_key).expect("CA cert");
        let dir = tempfile::tempdir().expect("tempdir");
        let ca_pem = ca_cert.pem();
        let pki = Pki {
            dir,
            ca_pem,
            ca_cert,
            ca_key,
        };
        let (c, k) = pki.leaf(
            &["localhost", "127.0.0.1"],
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        );
        pki.write("server.pem", &c);
        pki.write("server.key", &k);
        pki.write("ca.pem", &pki.ca_pem.clone());
        pki
    }

    /// A certificate for `names` signed by the CA: (cert PEM, key PEM).
    pub fn leaf(&self, names: &[&str], usage: rcgen::ExtendedKeyUsagePurpose) -> (String, String) {
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
    pub fn client(&self, san: &str) -> (String, String) {
        self.leaf(&[san], rcgen::ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A self-signed client certificate (no CA vouches for it).
    pub fn self_signed_client(san: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::new(vec![san.to_string()]).expect("params");
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let c = p.self_signed(&key).expect("self-sign");
        (c.pem(), key.serialize_pem())
    }

    /// Writes a file into the PKI dir.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("write PKI file");
        p
    }

    /// A file's path in the PKI dir.
    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// One HTTPS/1.1 request over a fresh TLS connection to `addr`,
/// verifying the server as `localhost` against `ca_pem`, optionally
/// presenting a client certificate (cert PEM, key PEM).
pub fn tls_request(
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
pub fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// A persistent HTTP/1.1 connection (keep-alive), for load.
pub struct KeepAlive {
    addr: String,
    reader: BufReader<TcpStream>,
}

impl KeepAlive {
    /// Connects.
    pub fn connect(addr: &str) -> Result<KeepAlive, String> {
        let s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
        let t = Some(Duration::from_secs(20));
        s.set_read_timeout(t).map_err(|e| e.to_string())?;
        s.set_write_timeout(t).map_err(|e| e.to_string())?;
        Ok(KeepAlive {
            addr: addr.to_string(),
            reader: BufReader::new(s),
        })
    }

    /// Waits until the server closes the idle connection; how long that
    /// took, or `Err` when `limit` passes first.
    pub fn closed_within(&mut self, limit: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let mut buf = [0u8; 256];
        let s = self.reader.get_mut();
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| e.to_string())?;
        while start.elapsed() < limit {
            match s.read(&mut buf) {
                Ok(0) => return Ok(start.elapsed()),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return Ok(start.elapsed()),
            }
        }
        Err(format!("still open after {limit:?}"))
    }

    /// One request on the connection; the response must carry a
    /// Content-Length (this server always sends one).
    pub fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> Result<Response, String> {
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        self.reader
            .get_mut()
            .write_all(req.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        let mut head = Vec::new();
        loop {
            let mut line = Vec::new();
            let n = self
                .reader
                .read_until(b'\n', &mut line)
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("connection closed before the response".into());
            }
            head.extend_from_slice(&line);
            if line == b"\r\n" {
                break;
            }
        }
        let text = String::from_utf8_lossy(&head).into_owned();
        let len = text
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .ok_or_else(|| format!("no Content-Length in {text:?}"))?;
        let mut body = vec![0u8; len];
        self.reader
            .read_exact(&mut body)
            .map_err(|e| format!("read body: {e}"))?;
        head.extend_from_slice(&body);
        parse_response(&head)
    }
}

/// Checks a Prometheus text-format (0.0.4) scrape strictly: HELP and TYPE
/// lines well formed and before their samples, sample names and labels
/// valid, values numbers, no series twice, a final newline. Returns every
/// series (`name{labels}`) with its value.
pub fn parse_exposition(body: &str) -> Result<BTreeMap<String, f64>, String> {
    fn name_ok(n: &str) -> bool {
        let mut c = n.chars();
        matches!(c.next(), Some(x) if x.is_ascii_alphabetic() || x == '_' || x == ':')
            && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
    }
    if !body.ends_with('\n') {
        return Err("no final newline".into());
    }
    let mut typed: BTreeMap<String, String> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (i, line) in body.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = line.strip_prefix("# ") {
            let mut it = rest.splitn(3, ' ');
            let kind = it.next().unwrap_or("");
            let name = it.next().unwrap_or("");
            let arg = it.next().unwrap_or("");
            if !name_ok(name) {
                return Err(format!("line {n}: bad metric name in {line:?}"));
            }
            match kind {
                "HELP" => {}
                "TYPE" => {
                    if !["counter", "gauge", "untyped", "summary", "histogram"].contains(&arg) {
                        return Err(format!("line {n}: bad type in {line:?}"));
                    }
                    if typed.insert(name.to_string(), arg.to_string()).is_some() {
                        return Err(format!("line {n}: second TYPE for {name}"));
                    }
                }
                _ => return Err(format!("line {n}: unknown comment {line:?}")),
            }
            continue;
        }
        if line.is_empty() {
            return Err(format!("line {n}: empty line"));
        }
        let (series, value) = match line.rfind(' ') {
            Some(sp) => (&line[..sp], &line[sp + 1..]),
            None => return Err(format!("line {n}: no value in {line:?}")),
        };
        let v: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            x => x
                .parse()
                .map_err(|_| format!("line {n}: value {x:?} is not a number"))?,
        };
        let name = series.split('{').next().unwrap_or("");
        if !name_ok(name) {
            return Err(format!("line {n}: bad sample name in {line:?}"));
        }
        if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
            let inner = labels
                .strip_prefix('{')
                .and_then(|l| l.strip_suffix('}'))
                .ok_or_else(|| format!("line {n}: bad labels in {line:?}"))?;
            // name="value" pairs, values with \\ \" \n escapes only.
            let b = inner.as_bytes();
            let mut i = 0;
            while i < b.len() {
                let eq = inner[i..]
                    .find('=')
                    .ok_or_else(|| format!("line {n}: label without = in {line:?}"))?;
                if !name_ok(&inner[i..i + eq]) {
                    return Err(format!("line {n}: bad label name in {line:?}"));
                }
                i += eq + 1;
                if b.get(i) != Some(&b'"') {
                    return Err(format!("line {n}: unquoted label value in {line:?}"));
                }
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err(format!("line {n}: unterminated label value")),
                        Some(b'\\') => {
                            if !matches!(b.get(i + 1), Some(b'\\' | b'"' | b'n')) {
                                return Err(format!("line {n}: bad escape in {line:?}"));
                            }
                            i += 2;
                        }
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                match b.get(i) {
                    None => {}
                    Some(b',') => i += 1,
                    Some(_) => return Err(format!("line {n}: junk after a label in {line:?}")),
                }
            }
        }
        let family = ["_total", "_created", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains_key(*f)))
            .unwrap_or(name);
        if !typed.contains_key(family) && !typed.contains_key(name) {
            return Err(format!("line {n}: sample {name} before its TYPE"));
        }
        if out.insert(series.to_string(), v).is_some() {
            return Err(format!("line {n}: series {series} twice"));
        }
    }
    Ok(out)
}

/// A copy of the exporter binary any user may run (0755, in a 0755 temp
/// dir): the build tree under the repository may not be reachable for
/// uid 65534.
pub fn world_executable_exporter() -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("perf-exporter-bin")
        .tempdir()
        .expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod dir");
    let bin = dir.path().join("perf-exporter");
    std::fs::copy(EXPORTER, &bin).expect("copy the binary");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod bin");
    (dir, bin)
}

/// A file any user may read (0644) in a 0755 temp dir: configs for
/// processes run as another user.
pub fn world_readable_file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod dir");
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod file");
    (dir, p)
}

/// `kernel.perf_event_paranoid`.
pub fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .expect("read /proc/sys/kernel/perf_event_paranoid")
        .trim()
        .parse()
        .expect("a number")
}

/// Panics unless this test runs as root (it switches users, hotplugs).
pub fn require_root() {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_string));
    assert_eq!(
        euid.as_deref(),
        Some("0"),
        "this test needs root (it runs the exporter as other users, with capabilities, or hotplugs a CPU)"
    );
}

/// Panics unless `tool` runs (`tool --version`).
pub fn require_tool(tool: &str) {
    let ok = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "this test needs `{tool}` (util-linux/libcap) on PATH");
}

/// The value of the only sample of `name` in a scrape (no labels).
pub fn scalar(series: &BTreeMap<String, f64>, name: &str) -> Option<f64> {
    series.get(name).copied()
}

/// Samples of family `name`, by their `cpu` label.
pub fn by_cpu(series: &BTreeMap<String, f64>, name: &str) -> BTreeMap<u32, f64> {
    series
        .iter()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix(name)?.strip_prefix('{')?;
            let cpu = rest
                .split("cpu=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse()
                .ok()?;
            Some((cpu, *v))
        })
        .collect()
}
