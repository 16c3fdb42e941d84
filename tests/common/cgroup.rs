//! Cgroup trees for the per-workload tests: the `cgroups:` section of a
//! one-set config, a directory of real cgroups removed (deepest first) on
//! drop, also when a test panics, and the software set the sim and live
//! tests count.

use perf_exporter::cgroup::{find_root, Hierarchy};
use perf_exporter::config::cgroups::CgroupsConfig;
use perf_exporter::config::Config;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The YAML of a `software` set counting `cpu-clock` and
/// `context-switches`, as a literal (`concat!(software_set!(), "...")`
/// adds sets).
#[macro_export]
macro_rules! software_set {
    () => {
        "sets:
  - name: software
    events:
      - metric: perf_cpu_clock_seconds_total
        event: cpu-clock
      - metric: perf_context_switches_total
        event: context-switches
"
    };
}

/// A config of one set, `software`, counting `cpu-clock`
/// (`tests/configs/software_cpu_clock.yaml`), and the `cgroups:` section
/// `yaml` (its indented lines).
pub(crate) fn with_section(yaml: &str) -> String {
    // By a path relative to this file, as CLOCKS_YAML.
    let set = include_str!("../configs/software_cpu_clock.yaml");
    format!("{set}cgroups:\n{yaml}")
}

/// The `cgroups:` section `yaml` of [`with_section`]'s config, validated.
pub(crate) fn section(yaml: &str) -> CgroupsConfig {
    Config::parse(&with_section(yaml), "c.yaml")
        .unwrap()
        .cgroups
        .unwrap()
}

/// Removes a directory tree of cgroups (or plain directories), deepest
/// first. Removing a cgroup fails while a dying task is still attached:
/// polls up to 10 s, then says what it could not remove.
pub(crate) fn remove_tree(path: &Path) {
    if let Ok(rd) = std::fs::read_dir(path) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    // A cgroup is removable once its last process has exited: polled
    // against a deadline (by hand: benches/cgroup_scan.rs includes this
    // file without the rest of tests/common).
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::remove_dir(path).is_err() && path.exists() {
        if Instant::now() > deadline {
            eprintln!("could not remove {}", path.display());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A directory of cgroups under this machine's cgroup2 root, named
/// `<prefix>-<pid>-<tag>`, removed with everything below it on drop.
pub(crate) struct CgroupTree {
    /// The directory.
    pub top: PathBuf,
}

impl CgroupTree {
    /// Creates `<cgroup2 root>/<prefix>-<pid>-<tag>`.
    pub(crate) fn new(prefix: &str, tag: &str) -> CgroupTree {
        let root = find_root(Path::new("/proc"), None).expect("this machine has cgroup2");
        assert_eq!(root.hierarchy, Hierarchy::V2);
        let top = root
            .path
            .join(format!("{prefix}-{}-{tag}", std::process::id()));
        std::fs::create_dir(&top).unwrap_or_else(|e| panic!("mkdir {}: {e}", top.display()));
        CgroupTree { top }
    }

    /// Creates `rel` (and its parents) below the top.
    pub(crate) fn mkdir(&self, rel: &str) {
        std::fs::create_dir_all(self.top.join(rel)).unwrap();
    }
}

impl Drop for CgroupTree {
    fn drop(&mut self) {
        remove_tree(&self.top);
    }
}

/// A `software` set (summed over CPUs) of the three clocks and switches the
/// live per-cgroup tests compare with `cpu.stat` and a known workload.
/// (`tests/configs/cgroup_clocks.yaml`; by a path relative to this file,
/// which `benches/cgroup_scan.rs` includes too.)
pub(crate) const CLOCKS_YAML: &str = include_str!("../configs/cgroup_clocks.yaml");

/// A python loop busy `duty` of every 10 ms, sleeping the rest.
pub(crate) fn burner(duty: f64) -> String {
    format!(
        "import time\nb={duty}*0.01\nwhile True:\n t=time.perf_counter()\n while time.perf_counter()-t<b: pass\n time.sleep(0.01-b)\n"
    )
}

/// Starts `python3 -c script` in the cgroup `dir` (its shell joins the
/// cgroup, then execs python), with its standard output piped.
pub(crate) fn python_in(dir: &Path, script: &str) -> std::process::Child {
    python_command(dir, script)
        .spawn()
        .expect("spawn sh + python3")
}

/// `python3 -c script` run by a shell that first moves itself into the
/// cgroup `dir`, its stdout a pipe.
fn python_command(dir: &Path, script: &str) -> std::process::Command {
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg("echo $$ > \"$1\" && exec /usr/bin/python3 -c \"$2\"")
        .arg("sh")
        .arg(dir.join("cgroup.procs"))
        .arg(script)
        .stdout(std::process::Stdio::piped());
    c
}

/// [`python_in`] with its stdin a pipe (the caller writes to it).
pub(crate) fn python_gated_in(dir: &Path, script: &str) -> std::process::Child {
    python_command(dir, script)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn sh + python3")
}

/// `usage_usec` of a cgroup's `cpu.stat`.
pub(crate) fn usage_usec(dir: &Path) -> u64 {
    let s = std::fs::read_to_string(dir.join("cpu.stat")).expect("cpu.stat");
    s.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
        .expect("usage_usec")
}

/// The value of `family`'s series with `cgroup="<cgroup>"`.
pub(crate) fn cgroup_value(
    s: &perf_exporter::snapshot::Snapshot,
    family: &str,
    cgroup: &str,
) -> Option<f64> {
    let f = s.families.iter().find(|f| f.name == family)?;
    f.samples
        .iter()
        .find(|x| x.labels.iter().any(|(k, v)| *k == "cgroup" && v == cgroup))
        .map(|x| x.value)
}

/// The context switches of the tasks in the cgroup `dir` now, as the
/// kernel counts them per task (`voluntary_ctxt_switches` and
/// `nonvoluntary_ctxt_switches` of `/proc/<tid>/status`, over
/// `cgroup.threads`): the switches out of them.
pub(crate) fn own_switches_now(dir: &Path) -> f64 {
    let threads = std::fs::read_to_string(dir.join("cgroup.threads")).unwrap_or_default();
    threads
        .lines()
        .filter_map(|t| std::fs::read_to_string(format!("/proc/{}/status", t.trim())).ok())
        .map(|st| {
            st.lines()
                .filter(|l| l.contains("voluntary_ctxt_switches:"))
                .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
                .sum::<f64>()
        })
        .sum()
}

/// A cgroup's context switches counted by the exporter (`ours`) agree
/// with those its workload counted itself (`reported`): the workload's
/// own count misses the shell's few switches before it joined the cgroup
/// and python's exit.
pub(crate) fn assert_own_switches(ours: f64, reported: f64) {
    assert!(
        ours >= reported - 10.0 && ours <= reported * 1.02 + 30.0,
        "ours {ours} vs the workload's {reported}"
    );
}
