//! The per-CPU detail of a frame (`per_cpu`, in every frame unless
//! `?per_cpu=0`; which metrics: [`PerCpuDetail`](super::PerCpuDetail)):
//! the CPU numbers once, then per metric one array of its
//! increases in the order of those CPUs, then how the per-CPU derived
//! values are computed from them (the page computes them; they are not
//! sent per CPU).
//!
//! ```json
//! "per_cpu": {
//!   "cpus":     [0, 1, 2],
//!   "counts":   { "perf_context_switches_total": [120, 80, null],
//!                 "perf_cpu_clock_seconds_total": [1.000000417, 0.999999982, null] },
//!   "formulas": { "ipc": { "ratio": ["perf_instructions_total", "perf_cpu_cycles_total"], "format": "ratio" },
//!                 "context_switches_per_second": { "rate": "perf_context_switches_total", "format": "rate" } }
//! }
//! ```
//!
//! * `counts`: the counter families of the frame's `counts` that have a
//!   `cpu` label (not the uncore ones) and that the detail asks for. A value is written as an integer when
//!   it is one (event counts, bytes: the usual case), else rounded to
//!   nanounits (seconds, joules, and counts scaled for multiplexing).
//!   `null`: that CPU has no series of the metric in the window (a CPU
//!   that went offline, a PMU that counts on some CPUs only).
//! * `formulas`: the per-CPU derived values whose inputs are in `counts`
//!   (the entries of the served derived table marked `per_cpu: true`,
//!   [`formulas`]: in the default config `ipc`, `busy_ratio` (MPERF/TSC,
//!   the share of time the CPU was not halted) and the OS event rates;
//!   nothing is listed by the page or here), in the table's order, the
//!   heatmap's preference: `{"ratio": [numerator, denominator]}` (no value where
//!   the denominator is 0 or either input is `null`) or `{"rate": metric}`
//!   (the count over `interval_seconds`), with `format`, how to show the
//!   value (from the entry's `unit:`: `percent` for a share, `rate` per
//!   second, `ratio` a plain number).
//!
//! Cost. At 512 CPUs this is the bulk of a frame: with every per-CPU
//! counter (`per_cpu=all`), about 10,000 numbers. They are kept in one flat array while the frame is built, and which CPU
//! a series is on is learnt once ([`CpuIndex`], kept by the
//! [`Framer`](super::Framer) from one frame to the next) instead of being
//! parsed from its labels at every frame.

use super::{label, numbers, Format};
use crate::config::derived::DerivedTable;
use crate::snapshot::{Labels, Sample};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// CPU numbers from this on are not given per CPU (Linux has at most
/// 8192 CPUs); their counts are still in the frame's sums.
const MAX_CPU: u32 = 1 << 13;

/// No CPU (in [`CpuIndex`]).
const NO_CPU: u32 = u32::MAX;

/// How the page computes a per-CPU derived value from the columns (the
/// entry's [`Formula::per_cpu`](crate::config::derived::Formula::per_cpu)).
pub(super) use crate::config::derived::PerCpuForm as Form;

/// A per-CPU derived value: its name, how the page computes it, and how
/// it shows it (the entry's `unit:`, [`Format::of`]).
pub(super) type Column = (String, Form, Format);

/// The derived values given per CPU: the entries of `table` (the one the
/// engine serves) marked `per_cpu: true`, in the table's order (the
/// heatmap shows the first with a value unless one is picked), each with
/// its per-CPU form and its format. Nothing is listed here: a config's
/// own entries are given as it marks them, and a value that sums over
/// CPUs (`cpus_utilized`, the CPUs counted) is not marked.
pub(super) fn formulas(table: &DerivedTable) -> Vec<Column> {
    table
        .metrics
        .iter()
        .filter(|d| d.per_cpu)
        .filter_map(|d| Some((d.name.clone(), d.formula.per_cpu()?, Format::of(d))))
        .collect()
}

/// Whether `metric` is an input of a per-CPU derived value of `forms`.
pub(super) fn is_input(metric: &str, forms: &[Column]) -> bool {
    forms.iter().any(|(_, f, _)| match f {
        Form::Ratio(n, d) => n == metric || d == metric,
        Form::Rate(m) => m == metric,
    })
}

/// The per-CPU detail (module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerCpu {
    /// The CPUs, in numeric order.
    pub cpus: Vec<u32>,
    /// The window, for the rates.
    secs: f64,
    /// The metrics in the order of their columns.
    metrics: Vec<String>,
    /// Positions of `metrics` in name order.
    order: Vec<usize>,
    /// The columns, one after the other: `cpus.len()` values each.
    values: Vec<Option<f64>>,
    /// The per-CPU derived values whose inputs are columns (those kept),
    /// in the derived table's order.
    derived: Vec<Column>,
}

impl PerCpu {
    /// The metrics, in name order, each with its value on each CPU of
    /// [`cpus`](Self::cpus).
    pub fn counts(&self) -> impl Iterator<Item = (&str, &[Option<f64>])> + '_ {
        self.order
            .iter()
            .map(|&c| (self.metrics[c].as_str(), self.column(c)))
    }

    /// `metric`'s increase on `cpu`.
    pub fn count(&self, metric: &str, cpu: u32) -> Option<f64> {
        self.values_of(metric)?.get(self.slot(cpu)?).copied()?
    }

    /// `metric`'s increase on each CPU of [`cpus`](Self::cpus).
    pub fn values_of(&self, metric: &str) -> Option<&[Option<f64>]> {
        let c = self.metrics.iter().position(|m| m == metric)?;
        Some(self.column(c))
    }

    /// The per-CPU derived values given (module docs), in the order the
    /// heatmap prefers them (the derived table's).
    pub fn derived_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.derived.iter().map(|(n, ..)| n.as_str())
    }

    /// The derived value `name` on `cpu`: `None` where an input is missing
    /// there or the denominator did not move.
    pub fn derived(&self, name: &str, cpu: u32) -> Option<f64> {
        let (_, form, _) = self.derived.iter().find(|(n, ..)| *n == name)?;
        let i = self.slot(cpu)?;
        let at = |m: &str| self.values_of(m).and_then(|c| c[i]);
        match form {
            Form::Ratio(n, d) => {
                let (n, d) = (at(n)?, at(d)?);
                (d > 0.0).then(|| n / d)
            }
            Form::Rate(m) => at(m).filter(|_| self.secs > 0.0).map(|v| v / self.secs),
        }
    }

    /// Keeps the derived values `keep` says yes to.
    pub fn retain_derived(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.derived.retain(|(n, ..)| keep(n));
    }

    fn column(&self, c: usize) -> &[Option<f64>] {
        let n = self.cpus.len();
        &self.values[c * n..(c + 1) * n]
    }

    fn slot(&self, cpu: u32) -> Option<usize> {
        self.cpus.binary_search(&cpu).ok()
    }
}

/// Which CPU each per-CPU series is on, learnt from its labels once and
/// kept from one frame to the next: by family position, the family's name
/// and, by sample position, the label set seen there with its CPU. The
/// engine keeps a series' label set (one shared allocation) for as long
/// as the series lives (the same allocation in every collection: see
/// `benches/live_frame.rs`'s steady state), so a sample finds its CPU by
/// comparing one pointer, and its labels are parsed again only where
/// another label set is at that position. Holding the label set keeps its
/// allocation from being reused for another series meanwhile.
#[derive(Debug, Default)]
pub(super) struct CpuIndex {
    families: Vec<(String, Vec<(Labels, u32)>)>,
    /// Values per column: the highest CPU number of the last frame, plus
    /// one (more while a frame is built).
    width: usize,
    /// Metric columns and CPUs of the last frame (to size the next).
    last: (usize, usize),
}

impl CpuIndex {
    /// The entry of the family at `pos` named `name`, made afresh if the
    /// families moved.
    fn family(&mut self, pos: usize, name: &str) -> usize {
        if self.families.len() <= pos {
            self.families.resize_with(pos + 1, Default::default);
        }
        let f = &mut self.families[pos];
        if f.0 != name {
            f.0 = name.to_string();
            f.1.clear();
        }
        pos
    }
}

/// The columns of one frame, filled while it is built.
pub(super) struct CpuColumns<'a> {
    index: &'a mut CpuIndex,
    present: Vec<bool>,
    metrics: Vec<String>,
    /// `metrics.len()` columns of `index.width` values, by CPU number.
    values: Vec<Option<f64>>,
}

impl<'a> CpuColumns<'a> {
    pub(super) fn new(index: &'a mut CpuIndex) -> Self {
        let (cols, _) = index.last;
        let width = index.width;
        CpuColumns {
            present: vec![false; width],
            metrics: Vec::with_capacity(cols),
            values: Vec::with_capacity(cols * width),
            index,
        }
    }

    /// Adds the family at position `pos` of the collection, its series
    /// `samples` with their increases `d`: each to its CPU's value in the
    /// family's column (made at its first series on a CPU).
    pub(super) fn add_family(&mut self, pos: usize, name: &str, samples: &[Sample], d: &[f64]) {
        let fi = self.index.family(pos, name);
        let seen = &mut self.index.families[fi].1;
        learn(seen, samples);
        let Some(top) = seen.iter().map(|(_, c)| *c).filter(|&c| c != NO_CPU).max() else {
            return;
        };
        let top = top as usize;
        if top >= self.index.width {
            // Doubling: a new index meets CPUs 0, 1, 2 ... one at a time.
            self.widen((top + 1).max(2 * self.index.width));
        }
        let w = self.index.width;
        self.metrics.push(name.to_string());
        let start = self.values.len();
        self.values.resize(start + w, None);
        let col = &mut self.values[start..];
        for ((_, cpu), d) in self.index.families[fi].1.iter().zip(d) {
            let cpu = *cpu as usize;
            if let (Some(v), Some(p)) = (col.get_mut(cpu), self.present.get_mut(cpu)) {
                *v = Some(v.unwrap_or(0.0) + d);
                *p = true;
            }
        }
    }

    /// Room for CPU numbers below `width` in every column.
    fn widen(&mut self, width: usize) {
        let old = self.index.width;
        let mut values = Vec::with_capacity(self.metrics.len() * width);
        for col in self.values.chunks(old.max(1)).take(self.metrics.len()) {
            values.extend_from_slice(col);
            values.resize(values.len() + width - col.len(), None);
        }
        self.values = values;
        self.present.resize(width, false);
        self.index.width = width;
    }

    /// The detail: the CPUs that had a series in the window, in order,
    /// and the metrics in name order.
    pub(super) fn finish(self, secs: f64, forms: Vec<Column>) -> PerCpu {
        let w = self.index.width;
        let cpus: Vec<u32> = (0..w as u32)
            .filter(|&c| self.present[c as usize])
            .collect();
        let values = if cpus.len() == w {
            self.values
        } else {
            // CPUs missing from the window (offline now): left out.
            let mut v = Vec::with_capacity(self.metrics.len() * cpus.len());
            for col in self.values.chunks(w.max(1)).take(self.metrics.len()) {
                v.extend(cpus.iter().map(|&c| col[c as usize]));
            }
            v
        };
        self.index.last = (self.metrics.len(), cpus.len());
        // The next frame's columns: as wide as the CPUs seen.
        self.index.width = cpus.last().map_or(0, |&c| c as usize + 1);
        let mut order: Vec<usize> = (0..self.metrics.len()).collect();
        order.sort_by(|&a, &b| self.metrics[a].cmp(&self.metrics[b]));
        let has = |m: &str| self.metrics.iter().any(|x| x == m);
        let derived: Vec<Column> = forms
            .into_iter()
            .filter(|(_, f, _)| match f {
                Form::Ratio(n, d) => has(n) && has(d),
                Form::Rate(m) => has(m),
            })
            .collect();
        PerCpu {
            cpus,
            secs,
            metrics: self.metrics,
            order,
            values,
            derived,
        }
    }
}

/// Makes `seen` the label sets of `samples` with their CPUs: what it had
/// at the same position is kept where it is the same label set (the usual
/// case: the engine shares a series' label set between collections), the
/// CPU parsed from the labels otherwise.
fn learn(seen: &mut Vec<(Labels, u32)>, samples: &[Sample]) {
    seen.truncate(samples.len());
    for (e, s) in seen.iter_mut().zip(samples) {
        if !e.0.same(&s.labels) {
            *e = (s.labels.clone(), cpu_of(&s.labels));
        }
    }
    let known = seen.len();
    seen.extend(
        samples[known..]
            .iter()
            .map(|s| (s.labels.clone(), cpu_of(&s.labels))),
    );
}

/// The CPU of a series (its `cpu` label), or [`NO_CPU`].
fn cpu_of(labels: &Labels) -> u32 {
    label(labels, "cpu")
        .and_then(|c| c.parse::<u32>().ok())
        .filter(|&c| c < MAX_CPU)
        .unwrap_or(NO_CPU)
}

impl PerCpu {
    /// The detail as JSON (module docs), appended to `out`. The columns
    /// are written by hand, not through serde: at 512 CPUs they are
    /// 10,000 numbers, most of them whole counts ([`numbers`]). `out`
    /// is sized by the caller: growing it here would double a buffer of
    /// 90 KB, past the size where `malloc` maps fresh pages for every
    /// frame (page faults on every frame).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"cpus\":[");
        numbers::write_integers(out, &self.cpus);
        out.extend_from_slice(b"],\"counts\":{");
        for (k, (name, col)) in self.counts().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            write_str(out, name);
            out.extend_from_slice(b":[");
            numbers::write_cells(out, col);
            out.push(b']');
        }
        out.extend_from_slice(b"},\"formulas\":");
        // Plain names and strings always encode.
        let _ = serde_json::to_writer(&mut *out, &Formulas(&self.derived));
        out.push(b'}');
    }

    /// The detail as JSON (module docs).
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        self.write_json(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// `s` as a JSON string.
pub(super) fn write_str(out: &mut Vec<u8>, s: &str) {
    // A string always encodes.
    let _ = serde_json::to_writer(&mut *out, s);
}

struct Formulas<'a>(&'a [Column]);

impl Serialize for Formulas<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (name, form, format) in self.0 {
            m.serialize_entry(name, &FormulaJson(form, *format))?;
        }
        m.end()
    }
}

struct FormulaJson<'a>(&'a Form, Format);

impl Serialize for FormulaJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        match self.0 {
            Form::Ratio(n, d) => m.serialize_entry("ratio", &[n, d])?,
            Form::Rate(r) => m.serialize_entry("rate", r)?,
        }
        m.serialize_entry("format", &self.1)?;
        m.end()
    }
}
