//! A child process under test, built by [`Proc::builder`]: its output in
//! a log file, its own temporary directory, signals, plain HTTP requests
//! and scrapes, killed and reaped on drop; a keep-alive client; files
//! other users may run or read.

use super::{
    free_port, parse_exposition, parse_response, try_request, Response, EXPORTER, READY_TIMEOUT,
};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A started process with its output in a log file. Killed on drop.
#[derive(Debug)]
pub(crate) struct Proc {
    /// What it is, for messages.
    pub name: String,
    /// `127.0.0.1:PORT` it was told to listen on (empty when it was given
    /// no listen flag).
    pub addr: String,
    child: Child,
    log: PathBuf,
    exited: Option<ExitStatus>,
    /// Its temporary directory (the log lives there; with
    /// [`Builder::in_own_dir`], its working directory).
    pub dir: tempfile::TempDir,
}

/// How to start a [`Proc`]: `Proc::builder(program).args(..).spawn()`.
/// Every child runs without the test's own `OTEL_*` and `K8S_NODE_NAME`
/// variables (they would change what the exporter pushes), with `env`
/// added.
#[derive(Debug, Clone)]
pub(crate) struct Builder {
    name: Option<String>,
    program: PathBuf,
    wrapper: Vec<OsString>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    listen: Option<String>,
    own_dir: bool,
}

impl Builder {
    /// Its name in messages (default: the wrapper and the program).
    pub(crate) fn name(mut self, name: &str) -> Builder {
        self.name = Some(name.to_string());
        self
    }

    /// Runs it under `wrapper` (e.g. `setpriv ... --`, `prlimit ... --`).
    pub(crate) fn wrapper<S: AsRef<OsStr>>(
        mut self,
        wrapper: impl IntoIterator<Item = S>,
    ) -> Builder {
        self.wrapper
            .extend(wrapper.into_iter().map(|s| s.as_ref().to_owned()));
        self
    }

    /// Adds arguments.
    pub(crate) fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Builder {
        self.args
            .extend(args.into_iter().map(|s| s.as_ref().to_owned()));
        self
    }

    /// Adds an environment variable.
    pub(crate) fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Builder {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Appends `<flag>=127.0.0.1:PORT` on a free port ([`Proc::addr`]).
    pub(crate) fn listen(mut self, flag: &str) -> Builder {
        self.listen = Some(flag.to_string());
        self
    }

    /// Runs it in its temporary directory (relative paths it writes go
    /// away with it).
    pub(crate) fn in_own_dir(mut self) -> Builder {
        self.own_dir = true;
        self
    }

    /// Starts it; waits for nothing.
    pub(crate) fn spawn(&self) -> Proc {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("output.log");
        let out = File::create(&log).expect("log file");
        let err = out.try_clone().expect("clone log");
        let mut cmd = match self.wrapper.split_first() {
            Some((w, rest)) => {
                let mut c = Command::new(w);
                c.args(rest).arg(&self.program);
                c
            }
            None => Command::new(&self.program),
        };
        cmd.args(&self.args);
        let addr = match &self.listen {
            Some(flag) => {
                let addr = format!("127.0.0.1:{}", free_port());
                cmd.arg(format!("{flag}={addr}"));
                addr
            }
            None => String::new(),
        };
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("OTEL_") || k == "K8S_NODE_NAME" {
                cmd.env_remove(k);
            }
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if self.own_dir {
            cmd.current_dir(dir.path());
        }
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = cmd.spawn().unwrap_or_else(|e| {
            panic!(
                "cannot run {:?} {}: {e}",
                self.wrapper,
                self.program.display()
            )
        });
        let name = self.name.clone().unwrap_or_else(|| {
            let mut n: Vec<String> = self
                .wrapper
                .iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect();
            n.push(self.program.display().to_string());
            n.join(" ")
        });
        Proc {
            name,
            addr,
            child,
            log,
            exited: None,
            dir,
        }
    }

    /// Starts it on a free port ([`Builder::listen`], default
    /// `--web.listen-address`) and waits until `GET /-/ready` answers 200.
    /// Retries on another port when the chosen one was taken meanwhile;
    /// panics with the process's output when it dies or is not ready
    /// within [`READY_TIMEOUT`].
    pub(crate) fn start(mut self) -> Proc {
        if self.listen.is_none() {
            self.listen = Some("--web.listen-address".into());
        }
        let mut last = String::new();
        for _attempt in 0..5 {
            let mut s = self.spawn();
            // Some(true): ready; Some(false): exited on a port taken meanwhile.
            let ready = super::poll(READY_TIMEOUT, Duration::from_millis(50), || {
                if let Some(status) = s.exited() {
                    last = s.output();
                    if last.to_ascii_lowercase().contains("address already in use") {
                        return Some(false); // another port
                    }
                    panic!(
                        "{} ({} {:?}) exited with {status} before it was ready; its output:\n{last}",
                        s.name,
                        self.program.display(),
                        self.args
                    );
                }
                try_request("GET", &s.addr, "/-/ready", &[], "")
                    .is_ok_and(|r| r.status == 200)
                    .then_some(true)
            });
            match ready {
                Some(true) => return s,
                Some(false) => continue,
                None => panic!(
                    "{} ({} {:?}) did not answer 200 on http://{}/-/ready within {READY_TIMEOUT:?}; its output:\n{}",
                    s.name,
                    self.program.display(),
                    self.args,
                    s.addr,
                    s.output()
                ),
            }
        }
        panic!(
            "{}: no free port after 5 attempts; last output:\n{last}",
            self.program.display()
        );
    }
}

impl Proc {
    /// How to start `program`.
    pub(crate) fn builder(program: impl AsRef<Path>) -> Builder {
        Builder {
            name: None,
            program: program.as_ref().to_owned(),
            wrapper: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            listen: None,
            own_dir: false,
        }
    }

    /// Runs `wrapper.. program args.. --web.listen-address=127.0.0.1:PORT`
    /// (`wrapper` is e.g. `setpriv ... --` or `prlimit ... --`, or empty);
    /// waits for nothing.
    pub(crate) fn spawn(wrapper: &[&str], program: &Path, args: &[&str]) -> Proc {
        Proc::builder(program)
            .wrapper(wrapper)
            .args(args)
            .listen("--web.listen-address")
            .spawn()
    }

    /// `perf-exporter args..` directly; waits for nothing.
    pub(crate) fn exporter(args: &[&str]) -> Proc {
        Proc::spawn(&[], Path::new(EXPORTER), args)
    }

    /// Everything it wrote so far.
    pub(crate) fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (and how).
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().expect("try_wait");
        }
        self.exited
    }

    /// Waits until its output contains `needle`; panics with the output
    /// when it exits first or `timeout` passes.
    pub(crate) fn wait_log(&mut self, needle: &str, timeout: Duration) {
        let logged = super::poll(timeout, Duration::from_millis(20), || {
            if self.output().contains(needle) {
                return Some(());
            }
            if let Some(s) = self.exited() {
                panic!(
                    "{} exited ({s}) before logging {needle:?}; its output:\n{}",
                    self.name,
                    self.output()
                );
            }
            None
        });
        assert!(
            logged.is_some(),
            "{} did not log {needle:?} within {timeout:?}; its output:\n{}",
            self.name,
            self.output()
        );
    }

    /// Waits until the plain-HTTP `/-/ready` answers 200.
    pub(crate) fn wait_ready(&mut self) {
        self.wait_log("counters open", Duration::from_secs(15));
        let ready = super::poll(Duration::from_secs(10), Duration::from_millis(20), || {
            if try_request("GET", &self.addr, "/-/ready", &[], "").is_ok_and(|r| r.status == 200) {
                return Some(());
            }
            if let Some(s) = self.exited() {
                panic!("{} exited ({s}); its output:\n{}", self.name, self.output());
            }
            None
        });
        assert!(
            ready.is_some(),
            "{} not ready; its output:\n{}",
            self.name,
            self.output()
        );
    }

    /// Waits for the exit, up to `timeout`.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        super::poll(timeout, Duration::from_millis(5), || self.exited())
    }

    /// Sends SIGTERM and waits up to `limit` for the exit: the status and
    /// how long it took; panics (with the output) when it is still running.
    pub(crate) fn terminate(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let t0 = Instant::now();
        self.signal("TERM");
        match self.wait_exit(limit) {
            Some(st) => (st, t0.elapsed()),
            None => panic!(
                "{} did not exit within {limit:?} of SIGTERM; its output:\n{}",
                self.name,
                self.output()
            ),
        }
    }

    /// Kills it (SIGKILL) and reaps it.
    pub(crate) fn kill(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            self.exited = self.child.wait().ok();
        }
    }

    /// Sends a signal by name (`HUP`, `TERM`) with kill(1).
    pub(crate) fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{sig} {} failed", self.pid());
    }

    /// A plain-HTTP request; panics (with the output) when it fails.
    pub(crate) fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Response {
        try_request(method, &self.addr, path, headers, body).unwrap_or_else(|e| {
            panic!(
                "{method} {path} on {} failed: {e}; its output:\n{}",
                self.name,
                self.output()
            )
        })
    }

    /// GET over plain HTTP.
    pub(crate) fn get(&self, path: &str) -> Response {
        self.request("GET", path, &[], "")
    }

    /// One scrape of `/metrics`, which must answer 200 with a valid
    /// exposition: every series and its value.
    pub(crate) fn scrape(&self) -> BTreeMap<String, f64> {
        let r = self.get("/metrics");
        assert_eq!(
            r.status,
            200,
            "{}\n{}'s output:\n{}",
            r.body,
            self.name,
            self.output()
        );
        parse_exposition(&r.body).unwrap_or_else(|e| panic!("invalid scrape: {e}\n{}", r.body))
    }

    /// Scrapes every 50 ms until `pred` holds: that scrape. Panics (with
    /// the last scrape and the output) after `limit`.
    pub(crate) fn scrape_until(
        &self,
        limit: Duration,
        what: &str,
        pred: impl Fn(&BTreeMap<String, f64>) -> bool,
    ) -> BTreeMap<String, f64> {
        let mut last = BTreeMap::new();
        super::poll(limit, Duration::from_millis(50), || {
            let s = self.scrape();
            if pred(&s) {
                return Some(s);
            }
            last = s;
            None
        })
        .unwrap_or_else(|| {
            panic!(
                "{what} did not happen within {limit:?}; last scrape: {last:?}\n{}'s output:\n{}",
                self.name,
                self.output()
            )
        })
    }

    /// `http://127.0.0.1:PORT<path>`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Panics (with the output) if the process has exited.
    pub(crate) fn assert_running(&mut self) {
        if let Some(status) = self.exited() {
            panic!(
                "{} exited with {status}; its output:\n{}",
                self.name,
                self.output()
            );
        }
    }

    /// Starts `program args.. <listen_flag>=127.0.0.1:PORT` on a free port
    /// and waits until `GET /-/ready` answers 200 ([`Builder::start`]).
    pub(crate) fn start(name: &str, program: &Path, args: &[OsString], listen_flag: &str) -> Proc {
        Proc::builder(program)
            .name(name)
            .args(args)
            .listen(listen_flag)
            .start()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A child whose output the test reads itself (a workload, a browser):
/// killed and reaped on drop.
#[derive(Debug)]
pub(crate) struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A persistent HTTP/1.1 connection (keep-alive), for load.
pub(crate) struct KeepAlive {
    addr: String,
    reader: BufReader<TcpStream>,
}

impl KeepAlive {
    /// Connects.
    pub(crate) fn connect(addr: &str) -> Result<KeepAlive, String> {
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
    pub(crate) fn closed_within(&mut self, limit: Duration) -> Result<Duration, String> {
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
    pub(crate) fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> Result<Response, String> {
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

/// A copy of the exporter binary any user may run (0755, in a 0755 temp
/// dir): the build tree under the repository may not be reachable for
/// uid 65534.
pub(crate) fn world_executable_exporter() -> (tempfile::TempDir, PathBuf) {
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
pub(crate) fn world_readable_file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod dir");
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod file");
    (dir, p)
}
