//! Derived metrics on one host: availability follows inputs.
//!
//! Each derived metric's alternatives (`expr:` as a list) are tried in
//! order, like an event fallback chain: the first whose inputs all have
//! a value here wins. An alternative is rejected with the reason of its
//! first input that has none:
//!
//! * an event metric the host cannot count: that metric's own reason
//!   (its alternatives' problems);
//! * another derived metric that is unavailable: that one's reason;
//! * a `#` literal the host gives no value ([`Problem::LiteralUnavailable`]).
//!
//! `has_event(..)` probes are never a reason: they are 0 where the event
//! is not counted. A derived metric with no alternative left is
//! unavailable with every alternative's reason.

use super::chain::{Resolution, Status, Tried};
use super::literals::HostLiterals;
use crate::config::derived::{DerivedTable, Formula, Source};
use crate::pmu::cpuid::CpuIdentity;
use crate::problem::{Class, Problem};
use std::collections::BTreeMap;

/// One derived metric as resolved on this host.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedDerived {
    /// Its name.
    pub name: String,
    /// `resolved` (first alternative), `fallback` or `unavailable`.
    pub status: Status,
    /// The index of the alternative taken (among
    /// [`crate::config::derived::Derived::formulas`]).
    pub chosen: Option<usize>,
    /// The expression taken, as written.
    pub expr: Option<String>,
    /// Every alternative tried, in order (`event` holds the expression).
    pub tried: Vec<Tried>,
}

impl ResolvedDerived {
    /// The reason of the first rejected alternative: the first failure
    /// (something to fix), then a missing hardware PMU (an alternative
    /// this CPU would take with one), before any other expected absence,
    /// as [`super::chain::ResolvedMetric::problem`] chooses.
    pub fn problem(&self) -> Option<&Problem> {
        let mut ps = self.tried.iter().filter_map(|t| t.problem.as_ref());
        let first = ps.clone().next();
        ps.clone()
            .find(|p| p.class() == Class::Failed)
            .or_else(|| ps.find(|p| matches!(p, Problem::NeedsHardwarePmu { .. })))
            .or(first)
    }

    /// The alternative evaluated on this host: the one taken, or for an
    /// unavailable one the one whose reason is [`Self::problem`].
    fn evaluated(&self) -> Option<usize> {
        if self.chosen.is_some() {
            return self.chosen;
        }
        let why = self.problem()?;
        self.tried
            .iter()
            .position(|t| t.problem.as_ref().is_some_and(|p| std::ptr::eq(p, why)))
    }

    /// For an unavailable one: not on this platform or failed.
    pub fn class(&self) -> Option<Class> {
        (self.status == Status::Unavailable)
            .then(|| self.problem().map_or(Class::Failed, Problem::class))
    }
}

/// Every derived metric of a config on one host, in evaluation order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DerivedResolution {
    /// In the table's evaluation order.
    pub metrics: Vec<ResolvedDerived>,
}

impl DerivedResolution {
    /// The one named `name`.
    pub fn get(&self, name: &str) -> Option<&ResolvedDerived> {
        self.metrics.iter().find(|d| d.name == name)
    }

    /// The table this host evaluates: each entry with the alternative it
    /// takes here. An unavailable one keeps the alternative whose reason
    /// is [`ResolvedDerived::problem`] (else its first), so that its
    /// evaluation names that alternative's missing input: on a VM without
    /// a PMU the one this CPU would take with a PMU, not another
    /// platform's tried before it.
    pub fn table(&self, table: &DerivedTable) -> DerivedTable {
        table.choose(&|n| self.get(n).and_then(ResolvedDerived::evaluated))
    }

    /// [`Self::table`] with the host's `#` literals folded in as numbers:
    /// what every consumer of this host's collections evaluates (`stat`,
    /// the live view, OTLP). A literal without a value here stays, and
    /// its evaluation says so.
    pub fn host_table(&self, table: &DerivedTable, literals: &HostLiterals) -> DerivedTable {
        let mut t = self.table(table);
        for d in &mut t.metrics {
            d.formula.expr = d.formula.expr.fold_literals(&|l| literals.get(l).ok());
        }
        t
    }
}

/// An input's reason with the input named (the reasons whose text is a
/// detail; the others name their event already).
fn naming_input(p: Problem, operand: &str) -> Problem {
    match p {
        Problem::NotOnPlatform { event, detail } => Problem::NotOnPlatform {
            detail: format!("input `{operand}` ({event}): {detail}"),
            event,
        },
        Problem::Config { event, detail } => Problem::Config {
            detail: format!("input `{operand}` ({event}): {detail}"),
            event,
        },
        p => p,
    }
}

/// Why `f` cannot be evaluated here, or `None` when every input it reads
/// (operands and literals) has a value. An alternative whose CPU guard
/// (`requires_cpu`) does not match this host's identity is another
/// CPU's: [`Problem::NoCpuEncoding`] (an unknown identity judges nothing:
/// the inputs, whose own guards say so, decide). Else
/// the first input without a value; but where that one only needs a
/// hardware PMU and a later input has no encoding for this host's CPU
/// (another platform's count, [`Problem::NoCpuEncoding`]), that one: a
/// PMU would not make the formula evaluable on this CPU (a VM without a
/// PMU would otherwise show Zen 4's shares as waiting for one, for the
/// shared counts they read first).
fn rejected(
    f: &Formula,
    events: &BTreeMap<&str, Option<Problem>>,
    done: &BTreeMap<String, Option<Problem>>,
    literals: &HostLiterals,
) -> Option<Problem> {
    if let (Some(req), CpuIdentity::Known(id)) = (&f.requires_cpu, literals.cpu()) {
        if !req.matches(id) {
            return Some(Problem::NoCpuEncoding {
                event: f.text.clone(),
                pmu: String::new(),
                identity: id.clone(),
                known: true,
            });
        }
    }
    let mut first: Option<Problem> = None;
    for i in &f.inputs {
        let why = match &i.source {
            // A metric the config does not count never has a value
            // (the config's table names counted ones only; a narrowed
            // config, `stat -e`, may not count them all).
            Source::Metric(m) => match events.get(m.as_str()) {
                Some(why) => why.clone(),
                None => Some(Problem::Config {
                    event: m.clone(),
                    detail: format!("`{m}` is not counted by this config"),
                }),
            },
            Source::Derived(d) => done.get(d).cloned().flatten(),
            Source::Duration => None,
        };
        if let Some(p) = why {
            let other_cpu = matches!(p, Problem::NoCpuEncoding { known: true, .. });
            let p = naming_input(p, &i.operand);
            match &first {
                None => first = Some(p),
                Some(Problem::NeedsHardwarePmu { .. }) if other_cpu => return Some(p),
                Some(_) => {}
            }
        }
    }
    if first.is_some() {
        return first;
    }
    f.expr.literals().into_iter().find_map(|l| {
        literals
            .get(l)
            .err()
            .map(|detail| Problem::LiteralUnavailable {
                literal: l.to_string(),
                detail,
            })
    })
}

/// Resolves every derived metric of `table` against the event metrics of
/// `res` and the host's `literals`.
pub fn resolve_derived(
    table: &DerivedTable,
    res: &Resolution,
    literals: &HostLiterals,
) -> DerivedResolution {
    // An unavailable event metric's reason; `None` for a counted one.
    let events: BTreeMap<&str, Option<Problem>> = res
        .metrics
        .iter()
        .map(|m| {
            let why = (m.status == Status::Unavailable).then(|| {
                m.problem()
                    .cloned()
                    .unwrap_or_else(|| Problem::NotOnPlatform {
                        event: m.metric.clone(),
                        detail: format!("`{}` is not counted here", m.metric),
                    })
            });
            (m.metric.as_str(), why)
        })
        .collect();
    let mut done: BTreeMap<String, Option<Problem>> = BTreeMap::new();
    let mut metrics = Vec::with_capacity(table.metrics.len());
    for d in &table.metrics {
        let mut tried = Vec::new();
        let mut chosen = None;
        for (idx, f) in d.formulas().enumerate() {
            let problem = rejected(f, &events, &done, literals);
            let ok = problem.is_none();
            tried.push(Tried {
                event: f.text.clone(),
                problem,
            });
            if ok {
                chosen = Some(idx);
                break;
            }
        }
        let status = match chosen {
            Some(0) => Status::Resolved,
            Some(_) => Status::Fallback,
            None => Status::Unavailable,
        };
        let r = ResolvedDerived {
            name: d.name.clone(),
            status,
            chosen,
            expr: chosen
                .and_then(|i| d.formulas().nth(i))
                .map(|f| f.text.clone()),
            tried,
        };
        let why = (status == Status::Unavailable).then(|| {
            r.problem()
                .cloned()
                .unwrap_or_else(|| Problem::NotOnPlatform {
                    event: d.name.clone(),
                    detail: format!("derived metric `{}` has no value here", d.name),
                })
        });
        done.insert(d.name.clone(), why);
        metrics.push(r);
    }
    DerivedResolution { metrics }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::resolve::chain::resolve_config;
    use crate::resolve::Context;

    /// Perf's two top-down level-1 formulas for "retiring": the
    /// perf-metrics events (Ice Lake and later: `topdown-retiring` over
    /// `slots`) and Skylake's (`UOPS_RETIRED.RETIRE_SLOTS` over 4 slots
    /// per cycle, halved per thread with SMT).
    const CFG: &str = r#"
sets:
  - name: td
    events:
      - metric: slots_total
        event: ["cpu_core/slots/", "cpu/slots/"]
      - metric: retiring_slots_total
        event: ["cpu_core/topdown-retiring/", "cpu/topdown-retiring/"]
      - metric: uops_retired_slots_total
        event: ["cpu/event=0xc2,umask=0x02/"]
      - metric: cycles_total
        event: [cycles]
derived:
  - name: retiring
    expr:
      - retiring_slots_total / slots_total
      - "uops_retired_slots_total / (4 * cycles_total / (2 if #smt_on else 1))"
  - name: retiring_pct
    expr: 100 * retiring
  - name: per_slot
    expr: ["retiring / #slots", "retiring_slots_total / #slots"]
"#;

    fn on(fixture: &str) -> DerivedResolution {
        let table = crate::pmu::fixtures::table(fixture);
        let cfg = Config::parse(CFG, "t.yaml").unwrap();
        let res = resolve_config(&cfg, &table, &Context::default(), None);
        resolve_derived(&cfg.derived, &res, &HostLiterals::discover(&table))
    }

    #[test]
    fn perf_metrics_events_on_the_hybrid_skylake_formula_on_skx() {
        let h = on("intel-hybrid");
        let r = h.get("retiring").unwrap();
        assert_eq!((r.status, r.chosen), (Status::Resolved, Some(0)));
        assert_eq!(r.tried.len(), 1);
        assert_eq!(h.get("retiring_pct").unwrap().status, Status::Resolved);

        let s = on("intel-skx");
        let r = s.get("retiring").unwrap();
        assert_eq!((r.status, r.chosen), (Status::Fallback, Some(1)));
        assert_eq!(
            r.expr.as_deref(),
            Some("uops_retired_slots_total / (4 * cycles_total / (2 if #smt_on else 1))")
        );
        // The perf-metrics alternative is rejected with its input's reason.
        let why = r.tried[0].problem.as_ref().unwrap();
        assert_eq!(why.code(), "not_on_platform");
        assert_eq!(why.event(), "cpu_core/topdown-retiring/");
        // A derived input that resolved (through its fallback) counts.
        assert_eq!(s.get("retiring_pct").unwrap().status, Status::Resolved);
    }

    #[test]
    fn a_missing_literal_makes_the_metric_unavailable_with_its_name() {
        for fixture in ["intel-skx", "intel-hybrid"] {
            let r = on(fixture);
            let p = r.get("per_slot").unwrap();
            assert_eq!(p.status, Status::Unavailable, "{fixture}");
            assert_eq!(p.tried.len(), 2);
            let why = p.problem().unwrap();
            assert_eq!(why.code(), "literal_unavailable");
            assert!(
                why.to_string()
                    .starts_with("the literal `#slots` has no value on this host: the core PMU"),
                "{why}"
            );
            assert_eq!(p.class(), Some(Class::NotOnPlatform));
        }
    }

    #[test]
    fn unavailable_inputs_make_derived_ones_unavailable_with_their_reasons() {
        // Neoverse N1: no `cpu`/`cpu_core` PMU, so no slots, topdown or
        // raw Intel event: `retiring` has no alternative, and
        // `retiring_pct` carries its reason.
        let n1 = on("arm-neoverse-n1");
        let r = n1.get("retiring").unwrap();
        assert_eq!(r.status, Status::Unavailable);
        let pct = n1.get("retiring_pct").unwrap();
        assert_eq!(pct.status, Status::Unavailable);
        let (inner, outer) = (r.problem().unwrap(), pct.problem().unwrap());
        assert_eq!(outer.code(), inner.code());
        assert_eq!(
            outer.to_string(),
            format!("input `retiring` ({}): {inner}", inner.event())
        );
        // The table this host evaluates keeps the first alternatives.
        let cfg = Config::parse(CFG, "t.yaml").unwrap();
        let skx = on("intel-skx").table(&cfg.derived);
        assert!(skx
            .get("retiring")
            .unwrap()
            .formula
            .text
            .starts_with("uops_retired"));
        assert!(skx.metrics.iter().all(|d| d.fallbacks.is_empty()));
    }
}
