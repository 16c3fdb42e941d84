//! The names of the generic events (hardware, cache, software) as perf
//! accepts them, the kernel's sysfs names of the hardware events, and
//! the suggestions offered for a name that matches none.

use crate::sys::abi;

/// `PERF_TYPE_HARDWARE` event ids and the names perf accepts for them.
pub const HARDWARE: &[(&str, u64)] = &[
    ("cycles", abi::HW_CPU_CYCLES),
    ("cpu-cycles", abi::HW_CPU_CYCLES),
    ("instructions", abi::HW_INSTRUCTIONS),
    ("cache-references", abi::HW_CACHE_REFERENCES),
    ("cache-misses", abi::HW_CACHE_MISSES),
    ("branch-instructions", abi::HW_BRANCH_INSTRUCTIONS),
    ("branches", abi::HW_BRANCH_INSTRUCTIONS),
    ("branch-misses", abi::HW_BRANCH_MISSES),
    ("bus-cycles", abi::HW_BUS_CYCLES),
    ("stalled-cycles-frontend", abi::HW_STALLED_CYCLES_FRONTEND),
    ("idle-cycles-frontend", abi::HW_STALLED_CYCLES_FRONTEND),
    ("stalled-cycles-backend", abi::HW_STALLED_CYCLES_BACKEND),
    ("idle-cycles-backend", abi::HW_STALLED_CYCLES_BACKEND),
    ("ref-cycles", abi::HW_REF_CPU_CYCLES),
];

/// The sysfs `events/` name the kernel uses for each hardware id, indexed
/// by `PERF_COUNT_HW_*` (x86's `events_sysfs_show` names).
pub const HARDWARE_SYSFS: [&str; abi::HW_MAX as usize] = [
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
    ("cpu-clock", abi::SW_CPU_CLOCK),
    ("task-clock", abi::SW_TASK_CLOCK),
    ("page-faults", abi::SW_PAGE_FAULTS),
    ("faults", abi::SW_PAGE_FAULTS),
    ("context-switches", abi::SW_CONTEXT_SWITCHES),
    ("cs", abi::SW_CONTEXT_SWITCHES),
    ("cpu-migrations", abi::SW_CPU_MIGRATIONS),
    ("migrations", abi::SW_CPU_MIGRATIONS),
    ("minor-faults", abi::SW_PAGE_FAULTS_MIN),
    ("major-faults", abi::SW_PAGE_FAULTS_MAJ),
    ("alignment-faults", abi::SW_ALIGNMENT_FAULTS),
    ("emulation-faults", abi::SW_EMULATION_FAULTS),
    ("dummy", abi::SW_DUMMY),
    ("bpf-output", abi::SW_BPF_OUTPUT),
    ("cgroup-switches", abi::SW_CGROUP_SWITCHES),
];

/// Cache ids of `PERF_TYPE_HW_CACHE` and their accepted names.
const CACHES: &[(u64, &[&str])] = &[
    (abi::CACHE_L1D, &["L1-dcache", "l1-d", "l1d", "L1-data"]),
    (
        abi::CACHE_L1I,
        &["L1-icache", "l1-i", "l1i", "L1-instruction"],
    ),
    (abi::CACHE_LL, &["LLC", "L2"]),
    (abi::CACHE_DTLB, &["dTLB", "d-tlb", "Data-TLB"]),
    (abi::CACHE_ITLB, &["iTLB", "i-tlb", "Instruction-TLB"]),
    (abi::CACHE_BPU, &["branch", "branches", "bpu", "btb", "bpc"]),
    (abi::CACHE_NODE, &["node"]),
];
const OPS: &[(u64, &[&str])] = &[
    (abi::CACHE_OP_READ, &["load", "loads", "read"]),
    (abi::CACHE_OP_WRITE, &["store", "stores", "write"]),
    (
        abi::CACHE_OP_PREFETCH,
        &[
            "prefetch",
            "prefetches",
            "speculative-read",
            "speculative-load",
        ],
    ),
];
const RESULTS: &[(u64, &[&str])] = &[
    (
        abi::CACHE_RESULT_ACCESS,
        &["refs", "Reference", "ops", "access"],
    ),
    (abi::CACHE_RESULT_MISS, &["misses", "miss"]),
];

/// Which ops each cache supports as a *name* (perf's
/// `evsel__hw_cache_stat`). Whether a CPU's driver counts it is another
/// matter, which only the kernel (or the simulator's transcription of its
/// tables) knows.
pub fn cache_op_valid(cache: u64, op: u64) -> bool {
    use abi::*;
    match cache {
        CACHE_L1D | CACHE_LL | CACHE_DTLB | CACHE_NODE => op < CACHE_OP_MAX,
        CACHE_L1I => op == CACHE_OP_READ || op == CACHE_OP_PREFETCH,
        CACHE_ITLB | CACHE_BPU => op == CACHE_OP_READ,
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

pub(super) fn lookup(table: &[(&str, u64)], s: &str) -> Option<u64> {
    table
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|&(_, id)| id)
}

pub(super) fn parse_cache(s: &str) -> Option<u64> {
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

/// Whether `s` is a generic (hardware, cache, software) or raw event: what
/// `s:modifiers` would modify, as opposed to a tracepoint's subsystem.
pub(super) fn generic_or_raw(s: &str) -> bool {
    let raw = s
        .strip_prefix('r')
        .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()));
    raw || lookup(HARDWARE, s).is_some()
        || lookup(SOFTWARE, s).is_some()
        || parse_cache(s).is_some()
}

/// Every generic (hardware, cache, software) name, for suggestions.
pub fn generic_names() -> Vec<String> {
    let mut v: Vec<String> = HARDWARE.iter().map(|(n, _)| n.to_string()).collect();
    v.extend(cache_event_names());
    v.extend(SOFTWARE.iter().map(|(n, _)| n.to_string()));
    v
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
