//! The `bpf` per-cgroup backend on this machine's live kernel, as root:
//! real cgroups under the cgroup2 root (`pe-bpf-<pid>-...`, removed by a
//! guard on drop, also on panic) with CPU burners, a pipe ping-pong with a
//! known number of context switches, the `perf` backend side by side on
//! the same workload, and churn (a removed cgroup's slot is reclaimed).

use crate::common;

/// The tests count CPU time: one at a time.
use common::serial;

use common::cgroup::CgroupTree;
use perf_exporter::cgroup::{Cgroup, CgroupError, Kind as CgKind, Selection};
use perf_exporter::config::Config;
use perf_exporter::engine::cgroup::{
    BpfBackend, CgroupBackend, CgroupCounting, CgroupIssue, CgroupTotals, Discovery, PerfBackend,
};
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::perf::live::LiveKernel;
use perf_exporter::perf::Kernel;
use perf_exporter::pmu::PmuTable;
use perf_exporter::snapshot::Snapshot;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cgroup::{burner, cgroup_value as value, python_in, usage_usec, CLOCKS_YAML as YAML};
use common::clocks::{bracket, compare_clocks, Bracket, Outcome};
use common::Reaped;

/// When a comparison with `cpu.stat` fails while its bracketing reads were
/// further apart than this, it is measured again (common::clocks).
const LARGE_GAP: Duration = Duration::from_millis(50);

/// `cpu.stat`'s `usage_usec` of each of `dirs`, in seconds.
fn usages(dirs: &[&Path]) -> Vec<f64> {
    dirs.iter().map(|d| usage_usec(d) as f64 * 1e-6).collect()
}

/// The cgroups a test counts (paths under the cgroup2 root).
#[derive(Debug, Clone)]
struct Listed {
    root: PathBuf,
    rels: Arc<Mutex<Vec<String>>>,
}

impl Listed {
    fn new(tree: &CgroupTree) -> Listed {
        Listed {
            root: tree.top.parent().unwrap().to_path_buf(),
            rels: Arc::default(),
        }
    }

    fn set(&self, rels: Vec<String>) {
        *self.rels.lock().unwrap() = rels;
    }
}

impl Discovery for Listed {
    fn poll(&mut self) -> Result<Option<Selection>, CgroupError> {
        let counted = self
            .rels
            .lock()
            .unwrap()
            .iter()
            .map(|r| Cgroup {
                rel: r.clone(),
                dir: self.root.join(r),
                // As the selector does: the directory's inode number.
                id: std::fs::metadata(self.root.join(r)).map_or(0, |m| m.ino()),
                kind: CgKind::Path,
                labels: vec![("cgroup", r.clone())],
            })
            .collect();
        Ok(Some(Selection {
            counted,
            left_out: Vec::new(),
        }))
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Which {
    /// With room for this many cgroups (twice as many slots).
    Bpf(usize),
    Perf,
}

fn engine(which: Which, d: &Listed) -> Engine {
    engine_of(which, d, YAML, None)
}

/// Like [`engine`], continuing a previous engine's per-cgroup totals as a
/// reload does.
fn engine_continuing(which: Which, d: &Listed, old: Option<CgroupTotals>) -> Engine {
    engine_of(which, d, YAML, old)
}

/// [`engine`] with the set `software` of `yaml`, continuing `old`'s
/// per-cgroup totals where given.
fn engine_of(which: Which, d: &Listed, yaml: &str, old: Option<CgroupTotals>) -> Engine {
    common::require_root();
    common::require_perf_privilege();
    let t = PmuTable::discover(Path::new("/sys")).unwrap();
    let k: Arc<dyn Kernel> = Arc::new(LiveKernel::new());
    let cfg = Config::parse(yaml, "t.yaml").unwrap();
    let mut e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
    let sets = vec!["software".to_string()];
    let b: Box<dyn CgroupBackend> = match which {
        Which::Bpf(max) => Box::new(
            BpfBackend::new(k, e.resolution(), &sets, e.online_cpus(), false, max)
                .unwrap_or_else(|err| panic!("the bpf backend must load here: {err}")),
        ),
        Which::Perf => Box::new(PerfBackend::new(
            k,
            e.resolution(),
            &sets,
            e.online_cpus(),
            false,
            None,
        )),
    };
    let mut c = CgroupCounting::new(Box::new(d.clone()), b);
    if let Some(t) = old {
        c.carry_over(t);
    }
    e.attach_cgroups(c);
    let issues = e.cgroups().unwrap().issues();
    assert!(issues.is_empty(), "{issues:#?}");
    e
}

fn delta(a: &Snapshot, b: &Snapshot, family: &str, cgroup: &str) -> f64 {
    value(b, family, cgroup).unwrap_or_else(|| panic!("{family} of {cgroup} missing"))
        - value(a, family, cgroup).unwrap_or(0.0)
}

/// `python3 -c script` in a cgroup (killed on drop).
struct Python(Reaped);

impl Python {
    fn start(dir: &Path, script: &str) -> Python {
        Python(Reaped(python_in(dir, script)))
    }

    /// Like [`Self::start`] for a script that begins with [`GATE`]: returns
    /// once it is ready (in its cgroup, waiting for [`Self::go`]).
    fn gated(dir: &Path, script: &str) -> Python {
        let mut p = Python(Reaped(common::cgroup::python_gated_in(dir, script)));
        p.line("ready");
        p
    }

    /// Waits for the line `what` from a [`Self::gated`] workload.
    fn line(&mut self, what: &str) {
        let mut line = vec![0u8; what.len() + 1];
        std::io::Read::read_exact(self.0 .0.stdout.as_mut().unwrap(), &mut line)
            .unwrap_or_else(|e| panic!("the workload says {what}: {e}"));
        assert_eq!(line, format!("{what}\n").as_bytes());
    }

    /// Lets a [`Self::gated`] workload go on.
    fn go(&mut self) {
        std::io::Write::write_all(self.0 .0.stdin.as_mut().unwrap(), b"go\n")
            .expect("the workload waits for its go");
    }

    /// Waits for it and returns what it printed.
    fn output(mut self) -> String {
        let mut out = String::new();
        std::io::Read::read_to_string(self.0 .0.stdout.as_mut().unwrap(), &mut out).unwrap();
        let _ = self.0 .0.wait();
        out
    }
}

/// Polls until the cgroup has used `usec` more CPU time (deadline 30 s).
fn wait_usage(dir: &Path, usec: u64) {
    let start = usage_usec(dir);
    let what = format!("{} to run", dir.display());
    common::wait_for(&what, Duration::from_secs(30), || {
        usage_usec(dir) >= start + usec
    });
}

/// A pipe ping-pong of `n` round trips between a parent and its child
/// (both block on every read: about two context switches per round trip);
/// prints the voluntary + involuntary switches of both.
fn ping_pong(n: u32) -> String {
    format!(
        "import os,resource\nn={n}\na,b=os.pipe()\nc,d=os.pipe()\npid=os.fork()\nif pid==0:\n for i in range(n):\n  os.read(a,1); os.write(d,b'x')\n os._exit(0)\nfor i in range(n):\n os.write(b,b'x'); os.read(c,1)\nos.waitpid(pid,0)\nr=resource.getrusage(resource.RUSAGE_SELF)\nk=resource.getrusage(resource.RUSAGE_CHILDREN)\nprint(r.ru_nvcsw+r.ru_nivcsw+k.ru_nvcsw+k.ru_nivcsw, flush=True)\n"
    )
}

fn rel(tree: &CgroupTree, tag: &str) -> String {
    tree.mkdir(tag);
    format!("{}/{tag}", tree.top.file_name().unwrap().to_string_lossy())
}

#[test]
fn bpf_cpu_time_per_cgroup_agrees_with_cpu_stat() {
    let _s = serial();
    let tree = CgroupTree::new("pe-bpf", "cputime");
    let (hi, lo) = (rel(&tree, "duty80"), rel(&tree, "duty20"));
    let d = Listed::new(&tree);
    let (hi_dir, lo_dir) = (d.root.join(&hi), d.root.join(&lo));
    let _b1 = Python::start(&hi_dir, &burner(0.8));
    let _b2 = Python::start(&lo_dir, &burner(0.2));
    wait_usage(&hi_dir, 200_000);
    wait_usage(&lo_dir, 50_000);
    d.set(vec![hi.clone(), lo.clone()]);
    let mut e = engine(Which::Bpf(64), &d);
    assert_eq!(e.cgroups().unwrap().backend().name(), "bpf");
    let dirs = [hi_dir.as_path(), lo_dir.as_path()];
    let mut last = None;
    compare_clocks("per-cgroup cpu time vs cpu.stat (bpf)", LARGE_GAP, |_| {
        let b0 = bracket(|| usages(&dirs), || e.collect());
        wait_usage(&hi_dir, 2_000_000);
        let b1 = bracket(|| usages(&dirs), || e.collect());
        let mut o = Outcome::new(b0.max_gap(&b1));
        for (i, c) in [&hi, &lo].into_iter().enumerate() {
            let stat = b0.growth(&b1, i);
            for fam in [
                "perf_cgroup_cpu_clock_seconds_total",
                "perf_cgroup_task_clock_seconds_total",
            ] {
                let ours = delta(&b0.value, &b1.value, fam, c);
                eprintln!("{c}: {fam} {ours:.4} s, cpu.stat {stat} s");
                o.check(stat.agrees(ours, 0.02 * stat.mid() + 0.003), || {
                    format!("{c}: {fam} {ours:.4} s vs cpu.stat usage {stat} s")
                });
            }
        }
        last = Some((b0.value, b1.value));
        o
    });
    let (s0, s1) = last.expect("measured");
    // Software events are never multiplexed: enabled == running.
    let en = delta(&s0, &s1, "perf_cgroup_group_enabled_seconds_total", &hi);
    let run = delta(&s0, &s1, "perf_cgroup_group_running_seconds_total", &hi);
    assert!(
        en > 1.0 && (en - run).abs() < 1e-6,
        "enabled {en}, running {run}"
    );
}

#[test]
fn bpf_context_switches_agree_with_a_ping_pong() {
    let _s = serial();
    let tree = CgroupTree::new("pe-bpf", "ctxsw");
    let c = rel(&tree, "pingpong");
    let d = Listed::new(&tree);
    d.set(vec![c.clone()]);
    let mut e = engine(Which::Bpf(64), &d);
    let before = e.collect();
    let reported: f64 = Python::start(&d.root.join(&c), &ping_pong(5000))
        .output()
        .trim()
        .parse()
        .expect("python printed its switches");
    let after = e.collect();
    let ours = delta(&before, &after, "perf_cgroup_context_switches_total", &c);
    eprintln!("context switches: ours {ours}, the workload's own {reported}");
    assert!(reported >= 5000.0);
    common::cgroup::assert_own_switches(ours, reported);
}

/// [`ping_pong`] with both processes pinned to `cpu`: every hand-off is a
/// switch between two tasks of one cgroup.
fn pinned_ping_pong(n: u32, cpu: u32) -> String {
    format!(
        "import os\nos.sched_setaffinity(0,{{{cpu}}})\n{}",
        ping_pong(n)
    )
}

/// The context switches each workload printed (it has exited after).
fn own_switches<const N: usize>(workloads: [Python; N]) -> Vec<f64> {
    workloads
        .into_iter()
        .map(|w| {
            w.output()
                .trim()
                .parse()
                .expect("python printed its switches")
        })
        .collect()
}

/// A cgroup's CPU clock (seconds) agrees with its cpu.stat's growth.
/// `steal`: the time the hypervisor took from the CPU the workload ran
/// on meanwhile, which the CPU clock (the kernel's `local_clock`) counts
/// and cpu.stat does not (this kernel's `CONFIG_PARAVIRT_TIME_ACCOUNTING`
/// leaves it out of a task's run time): the clock may be above by that.
fn assert_cpu_clock(c: &str, cpu: f64, stat: f64, steal: f64) {
    let tol = 0.02 * stat + 0.003;
    assert!(
        cpu >= stat - tol && cpu <= stat + tol + steal,
        "{c}: cpu clock {cpu} s vs cpu.stat {stat} s (the CPU had {steal} s stolen; load average {})",
        common::clocks::loadavg()
    );
}

/// A tree whose top has the children `a` and `b`, all three listed:
/// the tree (removed on drop), the listing and their paths (top, a, b).
fn parent_and_two(tag: &str) -> (CgroupTree, Listed, [String; 3]) {
    let tree = CgroupTree::new("pe-bpf", tag);
    let (a, b) = (rel(&tree, "a"), rel(&tree, "b"));
    let parent = tree.top.file_name().unwrap().to_string_lossy().to_string();
    let d = Listed::new(&tree);
    d.set(vec![parent.clone(), a.clone(), b.clone()]);
    (tree, d, [parent, a, b])
}

/// Two cgroups, each a ping-pong of two processes, all four pinned to one
/// CPU: most switches stay within a cgroup's css_set, where the program
/// charges nothing until the next switch to another css_set (or a read),
/// and the rest cross between the two. Each cgroup's CPU time agrees with
/// its cpu.stat and its switches with the workload's own count (nothing
/// lost, nothing landing on the other cgroup), and their selected parent
/// got exactly their sum.
#[test]
fn bpf_switches_within_one_cgroup_lose_nothing() {
    let _s = serial();
    let (_tree, d, [parent, a, b]) = parent_and_two("within");
    let mut e = engine(Which::Bpf(64), &d);
    let dirs = [d.root.join(&a), d.root.join(&b)];
    let stat0 = usages(&[&dirs[0], &dirs[1]]);
    let steal0 = common::clocks::cpu_steal_seconds(0);
    let before = e.collect();
    let workloads = [
        Python::start(&dirs[0], &pinned_ping_pong(20000, 0)),
        Python::start(&dirs[1], &pinned_ping_pong(20000, 0)),
    ];
    let reported = own_switches(workloads);
    // Both have exited: their cgroups are empty, cpu.stat is final.
    let after = e.collect();
    let stat1 = usages(&[&dirs[0], &dirs[1]]);
    let steal = common::clocks::cpu_steal_seconds(0) - steal0;
    let mut sums = [0.0; 2];
    for (i, c) in [&a, &b].into_iter().enumerate() {
        let stat = stat1[i] - stat0[i];
        let cpu = delta(&before, &after, "perf_cgroup_cpu_clock_seconds_total", c);
        let sw = delta(&before, &after, "perf_cgroup_context_switches_total", c);
        eprintln!(
            "{c}: cpu clock {cpu:.4} s (cpu.stat {stat:.4} s), switches {sw} (own {})",
            reported[i]
        );
        assert_cpu_clock(c, cpu, stat, steal);
        assert!(reported[i] >= 20000.0);
        common::cgroup::assert_own_switches(sw, reported[i]);
        sums[0] += cpu;
        sums[1] += sw;
    }
    let p_cpu = delta(
        &before,
        &after,
        "perf_cgroup_cpu_clock_seconds_total",
        &parent,
    );
    let p_sw = delta(
        &before,
        &after,
        "perf_cgroup_context_switches_total",
        &parent,
    );
    eprintln!("parent: cpu clock {p_cpu:.6} s, switches {p_sw}; children's sums {sums:?}");
    assert!((p_cpu - sums[0]).abs() <= 1e-6, "{p_cpu} vs {}", sums[0]);
    assert!(
        (p_sw - sums[1]).abs() <= 1e-6 * p_sw.max(1.0),
        "{p_sw} vs {}",
        sums[1]
    );
}

/// A ping-pong between two processes in the cgroups `a` and `b` (both
/// pinned to `cpu`): every hand-off is a switch between two cgroups.
fn cross_ping_pong(a: &Path, b: &Path, n: u32, cpu: u32) -> String {
    format!(
        "import os,resource\nos.sched_setaffinity(0,{{{cpu}}})\nn={n}\nr,w=os.pipe()\nc,d=os.pipe()\npid=os.fork()\nif pid==0:\n open('{}/cgroup.procs','w').write(str(os.getpid()))\n os.write(d,b'r')\n for i in range(n):\n  os.read(r,1); os.write(d,b'x')\n os._exit(0)\nopen('{}/cgroup.procs','w').write(str(os.getpid()))\nos.read(c,1)\nfor i in range(n):\n os.write(w,b'x'); os.read(c,1)\nos.waitpid(pid,0)\nu=resource.getrusage(resource.RUSAGE_SELF)\nk=resource.getrusage(resource.RUSAGE_CHILDREN)\nprint(u.ru_nvcsw+u.ru_nivcsw+k.ru_nvcsw+k.ru_nivcsw, flush=True)\n",
        b.display(),
        a.display()
    )
}

/// Switches between two cgroups with the same owners: a selected parent
/// whose two unselected children ping-pong with each other, next to two
/// unselected cgroups ping-ponging, all on one CPU. The parent's CPU time
/// agrees with its cpu.stat and its switches with the workload's own count;
/// an unselected cgroup is never charged to it. (The check that found a
/// program skipping such switches charging 5-17 % too much.)
#[test]
fn bpf_switches_between_cgroups_with_the_same_owners_lose_nothing() {
    let _s = serial();
    let tree = CgroupTree::new("pe-bpf", "owners");
    let p = rel(&tree, "pod");
    let (x, y) = (rel(&tree, "pod/x"), rel(&tree, "pod/y"));
    let (u, v) = (rel(&tree, "u"), rel(&tree, "v"));
    let d = Listed::new(&tree);
    d.set(vec![p.clone()]);
    let mut e = engine(Which::Bpf(64), &d);
    let dir = |r: &str| d.root.join(r);
    let stat0 = usage_usec(&dir(&p)) as f64 * 1e-6;
    let steal0 = common::clocks::cpu_steal_seconds(0);
    let before = e.collect();
    let workloads = [
        Python::start(&dir(&p), &cross_ping_pong(&dir(&x), &dir(&y), 20000, 0)),
        Python::start(&dir(&u), &cross_ping_pong(&dir(&u), &dir(&v), 20000, 0)),
    ];
    let reported = own_switches(workloads);
    let after = e.collect();
    let stat = usage_usec(&dir(&p)) as f64 * 1e-6 - stat0;
    let steal = common::clocks::cpu_steal_seconds(0) - steal0;
    let cpu = delta(&before, &after, "perf_cgroup_cpu_clock_seconds_total", &p);
    let sw = delta(&before, &after, "perf_cgroup_context_switches_total", &p);
    eprintln!("{p}: cpu clock {cpu:.4} s (cpu.stat {stat:.4} s), switches {sw} (own {reported:?})");
    assert_cpu_clock(&p, cpu, stat, steal);
    assert!(reported[0] >= 20000.0);
    common::cgroup::assert_own_switches(sw, reported[0]);
}

/// A ping-pong of `n` round trips between a parent and its child in the
/// cgroup it starts in, both pinned to `cpu`; then the parent moves itself
/// to the cgroup `to` and burns CPU for 0.3 s. Prints the context switches
/// of both before the move (the child's all) and the parent's after it.
fn ping_pong_then_move(to: &Path, n: u32, cpu: u32) -> String {
    format!(
        "import os,resource,time\nos.sched_setaffinity(0,{{{cpu}}})\nn={n}\nr,w=os.pipe()\nc,d=os.pipe()\npid=os.fork()\nif pid==0:\n for i in range(n):\n  os.read(r,1); os.write(d,b'x')\n os._exit(0)\nfor i in range(n):\n os.write(w,b'x'); os.read(c,1)\nos.waitpid(pid,0)\nsw=lambda u: u.ru_nvcsw+u.ru_nivcsw\nmine=sw(resource.getrusage(resource.RUSAGE_SELF))\nopen('{}/cgroup.procs','w').write(str(os.getpid()))\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass\nafter=sw(resource.getrusage(resource.RUSAGE_SELF))-mine\nprint(mine+sw(resource.getrusage(resource.RUSAGE_CHILDREN)), after, flush=True)\n",
        to.display()
    )
}

/// A task that moves itself to another cgroup in the middle of an interval
/// (its switches with its child, in one css_set, were not charged yet):
/// the interval up to the move stays its old cgroup's (the program keeps
/// the owners an interval began with, and charges at the move), the rest
/// is the new one's. Each cgroup's context switches agree with the
/// workload's own count, and a selected parent got exactly their sum. (A
/// program charging a pending interval to the cgroup of the task leaving
/// at the end of it put the whole run of switches before the move on the
/// new cgroup: +8.7 % in the arm64 guest's exact count.)
#[test]
fn bpf_a_task_moving_itself_mid_interval_takes_nothing_with_it() {
    let _s = serial();
    let (_tree, d, [parent, a, b]) = parent_and_two("moves");
    let mut e = engine(Which::Bpf(64), &d);
    let before = e.collect();
    let out = Python::start(
        &d.root.join(&a),
        &ping_pong_then_move(&d.root.join(&b), 20000, 0),
    )
    .output();
    let after = e.collect();
    let own: Vec<f64> = out
        .split_whitespace()
        .map(|x| x.parse().expect("python printed its switches"))
        .collect();
    assert_eq!(own.len(), 2, "{out}");
    let sw = |c: &str| delta(&before, &after, "perf_cgroup_context_switches_total", c);
    let (in_a, in_b, in_parent) = (sw(&a), sw(&b), sw(&parent));
    eprintln!(
        "switches: {a} {in_a} (own {}), {b} {in_b} (own {}), parent {in_parent}",
        own[0], own[1]
    );
    assert!(own[0] >= 40000.0, "{out}");
    common::cgroup::assert_own_switches(in_a, own[0]);
    common::cgroup::assert_own_switches(in_b, own[1]);
    assert!(
        (in_parent - in_a - in_b).abs() <= 1e-6 * in_parent.max(1.0),
        "parent {in_parent} vs {in_a} + {in_b}"
    );
}

#[test]
fn bpf_and_perf_backends_agree_within_two_percent() {
    let _s = serial();
    let tree = CgroupTree::new("pe-bpf", "side");
    let (burn, pp) = (rel(&tree, "burn"), rel(&tree, "pp"));
    let d = Listed::new(&tree);
    let _b = Python::start(&d.root.join(&burn), &burner(0.5));
    wait_usage(&d.root.join(&burn), 100_000);
    d.set(vec![burn.clone(), pp.clone()]);
    let mut bpf = engine(Which::Bpf(64), &d);
    let mut perf = engine(Which::Perf, &d);
    let (b0, p0) = (bpf.collect(), perf.collect());
    let _ = Python::start(&d.root.join(&pp), &ping_pong(20000)).output();
    wait_usage(&d.root.join(&burn), 1_000_000);
    let (p1, b1) = (perf.collect(), bpf.collect());
    for (fam, c) in [
        ("perf_cgroup_cpu_clock_seconds_total", &burn),
        ("perf_cgroup_task_clock_seconds_total", &burn),
        ("perf_cgroup_context_switches_total", &burn),
        ("perf_cgroup_cpu_clock_seconds_total", &pp),
        ("perf_cgroup_context_switches_total", &pp),
    ] {
        let (ob, op) = (delta(&b0, &b1, fam, c), delta(&p0, &p1, fam, c));
        eprintln!("{c}: {fam} bpf {ob:.4}, perf {op:.4}");
        // The two collections are a few ms apart: allow that much.
        let slack = if fam.contains("switches") { 20.0 } else { 0.01 };
        assert!(
            (ob - op).abs() <= 0.02 * op.max(ob) + slack,
            "{c}: {fam} bpf {ob} vs perf {op}"
        );
    }
}

/// What a gated workload runs first: it says it is ready (it has moved
/// into its cgroup and started) and waits for a line on its stdin.
const GATE: &str = "import sys\nprint('ready',flush=True)\nsys.stdin.readline()\n";

/// What a gated workload runs last: it says it is done and waits for a
/// line on its stdin (so it is still there, blocked, when read).
const DONE: &str = "print('done',flush=True)\nsys.stdin.readline()\n";

/// A pipe ping-pong of `n` round trips pinned to CPU 0 in which the parent
/// touches a new page every `pe` rounds and the child every `ce` (0:
/// never), right before it hands over: most switches follow a run with no
/// fault, some a run with one.
fn faulting_ping_pong(n: u32, pe: u32, ce: u32) -> String {
    format!(
        "{GATE}import os,mmap\nos.sched_setaffinity(0,{{0}})\nn={n}\nm=mmap.mmap(-1,2*n*4096)\na,b=os.pipe()\nc,d=os.pipe()\npid=os.fork()\nif pid==0:\n for i in range(n):\n  os.read(a,1)\n  if {ce} and i%{ce}==0: m[(n+i)*4096]=1\n  os.write(d,b'x')\n os._exit(0)\nfor i in range(n):\n if i%{pe}==0: m[i*4096]=1\n os.write(b,b'x'); os.read(c,1)\nos.waitpid(pid,0)\n{DONE}"
    )
}

/// `n` moves between CPUs 0 and 1 (each a migration, counted when the task
/// is switched in on the other), a new page touched every other one.
fn migrator(n: u32) -> String {
    format!(
        "{GATE}import os,mmap\nm=mmap.mmap(-1,{n}*4096)\nfor i in range({n}):\n os.sched_setaffinity(0,{{i%2}})\n if i%2==0: m[i*4096]=1\n x=sum(range(2000))\n{DONE}"
    )
}

/// What the program spares (switches and migrations it counts, fault
/// counters it reads only after a fault) agrees exactly with the kernel's
/// own perf cgroup counters (the `perf` backend) side by side: two
/// cgroups' faulting ping-pongs on one CPU (every hand-off a switch
/// between them, faults before some of them) and a task moving between
/// the CPUs. The workloads are in their cgroups and waiting before the
/// first reads (the interval of a task before it moves itself in is
/// charged to its new cgroup by the bpf backend, not by the kernel:
/// `on_attach`), and done and waiting at the last: both backends saw the
/// same events. Faults agree exactly. Switches and migrations agree
/// exactly too, but in about 1 run in 10 (2026-11-28: 2 of 30, and 3 of 30
/// with the `context-switches` counter opened as before) the program has
/// one switch of a ping-pong's cgroup or one migration of the moving
/// task's cgroup fewer than the kernel's counter: an edge not explained
/// yet (the guide's BPF "Edges"), allowed here as 1. (Read after the
/// workloads had exited, they differed by one or two switches and as
/// many migrations, either way, in about 1 run in 20.)
#[test]
fn bpf_spared_reads_agree_with_perf_cgroup_counters() {
    let _s = serial();
    let tree = CgroupTree::new("pe-bpf", "spared");
    let (a, b, c) = (rel(&tree, "a"), rel(&tree, "b"), rel(&tree, "c"));
    let d = Listed::new(&tree);
    d.set(vec![a.clone(), b.clone(), c.clone()]);
    // The default config's `software` set: the six software counters.
    let yaml = include_str!("../../config/default.yaml");
    // This kernel has BTF and is newer than 5.9: the program reads only
    // the clock and page-faults at a switch after a run with no fault
    // (counters 0 to 5: cpu-clock, context-switches, cpu-migrations,
    // page-faults, minor-faults, major-faults). And
    // `context-switches` has no counter open: the program counts it alone,
    // so the backend holds as many descriptors as without that metric.
    let backend = |yaml: &str| {
        let t = PmuTable::discover(Path::new("/sys")).unwrap();
        let k: Arc<dyn Kernel> = Arc::new(LiveKernel::new());
        let cfg = Config::parse(yaml, "default.yaml").unwrap();
        let e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
        let sets = vec!["software".to_string()];
        let b = BpfBackend::new(k, e.resolution(), &sets, e.online_cpus(), false, 4).unwrap();
        (b, e.online_cpus()[0])
    };
    let (default, cpu) = backend(yaml);
    let reads = default.reads(cpu).unwrap();
    assert_eq!(
        (reads.times, reads.switches, reads.migrations, reads.faults),
        (0, 1 << 1, 1 << 2, (1 << 4) | (1 << 5)),
        "{reads:?}"
    );
    drop(default);
    let set = |events: &[&str]| {
        let mut y = "sets:\n  - name: software\n    events:\n".to_string();
        for e in events {
            let m = format!("perf_{}_total", e.replace('-', "_"));
            y += &format!("      - metric: {m}\n        help: h\n        event: {e}\n");
        }
        y
    };
    let (all, _) = backend(&set(&["cpu-clock", "context-switches", "page-faults"]));
    let (without, _) = backend(&set(&["cpu-clock", "page-faults"]));
    assert_eq!(all.open_fds(), without.open_fds());
    drop((all, without));
    let mut bpf = engine_of(Which::Bpf(64), &d, yaml, None);
    let mut perf = engine_of(Which::Perf, &d, yaml, None);
    let mut workloads = [
        Python::gated(&d.root.join(&a), &faulting_ping_pong(6000, 3, 5)),
        Python::gated(&d.root.join(&b), &faulting_ping_pong(6000, 40, 0)),
        Python::gated(&d.root.join(&c), &migrator(400)),
    ];
    let (b0, p0) = (bpf.collect(), perf.collect());
    for w in &mut workloads {
        w.go();
    }
    for w in &mut workloads {
        w.line("done");
    }
    let checks = [
        ("perf_cgroup_minor_faults_total", &a, 3200.0),
        ("perf_cgroup_minor_faults_total", &b, 150.0),
        ("perf_cgroup_minor_faults_total", &c, 200.0),
        ("perf_cgroup_page_faults_total", &a, 3200.0),
        ("perf_cgroup_major_faults_total", &a, 0.0),
        ("perf_cgroup_cpu_migrations_total", &c, 300.0),
        ("perf_cgroup_cpu_migrations_total", &a, 0.0),
        ("perf_cgroup_cpu_migrations_total", &b, 0.0),
        ("perf_cgroup_context_switches_total", &a, 12000.0),
        ("perf_cgroup_context_switches_total", &b, 12000.0),
        ("perf_cgroup_context_switches_total", &c, 300.0),
    ];
    // A workload that said it is done may not have blocked yet (nor its
    // reaped child made its last switch: the parent is woken before), and
    // one read of the two backends follows the other: read both until
    // they agree, for a while.
    let deadline = Instant::now() + Duration::from_secs(5);
    let (b1, p1) = loop {
        let (b1, p1) = (bpf.collect(), perf.collect());
        let agree = checks
            .iter()
            .all(|(fam, cg, _)| delta(&b0, &b1, fam, cg) == delta(&p0, &p1, fam, cg));
        if agree || Instant::now() > deadline {
            break (b1, p1);
        }
    };
    for (fam, cg, _) in checks {
        let (ob, op) = (delta(&b0, &b1, fam, cg), delta(&p0, &p1, fam, cg));
        eprintln!("{cg}: {fam} bpf {ob}, perf {op}");
    }
    for (fam, cg, least) in checks {
        let (ob, op) = (delta(&b0, &b1, fam, cg), delta(&p0, &p1, fam, cg));
        assert!(
            op >= least,
            "{cg}: {fam}: the workload made {op}, at least {least} expected"
        );
        // Faults exactly; switches and migrations within the edge the
        // guide names (one of either short now and then, see above).
        let edge = if fam.ends_with("faults_total") {
            0.0
        } else {
            1.0
        };
        assert!(
            (ob - op).abs() <= edge,
            "{cg}: {fam}: the bpf program's {ob} against the kernel's perf cgroup counter's {op} (at most {edge} apart)"
        );
    }
}

#[test]
fn bpf_fds_do_not_grow_with_cgroups_and_removed_cgroups_are_reclaimed() {
    let _s = serial();
    let tree = CgroupTree::new("pe-bpf", "churn");
    let keep = rel(&tree, "keep");
    let d = Listed::new(&tree);
    let _b = Python::start(&d.root.join(&keep), &burner(0.1));
    d.set(vec![keep.clone()]);
    // 42 slots: 41 cgroups, then 20 removed and 20 new ones fit only when
    // the removed ones' slots are reused.
    let mut e = engine(Which::Bpf(21), &d);
    e.collect();
    let fds1 = e.cgroups().unwrap().backend().open_fds();
    let many: Vec<String> = (0..40).map(|i| rel(&tree, &format!("c{i}"))).collect();
    let mut all = vec![keep.clone()];
    all.extend(many.iter().cloned());
    d.set(all.clone());
    let s = e.collect();
    assert_eq!(e.cgroups().unwrap().backend().open_fds(), fds1);
    assert_eq!(e.cgroups().unwrap().backend().counted().len(), 41);
    assert!(value(&s, "perf_cgroup_group_enabled_seconds_total", &many[0]).is_some());
    // Remove c0..c19 while counting: their series leave at the next sync.
    let mut last = value(&s, "perf_cgroup_cpu_clock_seconds_total", &keep).unwrap();
    for r in &many[..20] {
        std::fs::remove_dir(d.root.join(r)).unwrap();
    }
    d.set(all[..1].iter().chain(&many[20..]).cloned().collect());
    let s = e.collect();
    assert!(value(&s, "perf_cgroup_group_enabled_seconds_total", &many[0]).is_none());
    let v = value(&s, "perf_cgroup_cpu_clock_seconds_total", &keep).unwrap();
    assert!(v >= last);
    last = v;
    // New cgroups reuse the released slots (after one sync of rest): the
    // maps never hold more than the cgroups counted plus those resting.
    let fresh: Vec<String> = (0..20).map(|i| rel(&tree, &format!("n{i}"))).collect();
    let mut now = vec![keep.clone()];
    now.extend(many[20..].iter().cloned());
    now.extend(fresh.iter().cloned());
    d.set(now);
    let s = e.collect();
    let v = value(&s, "perf_cgroup_cpu_clock_seconds_total", &keep).unwrap();
    assert!(v >= last, "keep's counter went back: {last} -> {v}");
    for r in &fresh {
        let x = value(&s, "perf_cgroup_cpu_clock_seconds_total", r).unwrap_or(0.0);
        assert!(
            x < 0.01,
            "{r} starts from its own zero, not a previous owner's: {x}"
        );
    }
    assert_eq!(e.cgroups().unwrap().backend().counted().len(), 41);
    assert_eq!(e.cgroups().unwrap().backend().open_fds(), fds1);
    let issues = e.cgroups().unwrap().issues();
    assert!(
        issues
            .iter()
            .all(|i| !matches!(i, CgroupIssue::SlotsFull { .. })),
        "{issues:#?}"
    );
}

/// The switch program runs once per switch: one link to it in the
/// kernel, with `attach` called for every CPU opened, for a CPU back
/// online, and again directly (a second link would run it twice per
/// switch: no count changes, the cost doubles).
#[test]
fn bpf_switch_program_is_attached_exactly_once() {
    let _s = serial();
    common::require_root();
    common::require_perf_privilege();
    let mut c = perf_exporter::perf::bpf::BpfCounter::load(2, 1).unwrap();
    assert_eq!(c.switch_attachments().unwrap(), 0, "nothing attached yet");
    c.attach().unwrap();
    c.attach().unwrap();
    assert_eq!(c.switch_attachments().unwrap(), 1);
    drop(c);

    let t = PmuTable::discover(Path::new("/sys")).unwrap();
    let k: Arc<dyn Kernel> = Arc::new(LiveKernel::new());
    let cfg = Config::parse(YAML, "t.yaml").unwrap();
    let e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
    let cpus = e.online_cpus().to_vec();
    let sets = vec!["software".to_string()];
    let mut b = BpfBackend::new(k, e.resolution(), &sets, &cpus, false, 4).unwrap();
    assert_eq!(b.switch_attachments().unwrap(), 1, "CPUs {cpus:?}");
    // A CPU "back online" is reopened, and attach runs again.
    if let Some((last, rest)) = cpus.split_last() {
        b.cpus_changed(rest);
        b.cpus_changed(&cpus);
        assert_eq!(
            b.switch_attachments().unwrap(),
            1,
            "after CPU {last} returned"
        );
    }
}

/// A config counting the cgroups below `top` with `backend`.
/// The program caches per CPU which selected cgroups own a cgroup (itself
/// and its ancestors); selecting an ancestor later must reach that cache
/// (user space bumps `slots_version`): from the next sync on, the pod is
/// charged its running container's time.
#[test]
fn bpf_an_ancestor_selected_later_is_charged_its_running_child() {
    let _s = serial();
    let tree = CgroupTree::new("pe-bpf", "nested");
    let pod = rel(&tree, "pod");
    tree.mkdir("pod/ctr");
    let ctr = format!("{pod}/ctr");
    let d = Listed::new(&tree);
    let dir = d.root.join(&ctr);
    let _b = Python::start(&dir, &burner(0.5));
    wait_usage(&dir, 100_000);
    d.set(vec![ctr.clone()]);
    let mut e = engine(Which::Bpf(8), &d);
    e.collect();
    // The container runs: its owners (itself only) are cached.
    wait_usage(&dir, 200_000);
    d.set(vec![ctr.clone(), pod.clone()]);
    let dirs = [dir.as_path()];
    compare_clocks(
        "an ancestor's cpu time vs its child's cpu.stat (bpf)",
        LARGE_GAP,
        |_| {
            let b0 = bracket(|| usages(&dirs), || e.collect());
            wait_usage(&dir, 1_000_000);
            let b1 = bracket(|| usages(&dirs), || e.collect());
            let stat = b0.growth(&b1, 0);
            let mut o = Outcome::new(b0.max_gap(&b1));
            for c in [&ctr, &pod] {
                let ours = delta(
                    &b0.value,
                    &b1.value,
                    "perf_cgroup_cpu_clock_seconds_total",
                    c,
                );
                eprintln!("{c}: {ours:.4} s, the container's cpu.stat {stat} s");
                o.check(stat.agrees(ours, 0.02 * stat.mid() + 0.003), || {
                    format!("{c}: {ours:.4} s vs the container's cpu.stat usage {stat} s")
                });
            }
            o
        },
    );
}

fn backend_config(tree: &CgroupTree, backend: &str) -> PathBuf {
    let top = tree.top.file_name().unwrap().to_string_lossy().to_string();
    let p = std::env::temp_dir().join(format!("{top}-{backend}.yaml"));
    std::fs::write(
        &p,
        format!("{YAML}cgroups:\n  backend: {backend}\n  preset: none\n  paths: [\"{top}/*\"]\n  sets: [software]\n"),
    )
    .unwrap();
    p
}

/// What `check --config.file cfg` writes to stdout.
fn check_text(cfg: &Path) -> String {
    let out = Command::new(common::EXPORTER)
        .arg("check")
        .arg("--config.file")
        .arg(cfg)
        .output()
        .expect("run perf-exporter check");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn check_says_auto_picks_bpf_here_and_why() {
    common::require_root();
    let tree = CgroupTree::new("pe-bpf", "check");
    let cfg = backend_config(&tree, "auto");
    let text = check_text(&cfg);
    let _ = std::fs::remove_file(&cfg);
    assert!(
        text.contains("Per-cgroup backend: bpf (backend auto: BPF can be loaded (CAP_SYS_ADMIN) and the kernel has BTF, so bpf (counters once per CPU, charged to cgroups in the kernel))\n"),
        "{text}"
    );
}

#[test]
fn a_forced_bpf_backend_without_capabilities_fails_at_start_naming_what_is_missing() {
    common::require_root();
    common::require_tool("setpriv");
    let tree = CgroupTree::new("pe-bpf", "forced");
    let cfg = backend_config(&tree, "bpf");
    // uid 0 without any capability: CapEff is empty.
    let out = Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-all", "--"])
        .arg(common::EXPORTER)
        .arg("--config.file")
        .arg(&cfg)
        .args(["--web.listen-address", "127.0.0.1:0"])
        .output()
        .expect("run perf-exporter under setpriv");
    let _ = std::fs::remove_file(&cfg);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("cgroups: backend bpf cannot count: this process lacks CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); grant CAP_BPF and CAP_PERFMON"),
        "{err}"
    );
}

/// A CPU "back online" (told to the backend, not done to the machine:
/// nobody takes cpu1 offline here) gets new counters and a new generation
/// of readings in the program; the counts charged so far are kept and the
/// new counters' counts add on, still agreeing with `cpu.stat`. The
/// context switches, which the program counts itself, go on across the
/// new generation: they agree with the burner's own count.
#[test]
fn bpf_counts_are_kept_when_a_cpu_comes_back() {
    let _s = serial();
    // Bound by reference: the burners run while `w` lives.
    let mut w = Burning::start("hotplug", &[0.6], false);
    let Burning {
        ref c,
        ref dir,
        ref online,
        ref mut cc,
        ..
    } = w;
    assert!(online.len() >= 2, "needs two online CPUs: {online:?}");
    let switches = std::cell::Cell::new(0.0);
    let read = |cc: &mut CgroupCounting, cpus: &[u32]| {
        cc.collect(cpus);
        let mut f = Vec::new();
        cc.families(&mut f);
        let s = Snapshot { families: f };
        switches.set(value(&s, "perf_cgroup_context_switches_total", c).unwrap());
        value(&s, "perf_cgroup_cpu_clock_seconds_total", c).unwrap()
    };
    let dirs = [dir.as_path()];
    let without: Vec<u32> = online.iter().copied().filter(|&x| x != online[1]).collect();
    compare_clocks(
        "cpu-clock across a reopen vs cpu.stat (bpf)",
        LARGE_GAP,
        |_| {
            let own0 = common::cgroup::own_switches_now(dir);
            let b0 = bracket(|| usages(&dirs), || read(&mut *cc, online));
            let sw0 = switches.get();
            wait_usage(dir, 500_000);
            let v1 = read(&mut *cc, &without);
            let v2 = read(&mut *cc, online); // back: new counters on that CPU
            let v0 = b0.value;
            assert!(v2 >= v1 && v1 >= v0, "{v0} {v1} {v2}");
            wait_usage(dir, 500_000);
            let b3 = bracket(|| usages(&dirs), || read(&mut *cc, online));
            let own = common::cgroup::own_switches_now(dir) - own0;
            let sw = switches.get() - sw0;
            eprintln!("switches across the reopen: ours {sw}, the burner's own {own}");
            common::cgroup::assert_own_switches(sw, own);
            let ours = b3.value - v0;
            agrees_with_stat("cpu-clock across the reopen", ours, &b0, &b3)
        },
    );
}

/// A cgroup `burn` in a tree of its own with CPU burners of the given duty
/// cycles, counted by a `bpf` backend of its own (`per_cpu` series or not)
/// on the online CPUs of an engine that counts it too.
/// (Fields drop in order: the burners end before their tree is removed.)
struct Burning {
    _burners: Vec<Python>,
    _engine: Engine,
    c: String,
    dir: PathBuf,
    online: Vec<u32>,
    cc: CgroupCounting,
    _tree: CgroupTree,
}

impl Burning {
    fn start(tag: &str, duties: &[f64], per_cpu: bool) -> Burning {
        common::require_root();
        let tree = CgroupTree::new("pe-bpf", tag);
        let c = rel(&tree, "burn");
        let d = Listed::new(&tree);
        let dir = d.root.join(&c);
        let burners = duties
            .iter()
            .map(|&x| Python::start(&dir, &burner(x)))
            .collect();
        wait_usage(&dir, 100_000);
        d.set(vec![c.clone()]);
        let e = engine(Which::Bpf(8), &d);
        let online = e.online_cpus().to_vec();
        let k: Arc<dyn Kernel> = Arc::new(LiveKernel::new());
        let sets = vec!["software".to_string()];
        let b = BpfBackend::new(k, e.resolution(), &sets, &online, per_cpu, 8).unwrap();
        let cc = CgroupCounting::new(Box::new(d.clone()), Box::new(b));
        Burning {
            _tree: tree,
            _burners: burners,
            _engine: e,
            c,
            dir,
            online,
            cc,
        }
    }
}

/// The outcome of comparing `ours` with the growth of `cpu.stat` between
/// the brackets `a` and `b` (2 % + 3 ms).
fn agrees_with_stat<T, U>(what: &str, ours: f64, a: &Bracket<T>, b: &Bracket<U>) -> Outcome {
    let stat = a.growth(b, 0);
    eprintln!("{what}: {ours:.4} s, cpu.stat {stat} s");
    let mut o = Outcome::new(a.max_gap(b));
    o.check(stat.agrees(ours, 0.02 * stat.mid() + 0.003), || {
        format!("{what}: {ours:.4} s vs cpu.stat {stat} s")
    });
    o
}

/// The real binary with `backend: auto` on this machine (root, BTF):
/// counts with bpf, says so and why in the log and on the landing page,
/// and serves the cgroup's series.
#[test]
fn serve_with_auto_counts_with_bpf_and_says_why() {
    let _s = serial();
    common::require_root();
    let tree = CgroupTree::new("pe-bpf", "serve");
    let c = rel(&tree, "a");
    let d = Listed::new(&tree);
    let _b = Python::start(&d.root.join(&c), &burner(0.1));
    let cfg = backend_config(&tree, "auto");
    let mut p = common::exporter(&["--config.file", cfg.to_str().unwrap()]);
    p.wait_log("cgroups counted", Duration::from_secs(10));
    let _ = std::fs::remove_file(&cfg);
    assert!(
        p.output().contains("backend auto: BPF can be loaded"),
        "{}",
        p.output()
    );
    let landing = p.get("/").body;
    assert!(
        landing.contains("<p>Backend: bpf. 1 counted, 0 left out.</p>")
            && landing.contains("<p>Why bpf: backend auto: BPF can be loaded (CAP_SYS_ADMIN) and the kernel has BTF"),
        "{landing}"
    );
    let want = format!("perf_cgroup_cpu_clock_seconds_total{{cgroup=\"{c}\"}} ");
    common::wait_for(&want, Duration::from_secs(10), || {
        p.get("/metrics").body.contains(&want)
    });
}

/// `backend: auto` in a process holding CAP_PERFMON only (uid 0, every
/// other capability dropped): perf counts, and the log says why not bpf.
#[test]
fn auto_without_cap_bpf_falls_back_to_perf_and_says_why() {
    let _s = serial();
    common::require_root();
    common::require_tool("setpriv");
    let tree = CgroupTree::new("pe-bpf", "nocap");
    let c = rel(&tree, "a");
    let cfg = backend_config(&tree, "auto");
    let wrapper = [
        "setpriv",
        "--inh-caps=-all",
        "--bounding-set=-all,+perfmon",
        "--",
    ];
    let mut p = common::Proc::spawn(
        &wrapper,
        Path::new(common::EXPORTER),
        &["--config.file", cfg.to_str().unwrap()],
    );
    p.wait_log("cgroups counted", Duration::from_secs(10));
    let _ = std::fs::remove_file(&cfg);
    let log = p.output();
    assert!(
        log.contains("backend auto: perf, as this process may not load BPF programs (it lacks CAP_BPF (or CAP_SYS_ADMIN))")
            && log.contains("bpf_no_capability"),
        "{log}"
    );
    let want =
        format!("perf_cgroup_group_enabled_seconds_total{{cgroup=\"{c}\",set=\"software\"}} ");
    common::wait_for(&want, Duration::from_secs(10), || {
        p.get("/metrics").body.contains(&want)
    });
}

/// `per_cpu: true`: one series per CPU, summing to `cpu.stat`.
#[test]
fn bpf_per_cpu_series_sum_to_cpu_stat() {
    let _s = serial();
    let mut w = Burning::start("percpu", &[0.5, 0.5], true);
    let Burning {
        ref dir,
        ref online,
        ref mut cc,
        ..
    } = w;
    let per_cpu = |cc: &mut CgroupCounting| -> Vec<(String, f64)> {
        cc.collect(online);
        let mut f = Vec::new();
        cc.families(&mut f);
        let fam = f
            .iter()
            .find(|f| f.name == "perf_cgroup_cpu_clock_seconds_total")
            .expect("family");
        fam.samples
            .iter()
            .map(|s| {
                let cpu = s
                    .labels
                    .iter()
                    .find(|(k, _)| *k == "cpu")
                    .expect("cpu label");
                (cpu.1.clone(), s.value)
            })
            .collect()
    };
    let dirs = [dir.as_path()];
    compare_clocks(
        "the per-CPU cpu-clock's sum vs cpu.stat (bpf)",
        LARGE_GAP,
        |_| {
            let a = bracket(|| usages(&dirs), || per_cpu(&mut *cc));
            wait_usage(dir, 1_000_000);
            let b = bracket(|| usages(&dirs), || per_cpu(&mut *cc));
            assert_eq!(b.value.len(), online.len(), "{:?}", b.value);
            let sum: f64 =
                b.value.iter().map(|x| x.1).sum::<f64>() - a.value.iter().map(|x| x.1).sum::<f64>();
            eprintln!("per CPU {:?} -> {:?}", a.value, b.value);
            agrees_with_stat("the per-CPU sum", sum, &a, &b)
        },
    );
}

/// Issue 24 item 1, the `bpf` backend: a reload's new backend continues
/// the per-cgroup group times (they restarted from zero, 0.373 -> 0.053)
/// and counts, as the node's group times continue.
#[test]
fn bpf_group_times_and_counts_continue_over_a_reload() {
    let _s = serial();
    let tree = CgroupTree::new("pe-bpf", "reload");
    let busy = rel(&tree, "busy");
    let d = Listed::new(&tree);
    let _b = Python::start(&d.root.join(&busy), &burner(0.5));
    d.set(vec![busy.clone()]);
    let mut e = engine(Which::Bpf(4), &d);
    let deadline = Instant::now() + Duration::from_secs(30);
    let before = loop {
        let s = e.collect();
        // Long enough counted that a restart from zero shows at once.
        if value(&s, "perf_cgroup_group_enabled_seconds_total", &busy).is_some_and(|v| v > 0.3) {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the busy cgroup's group time stayed under 0.3 s for 30 s (a loaded machine?)"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let totals = e.cgroups().unwrap().totals();
    // The old counters close before the new ones open, as in a reload.
    drop(e);
    let mut e = engine_continuing(Which::Bpf(4), &d, Some(totals));
    let after = e.collect();
    for family in [
        "perf_cgroup_group_enabled_seconds_total",
        "perf_cgroup_group_running_seconds_total",
        "perf_cgroup_cpu_clock_seconds_total",
    ] {
        let v0 = value(&before, family, &busy).unwrap_or_else(|| panic!("{family} before"));
        let v1 = value(&after, family, &busy).unwrap_or_else(|| panic!("{family} after"));
        assert!(v1 >= v0, "{family} reset by the reload: {v0} -> {v1}");
    }
}

/// perf's modifiers per cgroup, on both backends: `page-faults:u` and
/// `page-faults:k` of a cgroup whose python process zero-fills 64 MiB (in
/// user mode: 16,384 fresh pages) count its user faults in `:u`, and the
/// `bpf` backend (counters opened once per CPU with the exclude bits,
/// read by the program) agrees with the `perf` backend (one counter per
/// cgroup per CPU).
#[test]
fn modifiers_per_cgroup_on_both_backends() {
    const FAULTS: &str = crate::config!("cgroup_bpf/faults");
    const PAGES: f64 = 16384.0;
    let _s = serial();
    let tree = CgroupTree::new("pe-bpf", "modifiers");
    let c = rel(&tree, "faults");
    let d = Listed::new(&tree);
    d.set(vec![c.clone()]);
    let mut bpf = engine_of(Which::Bpf(64), &d, FAULTS, None);
    let mut perf = engine_of(Which::Perf, &d, FAULTS, None);
    let (b0, p0) = (bpf.collect(), perf.collect());
    let out = Python::start(
        &d.root.join(&c),
        "b=bytearray(64<<20)\nprint(len(b), flush=True)\n",
    )
    .output();
    assert_eq!(
        out.trim(),
        (64 << 20).to_string(),
        "the workload did not run"
    );
    let (p1, b1) = (perf.collect(), bpf.collect());
    let f = |a: &Snapshot, b: &Snapshot, m: &str| delta(a, b, &format!("perf_cgroup_{m}"), &c);
    let (bu, bk) = (
        f(&b0, &b1, "page_faults_user_total"),
        f(&b0, &b1, "page_faults_kernel_total"),
    );
    let (pu, pk) = (
        f(&p0, &p1, "page_faults_user_total"),
        f(&p0, &p1, "page_faults_kernel_total"),
    );
    eprintln!("page faults of the cgroup: bpf user {bu} kernel {bk}, perf user {pu} kernel {pk}");
    for (name, user, kernel) in [("bpf", bu, bk), ("perf", pu, pk)] {
        assert!(user >= PAGES, "{name}: page-faults:u {user} < {PAGES}");
        assert!(kernel < user, "{name}: user {user}, kernel {kernel}");
    }
    assert!(
        (bu - pu).abs() <= 0.02 * pu + 10.0,
        "user: bpf {bu}, perf {pu}"
    );
    assert!(
        (bk - pk).abs() <= 0.02 * pk + 10.0,
        "kernel: bpf {bk}, perf {pk}"
    );
}

/// A cgroup the BPF program never charges (at level 20: it walks levels 0
/// to 15 of the hierarchy) is left out with a typed reason in `check`, on
/// the landing page and in the log, and no series of it is exported: a
/// zero for what is not counted is never served (issue 28, item 4).
#[test]
fn bpf_leaves_out_a_cgroup_beyond_its_reach_instead_of_exporting_zero() {
    let _s = serial();
    common::require_root();
    let tree = CgroupTree::new("pe-bpf", "deep");
    let top = tree.top.file_name().unwrap().to_string_lossy().to_string();
    // The top is at level 1: 19 levels below it put the leaf at level 20.
    let chain: Vec<String> = (2..=20).map(|l| format!("l{l}")).collect();
    let deep_tail = chain.join("/");
    tree.mkdir(&deep_tail);
    tree.mkdir("shallow");
    let (deep, shallow) = (format!("{top}/{deep_tail}"), format!("{top}/shallow"));
    let root = tree.top.parent().unwrap().to_path_buf();
    let _b = Python::start(&root.join(&deep), &burner(0.2));
    let _s2 = Python::start(&root.join(&shallow), &burner(0.05));
    let cfg = std::env::temp_dir().join(format!("{top}.yaml"));
    std::fs::write(
        &cfg,
        format!("{YAML}cgroups:\n  backend: bpf\n  preset: none\n  paths: [\"{shallow}\", \"{deep}\"]\n  sets: [software]\n"),
    )
    .unwrap();
    let text = check_text(&cfg);
    let row = text
        .lines()
        .find(|l| l.starts_with(&deep))
        .unwrap_or_else(|| panic!("no row for {deep}: {text}"));
    assert!(
        row.contains("left_out") && row.ends_with("not counted: the bpf backend's program reaches cgroups down to level 15 below the cgroup2 root and it is at level 20"),
        "{row}"
    );
    assert!(
        text.contains("cgroup_beyond_reach: what to do: count it with `cgroups.backend: perf`"),
        "{text}"
    );
    assert!(
        text.contains("2 cgroups matched: 1 counted, 1 left out (0 over max_cgroups 256, 0 gone, 1 beyond the backend's reach)"),
        "{text}"
    );
    let mut p = common::exporter(&["--config.file", cfg.to_str().unwrap()]);
    p.wait_log("cgroups counted", Duration::from_secs(10));
    let _ = std::fs::remove_file(&cfg);
    let log = p.output();
    let warned = log.lines().find(|l| {
        l.contains("level=warn")
            && l.contains("msg=\"cgroup not counted\"")
            && l.contains("code=cgroup_beyond_reach")
    });
    assert!(
        warned.is_some_and(|l| l.contains(&deep) && l.contains("backend=bpf")),
        "{log}"
    );
    let landing = p.get("/").body;
    assert!(
        landing.contains("<p>Backend: bpf. 1 counted, 1 left out.</p>")
            && landing.contains(&format!("<tr><td>{deep}</td><td>left_out</td>"))
            && landing.contains("and it is at level 20"),
        "{landing}"
    );
    let want = format!("perf_cgroup_cpu_clock_seconds_total{{cgroup=\"{shallow}\"}} ");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut body = p.get("/metrics").body;
    while !body.contains(&want) {
        assert!(Instant::now() < deadline, "{want} never served");
        std::thread::sleep(Duration::from_millis(50));
        body = p.get("/metrics").body;
    }
    assert!(
        !body.contains(&format!("cgroup=\"{deep}\"")),
        "a cgroup the program never charges is exported: {body}"
    );
}
