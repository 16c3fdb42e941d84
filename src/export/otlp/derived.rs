//! The config's derived metrics as OTLP gauges over the push interval:
//! each export evaluates the `derived:` table ([`crate::derive`], through
//! the live view's frame, [`crate::export::live`]) over the window since
//! the previous export's collection, so both sides of a ratio come from
//! the same two collections. A value not defined in the window (a zero
//! divisor) or whose inputs are not counted is not pushed: a gauge point
//! is always a measurement. The first export has no window: no derived
//! gauges.
//!
//! Each is a gauge family `perf_derived_<name>` without labels (the node:
//! the resource says which), so its OTel name is `perf.derived.<name>`
//! (`perf.derived.l1d.miss` in `1` for `l1d_miss_ratio`, as the naming
//! rules make of a `_ratio` gauge).

use crate::config::derived::DerivedTable;
use crate::export::prometheus::derived::{gauge_families, Window};
use crate::snapshot::Family;
use std::sync::Arc;
use std::time::Instant;

/// The prefix of the derived gauges' names.
pub(crate) const PREFIX: &str = crate::export::prometheus::derived::PREFIX;

/// The previous export's collection and what frames are built with.
#[derive(Debug, Default)]
pub(super) struct DerivedGauges {
    window: Window,
}

impl DerivedGauges {
    /// The derived gauges over the window from the previous call's
    /// `families` to these, collected at `at`.
    pub(super) fn families(
        &mut self,
        families: &[Family],
        at: Instant,
        table: &DerivedTable,
    ) -> Vec<Family> {
        let Some(f) = self.window.frame(&Arc::new(families.to_vec()), at, table) else {
            return Vec::new();
        };
        gauge_families(
            &f,
            table.metrics.iter().map(|d| {
                (
                    d.name.as_str(),
                    format!("{PREFIX}{}", d.name),
                    d.help.clone().unwrap_or_else(|| {
                        format!("Derived metric {}: {}", d.name, d.formula.text)
                    }),
                )
            }),
        )
    }
}
