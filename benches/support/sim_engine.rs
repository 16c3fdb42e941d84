//! An engine on the simulated PMU of a sysfs tree, with the default
//! config and a manual clock (the benchmarks advance it).
#![allow(dead_code)]

use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use std::path::Path;
use std::sync::Arc;

/// The simulated kernel and an engine counting the default config on it.
pub(crate) fn sim_engine(root: &Path) -> (Arc<SimKernel>, Engine) {
    let table = PmuTable::discover(root).expect("sysfs tree");
    let k = Arc::new(SimKernel::with_manual_clock(table.clone()));
    let cfg = Config::default_config();
    let e = Engine::for_config(k.clone(), table, &cfg, Fds::Unbounded);
    (k, e)
}
