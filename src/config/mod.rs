//! The YAML configuration: named sets of metrics, each metric with a
//! fallback chain of event encodings.
//!
//! ```yaml
//! sets:
//!   - name: core            # one perf group per CPU (or per uncore PMU instance)
//!     events:
//!       - metric: perf_cpu_cycles_total   # a counter: ends in _total
//!         help: CPU cycles.
//!         event: [cycles, "core/cpu-cycles/"]      # fallback chain, first that works wins
//!   - name: dram
//!     events:
//!       - metric: perf_dram_read_bytes_total
//!         event:
//!           - "uncore_imc_*/cas_count_read/"
//!           - { event: "amd_umc_*/event=0x0a,rdwrmask=1/", scale: 64, unit: bytes }
//!           - { sum_of: ["amd_df/event=0x07,umask=0x38/", "..."], scale: 64, unit: bytes }
//! ```
//!
//! `per:` says how far a set's series are summed before they are
//! exported ([`Per`]): `cpu` (the default), `core`, `socket` or `node`.
//! The engine counts per CPU whatever the level; only what Prometheus and
//! OTLP receive is summed. The boolean `per_cpu:` it replaces is refused
//! with the replacement named (`per_cpu: true` → `per: cpu`,
//! `per_cpu: false` → `per: node`).
//!
//! A reading (a `.snapshot` event such as a temperature) is declared
//! `gauge: true` and named without `_total`; every other metric is a
//! counter and its name ends in `_total` (see the rules in `names`).
//!
//! These types describe what was written, with every event spec already
//! parsed ([`crate::spec`]): parse, don't validate. The only I/O here is
//! reading the file. Resolution against a host produces separate types
//! (`crate::resolve::chain`).

pub mod cgroups;
pub mod derived;
pub mod import;
mod names;
mod raw;
pub mod sampling;

pub use names::valid_syntax as valid_metric_name;
use raw::{RawAlternative, RawConfig, RawMetric, RawSet};
use serde_saphyr::{Location, Spanned};
use std::collections::BTreeMap;
use std::path::Path;

use crate::bounded::{read_string, CONFIG_BYTES};
use crate::spec::format::Format;
#[cfg(test)]
use crate::spec::EventSpec;
use crate::spec::{self, Event};

/// The default configuration, embedded in the binary.
pub const DEFAULT_CONFIG: &str = include_str!("../../config/default.yaml");

/// A configuration error, with where it is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Invalid YAML or a value of the wrong shape.
    #[error("{file}{}: {msg}", at(*line, *column))]
    Invalid {
        /// The file (or `<default>`).
        file: String,
        /// 1-based line (0 when unknown).
        line: u64,
        /// 1-based column (0 when unknown).
        column: u64,
        /// What is wrong and what was expected.
        msg: String,
    },
}

/// `:line:column`, or nothing when the location is unknown.
fn at(line: u64, column: u64) -> String {
    match (line, column) {
        (0, _) => String::new(),
        (l, 0) => format!(":{l}"),
        (l, c) => format!(":{l}:{c}"),
    }
}

/// The whole file.
#[derive(Debug, Clone)]
pub struct Config {
    /// The sets, in order (never empty).
    pub sets: Vec<SetConfig>,
    /// Per-workload counting (`cgroups:`), when configured.
    pub cgroups: Option<cgroups::CgroupsConfig>,
    /// Sampled attribution (`sampling:`), when configured.
    pub sampling: Option<sampling::SamplingConfig>,
    /// Derived metrics (`derived:`), resolved against the sets' metrics
    /// (empty when there are none).
    pub derived: derived::DerivedTable,
}

/// How far a set's (or the per-cgroup) series are summed before export:
/// the level of the label they keep. Core and software PMUs' counters are
/// summed over the CPUs of one core (`core`, the CPUs of sysfs
/// `topology/core_cpus_list`), one package (`socket`,
/// `topology/physical_package_id`) or the whole node; uncore counters
/// keep their `pmu` and `socket` labels at every level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    /// One series per CPU (`cpu="N"`).
    #[default]
    Cpu,
    /// One per physical core (`core="N"`, N the lowest CPU of the core).
    Core,
    /// One per package (`socket="N"`).
    Socket,
    /// One per node (no label).
    Node,
}

impl Per {
    /// The level as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Per::Cpu => "cpu",
            Per::Core => "core",
            Per::Socket => "socket",
            Per::Node => "node",
        }
    }
}

/// The refusal of the boolean `per_cpu:` (file and line added by the
/// caller), naming its replacement.
pub(crate) fn per_cpu_replaced(value: bool, section: &str) -> String {
    let (now, means) = if value {
        ("cpu", "one series per CPU")
    } else {
        ("node", "summed over the node's CPUs")
    };
    format!(
        "`per_cpu: {value}` is replaced by `per: {now}` ({means}){section}; `per:` also takes `core` and `socket` (`per_cpu: true` -> `per: cpu`, `per_cpu: false` -> `per: node`)"
    )
}

/// One set: opened as one perf group per CPU, or per uncore PMU instance.
#[derive(Debug, Clone)]
pub struct SetConfig {
    /// The set's name (the `set` label of the group self-metrics).
    pub name: Spanned<String>,
    /// How far its series are summed before export (`per:`, default `cpu`).
    pub per: Per,
    /// The metrics (never empty).
    pub events: Vec<MetricConfig>,
}

/// One metric and the encodings that may count it.
#[derive(Debug, Clone)]
pub struct MetricConfig {
    /// The Prometheus metric name (`perf_cpu_cycles_total`).
    pub metric: Spanned<String>,
    /// The HELP text.
    pub help: Option<String>,
    /// A reading (`gauge: true`, a `.snapshot` event such as a
    /// temperature) rather than a counter.
    pub gauge: bool,
    /// The fallback chain: alternative encodings of the same quantity,
    /// in order (never empty), with where `event:` is written.
    pub event: Spanned<Vec<Alternative>>,
}

/// One event spec as written, and as parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// As written (for reports).
    pub text: String,
    /// As parsed: what the resolver takes (the event and its modifiers).
    pub parsed: Event,
}

/// One alternative encoding of a metric's quantity: one spec, or several
/// summed (`sum_of`, e.g. AMD Zen 3's eight DRAM channel events, or a
/// read and a write count making a total).
#[derive(Debug, Clone, PartialEq)]
pub struct Alternative {
    /// The specs it sums (one for most).
    pub specs: Vec<Spec>,
    /// Multiply counts by this (replaces the sysfs `.scale`).
    pub scale: Option<f64>,
    /// The base unit of the scaled value (`bytes`, `seconds`, `joules`).
    pub unit: Option<String>,
    /// Use this alternative only where a PMU's format term is exactly
    /// this: `"amd_df/umask=config:8-15"`. Distinguishes encodings that
    /// would resolve on the wrong generation of a PMU.
    pub requires_format: Option<FormatRequirement>,
    /// Use this alternative only where the CPU identity of the PMU it
    /// counts on matches (`GenuineIntel-6-55-.*`).
    pub requires_cpu: Option<CpuRequirement>,
}

/// A `requires_cpu` guard, compiled at load: a regex matched against a
/// core PMU's CPU identity (`GenuineIntel-6-55-4`, `0x00000000410fd0c0`)
/// as perf's `pmu-events/arch/*/mapfile.csv` entries are, i.e. it must
/// match the whole identity string.
#[derive(Debug, Clone)]
pub struct CpuRequirement {
    /// The regex as written.
    pub pattern: String,
    anchored: regex::Regex,
}

impl PartialEq for CpuRequirement {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}

impl CpuRequirement {
    /// Compiles `pattern`; the error carries the regex library's message.
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let anchored = regex::Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|e| format!("`requires_cpu: {pattern}` is not a valid regex: {e}"))?;
        Ok(CpuRequirement {
            pattern: pattern.to_string(),
            anchored,
        })
    }

    /// Whether the whole identity string matches.
    pub fn matches(&self, identity: &str) -> bool {
        self.anchored.is_match(identity)
    }
}

/// A `requires_format` guard, parsed at load: `PMU/term=configN:bits`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatRequirement {
    /// The PMU name or pattern (`amd_df`, `uncore_imc_*`).
    pub pmu: String,
    /// The format term (`umask`).
    pub term: String,
    /// The bits every matching PMU's `format/<term>` must hold exactly.
    pub format: Format,
}

impl FormatRequirement {
    /// Parses `PMU/term=configN:lo-hi[,lo-hi]`; the error says what is
    /// wrong and shows the form.
    pub fn parse(s: &str) -> Result<Self, String> {
        let why = |what: String| {
            format!("`requires_format: {s}`: {what}; write `PMU/term=configN:lo-hi`, e.g. `amd_df/umask=config:8-15`")
        };
        let (pmu, rest) = s
            .split_once('/')
            .ok_or_else(|| why("no `/` after the PMU name".into()))?;
        let (term, bits) = rest
            .split_once('=')
            .ok_or_else(|| why("no `=` after the term".into()))?;
        let (pmu, term) = (pmu.trim(), term.trim());
        let name_ok = |n: &str, extra: &[char]| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || extra.contains(&c))
        };
        if !name_ok(pmu, &['*', '-', '.']) {
            return Err(why(format!("`{pmu}` is not a PMU name or pattern")));
        }
        if !name_ok(term, &[]) {
            return Err(why(format!("`{term}` is not a format term")));
        }
        let format = Format::parse(bits).map_err(|e| why(e.0))?;
        Ok(FormatRequirement {
            pmu: pmu.to_string(),
            term: term.to_string(),
            format,
        })
    }
}

impl std::fmt::Display for FormatRequirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}={}", self.pmu, self.term, self.format)
    }
}

impl Alternative {
    /// The specs it sums (one for most).
    pub fn specs(&self) -> &[Spec] {
        &self.specs
    }

    /// How the alternative reads in reports: the spec, or `a + b + …`.
    pub fn display(&self) -> String {
        let texts: Vec<&str> = self.specs.iter().map(|s| s.text.as_str()).collect();
        texts.join(" + ")
    }

    /// The `requires_format` guard, if any.
    pub fn requires_format(&self) -> Option<&FormatRequirement> {
        self.requires_format.as_ref()
    }

    /// The `requires_cpu` guard, if any.
    pub fn requires_cpu(&self) -> Option<&CpuRequirement> {
        self.requires_cpu.as_ref()
    }

    /// The scale and unit it overrides, if any.
    pub fn overrides(&self) -> (Option<f64>, Option<&str>) {
        (self.scale, self.unit.as_deref())
    }
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        // Bounded: a FIFO or a device is refused at once instead of
        // blocking start-up or a reload, and so is a huge file.
        let text = read_string(path, CONFIG_BYTES).map_err(|source| ConfigError::Io {
            file: file.clone(),
            source,
        })?;
        Self::parse(&text, &file)
    }

    /// The embedded default.
    pub fn default_config() -> Self {
        // The embedded default is checked by a unit test; failing here
        // would be a build defect, so fall back to an empty config rather
        // than panic.
        Self::parse(DEFAULT_CONFIG, "<default>").unwrap_or(Config {
            sets: Vec::new(),
            cgroups: None,
            sampling: None,
            derived: derived::DerivedTable::default(),
        })
    }

    /// Parses and validates YAML text; `file` names it in errors. Every
    /// event spec is parsed here, once.
    pub fn parse(text: &str, file: &str) -> Result<Self, ConfigError> {
        let invalid = |loc: &Location, msg: String| ConfigError::Invalid {
            file: file.into(),
            line: loc.line(),
            column: loc.column(),
            msg,
        };
        if is_empty_document(text) {
            return Err(ConfigError::Invalid {
                file: file.into(),
                line: 0,
                column: 0,
                msg: EMPTY.into(),
            });
        }
        let raw: RawConfig = serde_saphyr::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            // The crate renders a snippet; keep its first line as the
            // message and our own location prefix.
            let full = e.to_string();
            let first = full.lines().next().unwrap_or("invalid YAML");
            // The snippet's first line repeats the place we already name
            // (`error: line 3 column 5: ...`): keep only the message.
            let msg = first
                .strip_prefix("error: line ")
                .and_then(|r| r.split_once(": "))
                .map_or(first, |(_, m)| m)
                .to_string();
            ConfigError::Invalid {
                file: file.into(),
                line,
                column,
                msg: hint_for(&msg),
            }
        })?;
        let sets = match raw.sets.value {
            Some(v) if !v.is_empty() => v,
            _ => return Err(invalid(&raw.sets.referenced, EMPTY.into())),
        };
        let mut out = Vec::new();
        let mut set_names = BTreeMap::new();
        let mut families: BTreeMap<String, String> = BTreeMap::new();
        for s in sets {
            out.push(convert_set(s, &mut set_names, &mut families, &invalid)?);
        }
        let cgroups = match raw.cgroups {
            Some(c) => {
                let names: Vec<&str> = out.iter().map(|s| s.name.value.as_str()).collect();
                Some(cgroups::convert(c.value, &c.referenced, &names, &invalid)?)
            }
            None => None,
        };
        let sampling = match raw.sampling {
            Some(s) => Some(sampling::convert(s, &invalid)?),
            None => None,
        };
        let derived = match raw.derived {
            Some(d) => derived::convert(d, &out, file)?,
            None => derived::DerivedTable::default(),
        };
        Ok(Config {
            sets: out,
            cgroups,
            sampling,
            derived,
        })
    }

    /// Sums every set over the node, as if each had `per: node`
    /// (`--config.aggregate-cpus`).
    pub fn aggregate_cpus(&mut self) {
        for s in &mut self.sets {
            s.per = Per::Node;
        }
    }
}

const EMPTY: &str = "the configuration has no sets: it needs `sets:` with at least one set of metrics (an empty configuration would count nothing)";

/// Whether the text is an empty YAML document (nothing, comments only,
/// or a bare null such as `~`).
fn is_empty_document(text: &str) -> bool {
    let content: Vec<&str> = text
        .lines()
        .map(|l| l.split_once(" #").map_or(l, |(a, _)| a).trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#') && *l != "---" && *l != "...")
        .collect();
    matches!(content.as_slice(), [] | ["~" | "null" | "Null" | "NULL"])
}

type Invalid<'a> = &'a dyn Fn(&Location, String) -> ConfigError;

fn convert_set(
    s: RawSet,
    set_names: &mut BTreeMap<String, ()>,
    families: &mut BTreeMap<String, String>,
    invalid: Invalid,
) -> Result<SetConfig, ConfigError> {
    if s.name.value.trim().is_empty() {
        return Err(invalid(
            &s.name.referenced,
            "a set needs a non-empty `name`".into(),
        ));
    }
    if set_names.insert(s.name.value.clone(), ()).is_some() {
        return Err(invalid(
            &s.name.referenced,
            format!("set `{}` is defined twice", s.name.value),
        ));
    }
    if s.events.is_empty() {
        return Err(invalid(
            &s.name.referenced,
            format!("set `{}` has no events", s.name.value),
        ));
    }
    if let Some(old) = &s.per_cpu {
        return Err(invalid(
            &old.referenced,
            per_cpu_replaced(old.value, &format!(" in set `{}`", s.name.value)),
        ));
    }
    let mut events = Vec::new();
    for m in s.events {
        events.push(convert_metric(m, families, invalid)?);
    }
    Ok(SetConfig {
        name: s.name,
        per: s.per.map_or(Per::Cpu, |p| p.value),
        events,
    })
}

fn convert_metric(
    m: RawMetric,
    families: &mut BTreeMap<String, String>,
    invalid: Invalid,
) -> Result<MetricConfig, ConfigError> {
    let name = &m.metric.value;
    let at = &m.metric.referenced;
    names::check(name, m.gauge).map_err(|e| invalid(at, e))?;
    if let Some(other) = families.insert(names::family(name).to_string(), name.clone()) {
        let msg = if &other == name {
            format!("metric `{name}` is defined twice")
        } else {
            format!("metric `{name}` collides with `{other}`: OpenMetrics names both families `{}`; rename one", names::family(name))
        };
        return Err(invalid(at, msg));
    }
    let event_at = m.event.referenced;
    let alts = m.event.value.into_vec();
    if alts.is_empty() {
        return Err(invalid(
            &event_at,
            format!("metric `{name}`: `event` is an empty list"),
        ));
    }
    let n = alts.len();
    let mut out = Vec::new();
    for (i, a) in alts.into_iter().enumerate() {
        let where_ = if n > 1 {
            format!("metric `{name}`, alternative {}", i + 1)
        } else {
            format!("metric `{name}`")
        };
        out.push(convert_alternative(a).map_err(|e| invalid(&event_at, format!("{where_}: {e}")))?);
    }
    same_modifiers(name, &out).map_err(|e| invalid(&event_at, e))?;
    Ok(MetricConfig {
        help: m.help,
        gauge: m.gauge,
        event: Spanned::new(out, event_at, m.event.defined),
        metric: m.metric,
    })
}

/// Parses a counted spec: modifiers the kernel would ignore when
/// counting (`cpu-clock:u`, `sched:sched_switch:k`) are refused here, at
/// load, with the line.
fn parse_spec(text: String) -> Result<Spec, String> {
    let parsed = spec::parse(&text).map_err(|e| e.0)?;
    parsed.check_modifiers(false).map_err(|e| e.to_string())?;
    Ok(Spec { text, parsed })
}

/// The fallback rule: the alternatives of one metric (and the specs of
/// one `sum_of`) are encodings of one quantity, so they carry the same
/// modifiers; `cycles:u` falling back to `cpu/cycles/` would change what
/// the series means with the host. Modifiers are compared by the exclude
/// bits they set (`uH` is `u`).
fn same_modifiers(name: &str, alts: &[Alternative]) -> Result<(), String> {
    let mut specs = alts
        .iter()
        .enumerate()
        .flat_map(|(i, a)| a.specs.iter().map(move |s| (i + 1, s)));
    let Some((_, first)) = specs.next() else {
        return Ok(());
    };
    let want = first.parsed.modifiers.exclude();
    let shown = |s: &Spec| match s.parsed.modifiers {
        m if m.is_empty() => "no modifiers".to_string(),
        m => format!("modifiers `{m}`"),
    };
    for (i, s) in specs {
        if s.parsed.modifiers.exclude() != want {
            let which = if alts.len() > 1 {
                format!("alternative {i}, ")
            } else {
                String::new()
            };
            return Err(format!(
                "metric `{name}`: {which}`{}` has {} but `{}` has {}: a fallback never changes what a metric means, so every alternative (and every `sum_of` spec) of one metric carries the same modifiers; give them all the same, or make separate metrics (e.g. `instructions_user_total` for `instructions:u`)",
                s.text,
                shown(s),
                first.text,
                shown(first),
            ));
        }
    }
    Ok(())
}

fn convert_alternative(a: RawAlternative) -> Result<Alternative, String> {
    let d = match a {
        RawAlternative::Spec(s) => {
            return Ok(Alternative {
                specs: vec![parse_spec(s)?],
                scale: None,
                unit: None,
                requires_format: None,
                requires_cpu: None,
            })
        }
        RawAlternative::Detailed(d) => d,
    };
    let texts = match (d.event, d.sum_of) {
        (Some(_), Some(_)) => return Err("give `event` or `sum_of`, not both".into()),
        (None, None) => return Err("needs `event` or `sum_of`".into()),
        (None, Some(v)) if v.is_empty() => return Err("`sum_of` is empty".into()),
        (Some(e), None) => vec![e],
        (None, Some(v)) => v,
    };
    if let Some(sc) = d.scale {
        spec::check_scale(sc).map_err(|why| format!("`scale: {sc}`: {why}"))?;
    }
    let specs = texts
        .into_iter()
        .map(parse_spec)
        .collect::<Result<Vec<_>, _>>()?;
    for (i, s) in specs.iter().enumerate() {
        if specs[..i].iter().any(|t| t.parsed == s.parsed) {
            return Err(format!(
                "`sum_of` lists `{}` twice (it would be counted twice)",
                s.text
            ));
        }
    }
    Ok(Alternative {
        specs,
        scale: d.scale,
        unit: d.unit,
        // Parsed here, so a malformed guard is refused at load with the
        // line, not found out when resolving.
        requires_format: d
            .requires_format
            .as_deref()
            .map(FormatRequirement::parse)
            .transpose()?,
        requires_cpu: d
            .requires_cpu
            .as_deref()
            .map(CpuRequirement::parse)
            .transpose()?,
    })
}

/// Rewrites the YAML library's messages for a user: no repeated location
/// (the prefix `file:line:column` has it), no advice about the library's
/// own options.
fn hint_for(msg: &str) -> String {
    let msg = strip_location(msg);
    if msg.contains("did not match any variant") {
        format!("{msg}: `event` must be a spec string, a list of alternatives, or {{event: SPEC, scale: N, unit: U}} / {{sum_of: [SPEC, ...], scale: N, unit: U}}")
    } else if let Some(rest) = msg.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(", set ").next().unwrap_or(rest).trim();
        format!("the key `{key}` is given twice in the same mapping: keep one")
    } else if let Some(head) = msg.strip_suffix(" rejected by the configured policy") {
        format!("{head} is not allowed here: give a finite number")
    } else if msg.contains("from_str_multiple") || msg.contains("multiple YAML documents") {
        "the file holds several YAML documents (separated by `---`): a configuration is one document".into()
    } else if let Some((head, _)) = msg
        .split_once(", set ")
        .or_else(|| msg.split_once("; use "))
    {
        head.to_string()
    } else {
        msg.to_string()
    }
}

/// Drops a leading `error: line N column M: `.
fn strip_location(msg: &str) -> &str {
    let m = msg.strip_prefix("error: ").unwrap_or(msg);
    match m.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((loc, rest)) if loc.split_whitespace().count() == 3 => rest,
        _ => m,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_parses() {
        let c = Config::parse(DEFAULT_CONFIG, "<default>").unwrap();
        assert!(!c.sets.is_empty());
    }

    /// `per:` takes the four levels (default `cpu`); the boolean it
    /// replaced is refused at its line with the replacement named, and an
    /// unknown level lists the known ones.
    #[test]
    fn per_levels_and_the_per_cpu_migration() {
        let set = |extra: &str| {
            format!("sets:\n  - name: a\n{extra}    events:\n      - metric: m_total\n        event: cycles\n")
        };
        let per = |extra: &str| Config::parse(&set(extra), "t.yaml").map(|c| c.sets[0].per);
        assert_eq!(per("").unwrap(), Per::Cpu);
        for p in [Per::Cpu, Per::Core, Per::Socket, Per::Node] {
            assert_eq!(per(&format!("    per: {}\n", p.as_str())).unwrap(), p);
        }
        for (old, new) in [("true", "per: cpu"), ("false", "per: node")] {
            let e = per(&format!("    per_cpu: {old}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("t.yaml:3:"), "{e}");
            assert!(
                e.contains(&format!("`per_cpu: {old}` is replaced by `{new}`")),
                "{e}"
            );
            assert!(e.contains("in set `a`"), "{e}");
        }
        let e = per("    per: die\n").unwrap_err().to_string();
        assert!(e.starts_with("t.yaml:3:"), "{e}");
        assert!(e.contains("socket"), "{e}");
    }

    #[test]
    fn chain_and_detailed_forms() {
        let y = "sets:\n  - name: a\n    events:\n      - metric: m_total\n        event: [cycles, {event: \"cpu/event=0x3c/\", scale: 2, unit: bytes}, {sum_of: [instructions, cycles]}]\n";
        let c = Config::parse(y, "t.yaml").unwrap();
        let alts = &c.sets[0].events[0].event.value;
        assert_eq!(alts.len(), 3);
        assert_eq!(alts[2].display(), "instructions + cycles");
        assert_eq!(alts[1].overrides(), (Some(2.0), Some("bytes")));
    }

    #[test]
    fn errors_name_file_line_column() {
        let y = "sets:\n  - name: a\n    events:\n      - metric: m_total\n        event: cycels\n";
        let e = Config::parse(y, "t.yaml").unwrap_err().to_string();
        assert!(e.starts_with("t.yaml:5:"), "{e}");
        assert!(e.contains("did you mean `cycles`"), "{e}");
        let y = "sets:\n  - name: a\n    evnts: []\n";
        let e = Config::parse(y, "t.yaml").unwrap_err().to_string();
        assert!(e.starts_with("t.yaml:3:"), "{e}");
        let y = "sets:\n  - name: a\n    events:\n      - metric: 9bad\n        event: cycles\n";
        let e = Config::parse(y, "t.yaml").unwrap_err().to_string();
        assert!(
            e.contains("t.yaml:4:") && e.contains("not a valid Prometheus metric name"),
            "{e}"
        );
        let y = "sets:\n  - name: a\n    events:\n      - metric: a_total\n        event: cycles\n      - metric: a_total\n        event: instructions\n";
        let e = Config::parse(y, "t.yaml").unwrap_err().to_string();
        assert!(
            e.contains("t.yaml:6:") && e.contains("defined twice"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod input_tests {
    use super::*;

    fn err(y: &str) -> String {
        Config::parse(y, "t.yaml").unwrap_err().to_string()
    }

    #[test]
    fn yaml_errors_speak_to_the_user() {
        let e = err("sets:\n  - name: a\n    name: b\n    events:\n      - metric: m_total\n        event: cycles\n");
        assert_eq!(
            e,
            "t.yaml:3:5: the key `name` is given twice in the same mapping: keep one"
        );
        let e = err("sets:\n  - name: a\n    events:\n      - metric: m_total\n        event: cycles\n---\nsets: []\n");
        assert!(
            e.starts_with("t.yaml:7:1: the file holds several YAML documents"),
            "{e}"
        );
        assert!(
            !e.contains("from_str") && !e.contains("Options") && !e.contains("line 7 column"),
            "{e}"
        );
    }

    /// Issue 10: `requires_format` is parsed at load into PMU pattern,
    /// term and bits; a malformed one is refused with the line and the
    /// form to use (before, it was stored as text and found out at
    /// resolve time, as an "unavailable" metric).
    #[test]
    fn requires_format_is_parsed_at_load() {
        let with = |req: &str| {
            format!("sets:\n  - name: a\n    events:\n      - metric: m_total\n        event:\n          - event: cycles\n            requires_format: \"{req}\"\n")
        };
        let c = Config::parse(&with("amd_df/umask=config:8-15"), "t.yaml").unwrap();
        let alt = &c.sets[0].events[0].event.value[0];
        let req = alt.requires_format().expect("parsed");
        assert_eq!((req.pmu.as_str(), req.term.as_str()), ("amd_df", "umask"));
        assert_eq!(req.format, Format::parse("config:8-15").unwrap());
        assert_eq!(req.to_string(), "amd_df/umask=config:8-15");
        for (bad, why) in [
            ("amd_df", "no `/` after the PMU name"),
            ("amd_df/umask", "no `=` after the term"),
            ("amd_df/umask=config9:0", "unknown config word `config9`"),
            ("amd_df/umask=config:15-8", "is reversed"),
            ("/umask=config:8-15", "`` is not a PMU name or pattern"),
            ("amd_df/um ask=config:8-15", "`um ask` is not a format term"),
        ] {
            let e = err(&with(bad));
            assert!(e.starts_with("t.yaml:6:11: "), "{bad}: {e}");
            assert!(
                e.contains(&format!("`requires_format: {bad}`: ")) && e.contains(why),
                "{bad}: {e}"
            );
            assert!(e.ends_with("e.g. `amd_df/umask=config:8-15`"), "{e}");
        }
    }

    /// Issue 17: `requires_cpu` is compiled at load and matched against
    /// the whole identity string; a bad regex is refused with the file,
    /// line and the regex error.
    #[test]
    fn requires_cpu_is_compiled_at_load() {
        let with = |req: &str| {
            format!("sets:\n  - name: a\n    events:\n      - metric: m_total\n        event:\n          - event: cycles\n            requires_cpu: '{req}'\n          - cycles\n")
        };
        let c = Config::parse(&with("GenuineIntel-6-(55|6A)-.*"), "t.yaml").unwrap();
        let alts = &c.sets[0].events[0].event.value;
        let req = alts[0].requires_cpu().expect("compiled");
        assert_eq!(req.pattern, "GenuineIntel-6-(55|6A)-.*");
        assert!(req.matches("GenuineIntel-6-55-4"));
        assert!(req.matches("GenuineIntel-6-6A-6"));
        // Anchored: neither a prefix nor a substring is enough.
        assert!(!req.matches("GenuineIntel-6-8F-8"));
        assert!(!req.matches("xGenuineIntel-6-55-4"));
        let alt = CpuRequirement::parse("GenuineIntel-6-55").unwrap();
        assert!(!alt.matches("GenuineIntel-6-55-4"));
        assert!(alts[1].requires_cpu().is_none());
        let e = err(&with("GenuineIntel-6-(55"));
        assert!(e.starts_with("t.yaml:6:11: "), "{e}");
        assert!(
            e.contains("`requires_cpu: GenuineIntel-6-(55` is not a valid regex: ")
                && e.contains("unclosed group"),
            "{e}"
        );
    }

    /// Issue 11: `~` as a whole config, `sets: []` and a bare `sets:`
    /// are refused with a reason, never with `:0:0` or an empty one.
    #[test]
    fn empty_configs_refused_with_a_reason() {
        for y in [
            "~\n",
            "sets: []\n",
            "sets:\n",
            "",
            "# only a comment\n",
            "null",
            "---\n~\n",
        ] {
            let e = err(y);
            assert!(e.contains("has no sets"), "{y:?}: {e}");
            assert!(
                !e.contains(":0:0") && !e.contains("null.yaml"),
                "{y:?}: {e}"
            );
        }
    }

    /// Defect 4: a counter without `_total`, a name with `:`, reserved
    /// names and colliding families are refused with the line, the
    /// reason and the name to use.
    #[test]
    fn metric_names() {
        let one = |name: &str, extra: &str| {
            err(&format!("sets:\n  - name: a\n    events:\n      - metric: {name}\n{extra}        event: cycles\n"))
        };
        let e = one("perf_cycles", "");
        assert!(
            e.starts_with("t.yaml:4:") && e.contains("use `perf_cycles_total`"),
            "{e}"
        );
        let e = one("perf:cycles_total", "");
        assert!(
            e.starts_with("t.yaml:4:") && e.contains("use `perf_cycles_total`"),
            "{e}"
        );
        let e = one("perf_temp_total", "        gauge: true\n");
        assert!(e.contains("use `perf_temp`"), "{e}");
        for reserved in [
            "perf_event_available",
            "perf_group_enabled_seconds_total",
            "perf_exporter_x_total",
            "perf_read_errors_total",
            "__name__",
        ] {
            let e = one(reserved, "        gauge: true\n");
            let e2 = one(reserved, "");
            assert!(
                e.contains("t.yaml:4:") && e2.contains("t.yaml:4:"),
                "{e} / {e2}"
            );
        }
        let y = "sets:\n  - name: a\n    events:\n      - metric: foo\n        gauge: true\n        event: cycles\n      - metric: foo_total\n        event: instructions\n";
        let e = err(y);
        assert!(
            e.starts_with("t.yaml:7:") && e.contains("collides with `foo`"),
            "{e}"
        );
    }

    /// A modifier is part of the spec: `instructions:u` is its own
    /// metric, and every alternative of a metric carries the same
    /// modifiers (compared by the bits they set).
    #[test]
    fn modifiers_are_stored_and_alternatives_agree() {
        let one = |ev: &str| {
            format!("sets:\n  - name: a\n    events:\n      - metric: instructions_user_total\n        event: {ev}\n")
        };
        let c = Config::parse(
            &one("[\"instructions:u\", \"armv8_pmuv3/inst_retired/u\", \"cpu/instructions/uH\"]"),
            "t.yaml",
        )
        .unwrap();
        let alts = &c.sets[0].events[0].event.value;
        assert_eq!(alts.len(), 3);
        assert!(alts.iter().all(|a| a.specs[0].parsed.modifiers.exclude()
            == alts[0].specs[0].parsed.modifiers.exclude()));
        assert!(alts[0].specs[0].parsed.modifiers.user);
        assert!(matches!(
            alts[0].specs[0].parsed.spec,
            EventSpec::Hardware { id: 1, .. }
        ));
        let e = Config::parse(&one("[\"instructions:u\", cpu/instructions/]"), "t.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.yaml:5:"), "{e}");
        assert!(
            e.contains("alternative 2, `cpu/instructions/` has no modifiers but `instructions:u` has modifiers `u`")
                && e.contains("a fallback never changes what a metric means"),
            "{e}"
        );
        let e = Config::parse(
            &one("[\"instructions:u\", \"cpu/instructions/k\"]"),
            "t.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("has modifiers `k` but"), "{e}");
        let e = Config::parse(
            &one("{sum_of: [\"instructions:u\", instructions]}"),
            "t.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`sum_of`"), "{e}");
        // The sampling event takes the modifiers that filter samples.
        let y = format!("{}sampling:\n  event: cpu-clock:u\n", one("instructions:u"));
        assert_eq!(
            Config::parse(&y, "t.yaml")
                .unwrap()
                .sampling
                .unwrap()
                .event
                .as_deref(),
            Some("cpu-clock:u")
        );
        let y = format!("{}sampling:\n  event: cycles:pp\n", one("instructions:u"));
        let e = Config::parse(&y, "t.yaml").unwrap_err().to_string();
        assert!(
            e.contains("t.yaml:7:") && e.contains("`sampling.event`") && e.contains("perf's `p`"),
            "{e}"
        );
    }

    #[test]
    fn specs_are_stored_parsed_and_checked() {
        let y = "sets:\n  - name: a\n    events:\n      - metric: m_total\n        event: [cycles, {sum_of: [cpu/event=0x3c/, cpu/event=0xc0/], scale: 2}]\n";
        let c = Config::parse(y, "t.yaml").unwrap();
        let alts = &c.sets[0].events[0].event.value;
        assert!(matches!(
            alts[0].specs[0].parsed.spec,
            EventSpec::Hardware { id: 0, .. }
        ));
        assert_eq!(alts[1].display(), "cpu/event=0x3c/ + cpu/event=0xc0/");
        let bad = |ev: &str| {
            err(&format!(
                "sets:\n  - name: a\n    events:\n      - metric: m_total\n        event: {ev}\n"
            ))
        };
        assert!(bad("\"cpu/event=1,event=2/\"").contains("given twice"));
        assert!(bad("cycles:ux").contains("column 9: `x` is not an event modifier"));
        assert!(bad("cpu-clock:u").contains("elapsed time"));
        assert!(bad("sched:sched_switch:k").contains("only `u`"));
        assert!(bad("page-faults:G").contains("only `u` and `k`"));
        for sc in ["0", "-64", "1e308", ".nan", ".inf"] {
            let e = bad(&format!("{{event: cycles, scale: {sc}}}"));
            assert!(
                e.contains("scale") || e.contains("finite number"),
                "{sc}: {e}"
            );
            assert!(!e.contains("policy"), "{sc}: {e}");
        }
        assert!(bad("{sum_of: [cycles, cycles]}").contains("twice"));
    }
}
