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
