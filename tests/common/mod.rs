//! Shared helpers for the tests that run the real `perf-exporter` binary
//! and real servers (Prometheus, promtool, ...).
//!
//! * [`Proc`] ([`proc`]): a child process listening on a free loopback
//!   port, killed on drop; its stdout+stderr go to a log file shown when it
//!   dies or never gets ready; signals, log and readiness waits (deadline
//!   polls); [`KeepAlive`], a keep-alive client.
//! * [`exporter`]: starts `perf-exporter` with the given arguments.
//! * [`browser`]: a headless Chromium driven over the DevTools protocol.
//! * [`cgroup`]: cgroup trees (real ones removed on drop), the
//!   `cgroups:` section of a one-set config.
//! * [`tls`]: a test PKI and an HTTPS client; [`exposition`]: a strict
//!   text-format validator.
//! * [`http`] / [`get`]: a tiny blocking HTTP/1.1 client.
//! * [`server_binary`]: the path of a fetched server binary
//!   (`scripts/fetch-servers.sh`); panics when it is missing, never skips.
//! * [`config!`]: a whole config of `tests/configs/`.
//! * [`serial`]: runs the tests that take it one at a time (those that
//!   count CPU time, change CPU state or load the machine), within a test
//!   binary and across binaries.
//!
//! Each suite (`tests/sim`, `tests/live`, `tests/e2e`: one test binary
//! each) includes this directory as its `common` module (`#[path =
//! "../common/mod.rs"]`), as does `tests/arm64_guest.rs`; each uses a
//! subset of it.
#![allow(dead_code, unused_imports)]

/// The twelve top-down shares of levels 1 and 2 (perf's TopdownL1 and
/// TopdownL2 names, as config/metrics/*.json take them).
pub(crate) const TOPDOWN_L1_L2: [&str; 12] = [
    "frontend_bound",
    "bad_speculation",
    "backend_bound",
    "retiring",
    "frontend_bound_latency",
    "frontend_bound_bandwidth",
    "bad_speculation_mispredicts",
    "bad_speculation_pipeline_restarts",
    "backend_bound_memory",
    "backend_bound_cpu",
    "retiring_heavy_operations",
    "retiring_light_operations",
];

/// The E-cores' level-2 shares (perf's `cpu_atom` TopdownL2 of
/// adl-metrics.json, config/metrics/alderlake.json).
pub(crate) const ATOM_L2: [&str; 8] = [
    "atom_frontend_bound_latency",
    "atom_frontend_bound_bandwidth",
    "atom_bad_speculation_mispredicts",
    "atom_bad_speculation_pipeline_restarts",
    "atom_backend_bound_memory",
    "atom_backend_bound_cpu",
    "atom_base",
    "atom_ms_uops",
];

pub(crate) mod browser;
pub(crate) mod cgroup;
pub(crate) mod clocks;
pub(crate) mod exposition;
pub(crate) mod proc;
pub(crate) mod tls;
pub(crate) mod tmux;

pub(crate) use exposition::{by_cpu, parse_exposition, scalar};
pub(crate) use proc::{
    world_executable_exporter, world_readable_file, Builder, KeepAlive, Proc, Reaped,
};
pub(crate) use tls::{basic, tls_request, Pki};

/// The tests' one poll loop: calls `f` every `every` until it gives a
/// value (returned) or `limit` passes (`None`: the caller says what did
/// not happen). A test waits for an event this way, never with a fixed
/// sleep; `f` may panic to stop early (a process that exited).
pub(crate) fn poll<T>(
    limit: Duration,
    every: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}

/// Polls `f` every 10 ms until it holds or `limit` passes: whether it
/// held (the caller asserts, with its own message).
pub(crate) fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    poll(limit, Duration::from_millis(10), || f().then_some(())).is_some()
}

/// Polls `f` every 20 ms until it holds; panics after `limit`, naming
/// `what`.
pub(crate) fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    assert!(
        poll(limit, Duration::from_millis(20), || f().then_some(())).is_some(),
        "timed out after {limit:?} waiting for {what}"
    );
}

/// A whole test config, `tests/configs/<name>.yaml`, as a `&'static str`
/// (read at compile time: usable in a `const` and in `concat!`). Configs
/// a test builds for a parameter stay `format!` strings in the test.
#[macro_export]
macro_rules! config {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/configs/",
            $name,
            ".yaml"
        ))
    };
}

/// The path of `tests/configs/<name>.yaml` (for a process given a config
/// file; [`config!`] gives the text).
pub(crate) fn config_path(name: &str) -> PathBuf {
    let p = repo_root()
        .join("tests/configs")
        .join(format!("{name}.yaml"));
    assert!(p.is_file(), "{} does not exist", p.display());
    p
}

/// The in-process half of [`serial`] (cargo runs a test binary's tests
/// on parallel threads).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held by the tests that must not overlap with one another: those that
/// count CPU time, change CPU state or load the machine. Two locks: the
/// test binary's mutex (its tests run on parallel threads) and an
/// exclusive `flock` on `serial.lock` in cargo's per-target temporary
/// directory, so that tests of two test binaries run at once (two
/// `cargo test --test ...` on one target directory) do not overlap either.
/// A test that panicked while holding it does not stop the others (the
/// mutex's poison is ignored; the kernel drops the `flock` with the file).
pub(crate) fn serial() -> Serial {
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if std::env::var_os(SERIAL_HELD_ENV).is_some() {
        return Serial {
            _file: None,
            _guard: guard,
        };
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serial.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.lock()
        .unwrap_or_else(|e| panic!("flock {}: {e}", path.display()));
    Serial {
        _file: Some(file),
        _guard: guard,
    }
}

/// Set for a test binary that a test holding [`serial`] runs as its child
/// (the child's tests then take only their own mutex: the parent's `flock`
/// would block them for ever).
pub(crate) const SERIAL_HELD_ENV: &str = "PERF_EXPORTER_TEST_SERIAL_HELD";

/// [`serial`]'s guard: both locks, released on drop (the file first).
pub(crate) struct Serial {
    _file: Option<std::fs::File>,
    _guard: std::sync::MutexGuard<'static, ()>,
}

pub(crate) mod otlp;

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The `perf-exporter` binary cargo built for this test run.
pub(crate) const EXPORTER: &str = env!("CARGO_BIN_EXE_perf-exporter");

/// How long a server gets to answer `/-/ready`.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The crate root.
pub(crate) fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A sysfs fixture tree, by name (`intel-skx`, `amd-zen4`, ...).
pub(crate) fn fixture(name: &str) -> PathBuf {
    let p = repo_root().join("tests/fixtures/sysfs").join(name);
    assert!(p.is_dir(), "sysfs fixture {} does not exist", p.display());
    p
}

/// The names of every sysfs fixture tree, sorted.
#[allow(dead_code)]
pub(crate) fn fixture_names() -> Vec<String> {
    let dir = repo_root().join("tests/fixtures/sysfs");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The path of a real server binary fetched by `scripts/fetch-servers.sh`:
/// `key` is `PROMETHEUS`, `PROMTOOL`, `NODE_EXPORTER` or `VICTORIA_METRICS`.
/// Reads `PERF_EXPORTER_TEST_<KEY>` (set by `scripts/test.sh`), else falls
/// back to `<repo>/.cache/servers/root/usr/bin/<name>`; panics when neither
/// names an existing file.
pub(crate) fn server_binary(key: &str) -> PathBuf {
    let name = match key {
        "PROMETHEUS" => "prometheus",
        "PROMTOOL" => "promtool",
        "NODE_EXPORTER" => "prometheus-node-exporter",
        "VICTORIA_METRICS" => "victoria-metrics",
        other => panic!("server_binary: unknown key `{other}`"),
    };
    let var = format!("PERF_EXPORTER_TEST_{key}");
    if let Some(p) = std::env::var_os(&var).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "{var}={} does not exist; run scripts/fetch-servers.sh (or scripts/test.sh)",
            p.display()
        );
        return p;
    }
    let p = repo_root().join(".cache/servers/root/usr/bin").join(name);
    assert!(
        p.is_file(),
        "{name} not found: {var} is not set and {} does not exist; run scripts/fetch-servers.sh (or scripts/test.sh)",
        p.display()
    );
    p
}

/// Panics unless this process may count system-wide (pid = -1):
/// CAP_PERFMON, CAP_SYS_ADMIN or `kernel.perf_event_paranoid <= 0`.
pub(crate) fn require_perf_privilege() {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        })
        .unwrap_or(0);
    let perfmon = caps & (1 << 38) != 0;
    let sys_admin = caps & (1 << 21) != 0;
    assert!(
        perfmon || sys_admin || paranoid.is_some_and(|p| p <= 0),
        "this test counts system-wide and needs CAP_PERFMON, CAP_SYS_ADMIN or \
         kernel.perf_event_paranoid <= 0 (have CapEff={caps:#x}, perf_event_paranoid={paranoid:?}); run it as root"
    );
}

/// The online CPUs of this host (`/sys/devices/system/cpu/online`).
pub(crate) fn online_cpus() -> Vec<u32> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .expect("read /sys/devices/system/cpu/online");
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                v.extend(a..=b);
            }
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

/// Ports handed out by this test process, never handed out twice (two
/// servers of one test binary must not race for the same port).
static PORTS: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A loopback port that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    let mut used = PORTS.lock().unwrap_or_else(|p| p.into_inner());
    let used = used.get_or_insert_with(HashSet::new);
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = l.local_addr().expect("local_addr").port();
        if used.insert(port) {
            return port;
        }
    }
}

/// Starts `perf-exporter <args>` on a free loopback port and waits until
/// it is ready.
pub(crate) fn exporter(args: &[&str]) -> Proc {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    Proc::start(
        "perf-exporter",
        Path::new(EXPORTER),
        &args,
        "--web.listen-address",
    )
}

/// Starts `perf-exporter --simulate --path.sysfs <fixture>`.
pub(crate) fn simulated_exporter(fixture_name: &str) -> Proc {
    let f = fixture(fixture_name);
    let mut args = vec![
        "--simulate".to_string(),
        "--path.sysfs".into(),
        f.to_str().expect("utf-8 path").into(),
    ];
    args.extend(fixture_procfs_args(fixture_name));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    exporter(&args)
}

/// Starts `perf-exporter --simulate --path.sysfs <fixture>` with `extra`
/// arguments after the fixture's.
pub(crate) fn simulated_exporter_with(fixture_name: &str, extra: &[String]) -> Proc {
    let mut args = vec![
        "--simulate".to_string(),
        "--path.sysfs".into(),
        fixture(fixture_name).to_str().expect("utf-8 path").into(),
    ];
    args.extend(fixture_procfs_args(fixture_name));
    args.extend(extra.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    exporter(&args)
}

/// Writes the embedded default config with every set at `per: cpu` (one
/// series per CPU, as before issue 29) to `dir/per-cpu.yaml` and returns
/// the `--config.file` arguments naming it.
pub(crate) fn per_cpu_default_config(dir: &Path) -> Vec<String> {
    let text =
        std::fs::read_to_string(repo_root().join("config/default.yaml")).expect("default config");
    let mut out = String::new();
    for l in text.lines() {
        out.push_str(if l.starts_with("    per: ") {
            "    per: cpu"
        } else {
            l
        });
        out.push('\n');
    }
    assert!(out.contains("    per: cpu\n") && !out.contains("    per: socket"));
    let config = dir.join("per-cpu.yaml");
    std::fs::write(&config, out).expect("write config");
    vec![
        "--config.file".into(),
        config.to_str().expect("utf-8 path").into(),
    ]
}

/// `tests/fixtures/procfs/<name>`: the fixture's procfs (`cpuinfo`), which
/// may not exist (see [`fixture_procfs_args`]).
pub(crate) fn fixture_procfs(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures/procfs").join(name)
}

/// The procfs arguments of a run on a fixture: `--path.procfs
/// tests/fixtures/procfs/<name>` (its `cpuinfo` gives the CPU identities
/// `requires_cpu` matches; a tree without one, like the Arm tree whose
/// identity is in sysfs, gets a path that does not exist) and, as that
/// procfs has no `self/mountinfo`, `--path.tracefs` of this host's tracefs
/// as the exporter finds it without flags, so tracepoints resolve as they
/// did before.
pub(crate) fn fixture_procfs_args(name: &str) -> Vec<String> {
    let procfs = fixture_procfs(name);
    let mut args = vec![
        "--path.procfs".to_string(),
        procfs.to_str().expect("utf-8 path").into(),
    ];
    let host = perf_exporter::pmu::host::find_tracefs(
        std::path::Path::new("/sys"),
        std::path::Path::new("/proc"),
    );
    if let Some(t) = host.path {
        args.push("--path.tracefs".into());
        args.push(t.to_str().expect("utf-8 path").into());
    }
    args
}

/// An HTTP response.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    /// Status code.
    pub status: u16,
    /// Header names (lower case) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked, and decompressed when `Content-Encoding:
    /// gzip`).
    pub body: String,
    /// The body's length as sent (de-chunked, still compressed).
    pub wire_len: usize,
}

impl Response {
    /// The first header of that name (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// GET `http://addr/path`; panics when the request fails.
pub(crate) fn get(addr: &str, path: &str) -> Response {
    http("GET", addr, path, &[], "")
}

/// One HTTP/1.1 request (`Connection: close`); panics when it fails.
pub(crate) fn http(
    method: &str,
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    try_request(method, addr, path, headers, body)
        .unwrap_or_else(|e| panic!("{method} http://{addr}{path}: {e}"))
}

/// One HTTP/1.1 request over a fresh connection (`Connection: close`).
pub(crate) fn try_request(
    method: &str,
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Response, String> {
    let s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    request_on(s, method, path, headers, body)
}

/// A connection to `addr` from the local address `source` (another
/// loopback address such as 127.0.0.2 is another client to the server:
/// Linux routes all of 127.0.0.0/8 to `lo`), for [`request_on`].
pub(crate) fn connect_from(source: std::net::IpAddr, addr: &str) -> Result<TcpStream, String> {
    let to: std::net::SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| e.to_string())?;
    let s = rt
        .block_on(async {
            let sock = match source {
                std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
            };
            sock.bind((source, 0).into())?;
            sock.connect(to).await?.into_std()
        })
        .map_err(|e| format!("connect from {source}: {e}"))?;
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    Ok(s)
}

/// One request (`Connection: close`) on the connection `s`, and the
/// whole response.
pub(crate) fn request_on(
    mut s: TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Response, String> {
    let addr = s.peer_addr().map_err(|e| e.to_string())?;
    let t = Some(Duration::from_secs(10));
    s.set_read_timeout(t).map_err(|e| e.to_string())?;
    s.set_write_timeout(t).map_err(|e| e.to_string())?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" || method == "PUT" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    parse_response(&raw)
}

/// Parses a raw HTTP/1.1 response (headers, then a body, de-chunked).
pub(crate) fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no end of headers in {:?}", String::from_utf8_lossy(raw)))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|e| format!("headers: {e}"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        body = dechunk(&body)?;
    }
    let wire_len = body.len();
    let gzip = headers
        .iter()
        .any(|(k, v)| k == "content-encoding" && v.eq_ignore_ascii_case("gzip"));
    if gzip {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut plain)
            .map_err(|e| format!("gzip body: {e}"))?;
        body = plain;
    }
    let body = String::from_utf8(body).map_err(|e| format!("body is not UTF-8: {e}"))?;
    Ok(Response {
        status,
        headers,
        body,
        wire_len,
    })
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let nl = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let size_str = std::str::from_utf8(&b[..nl]).map_err(|e| e.to_string())?;
        let size_str = size_str.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_str, 16)
            .map_err(|e| format!("chunk size {size_str:?}: {e}"))?;
        b = &b[nl + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("truncated chunk".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// Runs `perf-exporter --log.level=warn args` to its end; returns (exit
/// success, stdout, stderr).
pub(crate) fn run_exporter(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(EXPORTER)
        .arg("--log.level=warn")
        .args(args)
        .output()
        .expect("run perf-exporter");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `program args` with `stdin` as its input; returns (exit success,
/// stdout, stderr).
pub(crate) fn run_with_stdin(program: &Path, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_string();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(data.as_bytes());
    });
    let out = child.wait_with_output().expect("wait");
    let _ = writer.join();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// cpu1's hotplug switch.
pub(crate) const CPU1_ONLINE: &str = "/sys/devices/system/cpu/cpu1/online";

/// Takes cpu1 offline (`false`) or brings it back (`true`).
pub(crate) fn set_cpu1(on: bool) -> std::io::Result<()> {
    std::fs::write(CPU1_ONLINE, if on { "1" } else { "0" })
}

/// The environment variable that opts out of the tests that take cpu1
/// offline (`PERF_EXPORTER_TEST_NO_HOTPLUG=1`; CI does not set it).
pub(crate) const NO_HOTPLUG_ENV: &str = "PERF_EXPORTER_TEST_NO_HOTPLUG";

/// The marker that starts the notice of a hotplug test that did not run
/// (scripts/test.sh counts these lines as skipped tests).
pub(crate) const NO_HOTPLUG_NOTICE: &str = "HOTPLUG TEST NOT RUN";

/// Whether the hotplug tests are opted out of: `NO_HOTPLUG_ENV` set to
/// anything but empty or `0`.
pub(crate) fn hotplug_opted_out_by(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.trim().is_empty() && v.trim() != "0")
}

/// Call first in a test that takes cpu1 offline: returns true (and the test
/// must return at once, without touching any CPU) when
/// `PERF_EXPORTER_TEST_NO_HOTPLUG` is set. It says so loudly, on the real
/// stderr: the test harness captures only `eprintln!`, so a plain message
/// would vanish with a passing test.
#[must_use = "return from the test when this is true"]
pub(crate) fn hotplug_opted_out(test: &str) -> bool {
    let value = std::env::var(NO_HOTPLUG_ENV).ok();
    if !hotplug_opted_out_by(value.as_deref()) {
        return false;
    }
    let notice = format!(
        "\n{NO_HOTPLUG_NOTICE}: {test}: {NO_HOTPLUG_ENV}={} is set, so this test did not \
         take cpu1 offline and tested nothing about CPU hotplug (it passes as a skip; CI \
         runs it)\n",
        value.unwrap_or_default()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), notice.as_bytes());
    true
}

/// Brings cpu1 back online when dropped, whatever happened.
pub(crate) struct Cpu1Guard;

impl Drop for Cpu1Guard {
    fn drop(&mut self) {
        // The kernel may refuse while a hotplug is in progress: retry
        // until a deadline (a guard never panics).
        let every = Duration::from_millis(50);
        if poll(Duration::from_secs(5), every, || set_cpu1(true).ok()).is_some() {
            return;
        }
        eprintln!("could not bring cpu1 back online: write 1 to {CPU1_ONLINE}");
    }
}

/// Percent-encodes a query-string value (RFC 3986 unreserved kept).
pub(crate) fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `kernel.perf_event_paranoid`.
pub(crate) fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .expect("read /proc/sys/kernel/perf_event_paranoid")
        .trim()
        .parse()
        .expect("a number")
}

/// Panics unless this test runs as root (it switches users, hotplugs).
pub(crate) fn require_root() {
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
pub(crate) fn require_tool(tool: &str) {
    let ok = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "this test needs `{tool}` (util-linux/libcap) on PATH");
}

/// `serve --simulate` on the PMU-less fixture with the Kubernetes cgroup
/// tree of `tests/fixtures/cgroup/kubernetes-systemd`, pods and
/// containers counted.
pub(crate) fn kubernetes_exporter() -> (Proc, tempfile::TempDir) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("k8s.yaml");
    let config = concat!(
        crate::software_set!(),
        "cgroups:\n  preset: kubernetes\n  containers: true\n  sets: [software]\n"
    );
    std::fs::write(&cfg, config).unwrap();
    let args = [
        "--simulate".to_string(),
        "--path.sysfs".into(),
        root.join("sysfs/vm-no-pmu").display().to_string(),
        "--path.cgroupfs".into(),
        root.join("cgroup/kubernetes-systemd").display().to_string(),
        "--config.file".into(),
        cfg.display().to_string(),
    ];
    let mut p = exporter(&args.iter().map(String::as_str).collect::<Vec<_>>());
    p.wait_log("per-workload counting", std::time::Duration::from_secs(10));
    (p, dir)
}

/// A connection to `addr` whose `GET /-/healthy` is not answered within
/// half a second: over `--web.max-connections` it waits in the kernel's
/// accept queue. Panics, saying `why`, when it is served.
pub(crate) fn unserved_request(addr: &str, why: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect (the kernel accepts it)");
    s.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("write");
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let mut buf = [0u8; 512];
    assert!(s.read(&mut buf).is_err(), "{why}");
    s
}

/// Asserts that the request of [`unserved_request`] is answered 200
/// within `limit` (once a connection slot is free).
pub(crate) fn served_within(s: &mut TcpStream, limit: Duration) {
    s.set_read_timeout(Some(limit)).expect("timeout");
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).expect("served once a slot is free");
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
}
