//! The `check` report: how each configured metric resolves on this host,
//! with what `check` adds to it (derived metrics, CPU identities, counter
//! budget, self-test, cgroups, series budget), and when `check` fails.

use super::refusal::{nothing_to_count, Counting, NothingToCount};
use super::tried::{CheckTried, Row};
use super::{
    column, counters, derived, hex, identity, selftest, CheckBudget, CheckCgroups,
    CheckDefaultTable, CheckDerived, CheckIdentity,
};
use crate::pmu::PmuTable;
use crate::problem::{Class, Problem};
use crate::resolve::chain::{Resolution, ResolvedMetric, Status};
use crate::terminal::escape;
use serde::Serialize;
use std::fmt::Write as _;

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
    /// Without a `derived:` section: the default table, and the entries
    /// left out because the config does not count their inputs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derived_default: Option<CheckDefaultTable>,
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
        tried: m.tried.iter().map(CheckTried::of).collect(),
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
            derived_default: None,
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

    /// Adds what became of the default table when the config has no
    /// `derived:` section (`implicit`: the entries left out;
    /// [`crate::config::derived::DerivedTable::implicit`]).
    pub fn with_default_derived(
        mut self,
        implicit: Option<&[crate::config::derived::LeftOut]>,
    ) -> Self {
        self.derived_default = implicit.map(|l| CheckDefaultTable::of(self.derived.len(), l));
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
        let w = column(self.metrics.iter().map(|m| m.metric.as_str()), "METRIC");
        s.push_str(&identity::identity_text(&self.cpu_identities));
        let _ = writeln!(s, "{:w$}  {:11}  EVENT", "METRIC", "STATUS");
        for m in &self.metrics {
            let row = Row {
                name: &m.metric,
                status: &m.status,
                class: m.class,
                taken: m.event.as_deref(),
                should_be: "countable",
                tried: &m.tried,
            };
            row.head(&mut s, w);
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
            row.rejected(&mut s, w);
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
        if let Some(d) = &self.derived_default {
            s.push_str(&d.text());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn no_metrics() -> Resolution {
        Resolution {
            sets: Vec::new(),
            metrics: Vec::new(),
        }
    }

    /// A metric counted by `event` (none: not counted).
    fn metric(name: &str, status: &str, event: Option<&str>) -> CheckMetric {
        CheckMetric {
            metric: name.into(),
            status: status.into(),
            class: None,
            event: event.map(Into::into),
            instances: Vec::new(),
            tried: Vec::new(),
            partial: Vec::new(),
            counter_state: None,
        }
    }

    /// The report of `metrics` alone, which `serve` would not refuse.
    fn report(metrics: Vec<CheckMetric>) -> CheckReport {
        CheckReport {
            metrics,
            refusal: None,
            ..CheckReport::new(&no_metrics())
        }
    }

    #[test]
    fn check_fails_when_serve_would_refuse_or_strictly_on_any_unavailable() {
        let r = CheckReport::new(&no_metrics());
        assert_eq!(r.exit_status(false), 1);
        assert!(r.failure(false).unwrap().contains("no metrics"));
        let r = report(vec![
            metric("a_total", "resolved", None),
            metric("b_total", "unavailable", None),
        ]);
        assert_eq!((r.exit_status(false), r.exit_status(true)), (0, 1));
        assert!(r
            .failure(true)
            .unwrap()
            .contains("1 of 2 metrics unavailable: b_total"));
    }

    #[test]
    fn text_escapes_names_and_survives_any_width() {
        // Wider than a format width may be (65,535): no panic.
        let wide = "m".repeat(70_000);
        let r = report(vec![CheckMetric {
            partial: vec!["on \u{202e}cpu1".into()],
            ..metric(&wide, "resolved", Some("evil\x1b]52;c;eA==\x07"))
        }]);
        let t = r.text();
        assert!(t.contains(&wide), "the name is shown whole");
        assert!(!t.contains(['\x1b', '\x07', '\u{202e}']), "{t:?}");
        assert!(t.contains("evil\\x1b]52;c;eA==\\x07"), "{t:?}");
        assert!(t.contains("on \\u{202e}cpu1"), "{t:?}");
    }
}
