//! The simulated engine the suite's tests build, in one place: a
//! fixture's PMU table, a simulated kernel on a manual clock (every
//! count and ratio exact), the engine `Engine::for_config` builds for a
//! config, and a family's samples.

use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use perf_exporter::snapshot::{Family, Snapshot};
use std::path::Path;
use std::sync::Arc;

/// One second of the manual clock, in nanoseconds.
pub(crate) const SEC: u64 = 1_000_000_000;

/// The PMU table of `tests/fixtures/sysfs/<fixture>`.
pub(crate) fn table(fixture: &str) -> PmuTable {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(fixture);
    PmuTable::discover(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display()))
}

/// The engine for the config `yaml` on a simulated kernel over `t`;
/// `setup` sets the kernel's knobs before the engine opens anything.
pub(crate) fn engine_on(
    t: PmuTable,
    yaml: &str,
    setup: impl FnOnce(&SimKernel),
) -> (Arc<SimKernel>, Engine) {
    let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
    setup(&k);
    let cfg = Config::parse(yaml, "test.yaml").unwrap_or_else(|e| panic!("test config: {e}"));
    let e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
    (k, e)
}

/// The default config's engine on `fixture`'s simulated PMU, with the
/// default derived table resolved on that host; the CPU identity the
/// model guards match (`requires_cpu`) is the fixture's procfs
/// `cpuinfo` (x86) or sysfs `midr_el1` (Arm).
pub(crate) fn default_engine(fixture: &str) -> (Arc<SimKernel>, Engine) {
    let cfg = Config::default_config();
    let mut t = table(fixture);
    t.read_identities(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/procfs")
            .join(fixture),
    );
    let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
    let mut e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
    e.set_derived(Arc::new(cfg.derived.clone()));
    (k, e)
}

/// The default derived values of [`default_engine`] on `fixture` over
/// one second from the start (`None`: undefined).
pub(crate) fn default_derived_values(
    fixture: &str,
) -> std::collections::BTreeMap<String, Option<f64>> {
    let (k, mut e) = default_engine(fixture);
    e.collect();
    k.advance(SEC);
    let s = e.collect();
    perf_exporter::export::live::frame(&[], &s.families, 1.0, &Default::default(), e.derived())
        .derived
}

/// [`engine_on`] the fixture intel-skx (8 CPUs, core PMU `cpu`).
pub(crate) fn skx_engine(yaml: &str, setup: impl FnOnce(&SimKernel)) -> (Arc<SimKernel>, Engine) {
    engine_on(table("intel-skx"), yaml, setup)
}

/// The samples of family `name` in `families`: rendered labels, value.
pub(crate) fn samples(families: &[Family], name: &str) -> Vec<(String, f64)> {
    families
        .iter()
        .filter(|f| f.name == name)
        .flat_map(|f| &f.samples)
        .map(|x| (x.labels.rendered().to_string(), x.value))
        .collect()
}

/// [`samples`] of a snapshot.
pub(crate) fn family(s: &Snapshot, name: &str) -> Vec<(String, f64)> {
    samples(&s.families, name)
}

/// The live view's frame of one collection from the start (every
/// counter's total), with the default config's derived metrics.
pub(crate) fn frame_since_start(
    families: &[perf_exporter::snapshot::Family],
) -> perf_exporter::export::live::Frame {
    perf_exporter::export::live::frame(
        &[],
        families,
        1.0,
        &Default::default(),
        &perf_exporter::config::Config::default_config().derived,
    )
}

/// One second of the default config on a simulated kernel over `t` (its
/// CPU identities read already): what the live view's frame derives, the
/// families of the second collection, and the engine's problems by metric
/// (rendered).
pub(crate) struct DefaultWindow {
    /// The derived values by name (`None`: undefined).
    pub derived: std::collections::BTreeMap<String, Option<f64>>,
    /// The families of the collection at the end of the second.
    pub families: Vec<Family>,
    /// The engine's problems: (metric, reason).
    pub problems: Vec<(String, String)>,
    /// Each derived metric's alternative taken on this host (`None`:
    /// unavailable), by name.
    pub chosen: std::collections::BTreeMap<String, Option<String>>,
}

/// [`DefaultWindow`] over `t`.
pub(crate) fn default_window(t: PmuTable) -> DefaultWindow {
    let cfg = Config::default_config();
    let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
    let mut e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
    e.set_derived(Arc::new(cfg.derived.clone()));
    let s0 = e.collect();
    k.advance(SEC);
    let s1 = e.collect();
    let f = perf_exporter::export::live::frame(
        &s0.families,
        &s1.families,
        1.0,
        &Default::default(),
        e.derived(),
    );
    let problems = e
        .problems()
        .into_iter()
        .map(|(n, p)| (n.to_string(), p.to_string()))
        .collect();
    let chosen = e
        .host_derived()
        .resolution
        .metrics
        .iter()
        .map(|d| (d.name.clone(), d.expr.clone()))
        .collect();
    DefaultWindow {
        derived: f.derived,
        families: s1.families,
        problems,
        chosen,
    }
}

/// Copies `from` to `to` (directories and regular files only): a fixture
/// tree to change at run time.
pub(crate) fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
