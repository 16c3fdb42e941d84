//! Frames of the live view (`/api/v1/snapshot`, `/api/v1/stream`,
//! `perf-exporter stat --json`): what changed between two
//! [`Snapshot`]s, in base units, and the ratios people look at.
//!
//! Counters are monotonic totals, so a frame is the difference of two
//! collections `interval_seconds` apart. A series that restarted in the
//! window (its `start_unix_nanos` changed, or it went down: a reopen that
//! did not carry its total over) contributes its new total, counted since
//! the restart; a series that appeared in the window contributes its
//! total. Gauges are not in `counts`.
//!
//! # The frame (one JSON object)
//!
//! ```json
//! {
//!   "interval_seconds": 1.0,
//!   "counts":      { "perf_instructions_total": 1.2e9, ... },
//!   "derived":     { "ipc": 1.7, "context_switches_per_second": 2300.0, "l1d_miss_ratio": null, ... },
//!   "per_socket":  { "0": { "dram_read_bytes_per_second": 1.1e9, "dram_write_bytes_per_second": 4e8 } },
//!   "unavailable": { "perf_cpu_cycles_total": "needs a hardware PMU ...", "ipc": "needs perf_cpu_cycles_total: ..." },
//!   "per_cpu":     { "cpus": [0, 1], "counts": { "perf_instructions_total": [1900000000, 0], ... },
//!                    "formulas": { "ipc": { "ratio": ["perf_instructions_total", "perf_cpu_cycles_total"], "format": "ratio" }, ... } },
//!   "per_cgroup":  { "counted": 7, "rank_by": "...", "derived": [ { "name": "ipc", "format": "ratio" }, ... ],
//!                    "top": [ { "cgroup": "...", ... } ] }
//! }
//! ```
//!
//! * `counts`: metric name → increase over the interval, summed over CPUs
//!   and uncore instances (node-level counter families only; the
//!   per-cgroup families count the same events again and are in
//!   `per_cgroup`, never here; the engine's own, [`OWN`], are not in
//!   frames).
//! * `derived`: the config's `derived:` metrics (the default config's:
//!   IPC, miss ratios, MPKI, DRAM bandwidth, OS event rates), evaluated
//!   by [`crate::derive`] over this window's `counts` and its length
//!   (`duration_time`); a value undefined in the window (a ratio whose
//!   denominator did not move: an idle CPU) is `null`, never 0 and never
//!   left out. One whose inputs are not counted is in `unavailable`
//!   instead, with the input's reason.
//! * `per_socket`: the DRAM rates summed per `socket` label.
//! * `unavailable`: metric (or derived value) → why this host does not
//!   count it, from the resolution: configured metrics that did not open,
//!   and every derived value whose inputs are missing (naming the input).
//!   A value is in `derived` or in `unavailable`, never in neither. A
//!   stream leaves it out of a frame where it did not change
//!   ([`Framer::encode_stream`]): its viewers keep the last one they got.
//! * `per_cpu` (in every frame; `?per_cpu=0` leaves it out): the CPU
//!   numbers once, then per metric an array of its increases in that
//!   order (integers where they are: event counts, bytes); by default the
//!   metrics the per-CPU derived values are computed from, every per-CPU
//!   counter with `?per_cpu=all` ([`PerCpuDetail`]); and how the
//!   per-CPU derived values are computed from those arrays, each with how
//!   to show it (`format`): the config's derived entries marked
//!   `per_cpu: true` (in the default config `ipc`, `busy_ratio`
//!   (MPERF/TSC, the share of time the CPU was not halted) and the OS
//!   event rates; never a value that sums over CPUs, `cpus_utilized`), in
//!   the table's order, the page's heatmap's preference. The reader
//!   computes them ([`PerCpu`]; `per_cpu.rs`).
//! * `multiplexed` (only when some metric was): metric → the mean share
//!   of the window its counters were on the PMU (`perf_counter_running_ratio`,
//!   perf's `(xx.xx%)`).
//! * `not_counted` (only when some metric was not): the metrics none of
//!   whose counters ran in the window (`perf_counter_state` `never_ran`,
//!   perf's `<not counted>`). Their value is not a measurement, so they
//!   are in `unavailable`, with why, and never in `counts`.
//! * `implausible` (only when some metric was): the metrics some of whose
//!   counters are `implausible` (`perf_counter_state`, why in
//!   `perf_counter_implausible_info`: a count the CPU cannot produce).
//!   Their value is not a measurement: they are in `unavailable`, with
//!   why, never in `counts` nor in `per_cpu`.
//! * `per_cgroup` (where cgroups are counted): the busiest
//!   [`TOP_CGROUPS`] cgroups with their counts and derived values (the
//!   derived table's entries all of whose inputs are counted per cgroup,
//!   listed with their format), counted cgroups inside them nested
//!   ([`CgroupTop`]; `cgroups.rs`).
//!
//! [`FRAME_KEYS`] are the keys every frame has.

mod cgroups;
mod deltas;
mod numbers;
mod per_cpu;

pub use cgroups::{CgroupRow, CgroupTop, CGROUP_PREFIX, TOP_CGROUPS};

/// The per-cgroup counter states of the series not counting.
const CGROUP_STATE: &str = "perf_cgroup_counter_state";
pub use per_cpu::PerCpu;

use crate::config::derived::{Derived, DerivedTable, Source};
use crate::derive::{BinOp, DeriveError, Expr};
use crate::problem::CounterState;
use crate::snapshot::{Family, Kind, Labels, Sample};
use cgroups::CgroupRows;
use deltas::{deltas_into, sum};
use per_cpu::{CpuColumns, CpuIndex};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// How the page shows a derived value (its `unit:`, as written): a
/// share as a percentage (`ratio`, `1`), a rate per second (a unit per
/// second, or, without a unit, an expression over `duration_time`), else
/// a number (`CPUs` is one, though it is over `duration_time`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// A share of 1, shown as a percentage.
    Percent,
    /// Per second.
    Rate,
    /// A plain number (IPC, MPKI).
    Ratio,
}

impl Format {
    /// The format of `d`'s values.
    pub fn of(d: &Derived) -> Self {
        let unit = d.unit.as_deref().unwrap_or("").trim().to_ascii_lowercase();
        let over_time = matches!(
            &d.formula.expr,
            Expr::Binary(BinOp::Div, _, b) if matches!(&**b, Expr::Operand(o)
                if d.formula.inputs.iter().any(|i| i.operand == o.name && i.source == Source::Duration))
        );
        match unit.as_str() {
            "ratio" | "1" => Self::Percent,
            u if u.ends_with("per second") || u.ends_with("/s") => Self::Rate,
            "" if over_time => Self::Rate,
            _ => Self::Ratio,
        }
    }
}

/// The engine's own counter families (group times and read errors, per
/// set and CPU): about the exporter, not the host, so not in frames
/// (`/metrics` has them). At 512 CPUs they are half the series.
pub const OWN: &[&str] = &["perf_group_", "perf_read_errors_total"];

/// Whether `metric` is one of the engine's own families ([`OWN`]).
pub fn is_own(metric: &str) -> bool {
    OWN.iter().any(|p| metric.starts_with(p))
}

/// The DRAM counters given per socket, and their rates' names.
const DRAM_RATES: &[(&str, &str)] = &[
    ("perf_dram_read_bytes_total", "dram_read_bytes_per_second"),
    ("perf_dram_write_bytes_total", "dram_write_bytes_per_second"),
];

/// Whether the frame gives the derived value `name` per socket too
/// (`per_socket`: the DRAM rates).
pub fn is_per_socket(name: &str) -> bool {
    DRAM_RATES.iter().any(|(_, rate)| *rate == name)
}

/// The keys of every frame (`per_cpu` unless `?per_cpu=0`; not the
/// `per_cgroup` list, which is there only where cgroups are counted), in
/// the order JSON objects list them (sorted).
pub const FRAME_KEYS: &[&str] = &[
    "counts",
    "derived",
    "interval_seconds",
    "per_cpu",
    "per_socket",
    "unavailable",
];

/// Which per-CPU columns a frame carries (`per_cpu=` of the query).
///
/// At 512 CPUs every per-CPU counter is about 10,000 numbers and 87 KB
/// per frame: most of its cost (about 0.2 ms to build and encode on this
/// project's benchmark machine) and of every viewer's bandwidth, while the
/// page uses the per-CPU derived values only. So by default a frame
/// carries the columns those derived values are computed from, and all of
/// them on request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum PerCpuDetail {
    /// No `per_cpu` (`per_cpu=0`).
    Off,
    /// The inputs of the per-CPU derived values (`per_cpu=1`, the
    /// default): the entries marked `per_cpu: true` (in the default
    /// config, instructions and cycles for `ipc`, MPERF and TSC for
    /// `busy_ratio`, the context switches, interrupts and softirqs for
    /// their rates).
    #[default]
    Derived,
    /// Every counter that has a `cpu` label (`per_cpu=all`; `stat` always).
    All,
}

impl PerCpuDetail {
    /// Parses the value of `per_cpu=`.
    pub fn parse(v: &str) -> Result<Self, String> {
        match v {
            "0" | "false" => Ok(Self::Off),
            "1" | "true" => Ok(Self::Derived),
            "all" => Ok(Self::All),
            _ => Err(format!(
                "per_cpu=`{v}`: per_cpu is 0 (no per-CPU detail), 1 (the inputs of the per-CPU derived values, the default) or all (every per-CPU counter)"
            )),
        }
    }

    /// Whether a frame with this detail has a per-CPU column of `metric`
    /// (`forms`: the per-CPU derived values).
    fn wants(self, metric: &str, forms: &[per_cpu::Column]) -> bool {
        match self {
            Self::Off => false,
            Self::Derived => per_cpu::is_input(metric, forms),
            Self::All => true,
        }
    }
}

/// One frame of the live view (the schema is in the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frame {
    /// The window, in seconds.
    pub interval_seconds: f64,
    /// Metric → increase over the window, summed (node-level families
    /// only: never the `perf_cgroup_*` ones, which count the same events
    /// again per workload).
    pub counts: BTreeMap<String, f64>,
    /// Derived values; `None` (JSON `null`) where the denominator did not
    /// move.
    pub derived: BTreeMap<String, Option<f64>>,
    /// Socket → the DRAM rates of its memory controllers.
    pub per_socket: BTreeMap<String, BTreeMap<String, Option<f64>>>,
    /// The per-CPU detail (`None`: left out, [`Framer::frame`]).
    pub per_cpu: Option<PerCpu>,
    /// Metric or derived value → why this host does not count it.
    pub unavailable: BTreeMap<String, String>,
    /// The per-workload top list, where cgroups are counted.
    pub per_cgroup: Option<CgroupTop>,
    /// Metric → the share of the window it ran on the PMU, where it was
    /// multiplexed (below 1; perf's `(xx.xx%)`). Not in the JSON when empty.
    pub multiplexed: BTreeMap<String, f64>,
    /// Metrics that were not counted in the window (every series
    /// `never_ran`: perf's `<not counted>`); they are in `unavailable`
    /// with why, never in `counts`. Not in the JSON when empty.
    pub not_counted: BTreeSet<String>,
    /// Metrics some of whose counters are `implausible` (a count the CPU
    /// cannot produce): not a measurement, so they are in `unavailable`
    /// with why, never in `counts` nor in the per-CPU detail. Not in the
    /// JSON when empty.
    pub implausible: BTreeSet<String>,
}

impl Frame {
    /// The frame as JSON.
    pub fn to_json(&self) -> String {
        let cells = self
            .per_cpu
            .as_ref()
            .map_or(0, |p| p.cpus.len() * (p.counts().count() + 1));
        let rows = self.per_cgroup.as_ref().map_or(0, |c| c.top.len());
        self.to_json_in(Vec::with_capacity(4096 + 12 * cells + 1024 * rows), true)
    }

    /// The frame as JSON, written into `out` (sized for it by the caller):
    /// the keys in the order of the fields, the per-CPU columns by
    /// [`PerCpu::write_json`]; `unavailable` only if `with_unavailable`.
    fn to_json_in(&self, mut out: Vec<u8>, with_unavailable: bool) -> String {
        fn entry(out: &mut Vec<u8>, key: &str, v: &impl Serialize) {
            out.push(b',');
            per_cpu::write_str(out, key);
            out.push(b':');
            // Plain maps, numbers and strings always encode.
            let _ = serde_json::to_writer(&mut *out, v);
        }
        out.extend_from_slice(b"{\"interval_seconds\":");
        let _ = serde_json::to_writer(&mut out, &self.interval_seconds);
        entry(&mut out, "counts", &self.counts);
        entry(&mut out, "derived", &self.derived);
        entry(&mut out, "per_socket", &self.per_socket);
        if let Some(p) = &self.per_cpu {
            out.extend_from_slice(b",\"per_cpu\":");
            p.write_json(&mut out);
        }
        if with_unavailable {
            entry(&mut out, "unavailable", &self.unavailable);
        }
        if let Some(c) = &self.per_cgroup {
            entry(&mut out, "per_cgroup", c);
        }
        if !self.multiplexed.is_empty() {
            entry(&mut out, "multiplexed", &self.multiplexed);
        }
        if !self.not_counted.is_empty() {
            entry(&mut out, "not_counted", &self.not_counted);
        }
        if !self.implausible.is_empty() {
            entry(&mut out, "implausible", &self.implausible);
        }
        out.push(b'}');
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Where the reasons for unavailability come from: the caller's
/// explanations (from the resolution and the open failures: what the
/// landing page shows), by metric name. Metrics without one fall back to
/// the `reason` and `class` of the snapshot's `perf_event_available` 0
/// sample.
pub type Reasons = BTreeMap<String, String>;

/// Builds a frame from two collections `secs` apart, with every per-CPU
/// column (a [`Framer`] used once).
pub fn frame(
    prev: &[Family],
    cur: &[Family],
    secs: f64,
    reasons: &Reasons,
    derived: &DerivedTable,
) -> Frame {
    Framer::default().frame(prev, cur, secs, reasons, PerCpuDetail::All, derived)
}

/// Builds the frames of one stream, one after the other: it keeps what it
/// learnt about the series (which CPU each is on) and the size of the last
/// frame, so that a frame at 512 CPUs parses no label and grows no buffer.
#[derive(Debug, Default)]
pub struct Framer {
    cpus: CpuIndex,
    /// The increases of the family being added (kept: no allocation per
    /// family).
    deltas: Vec<f64>,
    /// Bytes of the last frame's JSON.
    json_len: usize,
    /// The `unavailable` of the last frame a stream sent
    /// ([`Framer::encode_stream`]).
    sent_unavailable: Option<BTreeMap<String, String>>,
}

impl Framer {
    /// A frame from two collections `secs` apart, with the per-CPU columns
    /// `detail` says.
    pub fn frame(
        &mut self,
        prev: &[Family],
        cur: &[Family],
        secs: f64,
        reasons: &Reasons,
        detail: PerCpuDetail,
        derived: &DerivedTable,
    ) -> Frame {
        let mut f = Frame {
            interval_seconds: secs,
            ..Frame::default()
        };
        let mut cpus = (detail != PerCpuDetail::Off).then(|| CpuColumns::new(&mut self.cpus));
        // The per-CPU derived values, from the table served.
        let forms = cpus
            .as_ref()
            .map_or_else(Vec::new, |_| per_cpu::formulas(derived));
        let mut cgroups = CgroupRows::default();
        let untrusted = implausible(cur);
        for (i, fam) in cur.iter().enumerate() {
            if fam.name == CGROUP_STATE {
                cgroups.states(fam);
            }
            if fam.kind != Kind::Counter || is_own(&fam.name) {
                continue;
            }
            // The engine keeps its families in order: the same position
            // first, a search by name only when the order changed.
            let old = prev
                .get(i)
                .filter(|p| p.name == fam.name)
                .or_else(|| prev.iter().find(|p| p.name == fam.name))
                .map(|p| p.samples.as_slice());
            let d = deltas_into(old, &fam.samples, &mut self.deltas);
            if fam.name.starts_with(CGROUP_PREFIX) {
                cgroups.add(fam, fam.samples.iter().zip(d.iter().copied()));
                continue;
            }
            f.counts.insert(fam.name.to_string(), sum(d));
            // An implausible count is no measurement, per CPU either.
            let trusted = !untrusted.contains_key(fam.name.as_str());
            if let Some(c) = cpus
                .as_mut()
                .filter(|_| trusted && detail.wants(&fam.name, &forms))
            {
                c.add_family(i, &fam.name, &fam.samples, d);
            }
            if let Some((_, rate)) = DRAM_RATES.iter().find(|(m, _)| *m == &*fam.name) {
                per_socket(&mut f.per_socket, rate, &fam.samples, d, secs);
            }
        }
        unavailable(cur, reasons, &mut f.unavailable);
        counter_states(cur, &mut f);
        for (m, why) in untrusted {
            f.counts.remove(m);
            f.multiplexed.remove(m);
            f.unavailable.insert(m.to_string(), why);
            f.implausible.insert(m.to_string());
        }
        derive(&mut f, derived, secs);
        f.per_cpu = cpus.map(|c| c.finish(secs, forms));
        f.per_cgroup = cgroups.finish(derived, secs);
        f
    }

    /// A frame of this stream as JSON, into a buffer the size of the last
    /// one's.
    pub fn encode(&mut self, f: &Frame) -> String {
        let json = f.to_json_in(Vec::with_capacity(self.json_len + 1024), true);
        self.json_len = json.len();
        json
    }

    /// A frame of a stream as JSON: as [`Framer::encode`], but without
    /// `unavailable` when it is the same as in this stream's previous
    /// frame, unless `full` (a viewer joined since: its first frame has
    /// it). A viewer keeps the last `unavailable` it got; on a VM without
    /// a PMU the reasons are most of a frame (about 60 KiB), and they
    /// change only with the host's state.
    pub fn encode_stream(&mut self, f: &Frame, full: bool) -> String {
        let same = self.sent_unavailable.as_ref() == Some(&f.unavailable);
        let json = f.to_json_in(Vec::with_capacity(self.json_len + 1024), full || !same);
        if !same {
            self.sent_unavailable = Some(f.unavailable.clone());
        }
        self.json_len = json.len();
        json
    }
}

fn not_configured(metric: &str) -> String {
    format!("{metric} is not in the config")
}

/// The config's derived values over the frame's window
/// ([`DerivedTable::evaluate`]: every input is this window's increase, or
/// its length): a value is in `derived` (`null` where it is undefined in
/// this window: a division by zero, or a derived input that is), or in
/// `unavailable` with why (the input it lacks and that input's reason).
fn derive(f: &mut Frame, table: &DerivedTable, secs: f64) {
    let values = {
        let counts = &f.counts;
        table.evaluate(
            &|m| counts.get(m).copied(),
            (secs > 0.0).then_some(secs),
            &|l| Err(format!("`{l}` has no value on this host")),
        )
    };
    for (name, v) in values {
        let v = match v {
            Ok(v) => Some(v),
            Err(e) => {
                let unavailable = &f.unavailable;
                match why_missing(table, name, e, &|x| unavailable.get(x).cloned()) {
                    Some(why) => {
                        f.unavailable.insert(name.to_string(), why);
                        continue;
                    }
                    None => None,
                }
            }
        };
        f.derived.insert(name.to_string(), v);
    }
}

/// Why the derived value `name` of `table` has no number, from its
/// evaluation's error: `None` where it is undefined in the window (a zero
/// divisor, an empty window, a derived input that is undefined itself),
/// else why, naming the operand it lacks (an input or a `has_event`
/// probe) with that operand's own reason, so that a derived input's is
/// the whole chain (`needs b: needs perf_x_total: ...`). `why` gives the
/// reason of an event metric or derived value that is unavailable (an
/// event metric it has none for is not in the config). The node's values
/// and each cgroup's ([`cgroups`]) say it the same way.
pub(super) fn why_missing(
    table: &DerivedTable,
    name: &str,
    err: DeriveError,
    why: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let op = match err {
        DeriveError::Undefined => return None,
        DeriveError::Missing(op) => op,
        e => return Some(e.to_string()),
    };
    let source = table.get(name).and_then(|d| {
        d.formula
            .inputs
            .iter()
            .chain(&d.formula.probes)
            .find(|i| i.operand == op)
            .map(|i| &i.source)
    });
    match source {
        Some(Source::Metric(m)) => Some(format!(
            "needs {m}: {}",
            why(m).unwrap_or_else(|| not_configured(m))
        )),
        Some(Source::Derived(d)) => why(d).map(|w| format!("needs {d}: {w}")),
        // An empty window: no value, as a zero divisor.
        Some(Source::Duration) => None,
        None => Some(format!("needs {op}: {}", not_configured(&op))),
    }
}

/// Configured metrics not counted on this host, with why. A metric counted
/// on some PMU instances and not others is counted.
fn unavailable(cur: &[Family], reasons: &Reasons, out: &mut BTreeMap<String, String>) {
    // Metric → counted somewhere, and a 0 sample's labels (with why).
    let mut counted: BTreeMap<&str, (bool, Option<&Labels>)> = BTreeMap::new();
    for s in cur
        .iter()
        .filter(|f| f.name == "perf_event_available")
        .flat_map(|f| &f.samples)
    {
        if let Some(m) = label(&s.labels, "metric") {
            let e = counted.entry(m).or_default();
            e.0 |= s.value > 0.0;
            if s.value <= 0.0 {
                e.1.get_or_insert(&s.labels);
            }
        }
    }
    for (m, (_, info)) in counted.into_iter().filter(|(_, c)| !c.0) {
        let why = reasons.get(m).cloned().unwrap_or_else(|| match info {
            Some(l) if label(l, "reason").is_some() => format!(
                "{} ({})",
                label(l, "reason").unwrap_or("failed"),
                label(l, "class").unwrap_or("failed").replace('_', " ")
            ),
            _ => "not counted on this host".into(),
        });
        out.insert(m.to_string(), why);
    }
}

/// What the counter states of the current collection say about the
/// frame: a metric none of whose counters ran in the window
/// (`perf_counter_states`: all `never_ran`) is not a measurement, so it
/// leaves `counts` for `unavailable` (with why) and `not_counted`; a
/// multiplexed one gets its mean running share in `multiplexed` (the
/// ratios of `perf_counter_running_ratio`, which lists only counters that
/// are not counting; the others ran all the time).
fn counter_states(cur: &[Family], f: &mut Frame) {
    let family = |name: &str| cur.iter().find(|x| x.name == name).map(|x| &x.samples);
    let Some(states) = family("perf_counter_states") else {
        return;
    };
    // Metric → (counters, never ran, ratios listed, their sum).
    let mut per: BTreeMap<&str, (f64, f64, f64, f64)> = BTreeMap::new();
    for s in states {
        let (Some(m), Some(st)) = (label(&s.labels, "metric"), label(&s.labels, "state")) else {
            continue;
        };
        let e = per.entry(m).or_default();
        e.0 += s.value;
        if CounterState::parse(st).is_some_and(|x| !x.is_measurement()) {
            e.1 += s.value;
        }
    }
    for s in family("perf_counter_running_ratio").into_iter().flatten() {
        if let Some(e) = label(&s.labels, "metric").and_then(|m| per.get_mut(m)) {
            e.2 += 1.0;
            e.3 += s.value;
        }
    }
    for (m, (n, never, listed, sum)) in per {
        if n > 0.0 && never >= n {
            f.counts.remove(m);
            f.unavailable
                .insert(m.to_string(), CounterState::NeverRan.explain().to_string());
            f.not_counted.insert(m.to_string());
        } else if n > 0.0 && listed > 0.0 {
            let r = (sum + (n - listed).max(0.0)) / n;
            if r < 1.0 {
                f.multiplexed.insert(m.to_string(), r);
            }
        }
    }
}

/// The metrics some of whose counters are `implausible`
/// (`perf_counter_states`), each with why: the reason of its first
/// `perf_counter_implausible_info` series, else the state's meaning.
fn implausible(cur: &[Family]) -> BTreeMap<&str, String> {
    let mut out = BTreeMap::new();
    let family = |name: &str| cur.iter().find(|x| x.name == name).map(|x| &x.samples);
    for s in family("perf_counter_states").into_iter().flatten() {
        if s.value > 0.0 && label(&s.labels, "state") == Some(CounterState::Implausible.as_str()) {
            if let Some(m) = label(&s.labels, "metric") {
                out.insert(m, CounterState::Implausible.explain().to_string());
            }
        }
    }
    for s in family("perf_counter_implausible_info")
        .into_iter()
        .flatten()
    {
        let (Some(m), Some(code)) = (label(&s.labels, "metric"), label(&s.labels, "reason")) else {
            continue;
        };
        if let (Some(why), Some(e)) = (
            crate::problem::plausible::Implausible::explain_code(code),
            out.get_mut(m),
        ) {
            if e.as_str() == CounterState::Implausible.explain() {
                *e = why;
            }
        }
    }
    out
}

/// Adds the DRAM rate `rate` of each series to its socket's (`socket`
/// label).
fn per_socket(
    out: &mut BTreeMap<String, BTreeMap<String, Option<f64>>>,
    rate: &str,
    samples: &[Sample],
    d: &[f64],
    secs: f64,
) {
    for (s, d) in samples.iter().zip(d) {
        if let Some(socket) = label(&s.labels, "socket") {
            let e = out.entry(socket.to_string()).or_default();
            let v = e.entry(rate.to_string()).or_insert(Some(0.0));
            *v = v.map(|v| v + d / secs).filter(|_| secs > 0.0);
        }
    }
}

fn label<'a>(l: &'a Labels, key: &str) -> Option<&'a str> {
    l.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests;
