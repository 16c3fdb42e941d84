//! The default config's imported `derived:` entries: perf's metric JSON
//! of several platforms taken against a config's own sets (no `sets:`
//! written), merged by metric name into `expr:` lists.
//!
//! Each file is one platform's (its events and its metrics, as
//! [`super::import`] reads them). A perf event a metric reads becomes the
//! event metric of the base config whose fallback chain holds that
//! encoding (one spec of an alternative, compared by PMU, `cpu` and
//! `core` alike, and by terms as numbers, or a generic name as written),
//! or an [`EQUIVALENT`] spec (an encoding the config counts under another
//! spec, with the config metric's increase per count: one CAS is 64
//! bytes); where that alternative has a `scale:` the count is the metric
//! divided by it (`INT_MISC.RECOVERY_CYCLES` is
//! `(perf_topdown_recovery_slots_total / 4)`). A metric with an event no
//! set counts is left out, saying so.
//!
//! A file's formula that reads a metric other files give too reads its
//! own file's formula for it, inlined in parentheses (a reference by name
//! could resolve to another platform's alternative on a host); a metric
//! only one file gives stays a reference.
//!
//! Then the metrics of the same derived name are merged in file order:
//! help, unit, group and record from the first file that gives each, the
//! expressions as the alternatives of `expr:` (one that another file
//! already gives is not repeated). An alternative is taken on a host
//! where its inputs are counted, the first that is: give the platform
//! whose formulas read the most specific events first.
//!
//! Plain data, no I/O: the caller reads the files and splices
//! [`Merged::yaml`] between [`BEGIN`] and [`END`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::yaml::q;
use super::{Counted, ImportError, Importer, Options, Skipped, Taken};
use crate::config::SetConfig;
use crate::derive;

/// The line before the generated entries.
pub const BEGIN: &str = "  # BEGIN imported derived metrics";

/// The line after them.
pub const END: &str = "  # END imported derived metrics";

/// The merged entries.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The `derived:` entries (indented as list items of `derived:`),
    /// from [`BEGIN`] to [`END`] inclusive, each line ending in `\n`.
    pub yaml: String,
    /// Metrics left out, each named `file: MetricName`.
    pub skipped: Vec<Skipped>,
}

/// A spec as compared: the PMU (`core` for every core PMU name) and the
/// terms as numbers; a generic name as written.
#[derive(Debug, PartialEq, Eq)]
enum Key {
    Pmu(String, BTreeMap<String, u64>),
    Name(String),
}

fn key(spec: &str) -> Key {
    let parsed = spec
        .strip_suffix('/')
        .and_then(|s| s.split_once('/'))
        .and_then(|(pmu, terms)| {
            let pmu = if pmu == "cpu" || pmu == "core" {
                "core"
            } else {
                pmu
            };
            let mut t = BTreeMap::new();
            for term in terms.split(',') {
                let (k, v) = term.split_once('=').unwrap_or((term, "1"));
                let v = v.trim();
                let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                    Some(h) => u64::from_str_radix(h, 16).ok()?,
                    None => v.parse().ok()?,
                };
                t.insert(k.trim().to_string(), n);
            }
            Some(Key::Pmu(pmu.to_string(), t))
        });
    parsed.unwrap_or_else(|| Key::Name(spec.to_string()))
}

/// A perf event the base config counts under another spec.
struct Equivalent {
    /// The event as the importer writes it.
    perf: &'static str,
    /// The spec of an alternative of the config's chain.
    config: &'static str,
    /// The config metric's increase per count of the perf event.
    per_count: f64,
}

/// The events the default config counts under other specs than perf's
/// JSON gives them (config/metrics/README.md says which metric reads
/// which, and why each holds).
///
/// Only the same count: the kernel's own name for that encoding (a
/// generic event it maps to it, a sysfs alias), with the config metric's
/// increase per count. Never a stand-in that counts something close (the
/// generic `L1-dcache-load-misses` for `MEM_LOAD_RETIRED.L1_MISS`): an
/// imported metric would then carry perf's name over another quantity.
/// A perf event the config does not count is left out, saying so; the
/// config counts it under its own encoding where it wants the metric.
const EQUIVALENT: [Equivalent; 26] = [
    // INST_RETIRED.ANY: the kernel's `instructions` on Intel is 0x00c0
    // (arch/x86/events/intel/core.c, intel_perfmon_event_map), the same
    // count.
    Equivalent {
        perf: "cpu/event=0xc0/",
        config: "instructions",
        per_count: 1.0,
    },
    // UNC_M_CAS_COUNT.RD and .WR (0x04/0x03, 0x04/0x0C) are the sysfs
    // `cas_count_read`/`cas_count_write` of the server memory controllers
    // (arch/x86/events/intel/uncore_snbep.c), whose sysfs scale,
    // 6.103515625e-5 MiB, is 64 bytes per CAS: the config counts bytes.
    Equivalent {
        perf: "uncore_imc_*/event=0x04,umask=0x03/",
        config: "uncore_imc_*/cas_count_read/",
        per_count: 64.0,
    },
    Equivalent {
        perf: "uncore_imc_*/event=0x04,umask=0x0c/",
        config: "uncore_imc_*/cas_count_write/",
        per_count: 64.0,
    },
    // The perf-metrics events of Intel cores (Ice Lake and later, the
    // P-cores of hybrid parts): the kernel's sysfs aliases `slots`
    // (event=0x00,umask=0x4) and `topdown-retiring`, `-bad-spec`,
    // `-fe-bound`, `-be-bound`, `-heavy-ops`, `-br-mispredict`,
    // `-fetch-lat`, `-mem-bound` (umask 0x80 to 0x87), the same encodings
    // (arch/x86/events/intel/core.c; the intel-hybrid fixture's cpu_core).
    // The default counts the metric events as `cpu_core/...` (then
    // `core/...`): on hybrid parts the P-cores' only.
    Equivalent {
        perf: "cpu_core/event=0x00,umask=0x04/",
        config: "core/slots/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_core/event=0x00,umask=0x80/",
        config: "cpu_core/topdown-retiring/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_core/event=0x00,umask=0x81/",
        config: "cpu_core/topdown-bad-spec/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_core/event=0x00,umask=0x82/",
        config: "cpu_core/topdown-fe-bound/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_core/event=0x00,umask=0x83/",
        config: "cpu_core/topdown-be-bound/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_core/event=0x00,umask=0x84/",
        config: "cpu_core/topdown-heavy-ops/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_core/event=0x00,umask=0x85/",
        config: "cpu_core/topdown-br-mispredict/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_core/event=0x00,umask=0x86/",
        config: "cpu_core/topdown-fetch-lat/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_core/event=0x00,umask=0x87/",
        config: "cpu_core/topdown-mem-bound/",
        per_count: 1.0,
    },
    // Ice Lake's perf-metrics events on its only core PMU, `cpu` (perf's
    // icelakex JSON gives them no `Unit`): the kernel's `icl_td_events_attrs`
    // (arch/x86/events/intel/core.c), the `slots` and level-1 `topdown-*`
    // aliases with the encodings above, counted as `core/slots/` and
    // `core/topdown-*/`.
    Equivalent {
        perf: "cpu/event=0x00,umask=0x04/",
        config: "core/slots/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu/event=0x00,umask=0x80/",
        config: "core/topdown-retiring/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu/event=0x00,umask=0x81/",
        config: "core/topdown-bad-spec/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu/event=0x00,umask=0x82/",
        config: "core/topdown-fe-bound/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu/event=0x00,umask=0x83/",
        config: "core/topdown-be-bound/",
        per_count: 1.0,
    },
    // The E-cores of hybrid parts (cpu_atom, Gracemont): the kernel's
    // sysfs aliases of the same PMU (`adl_hybrid_events_attrs` in
    // arch/x86/events/intel/core.c; the intel-hybrid fixture's cpu_atom):
    // `cpu-cycles` event=0x3c (CPU_CLK_UNHALTED.CORE), `topdown-retiring`
    // event=0xc2 (TOPDOWN_RETIRING.ALL), `topdown-fe-bound` 0x71
    // (TOPDOWN_FE_BOUND.ALL), `topdown-be-bound` 0x74 (TOPDOWN_BE_BOUND.ALL).
    Equivalent {
        perf: "cpu_atom/event=0x3c/",
        config: "cpu_atom/cpu-cycles/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_atom/event=0xc2/",
        config: "cpu_atom/topdown-retiring/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_atom/event=0x71/",
        config: "cpu_atom/topdown-fe-bound/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu_atom/event=0x74/",
        config: "cpu_atom/topdown-be-bound/",
        per_count: 1.0,
    },
    // Arm PMUv3 common events (perf's arm64 JSON gives core events no
    // `Unit`): the sysfs names `drivers/perf/arm_pmuv3.c` gives these
    // encodings (`ARMV8_EVENT_ATTR`, `event=0x%04llx`), shown only where
    // the CPU implements the event (its PMCEID bit), which is why the
    // default counts them by name: OP_RETIRED 0x3A, OP_SPEC 0x3B,
    // STALL_SLOT_BACKEND 0x3D, STALL_SLOT_FRONTEND 0x3E, STALL_SLOT 0x3F.
    Equivalent {
        perf: "cpu/event=0x3a/",
        config: "core/op_retired/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu/event=0x3b/",
        config: "core/op_spec/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu/event=0x3d/",
        config: "core/stall_slot_backend/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu/event=0x3e/",
        config: "core/stall_slot_frontend/",
        per_count: 1.0,
    },
    Equivalent {
        perf: "cpu/event=0x3f/",
        config: "core/stall_slot/",
        per_count: 1.0,
    },
];

/// What the base config's sets count `c` as: the operand text that
/// stands for `c`'s count (the metric over its scale, and over the
/// increase per count of an [`EQUIVALENT`] spec).
fn counted_as(c: &Counted, sets: &[SetConfig]) -> Result<String, String> {
    let mut want: Vec<(Key, f64)> = c.specs.iter().map(|s| (key(s), 1.0)).collect();
    for e in &EQUIVALENT {
        let k = key(e.perf);
        if want.iter().any(|(w, _)| *w == k) {
            want.push((key(e.config), e.per_count));
        }
    }
    let mut found: Vec<(String, f64)> = Vec::new();
    // A file's `CountedAs` picks one of the metrics that count the
    // encoding (each guarded to other CPUs' formulas).
    let picked = |m: &str| c.counted_as.as_deref().is_none_or(|want| want == m);
    for m in sets
        .iter()
        .flat_map(|s| &s.events)
        .filter(|m| picked(&m.metric.value))
    {
        for alt in &m.event.value {
            if alt.specs.len() != 1 {
                continue;
            }
            let k = key(&alt.specs[0].text);
            if let Some((_, per)) = want.iter().find(|(w, _)| *w == k) {
                let f = (m.metric.value.clone(), alt.scale.unwrap_or(1.0) * per);
                if !found.contains(&f) {
                    found.push(f);
                }
            }
        }
    }
    match found.as_slice() {
        [] if c.counted_as.is_some() => Err(format!(
            "`{}` ({}) is not counted by `{}`, the metric its `CountedAs` names",
            c.metric,
            c.specs.join(" or "),
            c.counted_as.as_deref().unwrap_or_default()
        )),
        [] => Err(format!(
            "`{}` ({}) is counted by no set of the config",
            c.metric,
            c.specs.join(" or ")
        )),
        [(m, s)] if *s == 1.0 => Ok(m.clone()),
        [(m, s)] => Ok(format!("({m} / {s})")),
        more => Err(format!(
            "`{}` ({}) is counted by several metrics of the config ({})",
            c.metric,
            c.specs.join(" or "),
            more.iter()
                .map(|(m, _)| m.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// `t`'s expression over the base config's metrics.
fn over_sets(t: &Taken, sets: &[SetConfig]) -> Result<String, String> {
    // Only the events the expression names (`t.events` holds those of
    // the metrics it reads too).
    let parsed = derive::parse(&t.expr).map_err(|e| format!("its expression: {e}"))?;
    let names: Vec<String> = parsed
        .operands()
        .into_iter()
        .chain(parsed.probes())
        .map(|o| o.name.clone())
        .collect();
    let mut to: BTreeMap<&str, String> = BTreeMap::new();
    for c in t.events.iter().filter(|c| names.contains(&c.metric)) {
        to.insert(c.metric.as_str(), counted_as(c, sets)?);
    }
    // `rename` escapes what it writes, so a quotient goes in as a
    // placeholder name first.
    let mut placeholders: Vec<(String, String)> = Vec::new();
    let text = derive::rename(&t.expr, &mut |n| {
        let v = to.get(n)?;
        if v.starts_with('(') {
            let p = format!("imported_placeholder_{}", placeholders.len());
            placeholders.push((p.clone(), v.clone()));
            Some(p)
        } else {
            Some(v.clone())
        }
    })
    .map_err(|e| format!("its expression: {e}"))?;
    // Longest first: `_10` before `_1`.
    placeholders.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(b.0.cmp(&a.0)));
    Ok(placeholders
        .iter()
        .fold(text, |acc, (p, v)| acc.replace(p.as_str(), v)))
}

struct Entry {
    name: String,
    help: Option<String>,
    unit: Option<String>,
    group: Option<String>,
    record: Option<String>,
    /// Each alternative and its CPU guard.
    exprs: Vec<(String, Option<String>)>,
}

/// Takes each file's metrics against `sets` and merges them (see the
/// module docs).
pub fn merged_derived(
    files: &[(String, String)],
    sets: &[SetConfig],
) -> Result<Merged, ImportError> {
    let opts = Options::default();
    let mut skipped = Vec::new();
    // Each file's metrics over the sets, in file order.
    let mut per_file: Vec<Vec<(Taken, String)>> = Vec::new();
    for (file, text) in files {
        let one = [(file.clone(), text.clone())];
        let read = super::json::read(&one, &opts)?;
        if read.metrics.is_empty() {
            return Err(ImportError::NoMetrics);
        }
        let (taken, left, _) = Importer::new(read, &opts).taken();
        let mut out: Vec<String> = Vec::new();
        let mut mine: Vec<(Taken, String)> = Vec::new();
        skipped.extend(left.into_iter().map(|s| Skipped {
            metric: format!("{file}: {}", s.metric),
            why: s.why,
        }));
        for t in taken {
            // A metric that reads one left out here is left out too.
            let expr = match derive::parse(&t.expr) {
                Ok(p) => match p.operands().iter().find(|o| out.contains(&o.name)) {
                    Some(o) => Err(format!("it reads `{}`, which is left out", o.name)),
                    None => over_sets(&t, sets),
                },
                Err(e) => Err(format!("its expression: {e}")),
            };
            match expr {
                Ok(e) => mine.push((t, e)),
                Err(why) => {
                    out.push(t.name.clone());
                    skipped.push(Skipped {
                        metric: format!("{file}: {}", t.name),
                        why,
                    });
                }
            }
        }
        per_file.push(mine);
    }
    // A metric several files give is taken per host from the first
    // alternative whose inputs are counted, maybe another platform's:
    // a file's formula that reads it reads its own file's formula
    // instead, inlined.
    let mut given: BTreeMap<&str, usize> = BTreeMap::new();
    for (t, _) in per_file.iter().flatten() {
        *given.entry(t.name.as_str()).or_default() += 1;
    }
    let shared: Vec<String> = given
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, _)| k.to_string())
        .collect();
    let mut entries: Vec<Entry> = Vec::new();
    for (i, mine) in per_file.iter().enumerate() {
        for (t, expr) in mine {
            let expr = match inline_shared(expr, mine, &shared) {
                Ok(e) => super::folded(&e),
                Err(why) => {
                    skipped.push(Skipped {
                        metric: format!("{}: {}", files[i].0, t.name),
                        why,
                    });
                    continue;
                }
            };
            match entries.iter_mut().find(|e| e.name == t.name) {
                Some(e) => {
                    e.help = e.help.take().or_else(|| t.help.clone());
                    e.unit = e.unit.take().or_else(|| t.unit.clone());
                    e.group = e.group.take().or_else(|| t.group.clone());
                    e.record = e.record.take().or_else(|| t.record.clone());
                    let alt = (expr, t.requires_cpu.clone());
                    if !e.exprs.contains(&alt) {
                        e.exprs.push(alt);
                    }
                }
                None => entries.push(Entry {
                    name: t.name.clone(),
                    help: t.help.clone(),
                    unit: t.unit.clone(),
                    group: t.group.clone(),
                    record: t.record.clone(),
                    exprs: vec![(expr, t.requires_cpu.clone())],
                }),
            }
        }
    }
    Ok(Merged {
        yaml: write(files, &entries),
        skipped,
    })
}

/// `expr` with each reference to a `shared` metric of `mine` (one
/// file's) replaced by that metric's expression in parentheses, until
/// none is left.
fn inline_shared(
    expr: &str,
    mine: &[(Taken, String)],
    shared: &[String],
) -> Result<String, String> {
    let mut text = expr.to_string();
    for _ in 0..=derive::MAX_DEPTH {
        let mut placeholders: Vec<(String, String)> = Vec::new();
        let next = derive::rename(&text, &mut |n| {
            if !shared.iter().any(|s| s == n) {
                return None;
            }
            let (_, x) = mine.iter().find(|(t, _)| t.name == n)?;
            let p = format!("imported_inline_{}", placeholders.len());
            placeholders.push((p.clone(), format!("({x})")));
            Some(p)
        })
        .map_err(|e| format!("inlining: {e}"))?;
        if placeholders.is_empty() {
            return Ok(text);
        }
        // Longest first: `_10` before `_1`.
        placeholders.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(b.0.cmp(&a.0)));
        text = placeholders
            .iter()
            .fold(next, |acc, (p, v)| acc.replace(p.as_str(), v));
    }
    Err("metric references nest too deep (or form a cycle)".into())
}

fn write(files: &[(String, String)], entries: &[Entry]) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "{BEGIN}");
    let _ = writeln!(
        y,
        "  # Written by the importer from perf's metric JSON: {}.",
        files
            .iter()
            .map(|(f, _)| f.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        y,
        "  # Do not edit: change those files and run `UPDATE_DEFAULT=1 cargo test --lib config::import`."
    );
    for e in entries {
        let _ = writeln!(y, "  - name: {}", q(&e.name));
        if let Some(h) = &e.help {
            let _ = writeln!(y, "    help: {}", q(h));
        }
        if let Some(u) = &e.unit {
            let _ = writeln!(y, "    unit: {}", q(u));
        }
        if let Some(g) = &e.group {
            let _ = writeln!(y, "    group: {}", q(g));
        }
        if let [(one, None)] = e.exprs.as_slice() {
            let _ = writeln!(y, "    expr: {}", q(one));
        } else {
            let _ = writeln!(y, "    expr:");
            for (x, guard) in &e.exprs {
                match guard {
                    None => {
                        let _ = writeln!(y, "      - {}", q(x));
                    }
                    Some(g) => {
                        let _ = writeln!(y, "      - expr: {}", q(x));
                        let _ = writeln!(y, "        requires_cpu: {}", q(g));
                    }
                }
            }
        }
        if let Some(r) = &e.record {
            let _ = writeln!(y, "    record: {}", q(r));
        }
    }
    let _ = writeln!(y, "{END}");
    y
}
