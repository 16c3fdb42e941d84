//! The `list` report: every event the host offers and, when probed,
//! whether it opens.

use super::{column, hex};
use crate::pmu::PmuTable;
use crate::privilege::Privilege;
use crate::problem::Problem;
use crate::resolve::chain::Probe;
use crate::resolve::spec::{cache_event_names, HARDWARE, SOFTWARE};
use crate::resolve::{resolve_str, Context};
use crate::terminal::escape;
use serde::Serialize;
use std::fmt::Write as _;

/// One event in the `list` report.
#[derive(Debug, Serialize)]
pub struct ListEvent {
    /// The spec to write in a config.
    pub name: String,
    /// `hardware`, `cache`, `software`, `sysfs` or `tracepoint`.
    pub source: String,
    /// The PMU(s).
    pub pmu: String,
    /// `perf_event_attr.type`.
    #[serde(rename = "type")]
    pub type_: u32,
    /// `config`, hex.
    pub config: String,
    /// `true`/`false` when probed; `null` when not probed.
    pub available: Option<bool>,
    /// Why not available, or `not probed`.
    pub reason: Option<String>,
    /// The problem's code when not available.
    pub problem: Option<&'static str>,
    /// What to do about it.
    pub what_to_do: Option<String>,
}

/// The `list` report.
#[derive(Debug, Serialize)]
pub struct ListReport {
    /// Every event.
    pub events: Vec<ListEvent>,
    /// Tracepoints under tracefs (listed one by one only on request).
    pub tracepoints: usize,
    /// How many events were proved available.
    pub available: usize,
    /// How many were listed.
    pub total: usize,
    /// Whether availability was probed (live host or simulation).
    pub probed: bool,
}

fn tracepoint_names(ctx: &Context) -> Vec<String> {
    let Some(tfs) = &ctx.tracefs else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Ok(subs) = std::fs::read_dir(tfs.join("events")) else {
        return out;
    };
    for sub in subs.filter_map(|e| e.ok()) {
        let Ok(evs) = std::fs::read_dir(sub.path()) else {
            continue;
        };
        for ev in evs.filter_map(|e| e.ok()) {
            if ev.path().join("id").is_file() {
                out.push(format!(
                    "{}:{}",
                    sub.file_name().to_string_lossy(),
                    ev.file_name().to_string_lossy()
                ));
            }
        }
    }
    out.sort();
    out
}

impl ListReport {
    /// Lists what the host offers. With a probe, each event is opened
    /// once to prove it is available.
    /// Permission errors are diagnosed with `privilege` when given.
    pub fn new(
        table: &PmuTable,
        ctx: &Context,
        probe: Option<Probe>,
        privilege: Option<&Privilege>,
        all_tracepoints: bool,
    ) -> Self {
        let mut specs: Vec<(String, &str)> = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (n, id) in HARDWARE {
            if seen.insert(("hw", *id)) {
                specs.push((n.to_string(), "hardware"));
            }
        }
        specs.extend(cache_event_names().into_iter().map(|n| (n, "cache")));
        for (n, id) in SOFTWARE {
            if seen.insert(("sw", *id)) {
                specs.push((n.to_string(), "software"));
            }
        }
        for p in &table.pmus {
            for e in p.events.keys() {
                specs.push((format!("{}/{e}/", p.name), "sysfs"));
            }
        }
        let tps = tracepoint_names(ctx);
        if all_tracepoints {
            specs.extend(tps.iter().map(|t| (t.clone(), "tracepoint")));
        } else if let Some(first) = tps.iter().find(|t| t.starts_with("sched:")).or(tps.first()) {
            // One representative proves the tracepoint PMU works.
            specs.push((first.clone(), "tracepoint"));
        }
        let mut rows = Vec::new();
        for (name, source) in specs {
            let (pmu, type_, config, available, problem) = match resolve_str(&name, table, ctx) {
                Ok(insts) => {
                    let pmus: Vec<&str> = insts.iter().map(|i| i.pmu.as_str()).collect();
                    let (avail, problem) = match probe {
                        Some(pr) => match insts.iter().find_map(|i| pr(&name, i).err()) {
                            None => (Some(true), None),
                            Some(e) => (Some(false), Some(e)),
                        },
                        None => (None, None),
                    };
                    (
                        pmus.join(","),
                        insts[0].type_,
                        hex(insts[0].config[0]),
                        avail,
                        problem,
                    )
                }
                Err(e) => (
                    String::new(),
                    0,
                    String::new(),
                    Some(false),
                    Some(crate::resolve::chain::problem_of(e, &name)),
                ),
            };
            rows.push((name, source, pmu, type_, config, available, problem));
        }
        let available = rows.iter().filter(|r| r.5 == Some(true)).count();
        if let Some(p) = privilege {
            p.diagnose(rows.iter_mut().filter_map(|r| r.6.as_mut()), available > 0);
        }
        let events: Vec<ListEvent> = rows
            .into_iter()
            .map(
                |(name, source, pmu, type_, config, available, problem)| ListEvent {
                    name,
                    source: source.into(),
                    pmu,
                    type_,
                    config,
                    reason: match (&problem, available) {
                        (Some(p), _) => Some(p.to_string()),
                        (None, None) => Some("not probed".into()),
                        (None, Some(_)) => None,
                    },
                    what_to_do: problem.as_ref().map(Problem::what_to_do),
                    problem: problem.as_ref().map(Problem::code),
                    available,
                },
            )
            .collect();
        ListReport {
            total: events.len(),
            available,
            events,
            tracepoints: tps.len(),
            probed: probe.is_some(),
        }
    }

    /// Human-readable text, ending with the summary line.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let w = column(self.events.iter().map(|e| e.name.as_str()), "EVENT");
        let _ = writeln!(
            s,
            "{:w$}  {:10}  {:>4}  {:>18}  AVAILABLE",
            "EVENT", "SOURCE", "TYPE", "CONFIG"
        );
        for e in &self.events {
            let avail = match (e.available, &e.reason) {
                (Some(true), _) => "yes".to_string(),
                (Some(false), Some(r)) => format!("no: {}", escape(r)),
                (Some(false), None) => "no".to_string(),
                (None, _) => "not probed".to_string(),
            };
            let _ = writeln!(
                s,
                "{:w$}  {:10}  {:>4}  {:>18}  {avail}",
                escape(&e.name),
                escape(&e.source),
                e.type_,
                e.config
            );
        }
        let _ = writeln!(
            s,
            "tracepoints: {} (list them with --tracepoints)",
            self.tracepoints
        );
        let _ = writeln!(
            s,
            "modifiers: {} (`cycles:u`, `cpu/cycles/k`, `syscalls:sys_enter_read:u`); PMUs that count every privilege level at once (uncore, RAPL, msr) refuse them",
            crate::spec::SUPPORTED_MODIFIERS
        );
        if self.probed {
            let _ = writeln!(s, "{} of {} available", self.available, self.total);
        } else {
            let _ = writeln!(
                s,
                "{} of {} available ({} not probed: --path.sysfs is not the live /sys; use --simulate to probe against the simulated PMU)",
                self.available,
                self.total,
                self.total - self.events.iter().filter(|e| e.available.is_some()).count()
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_escapes_names_and_survives_any_width() {
        // Wider than a format width may be (65,535): no panic.
        let l = ListReport {
            events: vec![ListEvent {
                name: format!("{}\x1b[2J", "e".repeat(70_000)),
                source: "sysfs".into(),
                pmu: "p".into(),
                type_: 9,
                config: "0x1".into(),
                available: Some(false),
                reason: Some("PMU `p\u{9b}2J` refused".into()),
                problem: None,
                what_to_do: None,
            }],
            tracepoints: 0,
            available: 0,
            total: 1,
            probed: true,
        };
        let t = l.text();
        assert!(
            !t.contains(['\x1b', '\u{9b}']),
            "control characters in {t:?}"
        );
        assert!(t.contains("\\x1b[2J") && t.contains("p\\u{9b}2J"), "{t:?}");
    }
}
