//! Hybrid cgroup hosts, live, as root: which hierarchy the counting takes
//! (issue 24, items 2 and 3).
//!
//! * `--path.cgroupfs` is checked with statfs: this machine's v1 `cpu`
//!   hierarchy and a plain directory are refused as `no_cgroup_hierarchy`
//!   with the value to give; the tmpfs `/sys/fs/cgroup` the hierarchies are
//!   mounted in resolves to the one perf can count on.
//! * The `perf_event` controller bound to a v1 hierarchy (mounted by the
//!   test, as a systemd hybrid host has it): the perf backend counts a v1
//!   cgroup there, cgroup2 is refused for it (its cgroups lose their
//!   `perf_event` state: ENOENT), the bpf backend keeps cgroup2. Binding
//!   `perf_event` is global to the machine: the guard unmounts and waits
//!   until `/proc/cgroups` shows it back on cgroup2, also when the test
//!   fails; the test crate's tests run one at a time ([`serial`]).

use crate::common;

use common::{eventually, serial};

use perf_exporter::cgroup::{
    find_root, mount::perf_event_hierarchy, Cgroup, CgroupError, Hierarchy, Kind as CgKind, Lookup,
    Purpose, Root, Selection,
};
use perf_exporter::config::Config;
use perf_exporter::engine::cgroup::{CgroupCounting, Discovery, PerfBackend};
use perf_exporter::perf::live::LiveKernel;
use perf_exporter::perf::Kernel;
use perf_exporter::pmu::PmuTable;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use common::cgroup::{burner, cgroup_value as value, CLOCKS_YAML as YAML};

/// This machine's cgroup2 mount (hybrid layout).
const UNIFIED: &str = "/sys/fs/cgroup/unified";

/// `perf_event`'s hierarchy id in `/proc/cgroups` (0: cgroup2).
fn perf_event_bound() -> u32 {
    let t = std::fs::read_to_string("/proc/cgroups").expect("/proc/cgroups");
    perf_event_hierarchy(&t).unwrap_or_else(|| panic!("no perf_event line in /proc/cgroups:\n{t}"))
}

/// The number of cgroups of `perf_event`'s hierarchy (`/proc/cgroups`'
/// third column): a removed cgroup counts until its last reference goes.
fn perf_event_cgroups() -> u32 {
    let t = std::fs::read_to_string("/proc/cgroups").expect("/proc/cgroups");
    t.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&"perf_event")).then(|| f.get(2)?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no perf_event line in /proc/cgroups:\n{t}"))
}

/// The `perf_event` controller bound to a v1 hierarchy mounted at `dir`;
/// on drop: the processes started in it killed, its cgroups removed,
/// unmounted, and `perf_event` back on cgroup2 (polled up to 20 s).
struct PerfEventV1 {
    dir: PathBuf,
    children: Vec<Child>,
    cgroups: Vec<PathBuf>,
}

impl PerfEventV1 {
    fn mount() -> PerfEventV1 {
        common::require_root();
        let before = perf_event_bound();
        assert_eq!(
            before, 0,
            "perf_event is already bound to cgroup v1 hierarchy {before}: this test binds it itself (unmount that hierarchy first)"
        );
        let dir = std::env::temp_dir().join(format!("pe-v1-perf_event-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let guard = PerfEventV1 {
            dir,
            children: Vec::new(),
            cgroups: Vec::new(),
        };
        let out = Command::new("mount")
            .args(["-t", "cgroup", "-o", "perf_event", "none"])
            .arg(&guard.dir)
            .output()
            .expect("run mount(8)");
        assert!(
            out.status.success(),
            "mount -t cgroup -o perf_event none {}: {}",
            guard.dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            eventually(Duration::from_secs(5), || perf_event_bound() != 0),
            "perf_event mounted at {} but /proc/cgroups still shows it on cgroup2",
            guard.dir.display()
        );
        guard
    }

    /// Creates the v1 cgroup `name` and starts a busy python loop in it.
    fn busy_cgroup(&mut self, name: &str) -> (PathBuf, u32) {
        let cg = self.dir.join(name);
        std::fs::create_dir(&cg).unwrap_or_else(|e| panic!("mkdir {}: {e}", cg.display()));
        self.cgroups.push(cg.clone());
        let c = common::cgroup::python_in(&cg, &burner(1.0));
        let pid = c.id();
        self.children.push(c);
        let procs = cg.join("cgroup.procs");
        assert!(
            eventually(Duration::from_secs(10), || std::fs::read_to_string(&procs)
                .is_ok_and(|t| t.lines().any(|l| l == pid.to_string()))),
            "process {pid} never joined {}",
            cg.display()
        );
        (cg, pid)
    }
}

impl Drop for PerfEventV1 {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for cg in self.cgroups.iter().rev() {
            common::cgroup::remove_tree(cg);
        }
        // A removed cgroup stays a child of the root until its last
        // reference goes; unmounting a root with children leaves the
        // hierarchy (and perf_event bound to it) alive.
        if !eventually(Duration::from_secs(20), || perf_event_cgroups() == 1) {
            eprintln!(
                "{} cgroups are left in the perf_event hierarchy 20 s after removing ours",
                perf_event_cgroups()
            );
        }
        let umount = |dir: &Path| {
            let out = Command::new("umount").arg(dir).output();
            if !matches!(&out, Ok(o) if o.status.success()) {
                eprintln!("umount {}: {out:?}", dir.display());
            }
        };
        umount(&self.dir);
        // The hierarchy is destroyed once its last reference goes; then
        // perf_event is rebound to cgroup2. If it lingers, mounting it
        // again and unmounting it (now childless) releases it.
        for attempt in 0..2 {
            if eventually(Duration::from_secs(10), || perf_event_bound() == 0) {
                break;
            }
            if attempt == 0 {
                let _ = Command::new("mount")
                    .args(["-t", "cgroup", "-o", "perf_event", "none"])
                    .arg(&self.dir)
                    .status();
                umount(&self.dir);
            } else {
                eprintln!(
                    "perf_event is still bound to cgroup v1 hierarchy {} after unmounting {}: the machine's cgroup2 counting is off until it is released (mount it again and unmount it)",
                    perf_event_bound(),
                    self.dir.display()
                );
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// On-CPU time of a process (`/proc/<pid>/schedstat`, first field, ns).
fn on_cpu_s(pid: u32) -> f64 {
    let t = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).expect("schedstat");
    let ns: u64 = t
        .split(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("ns");
    ns as f64 * 1e-9
}

/// A fixed list of cgroups to count.
#[derive(Debug)]
struct Fixed(Vec<Cgroup>);

impl Discovery for Fixed {
    fn poll(&mut self) -> Result<Option<Selection>, CgroupError> {
        Ok(Some(Selection {
            counted: self.0.clone(),
            left_out: Vec::new(),
        }))
    }
}

/// `check`'s command line for a one-set config (in `dir`) and the
/// `cgroups:` section `yaml` (`backend: perf` unless it says otherwise).
fn check_args(dir: &Path, yaml: &str) -> Vec<String> {
    let cfg = dir.join("c.yaml");
    let backend = if yaml.contains("backend:") {
        ""
    } else {
        "  backend: perf\n"
    };
    let text = common::cgroup::with_section(&format!("{backend}{yaml}"));
    std::fs::write(&cfg, text).unwrap();
    vec![
        "check".into(),
        "--config.file".into(),
        cfg.display().to_string(),
    ]
}

/// `check` with a one-set config and the `cgroups:` section `yaml`
/// (`backend: perf` unless it says otherwise), on this machine's live sysfs
/// and kernel.
fn check(yaml: &str, more: &[&str]) -> (bool, String) {
    let t = tempfile::tempdir().unwrap();
    let o = Command::new(common::EXPORTER)
        .args(check_args(t.path(), yaml))
        .args(more)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
    )
}

/// The `cgroups:` lines of `check`'s text (root, or the problem).
fn cgroup_lines(out: &str) -> String {
    out.lines()
        .filter(|l| l.starts_with("cgroup root: ") || l.starts_with("cgroups: "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_cgroupfs_perf_cannot_count_on_is_refused_with_the_value_to_give() {
    let _s = serial();
    common::require_root();
    let cpu_v1 = Path::new("/sys/fs/cgroup/cpu");
    assert!(
        cpu_v1.join("cgroup.procs").exists() && Path::new(UNIFIED).join("cgroup.procs").exists(),
        "this test needs the hybrid layout of the test machines (v1 cpu at {}, cgroup2 at {UNIFIED})",
        cpu_v1.display()
    );
    assert_eq!(perf_event_bound(), 0, "perf_event must be on cgroup2 here");
    let yaml = "  preset: systemd\n";

    // A v1 hierarchy without perf_event: refused, naming the unified one.
    let (ok, out) = check(yaml, &["--path.cgroupfs", "/sys/fs/cgroup/cpu"]);
    assert!(ok, "{out}");
    let lines = cgroup_lines(&out);
    assert!(
        lines.contains("cgroups: no cgroup hierarchy to count per workload in /sys/fs/cgroup/cpu")
            && lines.contains("without perf_event (controllers cpu)")
            && lines.contains("give --path.cgroupfs \"/sys/fs/cgroup/unified\""),
        "{out}"
    );
    let (ok, out) = check(yaml, &["--path.cgroupfs", "/sys/fs/cgroup/cpu", "--strict"]);
    assert!(!ok, "--strict passes a refused cgroupfs:\n{out}");

    // The tmpfs the hierarchies are mounted in (the chart's default
    // hostPath): the hierarchy perf counts on, in it.
    let (ok, out) = check(yaml, &["--path.cgroupfs", "/sys/fs/cgroup"]);
    assert!(ok, "{out}");
    assert!(
        cgroup_lines(&out).contains("cgroup root: /sys/fs/cgroup/unified (cgroup2)"),
        "{out}"
    );

    // The chart's mount: the host's /sys/fs/cgroup bound recursively at
    // another path, in a mount namespace of its own (as a container has
    // it; nothing changes outside it): the hierarchy in it.
    let t = tempfile::tempdir().unwrap();
    let at = t.path().join("host-cgroup");
    std::fs::create_dir(&at).unwrap();
    let o = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg("mount --make-rprivate / && mount --rbind /sys/fs/cgroup \"$1\" && shift && exec \"$@\"")
        .arg("sh")
        .arg(&at)
        .arg(common::EXPORTER)
        .args(check_args(t.path(), yaml))
        .arg("--path.cgroupfs")
        .arg(&at)
        .output()
        .expect("run unshare(1)");
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}");
    assert!(
        cgroup_lines(&out).contains(&format!(
            "cgroup root: {} (cgroup2)",
            at.join("unified").display()
        )),
        "{out}"
    );

    // A plain directory that looks like cgroup2 (a fixture tree): refused
    // live (it is taken as it is only by the simulated PMU).
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("cgroup.controllers"), "").unwrap();
    let (_, out) = check(yaml, &["--path.cgroupfs", t.path().to_str().unwrap()]);
    let lines = cgroup_lines(&out);
    assert!(
        lines.contains("not a cgroup filesystem") && lines.contains("what to do: "),
        "{out}"
    );
    let e = find_root(Path::new("/proc"), Some(t.path())).unwrap_err();
    assert_eq!(e.problem().code(), "no_cgroup_hierarchy");
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario; to be split into steps (issue 26)
fn perf_event_bound_to_v1_is_where_perf_counts_and_bpf_keeps_cgroup2() {
    let _s = serial();
    common::require_root();
    common::require_perf_privilege();
    let mut v1 = PerfEventV1::mount();
    let name = format!("pe-v1-busy-{}", std::process::id());
    let (cg, pid) = v1.busy_cgroup(&name);

    // perf: the v1 perf_event hierarchy, as perf's cgroupfs_find_mountpoint().
    let root = find_root(Path::new("/proc"), None).unwrap();
    assert_eq!(
        root,
        Root {
            path: v1.dir.clone(),
            hierarchy: Hierarchy::V1PerfEvent
        }
    );
    // bpf: cgroup2, whose ids bpf_get_current_cgroup_id() returns.
    let bpf = Lookup::new(Path::new("/proc"), None)
        .purpose(Purpose::CgroupId)
        .find()
        .unwrap();
    assert_eq!(bpf.hierarchy, Hierarchy::V2);
    // cgroup2 given for perf: refused, naming the v1 mount.
    let e = find_root(Path::new("/proc"), Some(Path::new(UNIFIED))).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("bound to cgroup v1 hierarchy")
            && msg.contains(&format!("{:?}", v1.dir.display().to_string())),
        "{msg}"
    );
    // The v1 hierarchy given for bpf: refused, naming cgroup2.
    let e = Lookup::new(Path::new("/proc"), Some(&v1.dir))
        .purpose(Purpose::CgroupId)
        .find()
        .unwrap_err()
        .to_string();
    assert!(e.contains("unified hierarchy"), "{e}");

    // check lists the v1 cgroup under the v1 root.
    let (ok, out) = check(&format!("  preset: none\n  paths: [\"{name}\"]\n"), &[]);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "cgroup root: {} (cgroup v1 perf_event)",
            v1.dir.display()
        )) && out
            .lines()
            .any(|l| l.starts_with(&name) && l.contains("counted")),
        "{out}"
    );

    // A hybrid host's /sys/fs/cgroup as the chart mounts it: a tmpfs with
    // this perf_event hierarchy and cgroup2 in it (in a mount namespace of
    // its own: mounting a bound hierarchy again only adds a mount of it).
    let t = tempfile::tempdir().unwrap();
    let at = t.path().join("host-cgroup");
    std::fs::create_dir(&at).unwrap();
    let o = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(concat!(
            "mount --make-rprivate / && mount -t tmpfs none \"$1\" && ",
            "mkdir \"$1/perf_event\" \"$1/unified\" && ",
            "mount -t cgroup -o perf_event none \"$1/perf_event\" && ",
            "mount -t cgroup2 none \"$1/unified\" && shift && exec \"$@\""
        ))
        .arg("sh")
        .arg(&at)
        .arg(common::EXPORTER)
        .args(check_args(
            t.path(),
            &format!("  preset: none\n  paths: [\"{name}\"]\n"),
        ))
        .arg("--path.cgroupfs")
        .arg(&at)
        .output()
        .expect("run unshare(1)");
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!(
            "cgroup root: {} (cgroup v1 perf_event)",
            at.join("perf_event").display()
        )) && out
            .lines()
            .any(|l| l.starts_with(&name) && l.contains("counted")),
        "{out}"
    );

    // The v1 hierarchy given to auto, which would pick bpf as root: bpf
    // reads cgroup2's ids, so auto counts with perf there, saying why; a
    // configured bpf cannot count, saying why.
    let paths = format!("  preset: none\n  paths: [\"{name}\"]\n");
    let given = ["--path.cgroupfs", v1.dir.to_str().unwrap()];
    let (ok, out) = check(&format!("  backend: auto\n{paths}"), &given);
    assert!(ok, "{out}");
    assert!(
        out.contains("Per-cgroup backend: perf (backend auto: perf, as the BPF program reads cgroup2's cgroup ids")
            && out.contains(&format!("cgroup root: {} (cgroup v1 perf_event)", v1.dir.display())),
        "{out}"
    );
    let (_, out) = check(&format!("  backend: bpf\n{paths}"), &given);
    assert!(
        out.contains("Per-cgroup backend: none (cgroups: backend bpf cannot count: it reads cgroup2's cgroup ids"),
        "{out}"
    );

    // serve with backend perf counts it there; the log names the v1 root.
    let t = tempfile::tempdir().unwrap();
    let cfg = t.path().join("c.yaml");
    std::fs::write(
        &cfg,
        format!("{YAML}cgroups:\n  backend: perf\n  preset: none\n  paths: [\"{name}\"]\n  sets: [software]\n"),
    )
    .unwrap();
    let mut srv = common::exporter(&["--config.file", cfg.to_str().unwrap()]);
    srv.wait_log("per-workload counting", Duration::from_secs(10));
    let log = srv.output();
    assert!(
        log.contains(&format!("root={}", v1.dir.display())),
        "serve's per-workload counting line does not name the v1 root:\n{log}"
    );
    let series = format!("perf_cgroup_cpu_clock_seconds_total{{cgroup=\"{name}\"");
    let mut last = String::new();
    let counted = eventually(Duration::from_secs(20), || {
        last = srv.get("/metrics").body;
        last.lines().any(|l| {
            l.starts_with(&series)
                && l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| v > 0.0)
        })
    });
    assert!(
        counted,
        "no {series} > 0 from serve in 20 s:\n{last}\nlog:\n{}",
        srv.output()
    );
    drop(srv);

    // Count it with the perf backend, against the process's on-CPU time.
    let t = PmuTable::discover(Path::new("/sys")).unwrap();
    let k: Arc<dyn Kernel> = Arc::new(LiveKernel::new());
    let cfg = Config::parse(YAML, "t.yaml").unwrap();
    let mut e = perf_exporter::engine::Engine::for_config(
        k.clone(),
        t,
        &cfg,
        perf_exporter::engine::Fds::Unbounded,
    );
    let sets = vec!["software".to_string()];
    let b = PerfBackend::new(k, e.resolution(), &sets, e.online_cpus(), false, None);
    let c = Cgroup {
        rel: name.clone(),
        dir: cg.clone(),
        id: 0,
        kind: CgKind::Path,
        labels: vec![("cgroup", name.clone())],
    };
    e.attach_cgroups(CgroupCounting::new(Box::new(Fixed(vec![c])), Box::new(b)));
    let issues = e.cgroups().unwrap().issues();
    assert!(
        issues.is_empty(),
        "opening a v1 perf_event cgroup: {issues:#?}"
    );
    e.collect();
    let family = "perf_cgroup_cpu_clock_seconds_total";
    // Brackets: the process's time read before and after each collection.
    let a0 = on_cpu_s(pid);
    let s0 = e.collect();
    let a1 = on_cpu_s(pid);
    let target = a1 + 1.0;
    assert!(
        eventually(Duration::from_secs(30), || on_cpu_s(pid) >= target),
        "the busy loop in {} got less than 1 s of CPU in 30 s",
        cg.display()
    );
    let b0 = on_cpu_s(pid);
    let s1 = e.collect();
    let b1 = on_cpu_s(pid);
    let ours = value(&s1, family, &name).unwrap() - value(&s0, family, &name).unwrap_or(0.0);
    let (inner, outer) = (b0 - a1, b1 - a0);
    eprintln!("{name}: cpu-clock {ours:.4} s; the process ran {inner:.4}..{outer:.4} s");
    assert!(
        ours >= 0.98 * inner - 0.005 && ours <= 1.02 * outer + 0.005,
        "{name} (v1 perf_event): cpu-clock {ours} s, the process's on-CPU time between the reads was {inner}..{outer} s (bracketed by reads before and after each collection; a loaded machine widens the bracket, not the error)"
    );
    // The counters go before the hierarchy is unmounted (the guard).
    drop(e);
    drop(v1);
    assert_eq!(
        perf_event_bound(),
        0,
        "perf_event was not given back to cgroup2 after the test"
    );
}
