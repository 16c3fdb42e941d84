//! `perf-exporter metrics import`: perf's metric JSON turned into a
//! config (`sets:` that count the events, `derived:` that computes the
//! metrics).
//!
//! The kernel keeps each CPU model's events and metrics as JSON arrays
//! under `tools/perf/pmu-events/arch/<arch>/<model>/`: objects with an
//! `EventName` describe an event (`EventCode`, `UMask`, `CounterMask`,
//! ... and `Unit`, the PMU), objects with a `MetricName` a metric
//! (`MetricExpr`, `MetricGroup`, `ScaleUnit`, `MetricThreshold`). Give
//! the importer a model's files (events and metrics together, as perf
//! reads them) and it writes:
//!
//! * every event a taken metric reads as an event metric
//!   `perf_<event_name>_total` whose encoding is what perf's `jevents.py`
//!   builds from the JSON fields: `event=` (or `config=` from
//!   `ConfigCode`, with `ExtSel` as bits 8 and up), then `any`,
//!   `ch_mask`, `cmask`, `edge`, `fc_mask`, `inv`, `umask`, `type`,
//!   `rdwrmask`, `enallcores`, `enallslices`, `sliceid`, `threadmask`
//!   when non-zero, the `Filter` verbatim, and the `MSRValue` as
//!   `offcore_rsp` (MSR 0x1a6, 0x1a7), `ldlat` (0x3f6) or `frontend`
//!   (0x3f7). `SampleAfterValue` (a sampling period) does not apply to
//!   counting and is left out. The fixed-counter events perf names
//!   (`INST_RETIRED.ANY`, `CPU_CLK_UNHALTED.THREAD`, ...) get perf's
//!   encodings for them;
//! * the PMU from `Unit` as `jevents.py` maps it (`iMC` is
//!   `uncore_imc`, `DFPMC` is `amd_df`, ...); an uncore PMU named
//!   `uncore_x` is written as the fallback chain `uncore_x_*` (one PMU per
//!   box, as servers have) then `uncore_x` (one PMU, as clients have). An
//!   event without `Unit` is on the core PMU ([`Options::core_pmu`]);
//! * the events in **sets**, one perf group each, packed metric by
//!   metric: the events one metric reads (with the metrics it references)
//!   go into the same set when they fit, so its ratio divides counts of
//!   the same schedule. A core set holds at most [`Options::counters`]
//!   events that need a general-purpose counter (the fixed-counter
//!   events do not: Intel's event code 0x00 pseudo-encodings and the
//!   named fixed events); an uncore set at most 4 events (the usual
//!   counters per box);
//! * every metric whose operands all resolve as a `derived:` entry, its
//!   expression kept as written except for the names: events become
//!   their metric names, metrics their derived names (lower case).
//!   `ScaleUnit` `100%` becomes the unit `ratio` with the value left a
//!   fraction (Prometheus's base units); another scale multiplies the
//!   expression and its unit becomes the entry's `unit`.
//!
//! What it cannot take is reported, never guessed: an operand that names
//! no event of the files and no metric, an expression outside perf's
//! grammar, a threshold that does not parse (perf itself does not parse
//! thresholds when it builds its tables), a metric that reads a metric
//! not taken. The report goes at the top of the written file, as
//! comments, and to the terminal.
//!
//! Given a target host ([`Options::target`]: its sysfs, read by the
//! caller), the importer also
//!
//! * resolves a bare name the files do not define against the target's
//!   sysfs events, as perf does (`TSC` is `msr/tsc/`, `tsc` being the
//!   `msr` PMU's event); a name several unrelated PMUs have is refused as
//!   ambiguous;
//! * honours `Compat`: an event whose `Compat` (a regular expression
//!   perf matches whole against the PMU's sysfs `identifier`) matches no
//!   identifier of the target's PMUs of its `Unit` is skipped, so a later
//!   entry of the same name for that PMU version wins, and a metric that
//!   reads only the skipped one is left out saying so (a PMU without an
//!   `identifier` file takes every entry, as in perf);
//! * honours `PerPkg`: an event perf counts once per package is refused
//!   when the target's PMU for it has no `cpumask` (opened on every CPU,
//!   its count would be summed once per CPU).
//!
//! Without a target, names are resolved against the files alone.
//!
//! The jobs are in their own files: `json.rs` reads and decodes perf's
//! JSON, `operand.rs` says what an expression's name is, `take.rs` takes
//! the metrics, `pack.rs` packs their events into schedulable sets and
//! `yaml.rs` writes the config.
//!
//! Plain data, no I/O: the caller reads the files and writes the result.
//! Input is hostile and bounded: at most [`MAX_ENTRIES`] objects in all.

mod json;
mod merge;
mod operand;
mod pack;
mod take;
#[cfg(test)]
mod tests;
mod yaml;

use std::collections::{BTreeMap, BTreeSet};

use crate::derive;

pub use merge::{merged_derived, Merged, BEGIN, END};

/// The most JSON objects (events and metrics) one import reads.
pub const MAX_ENTRIES: usize = 200_000;

/// Why an import cannot be done at all (a metric it cannot take is a
/// [`Skipped`] entry instead).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file is not JSON.
    #[error("{file}: line {line}, column {column}: not JSON: {msg}")]
    Json {
        /// The file as given.
        file: String,
        /// 1-based.
        line: usize,
        /// 1-based.
        column: usize,
        /// The parser's message.
        msg: String,
    },
    /// A file is JSON but not an array of objects (perf's layout).
    #[error("{file}: not a perf event or metric file (a JSON array of objects is expected)")]
    NotAnArray {
        /// The file as given.
        file: String,
    },
    /// More objects than [`MAX_ENTRIES`].
    #[error("more than {MAX_ENTRIES} events and metrics in the files given")]
    TooMany,
    /// No metric at all in the files.
    #[error("no metric (an object with `MetricName` and `MetricExpr`) in the files given; give a model's metric file (e.g. `skx-metrics.json`) with its event files")]
    NoMetrics,
}

/// How to write what the JSON leaves to the host.
#[derive(Debug, Clone)]
pub struct Options {
    /// The core PMU of events without `Unit` (`cpu` on x86 without
    /// hybrid cores; `cpu_core` and `cpu_atom` come from `Unit`).
    pub core_pmu: String,
    /// General-purpose counters a core set may use (4: what Intel cores
    /// give each hardware thread with SMT on).
    pub counters: usize,
    /// The host the config is for, when known (see the module docs).
    pub target: Option<Target>,
}

/// The PMUs of the host a config is imported for, as its sysfs shows
/// them (read by the caller: this module does no I/O).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// Every PMU, by name.
    pub pmus: Vec<TargetPmu>,
}

/// One PMU of a [`Target`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetPmu {
    /// Its name (`msr`, `uncore_imc_0`).
    pub name: String,
    /// The names of its sysfs `events/` (lower case).
    pub events: BTreeSet<String>,
    /// Its sysfs `identifier`, when it has one.
    pub identifier: Option<String>,
    /// Whether it has a `cpumask` (opened once per listed CPU).
    pub cpumask: bool,
    /// Whether it is a core PMU.
    pub core: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            core_pmu: "cpu".into(),
            counters: 4,
            target: None,
        }
    }
}

/// A metric the importer did not take, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its `MetricName`.
    pub metric: String,
    /// Why, naming the operand or the part.
    pub why: String,
}

/// The result: a config in YAML and what was left out.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The config (`sets:` and `derived:`), with the report as comments.
    pub yaml: String,
    /// Metrics taken.
    pub taken: usize,
    /// Metrics left out, in file order.
    pub skipped: Vec<Skipped>,
    /// Thresholds left out (their metric was taken), in file order.
    pub dropped_thresholds: Vec<Skipped>,
}

/// One event of the files.
#[derive(Debug, Clone)]
pub(super) struct JsonEvent {
    pub(super) pmu: String,
    pub(super) terms: String,
    pub(super) help: Option<String>,
    /// `PerPkg`: counted once per package.
    pub(super) per_pkg: bool,
    /// Our own `CountedAs`: the one metric of the base config's sets that
    /// counts this event for this file's formulas, where several count
    /// its encoding (each guarded to other CPUs).
    pub(super) counted_as: Option<String>,
}

/// One metric of the files.
#[derive(Debug, Clone)]
pub(super) struct JsonMetric {
    pub(super) name: String,
    pub(super) expr: String,
    pub(super) help: Option<String>,
    pub(super) group: Option<String>,
    pub(super) scale_unit: Option<String>,
    pub(super) threshold: Option<String>,
    /// `PrometheusRecord` (ours, not perf's): the recording rule's name.
    pub(super) record: Option<String>,
    /// `RequiresCpu` (ours, not perf's): the CPU guard of the derived
    /// alternative (`requires_cpu`), where formulas of several platforms
    /// read the same counts.
    pub(super) requires_cpu: Option<String>,
}

/// An event a metric reads, as the config will count it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Counted {
    /// The event metric's name.
    pub(super) metric: String,
    /// The PMU.
    pub(super) pmu: String,
    /// Alternatives of the spec (a fallback chain).
    pub(super) specs: Vec<String>,
    /// Whether it needs a general-purpose counter.
    pub(super) general: bool,
    pub(super) help: Option<String>,
    /// The file's `CountedAs` (see [`JsonEvent`]).
    pub(super) counted_as: Option<String>,
}

/// The fixed-counter events `jevents.py` encodes itself.
pub(super) const FIXED: [(&str, &str); 6] = [
    ("inst_retired.any", "event=0xc0"),
    ("inst_retired.any_p", "event=0xc0"),
    ("cpu_clk_unhalted.ref", "event=0x0,umask=0x3"),
    ("cpu_clk_unhalted.thread", "event=0x3c"),
    ("cpu_clk_unhalted.core", "event=0x3c"),
    ("cpu_clk_unhalted.thread_any", "event=0x3c,any=1"),
];

/// `s` as the tail of a metric name: lower case, every run of other
/// characters than letters and digits one `_`.
pub(super) fn snake(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_string()
}

/// Modifiers after `:` carried into the spec (`:u` stays `:u`).
pub(super) fn mods_suffix(mods: &str) -> String {
    if mods.is_empty() {
        String::new()
    } else {
        format!(":{}", mods.trim_start_matches(':'))
    }
}

/// The importer: what the files hold, and the options.
pub(super) struct Importer<'a> {
    pub(super) events: BTreeMap<String, JsonEvent>,
    pub(super) incompatible: BTreeMap<String, String>,
    pub(super) by_name: BTreeMap<String, JsonMetric>,
    pub(super) metrics: Vec<JsonMetric>,
    pub(super) opts: &'a Options,
}

/// What one operand of a metric is.
pub(super) enum Resolved {
    /// An event to count.
    Event(Counted),
    /// Another metric, by its `MetricName`.
    Metric(String),
    /// A name the evaluator knows.
    Keep,
}

/// A metric taken: its entry and the events it reads (its own and those
/// of the metrics it references).
#[derive(Clone)]
pub(super) struct Taken {
    pub(super) name: String,
    pub(super) expr: String,
    pub(super) help: Option<String>,
    pub(super) unit: Option<String>,
    pub(super) group: Option<String>,
    pub(super) threshold: Option<String>,
    pub(super) record: Option<String>,
    pub(super) requires_cpu: Option<String>,
    pub(super) events: BTreeSet<Counted>,
}

/// `text` with its constants folded ([`derive::fold`]: perf's `x * 64 /
/// 1e6` under the importer's `1000000 * (..)` is `x`), written with only
/// the parentheses it needs; as written when nothing folds or it does
/// not parse (the caller reports that).
pub(super) fn folded(text: &str) -> String {
    let Ok(parsed) = derive::parse(text) else {
        return text.to_string();
    };
    let f = derive::fold(&parsed);
    if f == parsed {
        text.to_string()
    } else {
        derive::to_source(&f)
    }
}

/// Reads `files` (name and text) and writes the config.
pub fn import(files: &[(String, String)], opts: &Options) -> Result<Imported, ImportError> {
    let read = json::read(files, opts)?;
    if read.metrics.is_empty() {
        return Err(ImportError::NoMetrics);
    }
    Ok(Importer::new(read, opts).run(files))
}
