//! The series a config exports on a host, counted from its plan without
//! opening a counter (issue 29 item 5: `check`'s series budget).
//!
//! The plan is the engine's own ([`Engine::plan`](super::Engine)) on the
//! table's online CPUs: every planned member is taken as opened (the
//! resolution already probed what the kernel accepts), its groups cut to
//! the core PMUs' measured free counters as opening cuts them (`open.rs`).
//! What the first collection would then export, family by family:
//!
//! * each metric's exported series (one per CPU, core, socket or node, as
//!   its set's `per:` asks; uncore per instance), where some group of it
//!   runs;
//! * `perf_event_available`: one sample per metric, except a metric
//!   resolved for several PMUs and not counted on all of them (one per
//!   PMU);
//! * `perf_counter_states`: every state of each metric with a counter;
//! * `perf_counter_state` and `perf_counter_running_ratio`: the exported
//!   series that would not be counting: some group of it is larger than
//!   its PMU's free counters (never runs), or its CPU's groups on that
//!   PMU need more counters than are free (multiplexed: the kernel
//!   rotates them). Where the free counters are not known (not measured),
//!   nothing is predicted to multiplex; at run time a series that does
//!   adds its two series there;
//! * `perf_pmu_counters` and `perf_pmu_virtual` from the measured budget;
//! * the group-time and read-error families: one series per set and
//!   level (CPU, core, socket or node).

use super::{Engine, GroupKey, MemberPlan, SeriesKey};
use crate::perf::Kernel;
use crate::pmu::PmuTable;
use crate::problem::CounterState;
use crate::resolve::chain::{Resolution, Status};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The series of each family `serve` would export counting `resolution`
/// on `table`'s online CPUs, in scrape order (families without a series
/// left out), with the core PMUs' counter budget `budgets` (measured:
/// [`super::counters::measure`]; empty where not measured). Nothing is
/// opened: `kernel` is only held.
pub fn series_budget(
    kernel: Arc<dyn Kernel>,
    table: PmuTable,
    resolution: Resolution,
    budgets: &[super::PmuCounters],
) -> Vec<(String, usize)> {
    let mut e = Engine::unopened(kernel, table, resolution, None, false);
    e.counters.last = budgets.to_vec();
    e.count_series()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// One group as opening would make it: its key and members.
type Planned<'a> = (&'a GroupKey, Vec<MemberPlan>);

impl Engine {
    /// The groups of the plan as opened: each cut into groups that fit the
    /// PMU's free counters where they were measured (as `fit_to_counters`
    /// cuts them).
    fn planned_groups<'a>(
        &self,
        plan: &'a BTreeMap<GroupKey, Vec<MemberPlan>>,
    ) -> Vec<Planned<'a>> {
        let mut out = Vec::new();
        for (key, members) in plan {
            let chunks = self
                .counters
                .free(&key.pmu)
                .and_then(|free| super::plan::fit_chunks(&self.table, members, free));
            match chunks {
                Some(chunks) => out.extend(chunks.into_iter().map(|c| (key, c))),
                None => out.push((key, members.clone())),
            }
        }
        out
    }

    /// The state each planned group would be in: `never_ran` when larger
    /// than its PMU's free counters, `multiplexed` when its CPU's groups on
    /// that PMU that fit need more counters than are free (as the
    /// simulated PMU and, for general-purpose counters, the kernel
    /// schedule them), else `counting`.
    fn group_states(&self, groups: &[Planned<'_>]) -> Vec<CounterState> {
        let mut need: HashMap<(u32, &str), usize> = HashMap::new();
        for (key, members) in groups {
            if let Some(free) = self.counters.free(&key.pmu) {
                let n = super::plan::counters_needed(&self.table, members);
                if n <= free {
                    *need.entry((key.cpu, key.pmu.as_str())).or_insert(0) += n;
                }
            }
        }
        groups
            .iter()
            .map(|(key, members)| match self.counters.free(&key.pmu) {
                None => CounterState::Counting,
                Some(free) if super::plan::counters_needed(&self.table, members) > free => {
                    CounterState::NeverRan
                }
                Some(free)
                    if need
                        .get(&(key.cpu, key.pmu.as_str()))
                        .is_some_and(|&n| n > free) =>
                {
                    CounterState::Multiplexed
                }
                Some(_) => CounterState::Counting,
            })
            .collect()
    }

    /// Every family's series count, in scrape order (empty ones included).
    fn count_series(&self) -> Vec<(String, usize)> {
        let plan = self.plan();
        let groups = self.planned_groups(&plan);
        let states = self.group_states(&groups);
        // Exported series: the worst state of their groups; detail series
        // per metric; which (metric, PMU) pairs open; the time slots.
        let mut exported: BTreeMap<&SeriesKey, CounterState> = BTreeMap::new();
        let mut counted: BTreeSet<usize> = BTreeSet::new();
        let mut open: BTreeSet<(usize, &str)> = BTreeSet::new();
        let mut slots: BTreeSet<(usize, Option<(&'static str, u32)>)> = BTreeSet::new();
        for ((key, members), &state) in groups.iter().zip(&states) {
            for m in members {
                let w = exported.entry(&m.series).or_insert(state);
                *w = (*w).max(state);
                counted.insert(m.metric);
                open.insert((m.metric, m.attr.pmu.as_str()));
            }
            let at = super::plan::level_label(&self.table, self.per(key.set), key.cpu);
            slots.insert((key.set, at));
        }
        let mut out = Vec::new();
        // The metrics' families: series with data (some group ran).
        let mut per_metric = vec![0usize; self.resolution.metrics.len()];
        for (k, s) in &exported {
            if *s != CounterState::NeverRan {
                if let Some(n) = per_metric.get_mut(k.0) {
                    *n += 1;
                }
            }
        }
        for (m, n) in self.resolution.metrics.iter().zip(per_metric) {
            out.push((m.metric.clone(), n));
        }
        out.push((
            "perf_event_available".into(),
            self.availability_count(&open),
        ));
        out.push((
            "perf_counter_states".into(),
            counted.len() * CounterState::ALL.len(),
        ));
        let troubled = exported
            .values()
            .filter(|s| **s != CounterState::Counting)
            .count();
        out.push(("perf_counter_state".into(), troubled));
        out.push(("perf_counter_implausible_info".into(), 0));
        out.push(("perf_counter_running_ratio".into(), troubled));
        let budget = &self.counters.last;
        let kinds = budget
            .iter()
            .map(|b| {
                [b.free, b.total, b.free, b.others]
                    .iter()
                    .filter(|k| k.is_some())
                    .count()
            })
            .sum();
        out.push(("perf_pmu_counters".into(), kinds));
        out.push(("perf_pmu_virtual".into(), budget.len()));
        for f in [
            "perf_group_enabled_seconds_total",
            "perf_group_running_seconds_total",
            "perf_read_errors_total",
        ] {
            out.push((f.into(), slots.len()));
        }
        out
    }

    /// `perf_event_available`'s samples when the pairs `open` count (as
    /// `refresh_availability` and `available` make them).
    fn availability_count(&self, open: &BTreeSet<(usize, &str)>) -> usize {
        let mut available = 0;
        for (mi, m) in self.resolution.metrics.iter().enumerate() {
            if m.status == Status::Unavailable {
                available += 1;
                continue;
            }
            let pmus: BTreeSet<&str> = m.instances.iter().map(|i| i.inst.pmu.as_str()).collect();
            let shut = pmus.iter().any(|p| !open.contains(&(mi, *p)));
            if pmus.len() <= 1 || (m.partial.is_empty() && !shut) {
                available += 1;
            } else {
                available += pmus.len();
            }
        }
        available
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::engine::Fds;
    use crate::perf::sim::SimKernel;
    use std::path::Path;

    /// The series of one collection of an opened engine, per family with
    /// a series.
    fn collected(e: &mut Engine) -> Vec<(String, usize)> {
        e.collect()
            .families
            .into_iter()
            .filter(|f| !f.samples.is_empty())
            .map(|f| (f.name.to_string(), f.samples.len()))
            .collect()
    }

    /// The count from the plan equals an opened simulated engine's first
    /// collection on each fixture, with the usual counter budgets (as
    /// `check --simulate` measures them) and without any.
    #[test]
    fn the_count_from_the_plan_is_what_an_opened_engine_exports() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs");
        let mut fixtures: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        fixtures.sort();
        assert!(fixtures.len() >= 6, "{fixtures:?}");
        let cfg = Config::default_config();
        let mut troubled = 0;
        for f in &fixtures {
            let Ok(table) = PmuTable::discover(f) else {
                continue;
            };
            for usual in [false, true] {
                let k = Arc::new(SimKernel::with_manual_clock(table.clone()));
                if usual {
                    k.set_usual_counters(false);
                }
                let mut e = Engine::for_config(k.clone(), table.clone(), &cfg, Fds::Unbounded);
                k.advance(1_000_000_000);
                let real = collected(&mut e);
                let budgets = e.counter_budgets().to_vec();
                let counted =
                    series_budget(k.clone(), table.clone(), e.resolution().clone(), &budgets);
                assert_eq!(counted, real, "{} (usual counters: {usual})", f.display());
                troubled += counted
                    .iter()
                    .filter(|(n, _)| n == "perf_counter_state")
                    .map(|(_, c)| c)
                    .sum::<usize>();
            }
        }
        assert!(
            troubled > 0,
            "some fixture multiplexes on its usual counters"
        );
    }
}
