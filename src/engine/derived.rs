//! The config's derived metrics on this host, resolved once: which
//! alternative of each `expr:` the host takes (or why none), and the
//! table every reader of the engine's collections evaluates (`stat`, the
//! live view, OTLP, the `/metrics` gauges). `check` reports the same
//! resolution ([`HostDerived::resolve`] is the one place it is made).

use crate::config::derived::DerivedTable;
use crate::pmu::PmuTable;
use crate::resolve::chain::Resolution;
use crate::resolve::derived::{resolve_derived, DerivedResolution};
use crate::resolve::literals::HostLiterals;
use std::sync::Arc;

/// The derived metrics of a config as one host resolves them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostDerived {
    /// The config's table, every alternative kept (what `rules` and the
    /// reference read).
    pub config: Arc<DerivedTable>,
    /// Each metric's alternative taken here, or why none is.
    pub resolution: DerivedResolution,
    /// The table this host evaluates: each entry with the alternative
    /// it takes and the host's `#` literals folded in
    /// ([`DerivedResolution::host_table`]).
    pub table: Arc<DerivedTable>,
}

impl HostDerived {
    /// Resolves `config` against the event metrics of `resolution` and
    /// the `#` literals of `pmus` (read once, from its sysfs root).
    pub fn resolve(config: Arc<DerivedTable>, resolution: &Resolution, pmus: &PmuTable) -> Self {
        let literals = HostLiterals::discover(pmus);
        let res = resolve_derived(&config, resolution, &literals);
        let table = Arc::new(res.host_table(&config, &literals));
        HostDerived {
            config,
            resolution: res,
            table,
        }
    }

    /// Logs what became of the default table when the config has no
    /// `derived:` section: how many entries apply (info), and each one
    /// left out with the inputs the config does not count (debug).
    pub fn log_left_out(&self) {
        let Some(left) = self.config.implicit.as_deref() else {
            return;
        };
        if left.is_empty() {
            return;
        }
        let names: Vec<&str> = left.iter().map(|l| l.name.as_str()).collect();
        tracing::info!(
            applied = self.config.metrics.len(),
            left_out = left.len(),
            names = %names.join(","),
            "derived metrics: the default table (the config has no `derived:`); entries whose inputs the config does not count are left out"
        );
        for l in left {
            tracing::debug!(
                derived = %l.name,
                missing = %l.missing.join(","),
                "derived metric of the default table left out: the config does not count its inputs"
            );
        }
    }
}
