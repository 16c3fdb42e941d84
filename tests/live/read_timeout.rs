//! `--config.read-timeout` on the real binary, with a read that really
//! blocks: the config file lives on a FUSE mount (fuse-overlayfs) whose
//! daemon the test stops with SIGSTOP. The file stays a regular file
//! (`stat` is answered from the kernel's cache), so `O_NONBLOCK` does
//! nothing, and its `open` waits in the kernel for a daemon that does not
//! answer, as on a hung NFS or FUSE mount (issue 11, item 5).

use crate::common;

use common::{parse_exposition, scalar, Proc};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ONE_SET: &str = crate::config!("cpu_clock");

/// `--config.read-timeout` in these tests: long enough that the reads
/// that do not hang (sysfs, the fixture tree, a FUSE mount that answers)
/// end within it on a loaded machine (1 s was not: CI at load 12).
const TIMEOUT: &str = "3s";

/// A FUSE mount of a directory holding `perf.yaml`; reads of it hang
/// while [`HungMount::hang`] is in force. On drop (also on a panic) the
/// daemon is resumed first, then the mount is undone.
struct HungMount {
    dir: tempfile::TempDir,
    daemon: Child,
}

impl HungMount {
    fn new(config: &str) -> HungMount {
        common::require_root();
        common::require_tool("fuse-overlayfs");
        common::require_tool("fusermount");
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["lower", "upper", "work", "mnt"] {
            std::fs::create_dir(dir.path().join(d)).expect("mkdir");
        }
        std::fs::write(dir.path().join("lower/perf.yaml"), config).expect("write");
        let p = |d: &str| dir.path().join(d).display().to_string();
        let daemon = Command::new("fuse-overlayfs")
            .arg("-f")
            .arg("-o")
            .arg(format!(
                "lowerdir={},upperdir={},workdir={}",
                p("lower"),
                p("upper"),
                p("work")
            ))
            .arg(p("mnt"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run fuse-overlayfs");
        let m = HungMount { dir, daemon };
        common::wait_for("fuse-overlayfs to mount", Duration::from_secs(10), || {
            std::fs::read_to_string(m.config()).ok().as_deref() == Some(config)
        });
        m
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("mnt/perf.yaml")
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.daemon.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{sig} fuse-overlayfs");
    }

    /// Stops the daemon: every open of a file on the mount now blocks.
    fn hang(&self) {
        self.signal("STOP");
    }

    fn resume(&self) {
        self.signal("CONT");
    }
}

impl Drop for HungMount {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-CONT")
            .arg(self.daemon.id().to_string())
            .status();
        let _ = Command::new("fusermount")
            .arg("-u")
            .arg(self.dir.path().join("mnt"))
            .status();
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// The exporter on the simulated vm-no-pmu host with a [`TIMEOUT`] read
/// timeout.
fn exporter(extra: &[&str]) -> Proc {
    let f = common::fixture("vm-no-pmu").display().to_string();
    let mut args = vec![
        "--simulate",
        "--path.sysfs",
        &f,
        "--config.read-timeout",
        TIMEOUT,
    ];
    args.extend_from_slice(extra);
    Proc::exporter(&args)
}

/// `p` ends with status 1 (not hanging), saying `named`.
fn fails_at_start(mut p: Proc, named: &str) {
    let status = p
        .wait_exit(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("start-up hung:\n{}", p.output()));
    assert_eq!(status.code(), Some(1), "{}", p.output());
    assert!(p.output().contains(named), "{}", p.output());
}

fn reload_ok(p: &Proc) -> Option<f64> {
    let r = p.get("/metrics");
    assert_eq!(r.status, 200, "{}", r.body);
    let s = parse_exposition(&r.body).unwrap_or_else(|e| panic!("{e}\n{}", r.body));
    scalar(&s, "perf_config_last_reload_successful")
}

#[test]
fn a_reload_whose_config_read_hangs_fails_in_time_and_the_next_goes_ahead() {
    // Live counting: not beside the other live tests (tests/live/main.rs).
    let _serial = common::serial();
    let m = HungMount::new(ONE_SET);
    let cfg = m.config();
    let c = cfg.display().to_string();
    let mut p = exporter(&["--config.file", &c, "--web.enable-lifecycle"]);
    p.wait_ready();
    assert_eq!(reload_ok(&p), Some(1.0));
    m.hang();
    let named = format!(
        "reading {0} (the config file {0}) did not return within {TIMEOUT} (--config.read-timeout)",
        cfg.display()
    );
    // Twice: the second reload is not held up by the first's stuck read.
    for _ in 0..2 {
        let t0 = Instant::now();
        let r = p.request("POST", "/-/reload", &[], "");
        let took = t0.elapsed();
        assert_eq!(r.status, 500, "{}", r.body);
        assert!(r.body.contains(&named), "{}", r.body);
        // Not a timing claim: proof that it returned (it never did).
        assert!(took < Duration::from_secs(20), "took {took:?}");
        assert_eq!(reload_ok(&p), Some(0.0));
    }
    p.wait_log(&named, Duration::from_secs(15));
    assert!(
        p.output()
            .lines()
            .any(|l| l.contains(" level=error ") && l.contains(&named)),
        "{}",
        p.output()
    );
    // The mount answers again: the next reload succeeds.
    m.resume();
    // The stuck reads return now; their results are dropped.
    p.wait_log(
        "a read given up on (--config.read-timeout) has returned",
        Duration::from_secs(15),
    );
    let r = p.request("POST", "/-/reload", &[], "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(reload_ok(&p), Some(1.0));
    // SIGTERM ends it while a read is stuck again.
    m.hang();
    assert_eq!(p.request("POST", "/-/reload", &[], "").status, 500);
    p.signal("TERM");
    let status = p
        .wait_exit(Duration::from_secs(5))
        .expect("SIGTERM ends it");
    assert!(status.success(), "{status}\n{}", p.output());
}

#[test]
fn a_start_up_whose_config_read_hangs_fails_naming_the_file() {
    // Live counting: not beside the other live tests (tests/live/main.rs).
    let _serial = common::serial();
    let m = HungMount::new(ONE_SET);
    let cfg = m.config().display().to_string();
    m.hang();
    let p = exporter(&["--config.file", &cfg]);
    let named = format!("reading {cfg} (the config file {cfg}) did not return within {TIMEOUT}");
    fails_at_start(p, &named);
}

#[test]
fn a_start_up_whose_otlp_certificate_read_hangs_fails_naming_the_flag() {
    // Live counting: not beside the other live tests (tests/live/main.rs).
    let _serial = common::serial();
    let m = HungMount::new("not a certificate");
    let ca = m.config().display().to_string();
    m.hang();
    let otlp = ["--otlp.endpoint", "https://127.0.0.1:9"];
    let p = exporter(&[otlp[0], otlp[1], "--otlp.certificate", &ca]);
    fails_at_start(
        p,
        &format!("reading the OTLP TLS files (--otlp.certificate, --otlp.client-certificate, --otlp.client-key) did not return within {TIMEOUT}"),
    );
}
