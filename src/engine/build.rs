//! The one way an engine is built ([`Engine::for_config`]): what it counts
//! ([`ToCount`]: a config to resolve, or a resolution made already) and
//! how many descriptors it may open ([`Fds`]). The application (start-up,
//! reload, `stat`), the tests and the benchmarks all build it here.

use super::budget::{counter_cap, Fds};
use super::Engine;
use crate::config::Config;
use crate::perf::Kernel;
use crate::pmu::PmuTable;
use crate::probe::prober;
use crate::resolve::chain::{resolve_config, Resolution};
use crate::resolve::Context;
use std::sync::Arc;

/// What an engine counts.
#[derive(Debug)]
pub enum ToCount<'a> {
    /// A config, resolved on the engine's PMU table with each event
    /// probed through its kernel, in a context (tracepoints; `None`: the
    /// default, no tracefs).
    Config(&'a Config, Option<&'a Context>),
    /// A resolution made already (the application diagnoses it and
    /// refuses one that counts nothing before opening anything).
    Resolved(Resolution),
}

impl<'a> From<&'a Config> for ToCount<'a> {
    fn from(c: &'a Config) -> Self {
        ToCount::Config(c, None)
    }
}

impl From<Resolution> for ToCount<'_> {
    fn from(r: Resolution) -> Self {
        ToCount::Resolved(r)
    }
}

impl ToCount<'_> {
    /// The resolution to count.
    fn resolve(self, kernel: &dyn Kernel, table: &PmuTable) -> Resolution {
        match self {
            ToCount::Resolved(r) => r,
            ToCount::Config(cfg, ctx) => {
                let default;
                let ctx = match ctx {
                    Some(c) => c,
                    None => {
                        default = Context::default();
                        &default
                    }
                };
                let p = prober(kernel);
                resolve_config(cfg, table, ctx, Some(&p))
            }
        }
    }
}

impl Engine {
    /// Plans what `counting` asks for on `table` and opens every group
    /// through `kernel`, within `fds`: counters beyond the budget are
    /// reported as lacking file descriptors, with the limit to raise, and
    /// what fits counts.
    pub fn for_config<'a>(
        kernel: Arc<dyn Kernel>,
        table: PmuTable,
        counting: impl Into<ToCount<'a>>,
        fds: Fds,
    ) -> Engine {
        Engine::build(kernel, table, counting.into(), fds, false)
    }

    /// [`for_config`](Self::for_config) with every group opened disabled:
    /// nothing counts until [`enable`](Self::enable). A reload builds the
    /// new engine so, beside the serving one and outside its lock, and
    /// enables it at the swap, after the old one's last read (no event is
    /// counted by both).
    pub fn for_config_disabled<'a>(
        kernel: Arc<dyn Kernel>,
        table: PmuTable,
        counting: impl Into<ToCount<'a>>,
        fds: Fds,
    ) -> Engine {
        Engine::build(kernel, table, counting.into(), fds, true)
    }

    fn build(
        kernel: Arc<dyn Kernel>,
        table: PmuTable,
        counting: ToCount<'_>,
        fds: Fds,
        disabled: bool,
    ) -> Engine {
        let resolution = counting.resolve(kernel.as_ref(), &table);
        let (cap, exhausted) = counter_cap(kernel.as_ref(), &resolution, fds);
        let mut e = Engine::open(kernel, table, resolution, cap, disabled);
        e.fds.set_exhausted(exhausted);
        e
    }

    /// Whether counters were left out for lack of file descriptors.
    pub fn lacks_fds(&self) -> bool {
        self.fds.exhausted().is_some() || !self.fds.starved().is_empty()
    }
}
