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
use crate::export::live::{Framer, PerCpuDetail, Reasons};
use crate::snapshot::{Family, Kind, Labels, Sample};
use std::time::Instant;

/// The prefix of the derived gauges' names.
pub(crate) const PREFIX: &str = "perf_derived_";

/// The previous export's collection and what frames are built with.
#[derive(Debug, Default)]
pub(super) struct DerivedGauges {
    prev: Option<(Instant, Vec<Family>)>,
    framer: Framer,
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
        let prev = self.prev.replace((at, families.to_vec()));
        let Some((t0, old)) = prev else {
            return Vec::new();
        };
        let secs = at.duration_since(t0).as_secs_f64();
        let f = self.framer.frame(
            &old,
            families,
            secs,
            &Reasons::new(),
            PerCpuDetail::Off,
            table,
        );
        table
            .metrics
            .iter()
            .filter_map(|d| {
                let v = f.derived.get(&d.name).copied().flatten()?;
                Some(Family {
                    name: format!("{PREFIX}{}", d.name),
                    help: d.help.clone().unwrap_or_else(|| {
                        format!("Derived metric {}: {}", d.name, d.formula.text)
                    }),
                    kind: Kind::Gauge,
                    samples: vec![Sample {
                        labels: Labels::new(Vec::new()),
                        value: v,
                        start_unix_nanos: 0,
                    }],
                })
            })
            .collect()
    }
}
