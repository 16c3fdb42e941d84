//! The typed sets and events of a config: what was written, every event
//! spec parsed, the `requires_*` guards compiled; no I/O.

use crate::spec::format::Format;
use crate::spec::Event;
use serde_saphyr::Spanned;

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
