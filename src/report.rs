//! The `list` and `check` reports, as data (serialisable to JSON) and as
//! text for terminals, and when `check` fails ([`CheckReport::failure`],
//! the same rule `serve` refuses by: [`nothing_to_count`]).

use crate::pmu::PmuTable;
use crate::privilege::Privilege;
use crate::problem::{Class, Problem};
use crate::resolve::chain::{Probe, Resolution, ResolvedMetric, Status, SELECTED};
use crate::resolve::spec::{cache_event_names, HARDWARE, SOFTWARE};
use crate::resolve::{resolve_str, Context};
use crate::terminal::escape;
use serde::Serialize;
use std::fmt::Write as _;

/// The widest name column of the text reports: longer names overflow it
/// (a format width must stay below 65,536, and a table that wide helps
/// no one).
const MAX_COLUMN: usize = 64;

mod budget;
mod cgroups;
pub mod counters;
mod derived;
mod identity;
pub mod selftest;
pub use budget::{BudgetFamily, CheckBudget};
pub use cgroups::{backend_line, cgroup_rows, CgroupRow, CheckBackend, CheckCgroups};
pub use derived::CheckDerived;
pub use identity::CheckIdentity;

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// Refines the permission problems of a resolution with what this
/// process holds ([`Privilege::diagnose`]): `probed` says whether opens
/// were tried at all (a live or simulated kernel).
pub fn diagnose(res: &mut Resolution, privilege: &Privilege, probed: bool) {
    let any_open = probed && res.metrics.iter().any(|m| m.status != Status::Unavailable);
    privilege.diagnose(res.problems_mut(), any_open);
}

/// Orders problems for an explanation: failures (things to fix) first,
/// permission errors first among them, expected absences last.
fn rank(p: &Problem) -> u8 {
    match (p.class(), p.is_permission()) {
        (Class::Failed, true) => 0,
        (Class::Failed, false) => 1,
        (Class::NotOnPlatform, _) => 2,
    }
}

/// The most useful explanations among `(metric, problem)` pairs: one
/// per kind of problem (at most `n`), each naming its metrics (at most
/// five) and saying what to do: `m1, m2: problem; what to do: ...`.
pub fn explain_first<'a>(
    problems: impl IntoIterator<Item = (&'a str, &'a Problem)>,
    n: usize,
) -> String {
    let mut v: Vec<(&str, &Problem)> = problems.into_iter().collect();
    v.sort_by_key(|(_, p)| rank(p));
    let mut groups: Vec<(Vec<&str>, &Problem)> = Vec::new();
    for (m, p) in v {
        // One group per kind of problem (not per code: running out of
        // descriptors altogether is told apart from one failed open).
        let kind = std::mem::discriminant(p);
        match groups
            .iter_mut()
            .find(|(_, g)| std::mem::discriminant(*g) == kind)
        {
            Some((ms, _)) if !ms.contains(&m) => ms.push(m),
            Some(_) => {}
            None => groups.push((vec![m], p)),
        }
    }
    groups
        .into_iter()
        .take(n)
        .map(|(ms, p)| {
            let more = match ms.len() {
                0..=5 => String::new(),
                k => format!(" and {} more", k - 5),
            };
            format!(
                "{}{more}: {}",
                ms[..ms.len().min(5)].join(", "),
                p.explain()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the "nothing to count" rule judges: a resolution before its
/// counters open (a reload, `check`) or an engine that opened them
/// (`serve`, `stat`).
#[derive(Debug, Clone, Copy)]
pub enum Counting<'a> {
    /// Resolved, not opened: counts nothing when no metric resolves.
    Resolved(&'a Resolution),
    /// Opened: counts nothing when not one counter opened.
    Opened(&'a crate::engine::Engine),
}

/// Why nothing would be counted: `serve` refuses to start, a reload
/// refuses the new config, `stat` refuses to run and `check` fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NothingToCount {
    /// The config has no metrics.
    NoMetrics,
    /// Not one metric can be counted on this host.
    Unavailable {
        /// Why, per metric.
        problems: Vec<(String, Problem)>,
        /// What this process holds ([`Privilege::summary`]), when nothing
        /// allows system-wide counting.
        privilege: Option<String>,
    },
}

impl std::fmt::Display for NothingToCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NothingToCount::NoMetrics => f.write_str("the config has no metrics: nothing to count"),
            NothingToCount::Unavailable {
                problems,
                privilege,
            } => {
                // What a user can fix first (permission errors), expected
                // absences last.
                let first = explain_first(problems.iter().map(|(m, p)| (m.as_str(), p)), 5);
                match privilege {
                    Some(held) => write!(
                        f,
                        "nothing can be counted on this host: {held}; the first problems: {first}"
                    ),
                    None => write!(f, "nothing can be counted on this host: {first}"),
                }
            }
        }
    }
}

impl std::error::Error for NothingToCount {}

/// The one "nothing to count" rule: `Some` when no metric is configured
/// or not one can be counted (see [`Counting`]), with why. `privilege`,
/// when known, is said when it allows no system-wide counting.
pub fn nothing_to_count(
    what: Counting<'_>,
    privilege: Option<&Privilege>,
) -> Option<NothingToCount> {
    let (res, counting) = match what {
        Counting::Resolved(r) => (r, !r.counts_nothing()),
        Counting::Opened(e) => (e.resolution(), e.counting()),
    };
    if res.metrics.is_empty() {
        return Some(NothingToCount::NoMetrics);
    }
    if counting {
        return None;
    }
    let problems = match what {
        Counting::Resolved(r) => r
            .metrics
            .iter()
            .filter_map(|m| m.problem().map(|p| (m.metric.clone(), p.clone())))
            .collect(),
        Counting::Opened(e) => e.problems(),
    };
    Some(NothingToCount::Unavailable {
        problems,
        privilege: privilege
            .filter(|p| p.grant().is_none())
            .map(Privilege::summary),
    })
}

/// One PMU instance in the `check` report.
#[derive(Debug, Serialize)]
pub struct CheckInstance {
    /// PMU name.
    pub pmu: String,
    /// `perf_event_attr.type`.
    #[serde(rename = "type")]
    pub type_: u32,
    /// `config`, hex.
    pub config: String,
    /// `config1`, hex.
    pub config1: String,
    /// `config2`, hex.
    pub config2: String,
    /// CPUs it is opened on.
    pub cpus: Vec<u32>,
    /// Multiplier to base units.
    pub scale: f64,
    /// Base unit.
    pub unit: String,
    /// The `perf_event_attr` exclude bits the spec's modifiers set
    /// (`instructions:u`: `exclude_kernel`, `exclude_hv`,
    /// `exclude_guest`); absent without modifiers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<&'static str>,
}

/// The names of the exclude bits set, as `perf_event_attr` names them.
fn exclude_names(x: crate::sys::abi::Exclude) -> Vec<&'static str> {
    [
        (x.user, "exclude_user"),
        (x.kernel, "exclude_kernel"),
        (x.hv, "exclude_hv"),
        (x.host, "exclude_host"),
        (x.guest, "exclude_guest"),
    ]
    .into_iter()
    .filter_map(|(on, n)| on.then_some(n))
    .collect()
}

/// One alternative tried.
#[derive(Debug, Serialize)]
pub struct CheckTried {
    /// The alternative.
    pub event: String,
    /// Why not (or `selected`).
    pub reason: String,
    /// The problem's code (the `reason` label of a `perf_event_available`
    /// series that is 0), `null` when selected.
    pub problem: Option<&'static str>,
    /// What to do about it, `null` when selected.
    pub what_to_do: Option<String>,
}

/// One metric in the `check` report.
#[derive(Debug, Serialize)]
pub struct CheckMetric {
    /// Metric name.
    pub metric: String,
    /// `resolved`, `fallback` or `unavailable`.
    pub status: String,
    /// For an unavailable metric: `not_on_platform` (expected absence)
    /// or `failed` (should be here); `null` when counted.
    pub class: Option<&'static str>,
    /// The winning event spec.
    pub event: Option<String>,
    /// Where it is counted.
    pub instances: Vec<CheckInstance>,
    /// Every alternative tried.
    pub tried: Vec<CheckTried>,
    /// Instances of the winning alternative that could not be opened.
    pub partial: Vec<String>,
    /// Its counter state after `check`'s collection (or why it is
    /// unavailable); `null` when nothing was collected.
    pub counter_state: Option<counters::CheckState>,
}

/// The `check` report: `{"cpu_identities": [...], "metrics": [...]}`.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    /// The CPU identity of each core PMU ([`CheckReport::with_identities`]).
    pub cpu_identities: Vec<CheckIdentity>,
    /// Every configured metric.
    pub metrics: Vec<CheckMetric>,
    /// Every derived metric, in evaluation order, with the alternative
    /// this host takes (absent without a `derived:` section).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub derived: Vec<CheckDerived>,
    /// Why `serve` would refuse this config on this host.
    #[serde(skip)]
    pub refusal: Option<NothingToCount>,
    /// Per core PMU, the general-purpose counters free and who holds the
    /// others (measured through the kernel; empty without one).
    pub counters: Vec<counters::CheckCounters>,
    /// The measurements `counters` shows (for the text).
    #[serde(skip)]
    pub budgets: Vec<crate::engine::PmuCounters>,
    /// The start-up self-test per core PMU (`--collector.self-test`;
    /// absent without it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub self_test: Vec<selftest::CheckSelfTest>,
    /// The verdicts `self_test` shows (for the text).
    #[serde(skip)]
    pub self_tests: Vec<crate::engine::selftest::SelfTest>,
    /// The cgroups a `cgroups:` section selects (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroups: Option<CheckCgroups>,
    /// The series the config exports here ([`CheckBudget`]; absent when
    /// nothing could count). JSON key `series_budget`, apart from the
    /// counter budget (`counters`).
    #[serde(rename = "series_budget", skip_serializing_if = "Option::is_none")]
    pub budget: Option<CheckBudget>,
}

fn check_metric(m: &ResolvedMetric) -> CheckMetric {
    CheckMetric {
        metric: m.metric.clone(),
        status: m.status.as_str().into(),
        class: m.class().map(Class::as_str),
        event: m.event.clone(),
        instances: m
            .instances
            .iter()
            .map(|mi| CheckInstance {
                pmu: mi.inst.pmu.clone(),
                type_: mi.inst.type_,
                config: hex(mi.inst.config[0]),
                config1: hex(mi.inst.config[1]),
                config2: hex(mi.inst.config[2]),
                cpus: mi.inst.cpus.clone(),
                scale: mi.inst.scale,
                unit: mi.inst.unit.clone(),
                exclude: exclude_names(mi.inst.exclude),
            })
            .collect(),
        tried: m
            .tried
            .iter()
            .map(|t| CheckTried {
                event: t.event.clone(),
                reason: t
                    .problem
                    .as_ref()
                    .map_or(SELECTED.into(), ToString::to_string),
                problem: t.problem.as_ref().map(Problem::code),
                what_to_do: t.problem.as_ref().map(Problem::what_to_do),
            })
            .collect(),
        partial: m.partial.iter().map(Problem::explain).collect(),
        counter_state: (m.status == Status::Unavailable).then(|| {
            counters::CheckState::of(&crate::problem::MetricStates::unavailable(
                &m.metric,
                m.problem().cloned(),
            ))
        }),
    }
}

impl CheckReport {
    /// Builds the report from a resolution.
    pub fn new(r: &Resolution) -> Self {
        CheckReport {
            cpu_identities: Vec::new(),
            metrics: r.metrics.iter().map(check_metric).collect(),
            derived: Vec::new(),
            refusal: nothing_to_count(Counting::Resolved(r), None),
            counters: Vec::new(),
            budgets: Vec::new(),
            self_test: Vec::new(),
            self_tests: Vec::new(),
            cgroups: None,
            budget: None,
        }
    }

    /// Adds the derived metrics as resolved on this host.
    pub fn with_derived(mut self, d: &crate::resolve::derived::DerivedResolution) -> Self {
        self.derived = CheckDerived::of(d);
        self
    }

    /// Adds the CPU identity of each core PMU of `table`.
    pub fn with_identities(mut self, table: &PmuTable) -> Self {
        self.cpu_identities = CheckIdentity::of(table);
        self
    }

    /// Adds the core PMUs' counter budget.
    pub fn with_counters(mut self, budgets: Vec<crate::engine::PmuCounters>) -> Self {
        self.counters = budgets.iter().map(counters::CheckCounters::of).collect();
        self.budgets = budgets;
        self
    }

    /// Adds the start-up self-test's verdicts.
    pub fn with_self_test(mut self, tests: Vec<crate::engine::selftest::SelfTest>) -> Self {
        self.self_test = tests.iter().map(selftest::CheckSelfTest::of).collect();
        self.self_tests = tests;
        self
    }

    /// Adds each metric's counter state after a collection (matched by
    /// name; a metric without one keeps its own).
    pub fn with_states(mut self, states: &[crate::problem::MetricStates]) -> Self {
        for m in &mut self.metrics {
            if let Some(st) = states.iter().find(|s| s.metric == m.metric) {
                m.counter_state = Some(counters::CheckState::of(st));
            }
        }
        self
    }

    /// Why `check` fails, or `None`: whenever `serve` would refuse the
    /// config, and with `strict` whenever any metric is unavailable.
    pub fn failure(&self, strict: bool) -> Option<String> {
        if let Some(r) = &self.refusal {
            return Some(format!("serve would refuse this config: {r}"));
        }
        let unavailable: Vec<&str> = self
            .metrics
            .iter()
            .filter(|m| m.status == Status::Unavailable.as_str())
            .map(|m| m.metric.as_str())
            .collect();
        if let Some(p) = self.cgroups.as_ref().and_then(|c| c.reason.as_ref()) {
            if strict {
                return Some(format!("--strict: {p}"));
            }
        }
        if strict && !unavailable.is_empty() {
            return Some(format!(
                "--strict: {} of {} metrics unavailable: {}",
                unavailable.len(),
                self.metrics.len(),
                unavailable.join(", ")
            ));
        }
        let underived: Vec<&str> = self
            .derived
            .iter()
            .filter(|d| d.status == Status::Unavailable.as_str())
            .map(|d| d.name.as_str())
            .collect();
        (strict && !underived.is_empty()).then(|| {
            format!(
                "--strict: {} of {} derived metrics unavailable: {}",
                underived.len(),
                self.derived.len(),
                underived.join(", ")
            )
        })
    }

    /// The process exit status: 0, or 1 when [`failure`](Self::failure).
    pub fn exit_status(&self, strict: bool) -> u8 {
        u8::from(self.failure(strict).is_some())
    }

    /// Human-readable text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let w = self
            .metrics
            .iter()
            .map(|m| m.metric.len())
            .max()
            .unwrap_or(6)
            .clamp(6, MAX_COLUMN);
        s.push_str(&identity::identity_text(&self.cpu_identities));
        let _ = writeln!(s, "{:w$}  {:11}  EVENT", "METRIC", "STATUS");
        for m in &self.metrics {
            let _ = writeln!(
                s,
                "{:w$}  {:11}  {}",
                escape(&m.metric),
                m.status,
                escape(match m.class {
                    Some("not_on_platform") => "- (not on this platform)",
                    Some(_) => "- (failed: should be countable here)",
                    None => m.event.as_deref().unwrap_or("-"),
                })
            );
            for i in &m.instances {
                let exclude = if i.exclude.is_empty() {
                    String::new()
                } else {
                    format!(" {}", i.exclude.join(" "))
                };
                let _ = writeln!(
                    s,
                    "{:w$}    {} type={} config={} config1={} config2={} cpus={} scale={} {}{exclude}",
                    "",
                    escape(&i.pmu),
                    i.type_,
                    i.config,
                    i.config1,
                    i.config2,
                    crate::pmu::format_cpu_list(&i.cpus),
                    i.scale,
                    escape(&i.unit)
                );
            }
            for t in m.tried.iter().filter(|t| t.problem.is_some()) {
                let _ = writeln!(
                    s,
                    "{:w$}    tried {}: {}",
                    "",
                    escape(&t.event),
                    escape(&t.reason)
                );
            }
            if m.class == Some(Class::Failed.as_str()) {
                // The first failure is what to fix.
                if let Some(t) = m.tried.iter().find(|t| {
                    t.problem
                        .is_some_and(|c| c != "not_on_platform" && c != "needs_hardware_pmu")
                }) {
                    let _ = writeln!(
                        s,
                        "{:w$}    what to do: {}",
                        "",
                        escape(t.what_to_do.as_deref().unwrap_or(""))
                    );
                }
            }
            for p in &m.partial {
                let _ = writeln!(s, "{:w$}    partly: {}", "", escape(p));
            }
            if let Some(st) = &m.counter_state {
                s.push_str(&st.text(w));
            }
        }
        s.push_str(&derived::text(&self.derived, w));
        s.push_str(&counters::text(&self.budgets));
        s.push_str(&selftest::text(&self.self_tests));
        // The series budget, then the summary (the last line without cgroups).
        if let Some(b) = &self.budget {
            s.push_str(&b.text());
        }
        let n = |st: &str| self.metrics.iter().filter(|m| m.status == st).count();
        let c = |cl: Class| {
            self.metrics
                .iter()
                .filter(|m| m.class == Some(cl.as_str()))
                .count()
        };
        let _ = writeln!(
            s,
            "{} metrics: {} resolved, {} fallback, {} unavailable ({} not on this platform, {} failed)",
            self.metrics.len(),
            n("resolved"),
            n("fallback"),
            n("unavailable"),
            c(Class::NotOnPlatform),
            c(Class::Failed),
        );
        if let Some(c) = &self.cgroups {
            s.push_str(&c.text());
        }
        s
    }
}

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
        let w = self
            .events
            .iter()
            .map(|e| e.name.len())
            .max()
            .unwrap_or(5)
            .clamp(5, MAX_COLUMN);
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
    use crate::problem::OpenFailure;

    fn absent(e: &str) -> Problem {
        Problem::NotOnPlatform {
            event: e.into(),
            detail: format!("no PMU matches `{e}` on this host"),
        }
    }

    fn fd(e: &str) -> Problem {
        Problem::FdLimit(OpenFailure {
            op: "open",
            event: e.into(),
            pmu: "software".into(),
            cpu: 0,
            errno: libc::EMFILE,
        })
    }

    #[test]
    fn explanations_put_what_to_fix_first_and_group_by_kind() {
        let (a, b, c) = (absent("amd_df"), fd("cpu-clock"), fd("task-clock"));
        let s = explain_first([("m_dram", &a), ("m_clock", &b), ("m_task", &c)], 5);
        let fds = s.find("m_clock, m_task: out of file descriptors").unwrap();
        let dram = s.find("m_dram: no PMU matches").unwrap();
        assert!(fds < dram, "{s}");
        assert_eq!(s.matches("raise RLIMIT_NOFILE").count(), 1, "{s}");
        let many: Vec<String> = (0..8).map(|i| format!("m{i}")).collect();
        let s = explain_first(many.iter().map(|m| (m.as_str(), &b)), 5);
        assert!(s.starts_with("m0, m1, m2, m3, m4 and 3 more: "), "{s}");
    }

    /// One rule, said one way, for `serve`, a reload, `stat` and `check`.
    #[test]
    fn nothing_to_count_is_one_rule_said_one_way() {
        let empty = Resolution {
            sets: Vec::new(),
            metrics: Vec::new(),
        };
        let n = nothing_to_count(Counting::Resolved(&empty), None);
        assert_eq!(n, Some(NothingToCount::NoMetrics));
        assert_eq!(
            NothingToCount::NoMetrics.to_string(),
            "the config has no metrics: nothing to count"
        );
        let hw = Problem::NeedsHardwarePmu {
            event: "cycles".into(),
        };
        let problems = vec![("c_total".to_string(), hw.clone())];
        let n = NothingToCount::Unavailable {
            problems: problems.clone(),
            privilege: None,
        };
        assert_eq!(
            n.to_string(),
            format!(
                "nothing can be counted on this host: c_total: {}",
                hw.explain()
            )
        );
        // What the process holds is said first when it allows nothing.
        let none = Privilege {
            euid: Some(65534),
            cap_eff: 0,
            paranoid: Some(2),
            kernel: Some((6, 8)),
            seccomp: Some(0),
        };
        let n = NothingToCount::Unavailable {
            problems,
            privilege: Some(none.summary()),
        };
        let s = n.to_string();
        assert!(
            s.starts_with(&format!(
                "nothing can be counted on this host: {}; the first problems: c_total: ",
                none.summary()
            )),
            "{s}"
        );
    }

    #[test]
    fn check_fails_when_serve_would_refuse_or_strictly_on_any_unavailable() {
        let empty = Resolution {
            sets: Vec::new(),
            metrics: Vec::new(),
        };
        let r = CheckReport::new(&empty);
        assert_eq!(r.exit_status(false), 1);
        assert!(r.failure(false).unwrap().contains("no metrics"));
        let metric = |name: &str, status: &str| CheckMetric {
            metric: name.into(),
            status: status.into(),
            class: None,
            event: None,
            instances: Vec::new(),
            tried: Vec::new(),
            partial: Vec::new(),
            counter_state: None,
        };
        let r = CheckReport {
            cpu_identities: Vec::new(),
            metrics: vec![
                metric("a_total", "resolved"),
                metric("b_total", "unavailable"),
            ],
            derived: Vec::new(),
            refusal: None,
            counters: Vec::new(),
            budgets: Vec::new(),
            self_test: Vec::new(),
            self_tests: Vec::new(),
            cgroups: None,
            budget: None,
        };
        assert_eq!((r.exit_status(false), r.exit_status(true)), (0, 1));
        assert!(r
            .failure(true)
            .unwrap()
            .contains("1 of 2 metrics unavailable: b_total"));
    }

    #[test]
    fn text_reports_escape_names_and_survive_any_width() {
        // Wider than a format width may be (65,535): no panic.
        let wide = "m".repeat(70_000);
        let r = CheckReport {
            cpu_identities: Vec::new(),
            metrics: vec![CheckMetric {
                metric: wide.clone(),
                status: "resolved".into(),
                class: None,
                event: Some("evil\x1b]52;c;eA==\x07".into()),
                instances: Vec::new(),
                tried: Vec::new(),
                partial: vec!["on \u{202e}cpu1".into()],
                counter_state: None,
            }],
            derived: Vec::new(),
            refusal: None,
            counters: Vec::new(),
            budgets: Vec::new(),
            self_test: Vec::new(),
            self_tests: Vec::new(),
            cgroups: None,
            budget: None,
        };
        let t = r.text();
        assert!(t.contains(&wide), "the name is shown whole");
        assert!(!t.contains(['\x1b', '\x07', '\u{202e}']), "{t:?}");
        assert!(t.contains("evil\\x1b]52;c;eA==\\x07"), "{t:?}");
        assert!(t.contains("on \\u{202e}cpu1"), "{t:?}");
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
