//! Per-cgroup counting on this machine's live kernel, as root: real
//! cgroups under `/sys/fs/cgroup/unified` (named `pe-cgengine-<pid>-...`,
//! removed by a guard on drop, also on panic) with CPU burners at known
//! duty cycles, a workload with a known number of context switches, the
//! `perf` tool side by side, churn of 500 cgroups, and hostile names.
//!
//! The tests drive the engine with the live kernel and a discovery that
//! lists a test cgroup's children, so they do not depend on the presets.

use crate::common;

/// The live tests count fds and CPU time: one at a time.
use common::serial;

use perf_exporter::cgroup::{Cgroup, CgroupError, Kind as CgKind, Selection};
use perf_exporter::config::Config;
use perf_exporter::engine::cgroup::{CgroupCounting, CgroupIssue, Discovery, PerfBackend};
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::export::prometheus;
use perf_exporter::perf::live::LiveKernel;
use perf_exporter::perf::Kernel;
use perf_exporter::pmu::PmuTable;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROOT: &str = "/sys/fs/cgroup/unified";

use common::cgroup::{burner, cgroup_value as value, CLOCKS_YAML as YAML};
use common::clocks::{bracket, compare_clocks, Outcome};

/// A cgroup this test created, with the processes it started in it;
/// killed and removed on drop.
struct CgDir {
    path: PathBuf,
    rel: String,
    children: Vec<Child>,
}

impl CgDir {
    fn new(rel: &str) -> CgDir {
        let path = Path::new(ROOT).join(rel);
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        CgDir {
            path,
            rel: rel.into(),
            children: Vec::new(),
        }
    }

    /// Starts `python3 -c script` inside the cgroup.
    fn spawn_python(&mut self, script: &str) -> &mut Child {
        self.children
            .push(common::cgroup::python_in(&self.path, script));
        self.children.last_mut().unwrap()
    }

    fn usage_usec(&self) -> u64 {
        common::cgroup::usage_usec(&self.path)
    }

    fn cgroup(&self) -> Cgroup {
        cgroup_of(&self.rel)
    }
}

impl Drop for CgDir {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        common::cgroup::remove_tree(&self.path);
    }
}

fn cgroup_of(rel: &str) -> Cgroup {
    Cgroup {
        rel: rel.into(),
        dir: Path::new(ROOT).join(rel),
        id: 0,
        kind: CgKind::Path,
        labels: vec![("cgroup", rel.to_string())],
    }
}

/// Counts the children of a test cgroup, or a fixed list.
#[derive(Debug, Clone, Default)]
struct Listed(Arc<Mutex<Vec<String>>>);

impl Listed {
    fn set(&self, rels: Vec<String>) {
        *self.0.lock().unwrap() = rels;
    }
}

impl Discovery for Listed {
    fn poll(&mut self) -> Result<Option<Selection>, CgroupError> {
        Ok(Some(Selection {
            counted: self
                .0
                .lock()
                .unwrap()
                .iter()
                .map(|r| cgroup_of(r))
                .collect(),
            left_out: Vec::new(),
        }))
    }
}

fn live_engine(yaml: &str, d: &Listed) -> Engine {
    common::require_root();
    common::require_perf_privilege();
    let t = PmuTable::discover(Path::new("/sys")).unwrap();
    let k: Arc<dyn Kernel> = Arc::new(LiveKernel::new());
    let cfg = Config::parse(yaml, "t.yaml").unwrap();
    let mut e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
    let sets = vec!["software".to_string()];
    let b = PerfBackend::new(k, e.resolution(), &sets, e.online_cpus(), false, None);
    e.attach_cgroups(CgroupCounting::new(Box::new(d.clone()), Box::new(b)));
    let issues = e.cgroups().unwrap().issues();
    assert!(
        issues.iter().all(|i| matches!(i, CgroupIssue::Gone { .. })),
        "{issues:#?}"
    );
    e
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn name(tag: &str) -> String {
    format!("pe-cgengine-{}-{tag}", std::process::id())
}

/// Waits until the cgroup has used some CPU (python has started).
fn wait_busy(c: &CgDir) {
    let start = c.usage_usec();
    let what = format!("the burner in {} to run", c.rel);
    common::wait_for(&what, Duration::from_secs(20), || {
        c.usage_usec() >= start + 200_000
    });
}

#[test]
fn cpu_time_per_cgroup_agrees_with_cpu_stat_and_perf_stat() {
    let _s = serial();
    common::require_tool("perf");
    let mut hi = CgDir::new(&name("duty80"));
    let mut lo = CgDir::new(&name("duty20"));
    hi.spawn_python(&burner(0.8));
    lo.spawn_python(&burner(0.2));
    wait_busy(&hi);
    wait_busy(&lo);
    let d = Listed::default();
    d.set(vec![hi.rel.clone(), lo.rel.clone()]);
    let mut e = live_engine(YAML, &d);
    e.collect();
    let g = format!("{},{}", hi.rel, hi.rel);
    let usages = || vec![hi.usage_usec() as f64 * 1e-6, lo.usage_usec() as f64 * 1e-6];
    let mut last = None;
    // The reads of cpu.stat bracket each collection; perf's window is its
    // `sleep 3` inside ours: the gap is also how much longer ours was.
    let large_gap = Duration::from_millis(100);
    compare_clocks(
        "per-cgroup cpu time vs cpu.stat and perf stat -G",
        large_gap,
        |_| {
            let perf = Command::new("perf")
                .args([
                    "stat",
                    "-a",
                    "-x",
                    ",",
                    "-e",
                    "cpu-clock,context-switches",
                    "-G",
                    &g,
                    "--",
                    "sleep",
                    "3",
                ])
                .stderr(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .expect("perf stat");
            let steal0 = common::clocks::steal_seconds();
            let b0 = bracket(usages, || e.collect());
            let t0 = Instant::now();
            let out = perf.wait_with_output().expect("perf stat ran");
            let b1 = bracket(usages, || e.collect());
            // Stolen from either CPU: at most what the burners absorbed.
            let steal = common::clocks::steal_seconds() - steal0;
            let window = t0.elapsed();
            let mut o = Outcome::new(
                b0.max_gap(&b1)
                    .max(window.saturating_sub(Duration::from_secs(3))),
            );
            let (s0, s1) = (&b0.value, &b1.value);
            for (i, c) in [&hi, &lo].into_iter().enumerate() {
                let stat = b0.growth(&b1, i);
                for fam in [
                    "perf_cgroup_cpu_clock_seconds_total",
                    "perf_cgroup_task_clock_seconds_total",
                ] {
                    let ours =
                        value(s1, fam, &c.rel).unwrap() - value(s0, fam, &c.rel).unwrap_or(0.0);
                    eprintln!(
                        "{}: {fam} {ours:.4} s, cpu.stat {stat} s, {steal:.3} s stolen",
                        c.rel
                    );
                    o.check(
                        stat.agrees_but_steal(ours, 0.02 * stat.mid() + 0.002, steal),
                        || format!("{}: {fam} {ours:.4} s vs cpu.stat usage {stat} s", c.rel),
                    );
                }
            }
            // perf stat over (nearly) the same window, on the same cgroup.
            let text = String::from_utf8_lossy(&out.stderr);
            let perf_ms: f64 = text
                .lines()
                .find(|l| l.contains(",cpu-clock,"))
                .and_then(|l| l.split(',').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no cpu-clock line in perf stat's output:\n{text}"));
            let ours = value(s1, "perf_cgroup_cpu_clock_seconds_total", &hi.rel).unwrap()
                - value(s0, "perf_cgroup_cpu_clock_seconds_total", &hi.rel).unwrap_or(0.0);
            eprintln!(
                "perf stat -G {}: cpu-clock {:.4} s; ours {ours:.4} s over {window:?}",
                hi.rel,
                perf_ms / 1e3
            );
            o.check((ours - perf_ms / 1e3).abs() <= 0.05 * ours + 0.05, || {
                format!("perf stat says {perf_ms} ms, we say {ours:.4} s over {window:?}\n{text}")
            });
            last = Some(b1.value);
            o
        },
    );
    let s1 = last.expect("measured");
    let en = value(&s1, "perf_cgroup_group_enabled_seconds_total", &hi.rel).unwrap();
    assert!(en > 0.0);
}

#[test]
fn context_switches_per_cgroup_agree_with_a_known_workload() {
    let _s = serial();
    let mut c = CgDir::new(&name("ctxsw"));
    let d = Listed::default();
    d.set(vec![c.rel.clone()]);
    let mut e = live_engine(YAML, &d);
    e.collect();
    let before = e.collect();
    // 2000 sleeps: about one voluntary switch each (not quite: a sleep
    // whose 0.2 ms timer fires before the task blocks, as when the VM's
    // CPU was taken away for longer, returns without a switch; CI saw 1,995);
    // the process reports its own voluntary and involuntary switches when
    // it is done, which is what ours must agree with.
    let child = c.spawn_python(
        "import time,resource\nfor i in range(2000): time.sleep(0.0002)\nr=resource.getrusage(resource.RUSAGE_SELF)\nprint(r.ru_nvcsw+r.ru_nivcsw, flush=True)\n",
    );
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    let _ = child.wait();
    let reported: f64 = out.trim().parse().expect("python printed its switches");
    let after = e.collect();
    let ours = value(&after, "perf_cgroup_context_switches_total", &c.rel).unwrap()
        - value(&before, "perf_cgroup_context_switches_total", &c.rel).unwrap_or(0.0);
    eprintln!("context switches: ours {ours}, the workload's own {reported}");
    assert!(
        reported >= 1500.0,
        "the workload switched only {reported} times in 2000 sleeps"
    );
    common::cgroup::assert_own_switches(ours, reported);
}

#[test]
fn churn_of_500_cgroups_leaks_nothing_and_survivors_never_go_back() {
    let _s = serial();
    let parent = CgDir::new(&name("churn"));
    let mut keep = CgDir::new(&format!("{}/keep", parent.rel));
    keep.spawn_python(&burner(0.1));
    wait_busy(&keep);
    let d = Listed::default();
    d.set(vec![keep.rel.clone()]);
    let mut e = live_engine(YAML, &d);
    e.collect();
    let base = fds();
    let mut last = 0.0;
    let mut live: Vec<String> = Vec::new();
    let mut gone_reported = 0;
    for i in 0..500 {
        let rel = format!("{}/c{i}", parent.rel);
        std::fs::create_dir(Path::new(ROOT).join(&rel)).unwrap();
        live.push(rel);
        if live.len() > 4 {
            let old = live.remove(0);
            std::fs::remove_dir(Path::new(ROOT).join(&old)).unwrap();
            if i % 50 == 0 {
                // Removed after discovery saw it: gone before open.
                let ghost = format!("{}/ghost{i}", parent.rel);
                std::fs::create_dir(Path::new(ROOT).join(&ghost)).unwrap();
                std::fs::remove_dir(Path::new(ROOT).join(&ghost)).unwrap();
                let mut list = vec![keep.rel.clone(), old, ghost];
                list.extend(live.iter().cloned());
                d.set(list);
                e.collect();
                gone_reported += e
                    .cgroups()
                    .unwrap()
                    .issues()
                    .iter()
                    .filter(|x| matches!(x, CgroupIssue::Gone { .. }))
                    .count();
            }
        }
        let mut list = vec![keep.rel.clone()];
        list.extend(live.iter().cloned());
        d.set(list);
        let s = e.collect();
        let v = value(&s, "perf_cgroup_cpu_clock_seconds_total", &keep.rel).expect("keep counted");
        assert!(v >= last, "keep's counter went back: {last} -> {v}");
        last = v;
        for r in &live {
            assert!(
                value(&s, "perf_cgroup_group_enabled_seconds_total", r).is_some(),
                "{r} counted within one collection"
            );
        }
    }
    for r in live.drain(..) {
        std::fs::remove_dir(Path::new(ROOT).join(r)).unwrap();
    }
    d.set(vec![keep.rel.clone()]);
    e.collect();
    assert_eq!(fds(), base, "file descriptors back to the baseline");
    assert!(
        gone_reported >= 9,
        "cgroups gone before open reported: {gone_reported}"
    );
    drop(e);
    drop(keep);
}

#[test]
fn hostile_cgroup_names_are_escaped_exactly() {
    let _s = serial();
    let parent = CgDir::new(&name("hostile"));
    let names = [
        "with space".to_string(),
        "q\"uote's".to_string(),
        "back\\slash".to_string(),
        "l".repeat(240),
    ];
    let dirs: Vec<CgDir> = names
        .iter()
        .map(|n| CgDir::new(&format!("{}/{n}", parent.rel)))
        .collect();
    // The kernel refuses a newline in a cgroup name (cgroup_mkdir: EINVAL);
    // the sim tests cover its escaping.
    let nl = Path::new(ROOT).join(&parent.rel).join("new\nline");
    assert_eq!(
        std::fs::create_dir(&nl).map_err(|e| e.raw_os_error()),
        Err(Some(libc::EINVAL))
    );
    let d = Listed::default();
    d.set(dirs.iter().map(|c| c.rel.clone()).collect());
    let mut e = live_engine(YAML, &d);
    let want: Vec<String> = names
        .iter()
        .map(|n| {
            let esc = n
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!(
                "perf_cgroup_group_enabled_seconds_total{{cgroup=\"{}/{esc}\",set=\"software\"}} ",
                parent.rel
            )
        })
        .collect();
    // Collections until every cgroup's series is there (deadline 5 s).
    let mut text = String::new();
    common::eventually(Duration::from_secs(5), || {
        text.clear();
        prometheus::encode_text(&e.collect().families, &mut text);
        want.iter().all(|w| text.contains(w.as_str()))
    });
    for w in &want {
        assert!(text.contains(w.as_str()), "{w:?} missing in\n{text}");
    }
    assert_eq!(e.cgroups().unwrap().backend().counted().len(), names.len());
    let _ = dirs.iter().map(CgDir::cgroup).count();
}

/// The real binary counting the children of `parent` (a `paths:` glob),
/// once it logged the cgroups counted; the config's directory.
fn serve_children_of(parent: &CgDir) -> (common::Proc, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let yaml = format!(
        "{YAML}cgroups:\n  paths: [\"{}/*\"]\n  sets: [software]\n",
        parent.rel
    );
    std::fs::write(&cfg, yaml).unwrap();
    let mut p = common::exporter(&["--config.file", cfg.to_str().unwrap()]);
    p.wait_log("cgroups counted", Duration::from_secs(10));
    (p, dir)
}

/// The real binary on the live kernel with real discovery (`paths:` glob
/// under this test's cgroup): a new cgroup is counted from the next
/// scrape, a removed one's series leave, and the labels are the paths.
#[test]
fn serve_follows_real_cgroups_coming_and_going() {
    let _s = serial();
    common::require_root();
    common::require_perf_privilege();
    let parent = CgDir::new(&name("serve"));
    let mut a = CgDir::new(&format!("{}/a", parent.rel));
    a.spawn_python(&burner(0.1));
    wait_busy(&a);
    let (p, _dir) = serve_children_of(&parent);
    let series = |rel: &str| format!("perf_cgroup_cpu_clock_seconds_total{{cgroup=\"{rel}\"}} ");
    let scrape_until = |p: &common::Proc, want: &str, present: bool| {
        let found = common::poll(Duration::from_secs(10), Duration::from_millis(50), || {
            (p.get("/metrics").body.contains(want) == present).then_some(())
        });
        assert!(
            found.is_some(),
            "{want:?} present={present} within 10 s:\n{}",
            p.get("/metrics").body
        );
    };
    scrape_until(&p, &series(&a.rel), true);
    let b = CgDir::new(&format!("{}/b", parent.rel));
    // Counted from the first scrape after its creation (inotify).
    let body = p.get("/metrics").body;
    assert!(body.contains(&series(&b.rel)), "{}", body);
    let gone = b.rel.clone();
    drop(b);
    let body = p.get("/metrics").body;
    assert!(!body.contains(&series(&gone)), "{body}");
    assert!(body.contains(&series(&a.rel)));
}

/// Issue 28 item 8: a cgroup named with bytes that are not UTF-8 (`x`
/// and the byte 0xff) and its lossy twin (`x` and U+FFFD), both busy,
/// under the real binary with real discovery: two series, labelled
/// `x\xff` (four characters) and `x\u{FFFD}`, both counting, and neither
/// reported gone.
#[test]
fn a_cgroup_named_with_bytes_is_counted_apart_from_its_lossy_twin() {
    use std::os::unix::ffi::OsStrExt;
    let _s = serial();
    common::require_root();
    common::require_perf_privilege();
    let parent = CgDir::new(&name("bytes"));
    let raw = Path::new(ROOT)
        .join(&parent.rel)
        .join(std::ffi::OsStr::from_bytes(b"x\xff"));
    std::fs::create_dir(&raw).unwrap_or_else(|e| panic!("mkdir {}: {e}", raw.display()));
    let mut bytes = CgDir {
        path: raw,
        rel: format!("{}/x\\xff", parent.rel),
        children: Vec::new(),
    };
    let mut lossy = CgDir::new(&format!("{}/x\u{FFFD}", parent.rel));
    for c in [&mut bytes, &mut lossy] {
        c.spawn_python(&burner(0.1));
        wait_busy(c);
    }
    let (p, _dir) = serve_children_of(&parent);
    // The exposition escapes the label's backslash: `x\\xff`.
    let series = [
        format!(
            "perf_cgroup_cpu_clock_seconds_total{{cgroup=\"{}/x\\\\xff\"}}",
            parent.rel
        ),
        format!(
            "perf_cgroup_cpu_clock_seconds_total{{cgroup=\"{}/x\u{FFFD}\"}}",
            parent.rel
        ),
    ];
    let s = p.scrape_until(Duration::from_secs(10), "both cgroups counting", |s| {
        series.iter().all(|k| s.get(k).is_some_and(|v| *v > 0.0))
    });
    let ours: Vec<&String> = s
        .keys()
        .filter(|k| k.starts_with("perf_cgroup_cpu_clock_seconds_total{"))
        .filter(|k| k.contains(&parent.rel))
        .collect();
    assert_eq!(ours, series.iter().collect::<Vec<_>>(), "{s:?}");
    let page = p.get("/").body;
    assert!(!page.contains("cgroup_gone"), "{page}");
    assert!(page.contains(r"x\xff"), "the page names it: {page}");
    assert!(!p.output().contains("cgroup_gone"), "{}", p.output());
}
