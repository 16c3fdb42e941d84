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

/// How an engine opens what it counts: within which descriptor budget,
/// and whether its groups count at once. A bare [`Fds`] is an engine that
/// counts at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opening {
    /// The descriptor budget.
    pub fds: Fds,
    /// Every group opened disabled: nothing counts until
    /// [`Engine::enable`]. A reload builds the new engine so, beside the
    /// serving one and outside its lock, and enables it at the swap,
    /// after the old one's last read (no event is counted by both).
    pub disabled: bool,
}

impl Opening {
    /// Within `fds`, every group opened disabled.
    pub fn disabled(fds: Fds) -> Self {
        Opening {
            fds,
            disabled: true,
        }
    }
}

impl From<Fds> for Opening {
    fn from(fds: Fds) -> Self {
        Opening {
            fds,
            disabled: false,
        }
    }
}

impl Engine {
    /// Plans what `counting` asks for on `table` and opens every group
    /// through `kernel`, as `opening` says (a bare [`Fds`]: counting at
    /// once): counters beyond the descriptor budget are reported as
    /// lacking file descriptors, with the limit to raise, and what fits
    /// counts.
    pub fn for_config<'a>(
        kernel: Arc<dyn Kernel>,
        table: PmuTable,
        counting: impl Into<ToCount<'a>>,
        opening: impl Into<Opening>,
    ) -> Engine {
        let opening = opening.into();
        let resolution = counting.into().resolve(kernel.as_ref(), &table);
        let (cap, exhausted) = counter_cap(kernel.as_ref(), &resolution, opening.fds);
        let mut e = Engine::open(kernel, table, resolution, cap, opening.disabled);
        e.fds.set_exhausted(exhausted);
        e
    }

    /// Whether counters were left out for lack of file descriptors.
    pub fn lacks_fds(&self) -> bool {
        self.fds.exhausted().is_some() || !self.fds.starved().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::sim::SimKernel;

    /// One path: an engine opened disabled is the same engine, counting
    /// from its enable.
    #[test]
    fn an_engine_opened_disabled_is_the_same_once_enabled() {
        let t = crate::pmu::fixtures::table("intel-skx");
        let cfg = Config::default_config();
        let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
        assert_eq!(
            Opening::from(Fds::Unbounded),
            Opening {
                fds: Fds::Unbounded,
                disabled: false
            }
        );
        let at_once = Engine::for_config(k.clone(), t.clone(), &cfg, Fds::Unbounded);
        let mut later = Engine::for_config(k, t, &cfg, Opening::disabled(Fds::Unbounded));
        assert_eq!(later.open_groups(), 0);
        later.enable();
        assert_eq!(later.open_groups(), at_once.open_groups());
        assert_eq!(later.open_fds(), at_once.open_fds());
        assert!(at_once.open_groups() > 0);
    }
}
