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
//!
//! By job: `load.rs` reads and parses the file and says where it is
//! wrong; `convert.rs` validates the raw sets and metrics (`raw.rs`) into
//! the typed ones of `types.rs`, which do no I/O; `names.rs`,
//! `cgroups.rs`, `sampling.rs` and `derived.rs` hold their own rules.

pub mod cgroups;
mod convert;
pub mod derived;
pub mod import;
mod load;
mod names;
mod raw;
pub mod sampling;
mod types;

pub use names::valid_syntax as valid_metric_name;
pub(crate) use types::per_cpu_replaced;
pub use types::{
    Alternative, CpuRequirement, FormatRequirement, MetricConfig, Per, SetConfig, Spec,
};

use serde_saphyr::Location;

#[cfg(test)]
use crate::spec::format::Format;
#[cfg(test)]
use crate::spec::EventSpec;

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

/// Makes the error of a place in the file.
type Invalid<'a> = &'a dyn Fn(&Location, String) -> ConfigError;

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
