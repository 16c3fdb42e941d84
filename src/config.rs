//! The YAML configuration: named sets of metrics, each metric with a
//! fallback chain of event encodings.
//!
//! ```yaml
//! sets:
//!   - name: core            # one perf group per CPU (or per uncore PMU instance)
//!     events:
//!       - metric: perf_cpu_cycles_total
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
//! These types only describe what was written; the only I/O here is
//! reading the file. Resolution against a host produces separate types
//! (`crate::resolve::chain`).

use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::BTreeSet;
use std::path::Path;

/// The default configuration, embedded in the binary.
pub const DEFAULT_CONFIG: &str = include_str!("../config/default.yaml");

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
    #[error("{file}:{line}:{column}: {msg}")]
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

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The sets, in order.
    pub sets: Vec<SetConfig>,
}

/// One set: opened as one perf group per CPU, or per uncore PMU instance.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetConfig {
    /// The set's name (the `set` label of the group self-metrics).
    pub name: Spanned<String>,
    /// Export per-CPU series (default) or sum over CPUs.
    #[serde(default = "yes")]
    pub per_cpu: bool,
    /// The metrics.
    pub events: Vec<MetricConfig>,
}

fn yes() -> bool {
    true
}

/// One metric and the encodings that may count it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricConfig {
    /// The Prometheus metric name (`perf_cpu_cycles_total`).
    pub metric: Spanned<String>,
    /// The HELP text.
    #[serde(default)]
    pub help: Option<String>,
    /// One spec, or a fallback chain of alternatives.
    pub event: Spanned<EventField>,
}

/// `event:` as written: one alternative or a list of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum EventField {
    /// A single alternative.
    One(Alternative),
    /// A fallback chain.
    Chain(Vec<Alternative>),
}

impl EventField {
    /// The alternatives in order.
    pub fn alternatives(&self) -> Vec<&Alternative> {
        match self {
            EventField::One(a) => vec![a],
            EventField::Chain(v) => v.iter().collect(),
        }
    }
}

/// One alternative encoding of a metric's quantity.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Alternative {
    /// An event spec.
    Spec(String),
    /// A spec (or a sum of specs) with a scale and unit where sysfs has
    /// none.
    Detailed(DetailedAlternative),
}

/// The long form of an alternative.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetailedAlternative {
    /// One spec.
    #[serde(default)]
    pub event: Option<String>,
    /// Several specs counted together and summed (e.g. AMD Zen 3's eight
    /// DRAM channel events).
    #[serde(default)]
    pub sum_of: Option<Vec<String>>,
    /// Multiply counts by this (replaces the sysfs `.scale`).
    #[serde(default)]
    pub scale: Option<f64>,
    /// The base unit of the scaled value (`bytes`, `seconds`, `joules`).
    #[serde(default)]
    pub unit: Option<String>,
    /// Use this alternative only where a PMU's format term is exactly
    /// this: `"amd_df/umask=config:8-15"`. Distinguishes encodings that
    /// would resolve on the wrong generation of a PMU.
    #[serde(default)]
    pub requires_format: Option<String>,
}

impl Alternative {
    /// The specs it sums (one for most).
    pub fn specs(&self) -> Vec<&str> {
        match self {
            Alternative::Spec(s) => vec![s.as_str()],
            Alternative::Detailed(d) => match (&d.event, &d.sum_of) {
                (Some(e), _) => vec![e.as_str()],
                (None, Some(v)) => v.iter().map(String::as_str).collect(),
                (None, None) => vec![],
            },
        }
    }

    /// How the alternative reads in reports: the spec, or `a + b + …`.
    pub fn display(&self) -> String {
        self.specs().join(" + ")
    }

    /// The `requires_format` guard, if any.
    pub fn requires_format(&self) -> Option<&str> {
        match self {
            Alternative::Spec(_) => None,
            Alternative::Detailed(d) => d.requires_format.as_deref(),
        }
    }

    /// The scale and unit it overrides, if any.
    pub fn overrides(&self) -> (Option<f64>, Option<&str>) {
        match self {
            Alternative::Spec(_) => (None, None),
            Alternative::Detailed(d) => (d.scale, d.unit.as_deref()),
        }
    }
}

/// Whether `s` is a valid Prometheus metric name.
pub fn valid_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
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
        Self::parse(DEFAULT_CONFIG, "<default>").unwrap_or(Config { sets: Vec::new() })
    }

    /// Parses and validates YAML text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, ConfigError> {
        let cfg: Config = serde_saphyr::from_str(text).map_err(|e| {
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
        cfg.validate(file)?;
        Ok(cfg)
    }

    fn validate(&self, file: &str) -> Result<(), ConfigError> {
        let err = |loc: &serde_saphyr::Location, msg: String| ConfigError::Invalid {
            file: file.into(),
            line: loc.line(),
            column: loc.column(),
            msg,
        };
        let mut sets = BTreeSet::new();
        let mut metrics = BTreeSet::new();
        for s in &self.sets {
            if s.name.value.trim().is_empty() {
                return Err(err(
                    &s.name.referenced,
                    "a set needs a non-empty `name`".into(),
                ));
            }
            if !sets.insert(s.name.value.clone()) {
                return Err(err(
                    &s.name.referenced,
                    format!("set `{}` is defined twice", s.name.value),
                ));
            }
            if s.events.is_empty() {
                return Err(err(
                    &s.name.referenced,
                    format!("set `{}` has no events", s.name.value),
                ));
            }
            for m in &s.events {
                let name = &m.metric.value;
                if !valid_metric_name(name) {
                    return Err(err(
                        &m.metric.referenced,
                        format!("`{name}` is not a valid Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"),
                    ));
                }
                if !metrics.insert(name.clone()) {
                    return Err(err(
                        &m.metric.referenced,
                        format!("metric `{name}` is defined twice"),
                    ));
                }
                let alts = m.event.value.alternatives();
                if alts.is_empty() {
                    return Err(err(
                        &m.event.referenced,
                        format!("metric `{name}`: `event` is an empty list"),
                    ));
                }
                for (i, a) in alts.iter().enumerate() {
                    let where_ = if alts.len() > 1 {
                        format!("metric `{name}`, alternative {}", i + 1)
                    } else {
                        format!("metric `{name}`")
                    };
                    if let Alternative::Detailed(d) = a {
                        match (&d.event, &d.sum_of) {
                            (Some(_), Some(_)) => {
                                return Err(err(
                                    &m.event.referenced,
                                    format!("{where_}: give `event` or `sum_of`, not both"),
                                ))
                            }
                            (None, None) => {
                                return Err(err(
                                    &m.event.referenced,
                                    format!("{where_}: needs `event` or `sum_of`"),
                                ))
                            }
                            (None, Some(v)) if v.is_empty() => {
                                return Err(err(
                                    &m.event.referenced,
                                    format!("{where_}: `sum_of` is empty"),
                                ))
                            }
                            _ => {}
                        }
                        if let Some(sc) = d.scale {
                            if !sc.is_finite() || sc <= 0.0 {
                                return Err(err(
                                    &m.event.referenced,
                                    format!("{where_}: `scale` must be a positive number"),
                                ));
                            }
                        }
                    }
                    for spec in a.specs() {
                        if let Err(e) = crate::resolve::spec::parse(spec) {
                            return Err(err(&m.event.referenced, format!("{where_}: {}", e.0)));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Sums every set over CPUs, as if each had `per_cpu: false`
    /// (`--config.aggregate-cpus`).
    pub fn aggregate_cpus(&mut self) {
        for s in &mut self.sets {
            s.per_cpu = false;
        }
    }

    /// Where a metric's `event:` is written, for resolution errors.
    pub fn location_of(&self, metric: &str) -> Option<(u64, u64)> {
        self.sets
            .iter()
            .flat_map(|s| &s.events)
            .find(|m| m.metric.value == metric)
            .map(|m| (m.event.referenced.line(), m.event.referenced.column()))
    }
}

fn hint_for(msg: &str) -> String {
    if msg.contains("did not match any variant") {
        format!("{msg}: `event` must be a spec string, a list of alternatives, or {{event: SPEC, scale: N, unit: U}} / {{sum_of: [SPEC, ...], scale: N, unit: U}}")
    } else {
        msg.to_string()
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

    #[test]
    fn chain_and_detailed_forms() {
        let y = "sets:\n  - name: a\n    events:\n      - metric: m_total\n        event: [cycles, {event: \"cpu/event=0x3c/\", scale: 2, unit: bytes}, {sum_of: [instructions, cycles]}]\n";
        let c = Config::parse(y, "t.yaml").unwrap();
        let alts = c.sets[0].events[0].event.value.alternatives();
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
