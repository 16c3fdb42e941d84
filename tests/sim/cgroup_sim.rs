//! Per-cgroup counting on the simulated PMU with a manual clock, against
//! the fixture tree `tests/fixtures/cgroup-sim/basic` (each cgroup counts
//! its `cpu.stat` share of every CPU's count): exact values, the sum over
//! disjoint cgroups within the node count, churn, a cgroup gone before
//! open, the fd budget, uncore sets refused, carry-over, label escaping.

use crate::common;
use crate::engines::{engine_on, table, SEC};

use perf_exporter::cgroup::rank::Usage;
use perf_exporter::cgroup::{Cgroup, CgroupError, Kind as CgKind, Selection};
use perf_exporter::engine::cgroup::{
    CgroupCounting, CgroupIssue, CgroupTotals, Discovery, PerfBackend, SetGap,
};
use perf_exporter::engine::Engine;
use perf_exporter::export::prometheus;
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::snapshot::{Sample, Snapshot};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const YAML: &str = crate::software_set!();

fn tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroup-sim/basic")
}

fn cg(root: &Path, rel: &str) -> Cgroup {
    Cgroup {
        rel: rel.into(),
        dir: root.join(rel),
        id: 0,
        kind: CgKind::Path,
        labels: vec![("cgroup", rel.to_string())],
    }
}

/// A discovery the test steers.
#[derive(Debug, Clone, Default)]
struct Steered(Arc<Mutex<Selection>>, Arc<Mutex<Option<Usage>>>);

impl Steered {
    /// The `cpu.stat` reading the next collection takes: `usage_usec` of
    /// `rel`.
    fn usage_at(&self, rel: &str, usec: u64) {
        *self.1.lock().unwrap() = Some(Usage {
            usec: vec![(rel.to_string(), usec)],
        });
    }

    fn set(&self, root: &Path, rels: &[&str]) {
        self.0.lock().unwrap().counted = rels.iter().map(|r| cg(root, r)).collect();
    }
}

impl Discovery for Steered {
    fn poll(&mut self) -> Result<Option<Selection>, CgroupError> {
        Ok(Some(self.0.lock().unwrap().clone()))
    }

    fn usage(&mut self) -> Option<Usage> {
        self.1.lock().unwrap().take()
    }
}

struct Rig {
    k: Arc<SimKernel>,
    e: Engine,
    d: Steered,
}

fn rig(
    fixture: &str,
    yaml: &str,
    sets: &[&str],
    per_cpu: bool,
    budget: Option<usize>,
    rels: &[&str],
) -> Rig {
    let (k, mut e) = engine_on(table(fixture), yaml, |_| {});
    let d = Steered::default();
    d.set(&tree(), rels);
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let b = PerfBackend::new(
        k.clone(),
        e.resolution(),
        &sets,
        e.online_cpus(),
        per_cpu,
        budget,
    );
    e.attach_cgroups(CgroupCounting::new(Box::new(d.clone()), Box::new(b)));
    Rig { k, e, d }
}

fn value(s: &Snapshot, family: &str, labels: &str) -> Option<f64> {
    let f = s.families.iter().find(|f| f.name == family)?;
    f.samples
        .iter()
        .find(|x| x.labels.rendered() == labels)
        .map(|x| x.value)
}

/// `perf_cgroup_cpu_clock_seconds_total` of the series with these labels.
fn clock(s: &Snapshot, labels: &str) -> f64 {
    value(s, "perf_cgroup_cpu_clock_seconds_total", labels).expect(labels)
}

fn sum(s: &Snapshot, family: &str) -> f64 {
    s.families
        .iter()
        .filter(|f| f.name == family)
        .flat_map(|f| &f.samples)
        .map(|x| x.value)
        .sum()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * b.abs().max(1.0)
}

#[test]
fn cgroups_count_their_share_and_never_more_than_the_node() {
    let mut r = rig(
        "vm-no-pmu",
        YAML,
        &["software"],
        false,
        None,
        &["app/a", "app/b"],
    );
    r.e.collect();
    r.k.advance(SEC);
    let s = r.e.collect();
    let node = sum(&s, "perf_cpu_clock_seconds_total");
    let a = clock(&s, "{cgroup=\"app/a\"}");
    let b = clock(&s, "{cgroup=\"app/b\"}");
    // Two CPUs, one second: the node counts 2 s; app/a 45 %, app/b 15 %.
    assert!(close(node, 2.0), "{node}");
    assert!(close(a, 0.9), "{a}");
    assert!(close(b, 0.3), "{b}");
    assert!(a + b <= node);
    let cs = value(
        &s,
        "perf_cgroup_context_switches_total",
        "{cgroup=\"app/a\"}",
    )
    .unwrap();
    let cs_node = sum(&s, "perf_context_switches_total");
    assert!(cs > 0.0 && cs < cs_node, "{cs} {cs_node}");
    let en = value(
        &s,
        "perf_cgroup_group_enabled_seconds_total",
        "{cgroup=\"app/a\",set=\"software\"}",
    )
    .unwrap();
    let run = value(
        &s,
        "perf_cgroup_group_running_seconds_total",
        "{cgroup=\"app/a\",set=\"software\"}",
    )
    .unwrap();
    assert!(close(en, 2.0) && close(run, 2.0), "{en} {run}");
}

#[test]
fn multiplexed_cgroup_groups_are_scaled_like_node_groups() {
    let mut r = rig("vm-no-pmu", YAML, &["software"], true, None, &["app/a"]);
    r.e.collect();
    r.k.set_mux_ratio("software", 0.5);
    r.k.advance(SEC);
    let s = r.e.collect();
    let a = clock(&s, "{cgroup=\"app/a\",cpu=\"1\"}");
    assert!(close(a, 0.45), "{a}");
    let run = value(
        &s,
        "perf_cgroup_group_running_seconds_total",
        "{cgroup=\"app/a\",set=\"software\",cpu=\"1\"}",
    )
    .unwrap();
    assert!(close(run, 0.5), "{run}");
    // Its state says so, with the running share, as the node's do.
    let m = "metric=\"perf_cgroup_cpu_clock_seconds_total\",cgroup=\"app/a\",cpu=\"1\"";
    assert_eq!(
        value(
            &s,
            "perf_cgroup_counter_state",
            &format!("{{{m},state=\"multiplexed\"}}")
        ),
        Some(1.0)
    );
    let ratio = value(&s, "perf_cgroup_counter_running_ratio", &format!("{{{m}}}")).unwrap();
    assert!(close(ratio, 0.5), "{ratio}");
}

#[test]
fn churn_opens_new_cgroups_and_closes_removed_ones() {
    let mut r = rig("vm-no-pmu", YAML, &["software"], false, None, &["app/a"]);
    let base = r.k.live_counters();
    r.d.set(&tree(), &["app/a", "app/b"]);
    r.k.advance(SEC);
    let s = r.e.collect();
    // Counted from the collection that saw it (its counts start then).
    assert!(r
        .e
        .cgroups()
        .unwrap()
        .backend()
        .counted()
        .contains(&"app/b".to_string()));
    assert!(r.k.live_counters() > base);
    let a1 = clock(&s, "{cgroup=\"app/a\"}");
    r.k.advance(SEC);
    let s = r.e.collect();
    assert!(value(
        &s,
        "perf_cgroup_cpu_clock_seconds_total",
        "{cgroup=\"app/b\"}"
    )
    .is_some());
    r.d.set(&tree(), &["app/a"]);
    r.k.advance(SEC);
    let s = r.e.collect();
    assert_eq!(
        value(
            &s,
            "perf_cgroup_cpu_clock_seconds_total",
            "{cgroup=\"app/b\"}"
        ),
        None
    );
    assert_eq!(r.k.live_counters(), base, "app/b's counters closed");
    let a3 = clock(&s, "{cgroup=\"app/a\"}");
    assert!(a3 > a1, "surviving counter keeps counting");
    for _ in 0..200 {
        r.d.set(&tree(), &["app/a", "app/b"]);
        r.e.collect();
        r.d.set(&tree(), &["app/a"]);
        r.e.collect();
    }
    assert_eq!(
        r.k.live_counters(),
        base,
        "no counter leaked over 200 comings and goings"
    );
}

#[test]
fn a_cgroup_gone_before_open_is_reported_not_fatal() {
    let mut r = rig(
        "vm-no-pmu",
        YAML,
        &["software"],
        false,
        None,
        &["app/a", "app/vanished"],
    );
    r.k.advance(SEC);
    let s = r.e.collect();
    let c = r.e.cgroups().unwrap();
    assert_eq!(c.backend().counted(), vec!["app/a".to_string()]);
    let issues = c.issues();
    assert!(issues.iter().any(|i| matches!(i, CgroupIssue::Gone { cgroup, errno } if cgroup == "app/vanished" && *errno == libc::ENOENT)), "{issues:?}");
    assert!(value(
        &s,
        "perf_cgroup_cpu_clock_seconds_total",
        "{cgroup=\"app/a\"}"
    )
    .is_some());
}

/// A cgroup v2 tree whose root has applied no controller yet (an empty
/// `cgroup.subtree_control`, as under a minimal init): the kernel has no
/// perf_event state in child cgroups and refuses their counters with
/// ENOENT, which must not read "no PMU claims this encoding" (seen on the
/// emulated arm64 guest, tests/arm64_guest.rs). Once a controller is
/// applied, the next sync counts them.
#[test]
fn a_cgroup_without_perf_event_state_is_named_with_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for d in ["app/a", "app/b"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
        std::fs::write(root.join(d).join("cpu.stat"), "usage_usec 250\n").unwrap();
    }
    std::fs::write(root.join("cgroup.controllers"), "cpu io memory pids\n").unwrap();
    std::fs::write(root.join("cgroup.subtree_control"), "\n").unwrap();
    std::fs::write(root.join("cpu.stat"), "usage_usec 1000\n").unwrap();
    let mut r = rig("vm-no-pmu", YAML, &["software"], false, None, &[]);
    r.d.set(root, &["app/a"]);
    r.k.advance(SEC);
    r.e.collect();
    let c = r.e.cgroups().unwrap();
    assert!(
        c.backend().counted().is_empty(),
        "{:?}",
        c.backend().counted()
    );
    let issues = c.issues();
    let i = issues
        .iter()
        .find(|i| matches!(i, CgroupIssue::NoPerfEventState { cgroup, .. } if cgroup == "app/a"))
        .unwrap_or_else(|| panic!("expected a NoPerfEventState issue for app/a, got {issues:?}"));
    assert_eq!(i.code(), "cgroup_no_perf_event");
    assert!(
        i.what_to_do().contains("cgroup.subtree_control"),
        "{}",
        i.what_to_do()
    );
    assert!(!i.to_string().contains("no PMU claims"), "{i}");
    // A controller applied (systemd does it at boot): counted at the next sync.
    std::fs::write(root.join("cgroup.subtree_control"), "pids\n").unwrap();
    r.d.set(root, &["app/a", "app/b"]);
    r.k.advance(SEC);
    r.e.collect();
    let c = r.e.cgroups().unwrap();
    assert_eq!(
        c.backend().counted(),
        vec!["app/a".to_string(), "app/b".to_string()]
    );
}

#[test]
fn a_small_fd_budget_leaves_whole_cgroups_out_and_says_so() {
    // vm-no-pmu: 2 CPUs x 2 events + the directory = 5 fds per cgroup.
    // app/b comes first in the selection, but app/a is busier (45 % vs
    // 15 % of the tree's usage): app/a wins the budget.
    let mut r = rig(
        "vm-no-pmu",
        YAML,
        &["software"],
        false,
        Some(7),
        &["app/b", "app/a"],
    );
    r.e.collect();
    let c = r.e.cgroups().unwrap();
    assert_eq!(c.backend().counted(), vec!["app/a".to_string()]);
    assert_eq!(c.backend().open_fds(), 5);
    let issues = c.issues();
    assert!(issues.iter().any(|i| matches!(i, CgroupIssue::FdBudget { cgroup, per_cgroup: 5, .. } if cgroup == "app/b")), "{issues:?}");
    assert_eq!(
        issues
            .iter()
            .find(|i| i.code() == "fd_limit")
            .map(|i| i.what_to_do().contains("RLIMIT_NOFILE")),
        Some(true)
    );
}

#[test]
fn uncore_sets_are_refused_per_cgroup() {
    let yaml = crate::config!("cgroup_sim/core_and_dram");
    let mut r = rig(
        "intel-skx",
        yaml,
        &["core", "dram"],
        false,
        None,
        &["app/a"],
    );
    let s = r.e.collect();
    let issues = r.e.cgroups().unwrap().issues();
    let u = issues
        .iter()
        .find(|i| i.code() == "uncore_per_cgroup")
        .expect("refused");
    assert!(
        u.to_string().contains("uncore_imc_0") && u.what_to_do().contains("cgroups.sets"),
        "{u}"
    );
    assert!(s
        .families
        .iter()
        .all(|f| f.name != "perf_cgroup_dram_read_bytes_total"));
    r.k.advance(SEC);
    let s = r.e.collect();
    assert!(value(&s, "perf_cgroup_instructions_total", "{cgroup=\"app/a\"}").is_some());
}

/// A set that cannot be counted per cgroup (here `core`: no hardware
/// PMU) has no group-time series, not zeros; it is reported unavailable
/// with what to do. The set that opened keeps its group times.
#[test]
fn a_set_that_cannot_open_per_cgroup_has_no_group_times() {
    let yaml = format!(
        "{YAML}  - name: core
    events:
      - metric: perf_instructions_total
        event: instructions
"
    );
    let mut r = rig(
        "vm-no-pmu",
        &yaml,
        &["software", "core"],
        false,
        None,
        &["app/a"],
    );
    r.e.collect();
    r.k.advance(SEC);
    let s = r.e.collect();
    for family in [
        "perf_cgroup_group_enabled_seconds_total",
        "perf_cgroup_group_running_seconds_total",
    ] {
        let f = s.families.iter().find(|f| f.name == family).expect(family);
        let sets: Vec<&str> = f.samples.iter().map(|x| x.labels.rendered()).collect();
        assert_eq!(
            sets,
            vec!["{cgroup=\"app/a\",set=\"software\"}"],
            "{family}"
        );
        assert!(f.samples[0].value > 0.0, "{family}");
    }
    let issues = r.e.cgroups().unwrap().issues();
    let u = issues
        .iter()
        .find(|i| i.code() == "cgroup_set_unavailable")
        .unwrap_or_else(|| panic!("not reported: {issues:?}"));
    assert!(
        matches!(u, CgroupIssue::SetUnavailable { set, why: SetGap::Unavailable } if set == "core"),
        "{u:?}"
    );
    assert!(u.to_string().contains("`core`"), "{u}");
    assert!(u.what_to_do().contains("cgroups.sets"), "{u}");
}

/// A set whose groups the kernel refuses in every counted cgroup has no
/// group times either, and is reported with the refusals.
#[test]
fn a_set_refused_in_every_cgroup_has_no_group_times() {
    let mut r = rig("vm-no-pmu", YAML, &["software"], false, None, &["app/a"]);
    r.e.collect();
    r.k.refuse("software", libc::EACCES);
    r.d.set(&tree(), &["app/b"]);
    r.k.advance(SEC);
    let s = r.e.collect();
    assert!(
        s.families
            .iter()
            .all(|f| !f.name.starts_with("perf_cgroup_group_")),
        "{:?}",
        s.families.iter().map(|f| &f.name).collect::<Vec<_>>()
    );
    let issues = r.e.cgroups().unwrap().issues();
    assert!(
        issues.iter().any(|i| matches!(i, CgroupIssue::SetUnavailable { set, why: SetGap::OpenFailed } if set == "software")),
        "{issues:?}"
    );
    assert!(
        issues.iter().any(|i| i.code() != "cgroup_set_unavailable"),
        "the refusal itself: {issues:?}"
    );
}

/// A new engine with the `software` set counted per cgroup in `rels`,
/// continuing `totals` (as a reload does); returns how many per-cgroup
/// series continued.
fn reload_rig(yaml: &str, rels: &[&str], totals: CgroupTotals) -> (Rig, usize) {
    let mut r = rig("vm-no-pmu", yaml, &[], false, None, rels);
    // The engine hands out its counting only by reference; carry over
    // through a fresh counting on the new engine.
    let sets = vec!["software".to_string()];
    let b = PerfBackend::new(
        r.k.clone(),
        r.e.resolution(),
        &sets,
        r.e.online_cpus(),
        false,
        None,
    );
    let mut c = CgroupCounting::new(Box::new(r.d.clone()), Box::new(b));
    let n = c.carry_over(totals);
    r.e.attach_cgroups(c);
    (r, n)
}

/// The wall clock the engine stamps starts with.
fn wall_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn sample<'a>(s: &'a Snapshot, family: &str, labels: &str) -> &'a Sample {
    s.families
        .iter()
        .filter(|f| f.name == family)
        .flat_map(|f| &f.samples)
        .find(|x| x.labels.rendered() == labels)
        .unwrap_or_else(|| panic!("{family}{labels} missing"))
}

const ENABLED: &str = "perf_cgroup_group_enabled_seconds_total";
const RUNNING: &str = "perf_cgroup_group_running_seconds_total";
const SET_A: &str = "{cgroup=\"app/a\",set=\"software\"}";

/// Issue 24 item 1: a reload (even of an unchanged config) continued the
/// per-cgroup counts but restarted the per-cgroup group times from zero,
/// under their old start time over OTLP. They continue now, by set name,
/// as the node's do, with their start.
#[test]
fn totals_carry_over_to_a_new_backend_for_the_same_cgroup_and_metric() {
    let mut r = rig("vm-no-pmu", YAML, &["software"], false, None, &["app/a"]);
    r.e.collect();
    r.k.advance(SEC);
    let s = r.e.collect();
    let (en0, run0) = (sample(&s, ENABLED, SET_A), sample(&s, RUNNING, SET_A));
    assert!(
        close(en0.value, 2.0) && close(run0.value, 2.0),
        "{en0:?} {run0:?}"
    );
    let (start, times_start) = (
        sample(
            &s,
            "perf_cgroup_cpu_clock_seconds_total",
            "{cgroup=\"app/a\"}",
        )
        .start_unix_nanos,
        en0.start_unix_nanos,
    );
    let totals = r.e.cgroups().unwrap().totals();
    let (mut r2, n) = reload_rig(YAML, &["app/a"], totals);
    assert_eq!(
        n, 3,
        "cpu-clock, context-switches and the set's group times continue"
    );
    let s = r2.e.collect();
    let a = sample(
        &s,
        "perf_cgroup_cpu_clock_seconds_total",
        "{cgroup=\"app/a\"}",
    );
    assert!(close(a.value, 0.9), "{a:?}");
    assert_eq!(a.start_unix_nanos, start);
    for (family, before) in [(ENABLED, en0.value), (RUNNING, run0.value)] {
        let x = sample(&s, family, SET_A);
        assert!(
            close(x.value, before),
            "{family} reset by the reload: {before} -> {x:?}"
        );
        assert_eq!(
            x.start_unix_nanos, times_start,
            "{family}: its start continues"
        );
    }
    r2.k.advance(SEC);
    let s = r2.e.collect();
    let en = sample(&s, ENABLED, SET_A).value;
    assert!(close(en, 4.0), "one more second on 2 CPUs: {en}");
}

/// A metric a reload adds to a set starts from zero in every cgroup, so
/// it gets a start of its own, not the start of the series that continue
/// next to it (which was the cgroup's single start before).
#[test]
fn a_metric_added_by_a_reload_gets_a_new_start_per_cgroup() {
    let mut r = rig("vm-no-pmu", YAML, &["software"], false, None, &["app/a"]);
    r.e.collect();
    r.k.advance(SEC);
    let s = r.e.collect();
    let old = sample(
        &s,
        "perf_cgroup_cpu_clock_seconds_total",
        "{cgroup=\"app/a\"}",
    )
    .start_unix_nanos;
    let totals = r.e.cgroups().unwrap().totals();
    let more =
        format!("{YAML}      - metric: perf_page_faults_total\n        event: page-faults\n");
    // The new start is read from the wall clock: wait until it has moved
    // past the old one (nanoseconds; bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while wall_nanos() <= old {
        assert!(
            std::time::Instant::now() < deadline,
            "the wall clock did not advance"
        );
        std::thread::yield_now();
    }
    let (mut r2, n) = reload_rig(&more, &["app/a"], totals);
    assert_eq!(n, 3, "{more}");
    r2.k.advance(SEC);
    let s = r2.e.collect();
    let carried = sample(
        &s,
        "perf_cgroup_cpu_clock_seconds_total",
        "{cgroup=\"app/a\"}",
    );
    assert_eq!(carried.start_unix_nanos, old);
    let added = sample(&s, "perf_cgroup_page_faults_total", "{cgroup=\"app/a\"}");
    assert!(
        added.start_unix_nanos > old,
        "the added metric's count starts now, not at {old}: {added:?}"
    );
}

#[test]
fn hostile_names_are_escaped_exactly() {
    let root = std::env::temp_dir().join(format!("pe-cgsim-hostile-{}", std::process::id()));
    let long = format!("app/{}", "x".repeat(220));
    let names = [
        "app/odd name",
        "app/q\"uote",
        "app/new\nline",
        long.as_str(),
    ];
    std::fs::create_dir_all(root.join("app")).unwrap();
    std::fs::write(root.join("cpu.stat"), "usage_usec 1000\n").unwrap();
    for n in names {
        std::fs::create_dir_all(root.join(n)).unwrap();
        std::fs::write(root.join(n).join("cpu.stat"), "usage_usec 100\n").unwrap();
    }
    let mut r = rig("vm-no-pmu", YAML, &["software"], false, None, &[]);
    let mut with_gone: Vec<&str> = names.to_vec();
    with_gone.push("app/never there");
    r.d.set(&root, &with_gone);
    r.e.collect();
    r.k.advance(SEC);
    let s = r.e.collect();
    let mut text = String::new();
    prometheus::encode_text(&s.families, &mut text);
    for want in [
        "perf_cgroup_cpu_clock_seconds_total{cgroup=\"app/odd name\"} 0.2\n",
        "perf_cgroup_cpu_clock_seconds_total{cgroup=\"app/q\\\"uote\"} 0.2\n",
        "perf_cgroup_cpu_clock_seconds_total{cgroup=\"app/new\\nline\"} 0.2\n",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
    assert!(
        text.contains(&format!("{{cgroup=\"{long}\"}} 0.2\n")),
        "{text}"
    );
    let gone: Vec<String> =
        r.e.cgroups()
            .unwrap()
            .issues()
            .iter()
            .filter(|i| i.code() == "cgroup_gone")
            .map(|i| i.to_string())
            .collect();
    assert_eq!(gone.len(), 1, "{gone:?}");
    drop(r);
    std::fs::remove_dir_all(&root).unwrap();
}

/// `serve --simulate` on `vm-no-pmu` with cgroup discovery's Kubernetes
/// fixture, the software set counted per cgroup and `extra` added to the
/// `cgroups:` section, once per-workload counting has started. The
/// directory holds the config.
fn serve_kubernetes_fixture(extra: &str) -> (common::Proc, tempfile::TempDir) {
    serve_kubernetes_fixture_with("", &format!("  sets: [software]\n{extra}"))
}

/// Like [`serve_kubernetes_fixture`], with more `sets` in the config and
/// the whole `cgroups:` section below its preset.
fn serve_kubernetes_fixture_with(sets: &str, cgroups: &str) -> (common::Proc, tempfile::TempDir) {
    let cg = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroup/kubernetes-systemd");
    let yaml = format!("{YAML}{sets}cgroups:\n  preset: kubernetes\n{cgroups}");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    let sysfs = common::fixture("vm-no-pmu");
    let mut p = common::exporter(&[
        "--simulate",
        "--path.sysfs",
        sysfs.to_str().unwrap(),
        "--path.cgroupfs",
        cg.to_str().unwrap(),
        "--config.file",
        cfg.to_str().unwrap(),
    ]);
    p.wait_log("per-workload counting", std::time::Duration::from_secs(10));
    (p, dir)
}

/// The real binary on the simulated PMU with cgroup discovery's Kubernetes
/// fixture (`tests/fixtures/cgroup/kubernetes-systemd`): per-pod and
/// per-container families with their Kubernetes labels, disjoint pods
/// summing to no more than the node.
#[test]
fn serve_counts_the_kubernetes_fixture_per_pod() {
    let (mut p, _dir) = serve_kubernetes_fixture("  containers: true\n");
    let pod = "pod_uid=\"d77d5e50-3ad1-439f-885a-c494268b351b\",qos_class=\"burstable\"}";
    let (limit, every) = (Duration::from_secs(20), Duration::from_millis(100));
    let body = common::poll(limit, every, || {
        let b = p.get("/metrics").body;
        (b.contains("perf_cgroup_cpu_clock_seconds_total{") && b.contains(pod)).then_some(b)
    })
    .unwrap_or_else(|| panic!("no per-pod series:\n{}", p.output()));
    let line = body
        .lines()
        .find(|l| l.starts_with("perf_cgroup_cpu_clock_seconds_total{") && l.contains(pod))
        .unwrap();
    assert!(line.contains("cgroup=\"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podd77d5e50_3ad1_439f_885a_c494268b351b.slice\""), "{line}");
    assert!(
        body.contains(
            "container_id=\"0acdfe0516d16fbfcecc8500a089b9770a82d1dc27084e141ed63a1814136227\""
        ),
        "{body}"
    );
    let sum = |prefix: &str, pods_only: bool| -> f64 {
        body.lines()
            .filter(|l| l.starts_with(prefix) && (!pods_only || !l.contains("container_id")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let pods = sum("perf_cgroup_cpu_clock_seconds_total{", true);
    let node = sum("perf_cpu_clock_seconds_total", false);
    assert!(pods > 0.0 && pods <= node, "pods {pods} node {node}");
    assert!(p.output().contains("backend auto"), "{}", p.output());
    // The pod's CPU time from its cpu.stat (read every rank interval, here
    // at start-up), with the pod's labels (issue 24 item 8).
    let usage_usec = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroup/kubernetes-systemd/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podd77d5e50_3ad1_439f_885a_c494268b351b.slice/cpu.stat")).unwrap();
    let usage_usec: f64 = perf_exporter::cgroup::rank::usage_usec(&usage_usec).unwrap() as f64;
    let usage = body
        .lines()
        .find(|l| {
            l.starts_with("perf_cgroup_cpu_usage_seconds_total{")
                && l.contains(pod)
                && !l.contains("container_id")
        })
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no pod CPU time:\n{body}"));
    assert_eq!(usage, usage_usec * 1e-6);
    // A reload continues the per-cgroup totals (same cgroup, same metric).
    let value = |b: &str| -> f64 {
        b.lines()
            .find(|l| {
                l.starts_with("perf_cgroup_cpu_clock_seconds_total{")
                    && l.contains(pod)
                    && !l.contains("container_id")
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap()
    };
    let before = value(&p.get("/metrics").body);
    p.signal("HUP");
    p.wait_log(
        "per-cgroup series continue their counts",
        std::time::Duration::from_secs(10),
    );
    let after = value(&p.get("/metrics").body);
    assert!(after >= before, "reset by the reload: {before} -> {after}");
}

/// The kernel does not re-enable a CPU's events when it returns: the
/// per-cgroup groups of a CPU back online are reopened and its series
/// continue from their totals.
#[test]
fn a_cpu_back_online_counts_again_per_cgroup() {
    let mut r = rig("vm-no-pmu", YAML, &["software"], true, None, &["app/a"]);
    let one = "{cgroup=\"app/a\",cpu=\"1\"}";
    r.e.collect();
    r.k.advance(SEC);
    let s = r.e.collect();
    let before = clock(&s, one);
    assert!(close(before, 0.45), "{before}");
    r.k.set_online(1, false);
    r.k.advance(SEC);
    r.e.collect();
    r.k.set_online(1, true);
    r.e.collect();
    r.k.advance(SEC);
    let s = r.e.collect();
    let after = clock(&s, one);
    // One second offline (nothing), one second back (0.45 s more).
    assert!(close(after, 0.9), "{before} -> {after}");
    assert!(close(clock(&s, "{cgroup=\"app/a\",cpu=\"0\"}"), 1.35));
}

/// The landing page lists the cgroups matched, counted and left out, with
/// the reason and what to do (as `check` does).
#[test]
fn landing_page_lists_counted_and_left_out_cgroups() {
    let (p, _dir) = serve_kubernetes_fixture("  max_cgroups: 2\n");
    let page = p.get("/").body;
    let section = page
        .split_once("<a id=\"cgroups\"></a>")
        .unwrap_or_else(|| panic!("no cgroups section on the landing page:\n{page}"))
        .1;
    let rows: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with("<tr><td>"))
        .collect();
    let counted = rows
        .iter()
        .filter(|r| r.contains("<td>counted</td><td>pod</td>"))
        .count();
    let left: Vec<&&str> = rows
        .iter()
        .filter(|r| r.contains("<td>left_out</td>"))
        .collect();
    assert_eq!(counted, 2, "{section}");
    assert!(!left.is_empty(), "{section}");
    assert!(
        section.starts_with(&format!(
            "<h2>Workloads (cgroups)</h2>\n<p>Backend: perf. 2 counted, {} left out.</p>\n",
            left.len()
        )),
        "{section}"
    );
    for r in left {
        assert!(r.contains("max_cgroups"), "{r}");
        assert!(r.contains("raise `cgroups.max_cgroups`"), "{r}");
    }
}

/// Issue 13: what the backend cannot count per cgroup (here a set whose
/// counters this host does not have) is on the landing page with its code
/// and what to do, not only in the log.
#[test]
fn landing_page_lists_what_is_not_counted_per_cgroup() {
    let core = "  - name: core\n    events:\n      - metric: perf_instructions_total\n        event: instructions\n";
    let (p, _dir) = serve_kubernetes_fixture_with(core, "  sets: [software, core]\n");
    let page = p.get("/").body;
    let section = page
        .split_once("<h3>Not counted per cgroup</h3>")
        .unwrap_or_else(|| panic!("no per-cgroup issues on the landing page:\n{page}"))
        .1;
    let row = section
        .lines()
        .find(|l| l.starts_with("<tr><td>cgroup_set_unavailable</td>"))
        .unwrap_or_else(|| panic!("no row for the set:\n{section}"));
    assert!(row.contains("set `core` of `cgroups.sets`"), "{row}");
    assert!(row.contains("remove `core` from `cgroups.sets`"), "{row}");
}

/// The per-cgroup groups open the node metric's encoding with its
/// modifiers: `page-faults:u` per cgroup counts the cgroup's share of the
/// user faults (9/10 of the simulated faults), and every cgroup open
/// carries the exclude bits of `:u`.
#[test]
fn per_cgroup_counters_carry_the_modifiers() {
    const Y: &str = crate::config!("cgroup_sim/page_faults_user");
    let mut r = rig("vm-no-pmu", Y, &["faults"], false, None, &["app/a"]);
    r.e.collect();
    r.k.advance(SEC);
    let s = r.e.collect();
    // Two CPUs at 1000 faults/s, 9/10 in user mode; app/a has 45 %.
    let node = sum(&s, "perf_page_faults_user_total");
    let a = value(
        &s,
        "perf_cgroup_page_faults_user_total",
        "{cgroup=\"app/a\"}",
    )
    .unwrap();
    assert!(close(node, 1800.0), "{node}");
    assert!(close(a, 810.0), "{a}");
    // The probe, one node counter per CPU, one per cgroup per CPU: all
    // with the bits of `:u`.
    let ex = r.k.open_excludes();
    assert!(ex.len() >= 1 + 2 + 2, "{ex:?}");
    assert!(
        ex.iter().all(|x| x.kernel && x.hv && x.guest && !x.user),
        "{ex:?}"
    );
}

/// Three core events in one set, counted per cgroup.
const CORE3: &str = crate::config!("cgroup_sim/core3");

/// The per-cgroup state labels of `family` in `app/a` (summed over CPUs).
fn state_of(s: &Snapshot, family: &str) -> Option<String> {
    let f = s
        .families
        .iter()
        .find(|f| f.name == "perf_cgroup_counter_state")?;
    let prefix = format!("{{metric=\"{family}\",cgroup=\"app/a\",state=\"");
    f.samples.iter().find_map(|x| {
        let rest = x.labels.rendered().strip_prefix(&prefix)?;
        assert_eq!(x.value, 1.0);
        Some(rest.trim_end_matches("\"}").to_string())
    })
}

/// A per-cgroup group too large for the free counters opens and never
/// runs (issue 25, scenario 3; issue 27): its series are absent, never
/// zeros, its state is `never_ran` with a running share of 0, the group
/// times show it (enabled, never running), and the live view says why
/// instead of a count. It stays so while the node's groups split.
#[test]
fn a_cgroup_group_that_never_runs_has_no_values_and_says_why() {
    let mut r = rig("intel-skx", CORE3, &["core"], false, None, &["app/a"]);
    // Two counters for a group of three: it never runs.
    r.k.set_counters("cpu", 2);
    let first = r.e.collect();
    for _ in 0..3 {
        r.k.advance(SEC);
        let s = r.e.collect();
        for fam in [
            "perf_cgroup_cpu_cycles_total",
            "perf_cgroup_instructions_total",
            "perf_cgroup_branch_instructions_total",
        ] {
            assert_eq!(
                value(&s, fam, "{cgroup=\"app/a\"}"),
                None,
                "{fam}: no value, not 0"
            );
            assert_eq!(state_of(&s, fam).as_deref(), Some("never_ran"), "{fam}");
            let m = format!("{{metric=\"{fam}\",cgroup=\"app/a\"}}");
            assert_eq!(
                value(&s, "perf_cgroup_counter_running_ratio", &m),
                Some(0.0)
            );
            let n = format!("{{metric=\"{fam}\",state=\"never_ran\"}}");
            assert_eq!(value(&s, "perf_cgroup_counter_states", &n), Some(1.0));
            let c = format!("{{metric=\"{fam}\",state=\"counting\"}}");
            assert_eq!(value(&s, "perf_cgroup_counter_states", &c), Some(0.0));
        }
        let t = "{cgroup=\"app/a\",set=\"core\"}";
        let en = value(&s, "perf_cgroup_group_enabled_seconds_total", t).unwrap();
        let run = value(&s, "perf_cgroup_group_running_seconds_total", t).unwrap();
        assert!(en > 0.0 && run == 0.0, "{en} {run}");
        // The live view: no count, the reason instead.
        let f = perf_exporter::export::live::frame(
            &first.families,
            &s.families,
            1.0,
            &Default::default(),
            &Default::default(),
        );
        let top = f.per_cgroup.as_ref().expect("per_cgroup");
        let row = top.top.iter().find(|r| r.cgroup == "app/a").unwrap();
        assert!(
            !row.counts.contains_key("perf_cgroup_cpu_cycles_total"),
            "{row:?}"
        );
        assert_eq!(
            row.not_counted
                .get("perf_cgroup_cpu_cycles_total")
                .map(String::as_str),
            Some(perf_exporter::problem::CounterState::NeverRan.explain())
        );
        assert!(!row.derived.contains_key("ipc"), "{row:?}");
        assert!(f
            .to_json()
            .contains("\"not_counted\":{\"perf_cgroup_branch_instructions_total\":"));
    }
    // The exposition has no per-cgroup count, and says why.
    let mut text = String::new();
    prometheus::encode_text(&r.e.collect().families, &mut text);
    assert!(!text.contains("perf_cgroup_cpu_cycles_total{"), "{text}");
    assert!(text.contains("perf_cgroup_counter_state{metric=\"perf_cgroup_cpu_cycles_total\",cgroup=\"app/a\",state=\"never_ran\"} 1"), "{text}");
}

/// Issue 27: a per-cgroup cycles or instructions counter that runs (the
/// cgroup's tasks ran, its group was on the PMU) while its count stands
/// still for 3 collections in a row is `stalled`, as node-level ones
/// are; one that need not move (branch instructions) is not judged so;
/// it counts again when the count moves.
#[test]
fn a_cgroup_counter_that_runs_without_counting_is_stalled() {
    const CYC: &str = "perf_cgroup_cpu_cycles_total";
    const INS: &str = "perf_cgroup_instructions_total";
    const BR: &str = "perf_cgroup_branch_instructions_total";
    let mut r = rig("intel-skx", CORE3, &["core"], false, None, &["app/a"]);
    r.e.collect();
    r.k.advance(SEC);
    let s = r.e.collect();
    assert_eq!(state_of(&s, CYC), None, "counting");
    r.k.set_stalled("cpu", true);
    for n in 1..=3 {
        r.k.advance(SEC);
        let s = r.e.collect();
        let want = (n == 3).then(|| "stalled".to_string());
        assert_eq!(state_of(&s, CYC), want, "collection {n}");
        assert_eq!(state_of(&s, INS), want, "collection {n}");
        assert_eq!(state_of(&s, BR), None, "collection {n}");
    }
    let s = r.e.collect();
    let st = format!("{{metric=\"{CYC}\",state=\"stalled\"}}");
    assert_eq!(value(&s, "perf_cgroup_counter_states", &st), Some(1.0));
    r.k.set_stalled("cpu", false);
    r.k.advance(SEC);
    let s = r.e.collect();
    assert_eq!(state_of(&s, CYC), None, "counting again");
}

/// Issue 27: a cgroup's cycles and instructions are judged against its
/// own CPU time (the `cpu.stat` readings per-cgroup counting takes every
/// `rank_interval`): plausible at the simulated 2 GHz; more cycles per
/// second of CPU time than the 3 GHz maximum × 1.25 is `implausible`
/// from the next collection, and so are instructions near zero while the
/// cgroup was busy (a fake guest PMU); branch instructions are not
/// judged; a plausible window clears it.
#[test]
fn a_cgroup_counting_what_its_cpu_time_cannot_produce_is_implausible() {
    const CYC: &str = "perf_cgroup_cpu_cycles_total";
    const INS: &str = "perf_cgroup_instructions_total";
    const BR: &str = "perf_cgroup_branch_instructions_total";
    let mut r = rig("intel-skx", CORE3, &["core"], false, None, &["app/a"]);
    r.e.check_plausibility("/nonexistent/proc".into());
    let cycles = |s: &Snapshot| value(s, CYC, "{cgroup=\"app/a\"}").expect(CYC);
    let step = |r: &mut Rig, usec: Option<u64>| {
        if let Some(u) = usec {
            r.d.usage_at("app/a", u);
        }
        r.k.advance(10 * SEC);
        let s = r.e.collect();
        // The node-level check reads the maximum frequency (3 GHz).
        r.e.run_upkeep();
        s
    };
    step(&mut r, Some(0));
    // The cycles of a reading's window: two collections, as the 20 s
    // counted since the groups opened.
    let c20 = cycles(&step(&mut r, None));
    assert!(c20 > 0.0);
    // 2 GHz over the cgroup's CPU time: plausible.
    let mut usec = (c20 / 2.0e9 * 1e6) as u64;
    let s = step(&mut r, Some(usec));
    assert_eq!(state_of(&s, CYC), None);
    let s = step(&mut r, None);
    assert_eq!(state_of(&s, CYC), None, "plausible at 2 GHz");
    // 6 GHz over the next reading's window.
    usec += (c20 / 6.0e9 * 1e6) as u64;
    step(&mut r, Some(usec));
    let s = step(&mut r, None);
    assert_eq!(state_of(&s, CYC).as_deref(), Some("implausible"));
    assert_eq!(state_of(&s, INS).as_deref(), Some("implausible"));
    assert_eq!(state_of(&s, BR), None);
    // Plausible again; then a fake guest PMU: 395 per second while the
    // cgroup used 5 s of CPU.
    usec += (c20 / 2.0e9 * 1e6) as u64;
    step(&mut r, Some(usec));
    r.k.set_guest_rate("cpu", Some(395.0));
    let s = step(&mut r, None);
    assert_eq!(state_of(&s, CYC), None, "plausible again");
    usec += 5_000_000;
    step(&mut r, Some(usec));
    let s = step(&mut r, None);
    assert_eq!(state_of(&s, INS).as_deref(), Some("implausible"));
}

/// A per-cgroup group that counted, then lost its counters (another
/// user takes all but one), keeps its total, flagged `never_ran`, and
/// counts again when they come back.
#[test]
fn a_cgroup_group_that_stops_running_keeps_its_total_flagged() {
    const CORE2: &str = crate::config!("cgroup_sim/core2");
    const F: &str = "perf_cgroup_cpu_cycles_total";
    let mut r = rig("intel-skx", CORE2, &["core"], false, None, &["app/a"]);
    // Room for the node's group and the cgroup's on every CPU.
    r.k.set_counters("cpu", 4);
    r.e.collect();
    r.k.advance(SEC);
    let s = r.e.collect();
    let before = value(&s, F, "{cgroup=\"app/a\"}").unwrap();
    assert!(before > 0.0);
    assert_eq!(state_of(&s, F), None, "counting: no per-series state");
    let c = format!("{{metric=\"{F}\",state=\"counting\"}}");
    assert_eq!(value(&s, "perf_cgroup_counter_states", &c), Some(1.0));
    r.k.set_counters("cpu", 1);
    r.k.advance(SEC);
    let s = r.e.collect();
    assert_eq!(value(&s, F, "{cgroup=\"app/a\"}"), Some(before));
    assert_eq!(state_of(&s, F).as_deref(), Some("never_ran"));
    r.k.set_counters("cpu", 4);
    r.k.advance(SEC);
    let s = r.e.collect();
    assert_eq!(state_of(&s, F), None);
    assert!(value(&s, F, "{cgroup=\"app/a\"}").unwrap() > before);
}
