//! The event spec grammar, as `perf` users write events.
//!
//! ```text
//! cycles | instructions | cache-misses | ...        generic hardware (PERF_TYPE_HARDWARE)
//! L1-dcache-load-misses | LLC-loads | dTLB-... ...    generic cache (PERF_TYPE_HW_CACHE)
//! cpu-clock | context-switches | page-faults | ...   software (PERF_TYPE_SOFTWARE)
//! rNNNN                                              raw, on the core PMU(s)
//! pmu/event/  pmu/term=val,term/  pmu/event,term=val/  sysfs PMUs; `pmu` may be a glob
//! core/...                                           every core PMU
//! subsys:name                                        tracepoint
//! ```

use crate::pmu::{parse_number, parse_terms, SyntaxError, Term};
use std::fmt;

/// `PERF_TYPE_HARDWARE` event ids and the names perf accepts for them.
pub const HARDWARE: &[(&str, u64)] = &[
    ("cycles", 0),
    ("cpu-cycles", 0),
    ("instructions", 1),
    ("cache-references", 2),
    ("cache-misses", 3),
    ("branch-instructions", 4),
    ("branches", 4),
    ("branch-misses", 5),
    ("bus-cycles", 6),
    ("stalled-cycles-frontend", 7),
    ("idle-cycles-frontend", 7),
    ("stalled-cycles-backend", 8),
    ("idle-cycles-backend", 8),
    ("ref-cycles", 9),
];

/// The sysfs `events/` name the kernel uses for each hardware id.
pub const HARDWARE_SYSFS: &[&str] = &[
    "cpu-cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branch-instructions",
    "branch-misses",
    "bus-cycles",
    "stalled-cycles-frontend",
    "stalled-cycles-backend",
    "ref-cycles",
];

/// `PERF_TYPE_SOFTWARE` event ids and names (perf_event_open(2)). The
/// `software` PMU has no `events/` directory, so these are built in.
pub const SOFTWARE: &[(&str, u64)] = &[
    ("cpu-clock", 0),
    ("task-clock", 1),
    ("page-faults", 2),
    ("faults", 2),
    ("context-switches", 3),
    ("cs", 3),
    ("cpu-migrations", 4),
    ("migrations", 4),
    ("minor-faults", 5),
    ("major-faults", 6),
    ("alignment-faults", 7),
    ("emulation-faults", 8),
    ("dummy", 9),
    ("bpf-output", 10),
    ("cgroup-switches", 11),
];

/// Cache ids of `PERF_TYPE_HW_CACHE` and their accepted names.
const CACHES: &[(u64, &[&str])] = &[
    (0, &["L1-dcache", "l1-d", "l1d", "L1-data"]),
    (1, &["L1-icache", "l1-i", "l1i", "L1-instruction"]),
    (2, &["LLC", "L2"]),
    (3, &["dTLB", "d-tlb", "Data-TLB"]),
    (4, &["iTLB", "i-tlb", "Instruction-TLB"]),
    (5, &["branch", "branches", "bpu", "btb", "bpc"]),
    (6, &["node"]),
];
const OPS: &[(u64, &[&str])] = &[
    (0, &["load", "loads", "read"]),
    (1, &["store", "stores", "write"]),
    (
        2,
        &[
            "prefetch",
            "prefetches",
            "speculative-read",
            "speculative-load",
        ],
    ),
];
const RESULTS: &[(u64, &[&str])] = &[
    (0, &["refs", "Reference", "ops", "access"]),
    (1, &["misses", "miss"]),
];

/// Which ops each cache supports (perf's `evsel__hw_cache_stat`).
pub fn cache_op_valid(cache: u64, op: u64) -> bool {
    match cache {
        0 | 2 | 3 | 6 => op <= 2,
        1 => op == 0 || op == 2,
        4 | 5 => op == 0,
        _ => false,
    }
}

/// The canonical generic cache event names, e.g. `L1-dcache-load-misses`.
pub fn cache_event_names() -> Vec<String> {
    let mut out = Vec::new();
    for &(c, cn) in CACHES {
        for &(o, _) in OPS {
            if !cache_op_valid(c, o) {
                continue;
            }
            let (plural, single) = match o {
                0 => ("loads", "load"),
                1 => ("stores", "store"),
                _ => ("prefetches", "prefetch"),
            };
            out.push(format!("{}-{plural}", cn[0]));
            out.push(format!("{}-{single}-misses", cn[0]));
        }
    }
    out
}

/// A parsed event spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventSpec {
    /// A generic hardware event: the `PERF_TYPE_HARDWARE` id.
    Hardware {
        /// As written.
        name: String,
        /// The id (0 = cycles … 9 = ref-cycles).
        id: u64,
    },
    /// A generic cache event: `id | op << 8 | result << 16`.
    HwCache {
        /// As written.
        name: String,
        /// The encoded config.
        config: u64,
    },
    /// A software event.
    Software {
        /// As written.
        name: String,
        /// The id.
        id: u64,
    },
    /// `rNNNN` on the core PMU(s).
    Raw(u64),
    /// `pmu/terms/`.
    Pmu {
        /// The PMU name or pattern (`core` means every core PMU).
        pmu: String,
        /// The terms, each a format term, an event alias (bare) or
        /// `config`/`config1`/`config2`.
        terms: Vec<Term>,
        /// Bare terms as written, in order (an alias may be among them).
        bare: Vec<String>,
    },
    /// `subsys:name`.
    Tracepoint {
        /// The subsystem (tracefs `events/<subsys>`).
        subsys: String,
        /// The event name.
        name: String,
    },
}

impl fmt::Display for EventSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventSpec::Hardware { name, .. }
            | EventSpec::HwCache { name, .. }
            | EventSpec::Software { name, .. } => f.write_str(name),
            EventSpec::Raw(v) => write!(f, "r{v:x}"),
            EventSpec::Pmu { pmu, terms, .. } => {
                write!(f, "{pmu}/")?;
                for (i, t) in terms.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    match t.value {
                        crate::pmu::TermValue::Num(v) => write!(f, "{}={v:#x}", t.name)?,
                        crate::pmu::TermValue::Required => write!(f, "{}=?", t.name)?,
                    }
                }
                f.write_str("/")
            }
            EventSpec::Tracepoint { subsys, name } => write!(f, "{subsys}:{name}"),
        }
    }
}

fn lookup(table: &[(&str, u64)], s: &str) -> Option<u64> {
    table
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|&(_, id)| id)
}

fn parse_cache(s: &str) -> Option<u64> {
    let find = |tab: &[(u64, &[&str])], x: &str| -> Option<u64> {
        tab.iter()
            .find(|(_, names)| names.iter().any(|n| n.eq_ignore_ascii_case(x)))
            .map(|&(id, _)| id)
    };
    // Cache names themselves contain '-', so try every split point.
    for (i, _) in s.match_indices('-') {
        let (cache, rest) = (&s[..i], &s[i + 1..]);
        let Some(c) = find(CACHES, cache) else {
            continue;
        };
        let (op, result) = match find(OPS, rest) {
            Some(op) => (op, 0),
            None => {
                let Some((o, r)) = rest.rsplit_once('-') else {
                    continue;
                };
                match (find(OPS, o), find(RESULTS, r)) {
                    (Some(o), Some(r)) => (o, r),
                    _ => continue,
                }
            }
        };
        if cache_op_valid(c, op) {
            return Some(c | (op << 8) | (result << 16));
        }
    }
    None
}

/// Every generic (hardware, cache, software) name, for suggestions.
pub fn generic_names() -> Vec<String> {
    let mut v: Vec<String> = HARDWARE.iter().map(|(n, _)| n.to_string()).collect();
    v.extend(cache_event_names());
    v.extend(SOFTWARE.iter().map(|(n, _)| n.to_string()));
    v
}

/// Parses one event spec.
pub fn parse(spec: &str) -> Result<EventSpec, SyntaxError> {
    let s = spec.trim();
    if s.is_empty() {
        return Err(SyntaxError("empty event spec".into()));
    }
    if let Some(slash) = s.find('/') {
        let pmu = &s[..slash];
        let rest = &s[slash + 1..];
        let Some(inner) = rest.strip_suffix('/') else {
            return Err(SyntaxError(format!(
                "`{s}`: a PMU event is written `pmu/terms/`, with a closing `/` (modifiers such as `:u` are not supported)"
            )));
        };
        if pmu.is_empty()
            || !pmu
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*' || c == '-')
        {
            return Err(SyntaxError(format!("`{pmu}` is not a PMU name")));
        }
        if inner.contains('/') {
            return Err(SyntaxError(format!("`{s}` has more than two `/`")));
        }
        let terms = parse_terms(inner).map_err(|e| SyntaxError(format!("`{s}`: {}", e.0)))?;
        if terms.is_empty() {
            return Err(SyntaxError(format!("`{s}` names no event or term")));
        }
        let bare = inner
            .split(',')
            .map(str::trim)
            .filter(|t| !t.contains('='))
            .map(str::to_string)
            .collect();
        return Ok(EventSpec::Pmu {
            pmu: pmu.to_string(),
            terms,
            bare,
        });
    }
    if let Some((subsys, name)) = s.split_once(':') {
        let ok = |x: &str| {
            !x.is_empty()
                && x.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !ok(subsys) || !ok(name) {
            return Err(SyntaxError(format!(
                "`{s}`: a tracepoint is written `subsys:name` (modifiers such as `:u` are not supported)"
            )));
        }
        return Ok(EventSpec::Tracepoint {
            subsys: subsys.to_string(),
            name: name.to_string(),
        });
    }
    if let Some(hex) = s.strip_prefix('r') {
        if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return parse_number(&format!("0x{hex}")).map(EventSpec::Raw);
        }
    }
    if let Some(id) = lookup(HARDWARE, s) {
        return Ok(EventSpec::Hardware {
            name: s.to_string(),
            id,
        });
    }
    if let Some(id) = lookup(SOFTWARE, s) {
        return Ok(EventSpec::Software {
            name: s.to_string(),
            id,
        });
    }
    if let Some(config) = parse_cache(s) {
        return Ok(EventSpec::HwCache {
            name: s.to_string(),
            config,
        });
    }
    let names = generic_names();
    let close = suggest(s, names.iter().map(String::as_str));
    let mut msg = format!("unknown event `{s}`");
    if !close.is_empty() {
        msg.push_str(&format!("; did you mean {}?", quote_list(&close)));
    }
    msg.push_str(" (events of a PMU are written `pmu/event/`; run `perf-exporter list` to see what this host offers)");
    Err(SyntaxError(msg))
}

/// The closest names to `s` (Jaro-Winkler, case-insensitive), best first.
pub fn suggest<'a>(s: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let lower = s.to_ascii_lowercase();
    let mut scored: Vec<(f64, &str)> = names
        .map(|n| {
            let n_l = n.to_ascii_lowercase();
            let jw = strsim::jaro_winkler(&lower, &n_l);
            // Transpositions of short names (`mrs` for `msr`) score low
            // on Jaro-Winkler; an edit distance catches them.
            let close = strsim::osa_distance(&lower, &n_l) <= (lower.len() / 3).max(1);
            (if close { jw.max(0.81) } else { jw }, n)
        })
        .filter(|(score, _)| *score > 0.8)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(3)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// `` `a`, `b` or `c` ``.
pub fn quote_list(v: &[String]) -> String {
    let q: Vec<String> = v.iter().map(|x| format!("`{x}`")).collect();
    match q.len() {
        0 => String::new(),
        1 => q[0].clone(),
        n => format!("{} or {}", q[..n - 1].join(", "), q[n - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::TermValue;

    #[test]
    fn generic_names_parse() {
        assert_eq!(
            parse("cycles").unwrap(),
            EventSpec::Hardware {
                name: "cycles".into(),
                id: 0
            }
        );
        assert!(matches!(
            parse("ref-cycles").unwrap(),
            EventSpec::Hardware { id: 9, .. }
        ));
        assert!(matches!(
            parse("branches").unwrap(),
            EventSpec::Hardware { id: 4, .. }
        ));
        assert!(matches!(
            parse("context-switches").unwrap(),
            EventSpec::Software { id: 3, .. }
        ));
        assert!(matches!(
            parse("major-faults").unwrap(),
            EventSpec::Software { id: 6, .. }
        ));
    }

    #[test]
    fn cache_names_encode() {
        let c = |s: &str| match parse(s).unwrap() {
            EventSpec::HwCache { config, .. } => config,
            other => panic!("{other:?}"),
        };
        assert_eq!(c("L1-dcache-load-misses"), 0x10000);
        assert_eq!(c("L1-dcache-loads"), 0);
        assert_eq!(c("LLC-load-misses"), 0x10002);
        assert_eq!(c("LLC-stores"), 0x102);
        assert_eq!(c("dTLB-load-misses"), 0x10003);
        assert_eq!(c("iTLB-load-misses"), 0x10004);
        assert_eq!(c("branch-load-misses"), 0x10005);
        assert_eq!(c("node-prefetch-misses"), 0x10206);
        assert_eq!(c("l1d-load-misses"), 0x10000);
        assert!(parse("iTLB-stores").is_err());
        assert_eq!(cache_event_names().len(), 6 + 4 + 6 + 6 + 2 + 2 + 6);
    }

    #[test]
    fn pmu_specs() {
        let EventSpec::Pmu { pmu, terms, bare } =
            parse("cpu/event=0xd1,umask=0x20,cmask=2,inv,edge/").unwrap()
        else {
            panic!()
        };
        assert_eq!(pmu, "cpu");
        assert_eq!(terms.len(), 5);
        assert_eq!(bare, vec!["inv", "edge"]);
        assert!(matches!(
            parse("uncore_imc_*/cas_count_read/").unwrap(),
            EventSpec::Pmu { .. }
        ));
        let EventSpec::Pmu { terms, .. } = parse("arm_cmn/type=5,nodeid=?/").unwrap() else {
            panic!()
        };
        assert_eq!(terms[1].value, TermValue::Required);
        assert!(parse("cpu/event=1").is_err());
        assert!(parse("cpu//").is_err());
        assert!(parse("a/b/c/").is_err());
    }

    #[test]
    fn raw_and_tracepoints() {
        assert_eq!(parse("r412e").unwrap(), EventSpec::Raw(0x412e));
        assert_eq!(
            parse("syscalls:sys_enter_getppid").unwrap(),
            EventSpec::Tracepoint {
                subsys: "syscalls".into(),
                name: "sys_enter_getppid".into()
            }
        );
        assert!(parse("sched:").is_err());
    }

    #[test]
    fn unknown_suggests() {
        let e = parse("cycels").unwrap_err().0;
        assert!(e.contains("did you mean `cycles`"), "{e}");
        let e = parse("context-switch").unwrap_err().0;
        assert!(e.contains("`context-switches`"), "{e}");
    }
}
