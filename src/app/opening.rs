//! What start-up, reload and `stat` share once the config is resolved:
//! opening the engine within the fd budget (descriptors kept free for
//! connections, room asked for the per-cgroup counters), and the log
//! lines saying why metrics are not (fully) counted.

use crate::config::cgroups::CgroupsConfig;
use crate::engine::{Engine, Fds, Opening};
use crate::perf::Kernel;
use crate::pmu::PmuTable;
use crate::problem::log_reason;
use crate::problem::{Class, Problem};
use crate::resolve::chain::Resolution;
use std::path::Path;
use std::sync::Arc;
use tracing::Level;

/// File descriptors kept free for connections while the engine opens its
/// counters, so an fd-starved engine never starves the listener.
const FD_RESERVE: usize = 16;

/// Opens an engine for a resolution within the fd budget, keeping up to
/// [`FD_RESERVE`] descriptors free for connections and asking for the
/// descriptors the `cgroups:` section's counters need; it checks the
/// plausibility of cycles and instructions against `<procfs>/stat`.
pub(super) fn open_engine(
    kernel: Arc<dyn Kernel>,
    table: PmuTable,
    res: Resolution,
    cgroups: Option<&CgroupsConfig>,
    procfs: &Path,
) -> Engine {
    let extra = super::cgroups::wanted_fds(cgroups, &res);
    let fds = Fds::Budget {
        reserve: FD_RESERVE,
        extra,
    };
    let mut e = Engine::for_config(kernel, table, res, fds);
    e.check_plausibility(procfs.to_path_buf());
    e
}

/// [`open_engine`] beside a serving engine that holds `held` descriptors
/// (closed at the swap): the groups open disabled (they count from
/// [`Engine::enable`]), and `RLIMIT_NOFILE` is raised for both.
pub(super) fn open_engine_beside(
    kernel: Arc<dyn Kernel>,
    table: PmuTable,
    res: Resolution,
    cgroups: Option<&CgroupsConfig>,
    held: usize,
    procfs: &Path,
) -> Engine {
    let extra = super::cgroups::wanted_fds(cgroups, &res) + held;
    let fds = Fds::Budget {
        reserve: FD_RESERVE,
        extra,
    };
    let mut e = Engine::for_config(kernel, table, res, Opening::disabled(fds));
    e.check_plausibility(procfs.to_path_buf());
    e
}

/// Logs why metrics are not (fully) counted: one line per cause, naming
/// every metric it applies to (27 metrics that need a hardware PMU are
/// one line, not 27). An expected absence (`not_on_platform`) is logged
/// at INFO, a failure (something to fix) at WARN.
pub(super) fn log_problems<'a>(problems: impl IntoIterator<Item = (&'a str, &'a Problem)>) {
    for g in crate::problem::group(problems) {
        let (count, metrics) = (g.subjects.len(), g.list());
        let fields = g.log_fields("metrics");
        match g.problem.class() {
            Class::NotOnPlatform => log_reason!(
                Level::INFO,
                fields,
                [count,],
                [%metrics,],
                "not on this platform"
            ),
            Class::Failed => log_reason!(
                Level::WARN,
                fields,
                [count,],
                [%metrics,],
                "not (fully) available"
            ),
        }
    }
}
