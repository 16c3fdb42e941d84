//! What the process-level benchmarks share: starting a server on a free
//! loopback port, a keep-alive HTTP/1.1 client, per-process CPU time and
//! memory from `/proc`, syscall classification of `strace` output, and
//! small statistics.
#![allow(dead_code)]

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A benchmark error: what failed, for the exit message.
pub(crate) type Error = Box<dyn std::error::Error>;

/// Formats an error.
pub(crate) fn err(msg: impl Into<String>) -> Error {
    msg.into().into()
}

/// A port nobody listens on right now.
pub(crate) fn free_port() -> Result<u16, Error> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A server process, killed on drop; its output goes to a log file.
pub(crate) struct Server {
    /// What it is (for messages).
    pub name: String,
    /// The child.
    pub child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its stdout+stderr.
    pub log: PathBuf,
}

impl Server {
    /// Starts `bin args...` (the args may contain `{port}`) and waits until
    /// `GET path` answers 200.
    pub(crate) fn start(
        name: &str,
        bin: &Path,
        args: &[String],
        path: &str,
    ) -> Result<Self, Error> {
        let port = free_port()?;
        let log = std::env::temp_dir().join(format!(
            "perf-exporter-bench-{}-{}.log",
            name.replace(' ', "_"),
            std::process::id()
        ));
        let out = File::create(&log)?;
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{port}", &port.to_string()))
            .collect();
        let child = Command::new(bin)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .map_err(|e| err(format!("cannot start {name} ({}): {e}", bin.display())))?;
        let mut s = Server {
            name: name.into(),
            child,
            port,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = s.child.try_wait()? {
                return Err(err(format!(
                    "{name} exited ({st}) before answering:\n{}",
                    s.log_tail()
                )));
            }
            if let Ok(mut c) = HttpConn::connect(port) {
                if c.get(path).is_ok_and(|r| r.status == 200) {
                    return Ok(s);
                }
            }
            if Instant::now() > deadline {
                return Err(err(format!(
                    "{name} did not answer GET {path} within 20 s:\n{}",
                    s.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines of its log.
    pub(crate) fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response {
    /// HTTP status.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

/// One keep-alive HTTP/1.1 connection (as Prometheus keeps one per
/// target).
pub(crate) struct HttpConn {
    port: u16,
    reader: BufReader<TcpStream>,
    /// Extra request header lines, each ending in CRLF.
    headers: String,
}

impl HttpConn {
    /// Connects to 127.0.0.1:`port`.
    pub(crate) fn connect(port: u16) -> std::io::Result<Self> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(HttpConn {
            port,
            reader: BufReader::with_capacity(256 * 1024, s),
            headers: String::new(),
        })
    }

    /// Every request asks for gzip (`Accept-Encoding: gzip`, as
    /// Prometheus does); bodies are returned as sent.
    #[allow(dead_code)] // not every benchmark asks
    pub(crate) fn accept_gzip(mut self) -> Self {
        self.headers.push_str("Accept-Encoding: gzip\r\n");
        self
    }

    /// `GET path`, reading the whole body (Content-Length or chunked).
    pub(crate) fn get(&mut self, path: &str) -> std::io::Result<Response> {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/plain;version=0.0.4\r\n{}Connection: keep-alive\r\n\r\n",
            self.port, self.headers
        );
        self.reader.get_mut().write_all(req.as_bytes())?;
        let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("bad status line"))?;
        let mut len = None;
        let mut chunked = false;
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(bad("connection closed in headers"));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                if k == "content-length" {
                    len = v.parse::<usize>().ok();
                } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                }
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line)?;
                let n = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| bad("bad chunk size"))?;
                if n == 0 {
                    line.clear();
                    self.reader.read_line(&mut line)?;
                    break;
                }
                let start = body.len();
                body.resize(start + n, 0);
                self.reader.read_exact(&mut body[start..])?;
                line.clear();
                self.reader.read_line(&mut line)?;
            }
        } else {
            let n = len.ok_or_else(|| bad("no Content-Length"))?;
            body.resize(n, 0);
            self.reader.read_exact(&mut body)?;
        }
        Ok(Response { status, body })
    }
}

/// user+sys CPU time of a whole process (every thread, dead ones too), in
/// seconds, from `/proc/<pid>/stat` (clock-tick resolution).
pub(crate) fn stat_cpu_seconds(pid: u32) -> Result<f64, Error> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command name; utime and stime are
    // fields 14 and 15 of the line.
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Ok((ticks(11) + ticks(12)) as f64 / clk_tck() as f64)
}

fn clk_tck() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

/// CPU time of a process's live threads in seconds, from
/// `/proc/<pid>/task/*/schedstat` (nanosecond resolution, updated at each
/// context switch and tick).
pub(crate) fn schedstat_cpu_seconds(pid: u32) -> Result<f64, Error> {
    let mut ns = 0u64;
    for e in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let p = e?.path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(p) {
            ns += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(ns as f64 * 1e-9)
}

/// A `/proc/<pid>/status` field in KiB (`VmHWM`: peak RSS, `VmRSS`).
pub(crate) fn status_kib(pid: u32, field: &str) -> Result<u64, Error> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| err(format!("no {field} in /proc/{pid}/status")))
}

/// The `q` quantile (0..=1) of `xs`, nearest rank.
pub(crate) fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Where a traced syscall belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum SyscallClass {
    /// `read` of a perf event fd.
    PerfRead,
    /// Other syscalls on perf event fds (ioctl, ...).
    PerfOther,
    /// Send, receive, accept, close... on sockets.
    Socket,
    /// `epoll_*`, and eventfd/pipe wake-ups of the event loop.
    EventLoop,
    /// Opening or reading files (`/sys`, `/proc`, ...).
    File,
    /// Everything else (futex, memory, scheduling, signals, clocks...).
    Other,
}

impl SyscallClass {
    /// Every class, in report order.
    pub(crate) const ALL: [SyscallClass; 6] = [
        SyscallClass::PerfRead,
        SyscallClass::PerfOther,
        SyscallClass::Socket,
        SyscallClass::EventLoop,
        SyscallClass::File,
        SyscallClass::Other,
    ];

    /// A short name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SyscallClass::PerfRead => "perf read",
            SyscallClass::PerfOther => "perf other",
            SyscallClass::Socket => "socket I/O",
            SyscallClass::EventLoop => "event loop",
            SyscallClass::File => "files",
            SyscallClass::Other => "other",
        }
    }
}

/// One syscall from `strace -f -ttt -y` output: its time, name and class;
/// `None` for lines that are not a syscall's start (resumptions, signals,
/// exits).
pub(crate) fn parse_strace_line(line: &str) -> Option<(f64, String, SyscallClass)> {
    // With -f -o FILE every line starts with the thread id, padded to
    // five columns (`1355  1700000000.5 read(...`).
    let (first, rest) = line.trim_start().split_once(' ')?;
    let (ts, rest) = if first.bytes().all(|b| b.is_ascii_digit()) {
        rest.trim_start().split_once(' ')?
    } else {
        (first, rest)
    };
    let ts: f64 = ts.parse().ok()?;
    if rest.starts_with("<...") || rest.starts_with("---") || rest.starts_with("+++") {
        return None;
    }
    let open = rest.find('(')?;
    let name = rest[..open].to_string();
    let args = &rest[open + 1..];
    let first_arg = args.split([',', ')']).next().unwrap_or("");
    let class = if first_arg.contains("perf_event") {
        if name == "read" || name == "readv" || name == "pread64" {
            SyscallClass::PerfRead
        } else {
            SyscallClass::PerfOther
        }
    } else if name.starts_with("epoll")
        || first_arg.contains("eventfd")
        || first_arg.contains("eventpoll")
        || first_arg.contains("pipe:")
    {
        SyscallClass::EventLoop
    } else if first_arg.contains("socket:")
        || first_arg.contains("TCP")
        || first_arg.contains("UDP")
        || first_arg.contains("UNIX")
        || name == "accept4"
        || name == "accept"
    {
        SyscallClass::Socket
    } else if name == "openat"
        || name == "open"
        || name == "statx"
        || name == "newfstatat"
        || name == "getdents64"
        || ((name == "read" || name == "pread64" || name == "close" || name == "fstat")
            && first_arg.contains("</"))
    {
        SyscallClass::File
    } else {
        SyscallClass::Other
    };
    Some((ts, name, class))
}

/// Wall-clock seconds since the epoch (strace's `-ttt` clock).
pub(crate) fn epoch_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Whether every thread of `pid` is being traced.
pub(crate) fn all_threads_traced(pid: u32) -> bool {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for e in rd.flatten() {
        any = true;
        let traced = std::fs::read_to_string(e.path().join("status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("TracerPid:"))
                    .map(|v| v.trim() != "0")
            })
            .unwrap_or(false);
        if !traced {
            return false;
        }
    }
    any
}

/// Syscalls of `pid` while `work` runs: strace is attached to every thread
/// first, only syscalls that start inside the window of `work` are kept.
/// Returns `(name, class)` of each.
pub(crate) fn trace_syscalls(
    strace: &Path,
    pid: u32,
    work: &mut dyn FnMut() -> Result<(), Error>,
) -> Result<Vec<(String, SyscallClass)>, Error> {
    let out = std::env::temp_dir().join(format!("perf-exporter-bench-strace-{pid}.txt"));
    let mut tracer = Command::new(strace)
        .args(["-f", "-qq", "-ttt", "-y", "-s", "0", "-o"])
        .arg(&out)
        .args(["-p", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| err(format!("cannot run {}: {e}", strace.display())))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all_threads_traced(pid) {
        if let Some(st) = tracer.try_wait()? {
            let mut msg = String::new();
            if let Some(mut e) = tracer.stderr.take() {
                let _ = e.read_to_string(&mut msg);
            }
            return Err(err(format!("strace exited ({st}): {msg}")));
        }
        if Instant::now() > deadline {
            let _ = tracer.kill();
            return Err(err("strace did not attach to every thread within 10 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let t0 = epoch_now();
    let r = work();
    let t1 = epoch_now();
    std::thread::sleep(Duration::from_millis(200));
    // SIGINT makes strace detach cleanly and flush.
    let _ = Command::new("kill")
        .args(["-INT", &tracer.id().to_string()])
        .status();
    let _ = tracer.wait();
    r?;
    let f = File::open(&out)?;
    let mut calls = Vec::new();
    let mut lines = 0usize;
    for line in BufReader::new(f).lines() {
        let line = line?;
        lines += 1;
        if let Some((ts, name, class)) = parse_strace_line(&line) {
            if ts >= t0 && ts <= t1 {
                calls.push((name, class));
            }
        }
    }
    if calls.is_empty() {
        return Err(err(format!(
            "strace recorded no syscall of pid {pid} while it was scraped ({lines} lines in {}); is the output format new?",
            out.display()
        )));
    }
    let _ = std::fs::remove_file(&out);
    Ok(calls)
}

/// Reads an argument value: `--name value`.
pub(crate) fn arg_value(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Today's date and the machine, for the report header.
pub(crate) fn machine() -> String {
    let sh = |c: &str| {
        Command::new("sh")
            .args(["-c", c])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    format!(
        "{} | {} | {} CPUs | kernel {}",
        sh("date -u '+%Y-%m-%d %H:%M UTC'"),
        sh("lscpu | sed -n 's/^Model name: *//p' | head -1"),
        sh("nproc"),
        sh("uname -r"),
    )
}
