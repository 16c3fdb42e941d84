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
//! Plain data, no I/O: the caller reads the files and writes the result.
//! Input is hostile and bounded: at most [`MAX_ENTRIES`] objects in all.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::derive;

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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            core_pmu: "cpu".into(),
            counters: 4,
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
struct JsonEvent {
    pmu: String,
    terms: String,
    help: Option<String>,
}

/// One metric of the files.
#[derive(Debug, Clone)]
struct JsonMetric {
    name: String,
    expr: String,
    help: Option<String>,
    group: Option<String>,
    scale_unit: Option<String>,
    threshold: Option<String>,
}

/// An event a metric reads, as the config will count it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Counted {
    /// The event metric's name.
    metric: String,
    /// The PMU.
    pmu: String,
    /// Alternatives of the spec (a fallback chain).
    specs: Vec<String>,
    /// Whether it needs a general-purpose counter.
    general: bool,
    help: Option<String>,
}

/// The fixed-counter events `jevents.py` encodes itself.
const FIXED: [(&str, &str); 6] = [
    ("inst_retired.any", "event=0xc0"),
    ("inst_retired.any_p", "event=0xc0"),
    ("cpu_clk_unhalted.ref", "event=0x0,umask=0x3"),
    ("cpu_clk_unhalted.thread", "event=0x3c"),
    ("cpu_clk_unhalted.core", "event=0x3c"),
    ("cpu_clk_unhalted.thread_any", "event=0x3c,any=1"),
];

/// `jevents.py`'s `Unit` to PMU table; any other unit is `uncore_<unit>`.
const UNITS: [(&str, &str); 22] = [
    ("CBO", "uncore_cbox"),
    ("QPI LL", "uncore_qpi"),
    ("SBO", "uncore_sbox"),
    ("iMPH-U", "uncore_arb"),
    ("CPU-M-CF", "cpum_cf"),
    ("CPU-M-SF", "cpum_sf"),
    ("PAI-CRYPTO", "pai_crypto"),
    ("PAI-EXT", "pai_ext"),
    ("UPI LL", "uncore_upi"),
    ("hisi_sicl,cpa", "hisi_sicl,cpa"),
    ("hisi_sccl,ddrc", "hisi_sccl,ddrc"),
    ("hisi_sccl,hha", "hisi_sccl,hha"),
    ("hisi_sccl,l3c", "hisi_sccl,l3c"),
    ("imx8_ddr", "imx8_ddr"),
    ("imx9_ddr", "imx9_ddr"),
    ("L3PMC", "amd_l3"),
    ("DFPMC", "amd_df"),
    ("UMCPMC", "amd_umc"),
    ("cpu_core", "cpu_core"),
    ("cpu_atom", "cpu_atom"),
    ("ali_drw", "ali_drw"),
    ("arm_cmn", "arm_cmn"),
];

/// The JSON fields `jevents.py` turns into terms, in its order.
const FIELDS: [(&str, &str); 13] = [
    ("AnyThread", "any"),
    ("PortMask", "ch_mask"),
    ("CounterMask", "cmask"),
    ("EdgeDetect", "edge"),
    ("FCMask", "fc_mask"),
    ("Invert", "inv"),
    ("UMask", "umask"),
    ("NodeType", "type"),
    ("RdWrMask", "rdwrmask"),
    ("EnAllCores", "enallcores"),
    ("EnAllSlices", "enallslices"),
    ("SliceId", "sliceid"),
    ("ThreadMask", "threadmask"),
];

/// Reads `files` (name and text) and writes the config.
pub fn import(files: &[(String, String)], opts: &Options) -> Result<Imported, ImportError> {
    let mut events: BTreeMap<String, JsonEvent> = BTreeMap::new();
    let mut metrics: Vec<JsonMetric> = Vec::new();
    let mut count = 0usize;
    for (file, text) in files {
        let v: Value = serde_json::from_str(text).map_err(|e| ImportError::Json {
            file: file.clone(),
            line: e.line(),
            column: e.column(),
            msg: e.to_string(),
        })?;
        let Value::Array(items) = v else {
            return Err(ImportError::NotAnArray { file: file.clone() });
        };
        for item in &items {
            count += 1;
            if count > MAX_ENTRIES {
                return Err(ImportError::TooMany);
            }
            let Value::Object(o) = item else {
                return Err(ImportError::NotAnArray { file: file.clone() });
            };
            let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
            if let (Some(name), Some(expr)) = (s("MetricName"), s("MetricExpr")) {
                metrics.push(JsonMetric {
                    name,
                    expr,
                    help: s("BriefDescription"),
                    group: s("MetricGroup"),
                    scale_unit: s("ScaleUnit"),
                    threshold: s("MetricThreshold"),
                });
            } else if let Some(name) = s("EventName") {
                if let Some(e) = json_event(&|k| s(k), opts) {
                    events.entry(name.to_ascii_lowercase()).or_insert(e);
                }
            }
        }
    }
    if metrics.is_empty() {
        return Err(ImportError::NoMetrics);
    }
    Ok(Importer {
        events,
        by_name: metrics
            .iter()
            .map(|m| (m.name.to_ascii_lowercase(), m.clone()))
            .collect(),
        metrics,
        opts,
    }
    .run(files))
}

/// The spec terms of one event object, as `jevents.py` builds them
/// (`None` for an object that names no encoding, e.g. perf's tool
/// events).
fn json_event(s: &dyn Fn(&str) -> Option<String>, opts: &Options) -> Option<JsonEvent> {
    let name = s("EventName")?.to_ascii_lowercase();
    let num = |v: &str| -> Option<u64> {
        let first = v.split(',').next()?.trim();
        match first
            .strip_prefix("0x")
            .or_else(|| first.strip_prefix("0X"))
        {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => first.parse().ok(),
        }
    };
    let pmu = match s("Unit") {
        None => opts.core_pmu.clone(),
        Some(u) => UNITS.iter().find(|(k, _)| *k == u).map_or_else(
            || format!("uncore_{}", u.to_ascii_lowercase()),
            |(_, p)| (*p).to_string(),
        ),
    };
    if pmu == "tool" {
        return None;
    }
    let terms = if let Some((_, t)) = FIXED.iter().find(|(n, _)| *n == name) {
        (*t).to_string()
    } else {
        let mut code = s("EventCode").and_then(|v| num(&v)).unwrap_or(0);
        if let Some(ext) = s("ExtSel").and_then(|v| num(&v)) {
            code |= ext << 8;
        }
        let mut t = match s("ConfigCode").and_then(|v| num(&v)) {
            Some(c) => format!("config={c:#x}"),
            None => format!("event={code:#x}"),
        };
        for (field, term) in FIELDS {
            if let Some(v) = s(field).and_then(|v| num(&v)).filter(|&v| v != 0) {
                let _ = write!(t, ",{term}={v:#x}");
            }
        }
        if let Some(f) = s("Filter") {
            let _ = write!(t, ",{f}");
        }
        if let (Some(idx), Some(val)) = (s("MSRIndex").and_then(|v| num(&v)), s("MSRValue")) {
            let term = match idx {
                0x3f6 => Some("ldlat"),
                0x1a6 | 0x1a7 => Some("offcore_rsp"),
                0x3f7 => Some("frontend"),
                _ => None,
            };
            if let Some(term) = term {
                let _ = write!(t, ",{term}={val}");
            }
        }
        t
    };
    Some(JsonEvent {
        pmu,
        terms,
        help: s("BriefDescription"),
    })
}

/// `s` as the tail of a metric name: lower case, every run of other
/// characters than letters and digits one `_`.
fn snake(s: &str) -> String {
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

/// The derived name of a perf metric.
fn derived_name(metric: &str) -> String {
    let s = snake(metric);
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("m_{s}")
    } else {
        s
    }
}

struct Importer<'a> {
    events: BTreeMap<String, JsonEvent>,
    by_name: BTreeMap<String, JsonMetric>,
    metrics: Vec<JsonMetric>,
    opts: &'a Options,
}

/// What one operand of a metric is.
enum Resolved {
    Event(Counted),
    Metric(String),
    Keep,
}

/// A metric taken: its entry and the events it reads (its own and those
/// of the metrics it references).
struct Taken {
    name: String,
    expr: String,
    help: Option<String>,
    unit: Option<String>,
    group: Option<String>,
    threshold: Option<String>,
    events: BTreeSet<Counted>,
}

impl Importer<'_> {
    /// What an operand names: an event of the files (`NAME`,
    /// `NAME:mods`, `pmu@NAME,terms@`), a sysfs event (`pmu@name@`) or
    /// raw terms (`pmu@event=..@`), a metric, or a name the evaluator
    /// knows (`duration_time`).
    fn resolve(&self, name: &str) -> Result<Resolved, String> {
        if name == "duration_time" {
            return Ok(Resolved::Keep);
        }
        if let Some(m) = self.by_name.get(&name.to_ascii_lowercase()) {
            return Ok(Resolved::Metric(m.name.clone()));
        }
        let core = |pmu: &str| pmu == self.opts.core_pmu || pmu == "cpu_core" || pmu == "cpu_atom";
        let (pmu, terms, help, label) = if let Some((pmu, rest)) = name.split_once('@') {
            let (inside, mods) = rest.rsplit_once('@').unwrap_or((rest, ""));
            let (first, extra) = inside.split_once(',').unwrap_or((inside, ""));
            let mut terms = match self.events.get(&first.to_ascii_lowercase()) {
                Some(e) if !first.contains('=') => e.terms.clone(),
                _ => first.to_string(),
            };
            if !extra.is_empty() {
                terms = format!("{terms},{extra}");
            }
            let help = self
                .events
                .get(&first.to_ascii_lowercase())
                .and_then(|e| e.help.clone());
            (
                pmu.to_string(),
                format!("{terms}{}", mods_suffix(mods)),
                help,
                format!("{pmu}_{inside}"),
            )
        } else {
            let (ev, mods) = name.split_once(':').unwrap_or((name, ""));
            match self.events.get(&ev.to_ascii_lowercase()) {
                Some(e) => (
                    e.pmu.clone(),
                    format!("{}{}", e.terms, mods_suffix(mods)),
                    e.help.clone(),
                    name.to_string(),
                ),
                // perf's generic names (`cycles`, `L1-dcache-loads`) are
                // the kernel's, whatever the model.
                None if crate::spec::generic_names().iter().any(|g| g == ev) => (
                    self.opts.core_pmu.clone(),
                    String::new(),
                    None,
                    name.to_string(),
                ),
                None => {
                    return Err(format!(
                        "`{name}` is neither an event of the files given nor a metric"
                    ))
                }
            }
        };
        let specs = if terms.is_empty() {
            vec![name.to_string()]
        } else if pmu.starts_with("uncore_") && !pmu.contains('*') {
            vec![format!("{pmu}_*/{terms}/"), format!("{pmu}/{terms}/")]
        } else {
            vec![format!("{pmu}/{terms}/")]
        };
        let general = terms.is_empty()
            || !(core(&pmu)
                && (terms.starts_with("event=0x0,")
                    || terms == "event=0x0"
                    || FIXED.iter().any(|(_, t)| *t == terms)));
        Ok(Resolved::Event(Counted {
            metric: format!("perf_{}_total", snake(&label)),
            pmu,
            specs,
            general,
            help,
        }))
    }

    /// Takes `m` (after the metrics it reads), or says why not.
    fn take(
        &self,
        m: &JsonMetric,
        taken: &mut BTreeMap<String, Result<Taken, String>>,
        depth: usize,
    ) -> Result<(), String> {
        let key = m.name.to_ascii_lowercase();
        if taken.contains_key(&key) {
            return Ok(());
        }
        if depth > derive::MAX_DEPTH {
            return Err("its metric references nest too deep (or form a cycle)".into());
        }
        let result = self.take_one(m, taken, depth);
        taken.insert(key, result);
        Ok(())
    }

    fn take_one(
        &self,
        m: &JsonMetric,
        taken: &mut BTreeMap<String, Result<Taken, String>>,
        depth: usize,
    ) -> Result<Taken, String> {
        let expr = derive::parse(&m.expr).map_err(|e| format!("its expression: {e}"))?;
        let mut events = BTreeSet::new();
        let mut renames: BTreeMap<String, String> = BTreeMap::new();
        for o in expr.operands() {
            match self.resolve(&o.name)? {
                Resolved::Keep => {}
                Resolved::Event(c) => {
                    renames.insert(o.name.clone(), c.metric.clone());
                    events.insert(c);
                }
                Resolved::Metric(name) => {
                    if name.eq_ignore_ascii_case(&m.name) {
                        return Err("its expression reads itself".into());
                    }
                    let other = &self.by_name[&name.to_ascii_lowercase()];
                    self.take(other, taken, depth + 1)?;
                    match &taken[&name.to_ascii_lowercase()] {
                        Ok(t) => {
                            events.extend(t.events.iter().cloned());
                            renames.insert(o.name.clone(), t.name.clone());
                        }
                        Err(_) => return Err(format!("it reads `{name}`, which is not taken")),
                    }
                }
            }
        }
        // `has_event(..)` probes name events that may be missing: counted
        // where the files know them, kept as written otherwise.
        for o in expr.probes() {
            if let Ok(Resolved::Event(c)) = self.resolve(&o.name) {
                renames.insert(o.name.clone(), c.metric.clone());
                events.insert(c);
            }
        }
        let mut text =
            rename(&m.expr, None, &renames).map_err(|e| format!("its expression: {e}"))?;
        let (scale, unit) = m.scale_unit.as_deref().map_or((1.0, None), scale_unit);
        if scale != 1.0 {
            text = format!("{scale} * ({text})");
        }
        let threshold = m.threshold.as_deref().and_then(|t| {
            // A threshold reads its metric (and others, by name): the
            // names it reads must be taken too.
            let parsed = derive::parse(t).ok()?;
            for o in parsed.operands() {
                if o.name.eq_ignore_ascii_case(&m.name) || renames.contains_key(&o.name) {
                    continue;
                }
                match self.resolve(&o.name).ok()? {
                    Resolved::Metric(n) => {
                        let other = &self.by_name[&n.to_ascii_lowercase()];
                        self.take(other, taken, depth + 1).ok()?;
                        let t = taken[&n.to_ascii_lowercase()].as_ref().ok()?;
                        renames.insert(o.name.clone(), t.name.clone());
                    }
                    Resolved::Keep => {}
                    Resolved::Event(_) => return None,
                }
            }
            rename(t, Some(&m.name), &renames).ok()
        });
        Ok(Taken {
            name: derived_name(&m.name),
            expr: text,
            help: m.help.clone(),
            unit,
            group: m.group.clone(),
            threshold,
            events,
        })
    }

    fn run(&self, files: &[(String, String)]) -> Imported {
        let mut taken: BTreeMap<String, Result<Taken, String>> = BTreeMap::new();
        let mut skipped = Vec::new();
        let mut dropped = Vec::new();
        let mut names_seen: BTreeSet<String> = BTreeSet::new();
        for m in &self.metrics {
            if let Err(why) = self.take(m, &mut taken, 0) {
                taken.insert(m.name.to_ascii_lowercase(), Err(why));
            }
        }
        // File order, each metric once; two perf names that give one
        // derived name keep the first.
        let mut order: Vec<&Taken> = Vec::new();
        for m in &self.metrics {
            let key = m.name.to_ascii_lowercase();
            if !names_seen.insert(key.clone()) {
                continue;
            }
            match &taken[&key] {
                Ok(t) => {
                    if order.iter().any(|o| o.name == t.name) {
                        skipped.push(Skipped {
                            metric: m.name.clone(),
                            why: format!(
                                "its name gives `{}`, as an earlier metric's does",
                                t.name
                            ),
                        });
                        continue;
                    }
                    if m.threshold.is_some() && t.threshold.is_none() {
                        dropped.push(Skipped {
                            metric: m.name.clone(),
                            why: "its threshold does not parse in perf's grammar, or reads what is not taken".into(),
                        });
                    }
                    order.push(t);
                }
                Err(why) => skipped.push(Skipped {
                    metric: m.name.clone(),
                    why: why.clone(),
                }),
            }
        }
        // A metric read by another must come first: the config resolves
        // references in any order, so file order is kept.
        let sets = self.pack(&order);
        let yaml = write_yaml(files, &sets, &order, &skipped, &dropped);
        Imported {
            yaml,
            taken: order.len(),
            skipped,
            dropped_thresholds: dropped,
        }
    }

    /// Packs the events into sets, metric by metric (see the module
    /// docs).
    fn pack(&self, order: &[&Taken]) -> Vec<(String, Vec<Counted>)> {
        let mut sets: Vec<(String, Vec<Counted>)> = Vec::new();
        let mut placed: BTreeSet<String> = BTreeSet::new();
        let core =
            |c: &Counted| c.pmu == self.opts.core_pmu || c.pmu == "cpu_core" || c.pmu == "cpu_atom";
        for t in order {
            let mut by_pmu: BTreeMap<&str, Vec<&Counted>> = BTreeMap::new();
            for c in &t.events {
                if !placed.contains(&c.metric) {
                    by_pmu.entry(c.pmu.as_str()).or_default().push(c);
                }
            }
            for (pmu, new) in by_pmu {
                let limit = if core(new[0]) { self.opts.counters } else { 4 };
                let general = |v: &[Counted]| v.iter().filter(|c| c.general).count();
                // Into a set that already counts some of this metric's
                // events on this PMU (so its ratio divides one group's
                // counts), or its own, while it fits; else a new one.
                let mut current: Option<usize> = sets
                    .iter()
                    .position(|(_, v)| v[0].pmu == pmu && v.iter().any(|c| t.events.contains(c)));
                for c in new {
                    let fits = |i: usize| {
                        sets[i].1[0].pmu == pmu
                            && (!c.general || general(&sets[i].1) < limit)
                            && sets[i].1.len() < 16
                    };
                    let i = match current.filter(|&i| fits(i)) {
                        Some(i) => i,
                        None => {
                            let mut name = t.name.clone();
                            let mut n = 1;
                            while sets.iter().any(|(s, _)| *s == name) {
                                n += 1;
                                name = format!("{}_{n}", t.name);
                            }
                            sets.push((name, Vec::new()));
                            sets.len() - 1
                        }
                    };
                    sets[i].1.push(c.clone());
                    placed.insert(c.metric.clone());
                    current = Some(i);
                }
            }
        }
        sets
    }
}

/// `text` with the operands in `renames` renamed, and `own` (the
/// metric's own name, which its threshold reads) as its derived name.
fn rename(
    text: &str,
    own: Option<&str>,
    renames: &BTreeMap<String, String>,
) -> Result<String, derive::DeriveError> {
    derive::rename(text, &mut |n| {
        if own.is_some_and(|o| n.eq_ignore_ascii_case(o)) {
            return Some(derived_name(n));
        }
        renames.get(n).cloned()
    })
}

/// Modifiers after `:` carried into the spec (`:u` stays `:u`).
fn mods_suffix(mods: &str) -> String {
    if mods.is_empty() {
        String::new()
    } else {
        format!(":{}", mods.trim_start_matches(':'))
    }
}

/// `ScaleUnit` (`100%`, `1per_instr`, `1e3MB/s`): the factor and the unit.
/// A percentage stays a fraction (factor 1, unit `ratio`).
fn scale_unit(s: &str) -> (f64, Option<String>) {
    let s = s.trim();
    let split = s
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || ((c == 'e' || c == 'E') && i > 0)
                || (c == '-' && i > 0))
        })
        .map_or(s.len(), |(i, _)| i);
    let (num, unit) = s.split_at(split);
    let factor = num.parse::<f64>().unwrap_or(1.0);
    match unit {
        "%" => (1.0, Some("ratio".into())),
        "" => (factor, None),
        u => (factor, Some(u.to_string())),
    }
}

/// A YAML string: JSON's double-quoted form is YAML's.
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Text from the files as one comment line's worth: no line breaks, no
/// control characters.
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn write_yaml(
    files: &[(String, String)],
    sets: &[(String, Vec<Counted>)],
    order: &[&Taken],
    skipped: &[Skipped],
    dropped: &[Skipped],
) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "# Written by `perf-exporter metrics import` from:");
    for (f, _) in files {
        let _ = writeln!(y, "#   {}", comment(f));
    }
    let _ = writeln!(
        y,
        "# {} metrics taken, {} left out.",
        order.len(),
        skipped.len()
    );
    for s in skipped {
        let _ = writeln!(y, "# left out: {}: {}", comment(&s.metric), comment(&s.why));
    }
    for s in dropped {
        let _ = writeln!(
            y,
            "# threshold left out: {}: {}",
            comment(&s.metric),
            comment(&s.why)
        );
    }
    let _ = writeln!(y, "sets:");
    for (name, events) in sets {
        let _ = writeln!(y, "  - name: {}", q(name));
        let _ = writeln!(y, "    per: socket");
        let _ = writeln!(y, "    events:");
        for c in events {
            let _ = writeln!(y, "      - metric: {}", q(&c.metric));
            if let Some(h) = &c.help {
                let _ = writeln!(y, "        help: {}", q(h));
            }
            let specs: Vec<String> = c.specs.iter().map(|s| q(s)).collect();
            let _ = writeln!(y, "        event: [{}]", specs.join(", "));
        }
    }
    let _ = writeln!(y, "derived:");
    for t in order {
        let _ = writeln!(y, "  - name: {}", q(&t.name));
        if let Some(h) = &t.help {
            let _ = writeln!(y, "    help: {}", q(h));
        }
        if let Some(u) = &t.unit {
            let _ = writeln!(y, "    unit: {}", q(u));
        }
        if let Some(g) = &t.group {
            let _ = writeln!(y, "    group: {}", q(g));
        }
        let _ = writeln!(y, "    expr: {}", q(&t.expr));
        if let Some(th) = &t.threshold {
            let _ = writeln!(y, "    threshold: {}", q(th));
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
    }

    const EVENTS: &str = r#"[
      {"EventName": "L1D.REPLACEMENT", "EventCode": "0x51", "UMask": "0x1", "SampleAfterValue": "100003", "BriefDescription": "L1D data line replacements"},
      {"EventName": "INST_RETIRED.ANY", "UMask": "0x1", "BriefDescription": "Instructions retired"},
      {"EventName": "CPU_CLK_UNHALTED.THREAD", "EventCode": "0x3C", "BriefDescription": "Core cycles"},
      {"EventName": "OFFCORE_RESPONSE.X", "EventCode": "0xB7, 0xBB", "UMask": "0x1", "MSRIndex": "0x1a6,0x1a7", "MSRValue": "0x3FBC000001", "CounterMask": "0"},
      {"EventName": "UNC_M_CAS_COUNT.RD", "EventCode": "0x04", "UMask": "0x03", "Unit": "iMC", "PerPkg": "1"},
      {"EventName": "UNC_F_X", "EventCode": "0x01", "Unit": "DFPMC"}
    ]"#;

    #[test]
    fn encodings_follow_jevents() {
        let m = r#"[
          {"MetricName": "l1d_mpi", "MetricExpr": "L1D.REPLACEMENT / INST_RETIRED.ANY", "ScaleUnit": "1per_instr"},
          {"MetricName": "off", "MetricExpr": "OFFCORE_RESPONSE.X + UNC_F_X"},
          {"MetricName": "bw", "MetricExpr": "UNC_M_CAS_COUNT.RD * 64 / 1e6 / duration_time", "ScaleUnit": "1MB/s"},
          {"MetricName": "Pct", "MetricExpr": "cpu@L1D.REPLACEMENT\\,cmask\\=1@ / CPU_CLK_UNHALTED.THREAD", "ScaleUnit": "100%", "MetricThreshold": "Pct > 0.5 & l1d_mpi > 1"}
        ]"#;
        let out = import(
            &files(&[("ev.json", EVENTS), ("m.json", m)]),
            &Options::default(),
        )
        .unwrap();
        assert!(out.skipped.is_empty(), "{:?}", out.skipped);
        let y = &out.yaml;
        for want in [
            r#"event: ["cpu/event=0x51,umask=0x1/"]"#,
            r#"event: ["cpu/event=0xc0/"]"#,
            r#"event: ["cpu/event=0xb7,umask=0x1,offcore_rsp=0x3FBC000001/"]"#,
            r#"event: ["uncore_imc_*/event=0x4,umask=0x3/", "uncore_imc/event=0x4,umask=0x3/"]"#,
            r#"event: ["amd_df/event=0x1/"]"#,
            r#"event: ["cpu/event=0x51,umask=0x1,cmask=1/"]"#,
            r#"expr: "perf_l1d_replacement_total / perf_inst_retired_any_total""#,
            r#"expr: "perf_unc_m_cas_count_rd_total * 64 / 1e6 / duration_time""#,
            r#"unit: "per_instr""#,
            r#"unit: "MB/s""#,
            r#"unit: "ratio""#,
            r#"expr: "perf_cpu_l1d_replacement_cmask_1_total / perf_cpu_clk_unhalted_thread_total""#,
            r#"threshold: "pct > 0.5 & l1d_mpi > 1""#,
        ] {
            assert!(y.contains(want), "missing {want} in\n{y}");
        }
    }

    #[test]
    fn what_cannot_be_taken_is_reported_with_its_reason() {
        let m = r#"[
          {"MetricName": "a", "MetricExpr": "L1D.REPLACEMENT / TSC"},
          {"MetricName": "b", "MetricExpr": "a * 2"},
          {"MetricName": "c", "MetricExpr": "L1D.REPLACEMENT $ 2"},
          {"MetricName": "d", "MetricExpr": "L1D.REPLACEMENT", "MetricThreshold": "d > 1 == 2"},
          {"MetricName": "e", "MetricExpr": "e + 1"}
        ]"#;
        let out = import(
            &files(&[("ev.json", EVENTS), ("m.json", m)]),
            &Options::default(),
        )
        .unwrap();
        let why: Vec<(String, String)> = out
            .skipped
            .iter()
            .map(|s| (s.metric.clone(), s.why.clone()))
            .collect();
        assert_eq!(
            why[0],
            (
                "a".into(),
                "`TSC` is neither an event of the files given nor a metric".into()
            )
        );
        assert_eq!(
            why[1],
            ("b".into(), "it reads `a`, which is not taken".into())
        );
        assert_eq!(why[2].0, "c");
        assert!(
            why[2].1.starts_with("its expression: column 17"),
            "{}",
            why[2].1
        );
        assert_eq!(why[3], ("e".into(), "its expression reads itself".into()));
        assert_eq!(out.taken, 1);
        assert_eq!(out.dropped_thresholds[0].metric, "d");
        assert!(out.yaml.contains("# left out: a: `TSC` is neither"));
    }

    #[test]
    fn general_purpose_counters_bound_a_core_set() {
        let mut ev = String::from("[");
        let mut expr = Vec::new();
        for i in 1..=6 {
            ev += &format!(r#"{{"EventName": "E{i}", "EventCode": "0x{i}0"}},"#);
            expr.push(format!("E{i}"));
        }
        ev += r#"{"EventName": "INST_RETIRED.ANY"}]"#;
        let m = format!(
            r#"[{{"MetricName": "m", "MetricExpr": "({}) / INST_RETIRED.ANY"}}]"#,
            expr.join(" + ")
        );
        let out = import(
            &files(&[("ev.json", &ev), ("m.json", &m)]),
            &Options {
                counters: 4,
                ..Options::default()
            },
        )
        .unwrap();
        let sets: Vec<&str> = out
            .yaml
            .lines()
            .filter(|l| l.starts_with("  - name:"))
            .collect();
        assert_eq!(
            sets,
            [r#"  - name: "m""#, r#"  - name: "m_2""#, r#"  - name: "m""#]
        );
    }

    #[test]
    fn bad_files_are_refused_by_name() {
        let e = import(&files(&[("x.json", "{")]), &Options::default()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("x.json: line 1, column 1: not JSON"),
            "{e}"
        );
        let e = import(&files(&[("x.json", "{}")]), &Options::default()).unwrap_err();
        assert!(matches!(e, ImportError::NotAnArray { .. }));
        let e = import(&files(&[("x.json", EVENTS)]), &Options::default()).unwrap_err();
        assert!(matches!(e, ImportError::NoMetrics));
    }
}
