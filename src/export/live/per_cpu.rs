//! The per-CPU detail of a frame (opt-in: `?per_cpu=1`, `stat
//! --per-cpu`), in columns: the CPU numbers once, then per metric and per
//! derived value one array in the order of those CPUs. At 512 CPUs this
//! is a fraction of the size of an object per CPU, and it is built
//! without a map per CPU.
//!
//! ```json
//! "per_cpu": {
//!   "cpus":    [0, 1, 2],
//!   "counts":  { "perf_context_switches_total": [120.0, 80.0, null] },
//!   "derived": { "context_switches_per_second": [120.0, 80.0, null], "ipc": [1.9, null, null] }
//! }
//! ```
//!
//! `null` in `counts`: that CPU has no series of the metric (e.g. an
//! uncore counter, or a CPU that went offline); in `derived`: an input is
//! missing there, or the denominator did not move.

use super::{label, Formula, DERIVED};
use crate::snapshot::Labels;
use serde::Serialize;
use std::collections::BTreeMap;

/// MPERF over TSC per CPU: the share of time not halted.
const BUSY: Formula = Formula::Ratio("perf_msr_mperf_total", "perf_msr_tsc_total");

/// CPU numbers beyond this are not given per CPU (Linux has at most 8192
/// CPUs); their counts are still in the frame's sums.
const MAX_CPU: u32 = 1 << 16;

/// The per-CPU detail (module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PerCpu {
    /// The CPUs, in numeric order.
    pub cpus: Vec<u32>,
    /// Metric → its increase on each CPU of `cpus`.
    pub counts: BTreeMap<String, Vec<Option<f64>>>,
    /// The derived values that make sense per CPU ([`DERIVED`] marked so,
    /// and `busy_ratio`: MPERF/TSC) on each CPU of `cpus`.
    pub derived: BTreeMap<String, Vec<Option<f64>>>,
}

impl PerCpu {
    /// `metric`'s increase on `cpu`.
    pub fn count(&self, metric: &str, cpu: u32) -> Option<f64> {
        at(self.counts.get(metric)?, self.slot(cpu)?)
    }

    /// The derived value `name` on `cpu`.
    pub fn derived(&self, name: &str, cpu: u32) -> Option<f64> {
        at(self.derived.get(name)?, self.slot(cpu)?)
    }

    fn slot(&self, cpu: u32) -> Option<usize> {
        self.cpus.binary_search(&cpu).ok()
    }
}

fn at(col: &[Option<f64>], i: usize) -> Option<f64> {
    col.get(i).copied().flatten()
}

/// Accumulates the columns while a frame is built.
#[derive(Default)]
pub(super) struct CpuColumns {
    /// CPU number → its slot + 1 (0: not seen yet).
    slot_of: Vec<u32>,
    cpus: Vec<u32>,
    cols: Vec<(String, Vec<Option<f64>>)>,
    /// By sample position, the label set last seen there (its address) and
    /// its slot: families of a set share their per-CPU label sets, so
    /// most samples find their CPU without parsing a label.
    seen: Vec<(usize, usize)>,
}

impl CpuColumns {
    /// A column for `metric`.
    pub(super) fn column(&mut self, metric: &str) -> usize {
        self.cols
            .push((metric.to_string(), Vec::with_capacity(self.cpus.len())));
        self.cols.len() - 1
    }

    /// Adds `d` to the column's value on the CPU of the series at
    /// position `pos` of its family, if it has one.
    pub(super) fn add(&mut self, col: usize, pos: usize, labels: &Labels, d: f64) {
        // The address identifies the label set while both collections
        // live (it is never dereferenced).
        let id = labels.as_ptr() as usize;
        let slot = match self.seen.get(pos) {
            Some(&(seen, slot)) if seen == id && !labels.is_empty() => slot,
            _ => {
                let Some(slot) = self.slot(labels) else {
                    return;
                };
                if self.seen.len() <= pos {
                    self.seen.resize(pos + 1, (0, 0));
                }
                self.seen[pos] = (id, slot);
                slot
            }
        };
        let c = &mut self.cols[col].1;
        if c.len() <= slot {
            c.resize(slot + 1, None);
        }
        c[slot] = Some(c[slot].unwrap_or(0.0) + d);
    }

    /// The slot of the series' CPU (from its `cpu` label), if it has one.
    fn slot(&mut self, labels: &Labels) -> Option<usize> {
        let cpu = label(labels, "cpu").and_then(|c| c.parse::<u32>().ok())?;
        if cpu >= MAX_CPU {
            return None;
        }
        let i = cpu as usize;
        if i >= self.slot_of.len() {
            self.slot_of.resize(i + 1, 0);
        }
        if self.slot_of[i] == 0 {
            self.cpus.push(cpu);
            self.slot_of[i] = self.cpus.len() as u32;
        }
        Some(self.slot_of[i] as usize - 1)
    }

    /// The columns in CPU order, and the derived values.
    pub(super) fn finish(self, secs: f64) -> PerCpu {
        let n = self.cpus.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| self.cpus[i]);
        let sorted = order.iter().enumerate().all(|(k, &i)| k == i);
        let mut counts = BTreeMap::new();
        for (name, mut col) in self.cols {
            col.resize(n, None);
            if !sorted {
                col = order.iter().map(|&i| col[i]).collect();
            }
            counts.insert(name, col);
        }
        let mut derived = BTreeMap::new();
        let per_cpu = DERIVED
            .iter()
            .filter(|(_, _, p)| *p)
            .map(|(name, form, _)| (*name, *form))
            .chain([("busy_ratio", BUSY)]);
        for (name, form) in per_cpu {
            if let Some(col) = column(&counts, form, secs) {
                derived.insert(name.to_string(), col);
            }
        }
        PerCpu {
            cpus: order.iter().map(|&i| self.cpus[i]).collect(),
            counts,
            derived,
        }
    }
}

/// `form` on each CPU, where its inputs are columns (the rules of
/// [`super::eval`]: `None` where the denominator did not move).
fn column(
    counts: &BTreeMap<String, Vec<Option<f64>>>,
    form: Formula,
    secs: f64,
) -> Option<Vec<Option<f64>>> {
    Some(match form {
        Formula::Ratio(num, den) => {
            let (a, b) = (counts.get(num)?, counts.get(den)?);
            a.iter()
                .zip(b)
                .map(|(n, d)| match (n, d) {
                    (Some(n), Some(d)) if *d > 0.0 => Some(n / d),
                    _ => None,
                })
                .collect()
        }
        Formula::Rate(m) => counts
            .get(m)?
            .iter()
            .map(|v| v.filter(|_| secs > 0.0).map(|v| v / secs))
            .collect(),
    })
}
