//! Carry-over: an engine's accumulated counts as plain data, continued by
//! the engine of a reloaded config for every metric that counts exactly
//! the same events, with their start times, so unchanged counters neither
//! reset nor claim a new start.
//!
//! Grace period: the totals of metrics (and sets' group times) that a
//! reload removes are not thrown away but parked in the new engine until
//! the next reload, which continues them if the metric comes back
//! counting the same events. So a bad-then-fixed config (a set deleted by
//! mistake, then restored) does not reset those counters nor give them a
//! new start time. Parked totals are not exported; a reload that does not
//! bring them back drops them (they are kept one reload, no longer, so
//! repeated reloads cannot grow memory).

use super::Engine;
use crate::resolve::chain::{ResolvedMetric, Status};
use std::collections::{HashMap, HashSet};

/// An engine's accumulated counts as plain data, taken before a config
/// reload replaces it ([`Engine::totals`]) and continued by the new engine
/// for every metric that counts exactly the same events
/// ([`Engine::carry_over`]), so unchanged counters never reset.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    metrics: Vec<ResolvedMetric>,
    series: Vec<SeriesTotal>,
    /// The group-time and read-error series, by set name and CPU.
    times: Vec<(TimeKey, TimeTotal)>,
    /// Every CPU the engine saw online: one offline during the reload is
    /// still watched for its return.
    known_cpus: Vec<u32>,
    /// Where the totals an earlier reload parked begin (in `metrics`,
    /// in `times`): a carry-over continues them but does not park them
    /// again.
    parked_from: Option<(usize, usize)>,
}

/// One series' total: its key (with the index into `Totals::metrics`).
#[derive(Debug, Clone)]
struct SeriesTotal {
    key: super::SeriesKey,
    value: f64,
    has_data: bool,
    start_ns: u64,
}

/// A group-time series by set name and level label (`("cpu", 3)`,
/// `("core", 2)`, `("socket", 0)`; `None`: summed over the node).
type TimeKey = (String, super::times::At);

#[derive(Debug, Clone, Copy)]
struct TimeTotal {
    enabled: f64,
    running: f64,
    has_times: bool,
    errors: u64,
    start_ns: u64,
}

/// The totals of metrics (and sets' group times) the last reload removed,
/// parked in the new engine for the next reload: the grace period.
///
/// Invariants (tested below):
/// * It holds only what the engine before the reload counted itself and
///   the reload did not continue; what that engine had parked in turn and
///   this reload did not bring back is dropped. So totals are parked one
///   reload, no longer, and repeated reloads cannot grow it: it is
///   bounded by the one config before.
/// * Every metric it holds has a parked series: [`Parked::metrics`] names
///   nothing without totals to continue.
/// * [`Engine::totals`] appends it after the engine's own totals, marking
///   where it begins, so the next carry-over continues a parked metric
///   like any other and does not park it again.
/// * It is never exported.
#[derive(Debug, Clone, Default)]
pub(super) struct Parked {
    totals: Totals,
}

impl Parked {
    /// `own` (an engine's totals) followed by these.
    fn after(&self, own: Totals) -> Totals {
        own.with_parked(&self.totals)
    }

    /// The names of the metrics parked, in order.
    fn metrics(&self) -> impl Iterator<Item = &str> {
        self.totals.metrics.iter().map(|m| m.metric.as_str())
    }
}

/// A [`Parked`] being filled by a carry-over of `old`'s totals: it takes
/// what is not continued, unless `old`'s engine had parked it itself.
struct Parking {
    totals: Totals,
    /// Where `old`'s parked part begins, in its metrics and its times.
    fresh_metrics: usize,
    fresh_times: usize,
}

impl Parking {
    /// For what a carry-over of `old` does not continue.
    fn of(old: &Totals) -> Self {
        let (fresh_metrics, fresh_times) = old
            .parked_from
            .unwrap_or((old.metrics.len(), old.times.len()));
        Parking {
            totals: Totals {
                metrics: old.metrics.clone(),
                ..Totals::default()
            },
            fresh_metrics,
            fresh_times,
        }
    }

    /// A series not continued.
    fn series(&mut self, s: SeriesTotal) {
        if s.key.0 < self.fresh_metrics {
            self.totals.series.push(s);
        }
    }

    /// The `i`th group-time series of `old`, not continued.
    fn times(&mut self, i: usize, key: TimeKey, t: TimeTotal) {
        if i < self.fresh_times {
            self.totals.times.push((key, t));
        }
    }

    /// What is parked: the metrics without a parked series left out.
    fn done(self) -> Parked {
        Parked {
            totals: self.totals.without_unused_metrics(),
        }
    }
}

/// Whether two resolutions of a metric count the same thing the same way
/// (name, winning encodings, scale, kind); the CPUs may differ.
fn same_counting(a: &ResolvedMetric, b: &ResolvedMetric) -> bool {
    #[cfg(test)]
    tests::COMPARISONS.with(|c| c.set(c.get() + 1));
    a.metric == b.metric
        && a.status != Status::Unavailable
        && b.status != Status::Unavailable
        && a.gauge == b.gauge
        && a.event == b.event
        && a.instances.len() == b.instances.len()
        && a.instances.iter().zip(&b.instances).all(|(x, y)| {
            x.spec == y.spec
                && x.inst.pmu == y.inst.pmu
                && x.inst.type_ == y.inst.type_
                && x.inst.config == y.inst.config
                && x.inst.exclude == y.inst.exclude
                && x.inst.scale == y.inst.scale
                && x.inst.uncore == y.inst.uncore
                && x.inst.snapshot == y.inst.snapshot
        })
}

/// The earlier of two start times, 0 meaning unknown.
fn earliest(a: u64, b: u64) -> u64 {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (a, b) => a.min(b),
    }
}

impl Engine {
    /// The accumulated counts, to continue in a reloaded engine. Collect
    /// first so they are current.
    pub fn totals(&self) -> Totals {
        let set_name = |i: usize| {
            self.resolution
                .sets
                .get(i)
                .map_or_else(String::new, |s| s.name.clone())
        };
        let own = Totals {
            metrics: self.resolution.metrics.clone(),
            series: self
                .series
                .keyed()
                .map(|(key, st)| SeriesTotal {
                    key,
                    value: st.value,
                    has_data: st.has_data,
                    start_ns: st.start_ns,
                })
                .collect(),
            times: self
                .times
                .series()
                .iter()
                .map(|t| {
                    (
                        (set_name(t.set), t.at),
                        TimeTotal {
                            enabled: t.enabled,
                            running: t.running,
                            has_times: t.has_times,
                            errors: t.errors,
                            start_ns: t.start_ns,
                        },
                    )
                })
                .collect(),
            known_cpus: self.cpus.known().collect(),
            parked_from: None,
        };
        self.parked.after(own)
    }

    /// Continues `old`'s counters where this engine counts the same metric
    /// the same way: their series keep their totals and start times instead
    /// of restarting at zero. The group-time and read-error counters
    /// continue by set name, for every CPU, online or not (a CPU offline
    /// during the reload keeps its totals for its return, and is watched
    /// for it as before). What is not continued is parked for the next
    /// reload ([`Engine::parked_metrics`]). Returns the names of the
    /// metrics continued.
    pub fn carry_over(&mut self, old: Totals) -> Vec<String> {
        // Each old metric is compared with the new ones of its name only
        // (the first that counts the same way wins): linear in the
        // metrics, not their product (issue 28: 10,000 sets took 108 s).
        let map: Vec<Option<usize>> = {
            let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
            for (ni, nm) in self.resolution.metrics.iter().enumerate() {
                by_name.entry(nm.metric.as_str()).or_default().push(ni);
            }
            old.metrics
                .iter()
                .map(|om| {
                    by_name.get(om.metric.as_str()).and_then(|c| {
                        c.iter()
                            .copied()
                            .find(|&ni| same_counting(om, &self.resolution.metrics[ni]))
                    })
                })
                .collect()
        };
        let counting = self.counting_sets();
        let mut parking = Parking::of(&old);
        for s in old.series {
            let Some(ni) = map.get(s.key.0).copied().flatten() else {
                parking.series(s);
                continue;
            };
            let labels = s.key.1;
            let gauge = self.resolution.metrics[ni].gauge;
            let idx = self.series.of(&(ni, labels));
            let st = &mut self.series[idx];
            if gauge {
                if !st.has_data {
                    st.value = s.value;
                }
            } else {
                st.value += s.value;
                st.start_ns = earliest(st.start_ns, s.start_ns);
            }
            st.has_data |= s.has_data;
        }
        for (i, ((set, at), t)) in old.times.into_iter().enumerate() {
            let Some(&si) = counting.get(&set) else {
                parking.times(i, (set, at), t);
                continue;
            };
            let level = super::plan::level_label(&self.table, self.per(si), 0).map(|a| a.0);
            if at.map(|a| a.0) != level {
                // The set changed level (`per:`) between the engines.
                continue;
            }
            let x = self.times.series_of(&self.resolution, si, at);
            let Some(ts) = self.times.series_mut(x) else {
                continue;
            };
            ts.enabled += t.enabled;
            ts.running += t.running;
            ts.has_times |= t.has_times;
            ts.errors += t.errors;
            ts.start_ns = earliest(ts.start_ns, t.start_ns);
        }
        self.cpus.remember(old.known_cpus);
        self.parked = parking.done();
        self.refresh();
        map.iter()
            .flatten()
            .map(|&ni| self.resolution.metrics[ni].metric.clone())
            .collect()
    }

    /// The metrics whose totals are parked by the last reload (removed or
    /// changed by it), continued if the next reload brings them back.
    pub fn parked_metrics(&self) -> Vec<String> {
        self.parked.metrics().map(str::to_string).collect()
    }

    /// The sets with a metric that can be counted, by name: their index
    /// (the first of the name).
    fn counting_sets(&self) -> HashMap<String, usize> {
        let counted: HashSet<&str> = self
            .resolution
            .metrics
            .iter()
            .filter(|m| m.status != Status::Unavailable)
            .map(|m| m.set.as_str())
            .collect();
        let mut out = HashMap::new();
        for (si, s) in self.resolution.sets.iter().enumerate() {
            if counted.contains(s.name.as_str()) {
                out.entry(s.name.clone()).or_insert(si);
            }
        }
        out
    }
}

impl Totals {
    /// These totals and, for what they do not hold, the totals `parked`
    /// by the last reload: a metric parked then is found again by the next
    /// carry-over like any other.
    fn with_parked(mut self, parked: &Totals) -> Totals {
        let offset = self.metrics.len();
        self.parked_from = Some((offset, self.times.len()));
        self.metrics.extend(parked.metrics.iter().cloned());
        self.series
            .extend(parked.series.iter().map(|s| SeriesTotal {
                key: (s.key.0 + offset, s.key.1.clone()),
                ..s.clone()
            }));
        // A set parked last time is not counted now (else it would have
        // continued), so its keys cannot collide; checked all the same.
        let mut have: HashSet<TimeKey> = self.times.iter().map(|(k, _)| k.clone()).collect();
        for (key, t) in &parked.times {
            if have.insert(key.clone()) {
                self.times.push((key.clone(), *t));
            }
        }
        self
    }

    /// Keeps only the metrics some parked series refers to (renumbered).
    fn without_unused_metrics(mut self) -> Totals {
        let mut used: Vec<Option<usize>> = vec![None; self.metrics.len()];
        let mut metrics = Vec::new();
        let old = std::mem::take(&mut self.metrics);
        self.series.retain_mut(|s| {
            let (Some(slot), Some(m)) = (used.get_mut(s.key.0), old.get(s.key.0)) else {
                return false;
            };
            s.key.0 = *slot.get_or_insert_with(|| {
                metrics.push(m.clone());
                metrics.len() - 1
            });
            true
        });
        self.metrics = metrics;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// [`same_counting`] calls on this thread.
        pub(super) static COMPARISONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// Issue 28 item 11: a reload of N sets compared every old metric with
    /// every new one (N squared: 10,000 sets took 108 s, start-up 1 s).
    /// Each old metric is now compared with its namesakes only: N
    /// comparisons, and every metric continues.
    #[test]
    fn carrying_over_n_sets_compares_each_metric_with_its_namesake_only() {
        use crate::config::Config;
        use crate::engine::Fds;
        use crate::perf::sim::SimKernel;
        use std::sync::Arc;
        const N: usize = 500;
        let mut yaml = String::from("sets:\n");
        for i in 0..N {
            yaml.push_str(&format!(
                "  - name: s{i}\n    events:\n      - metric: perf_s{i}_clock_seconds_total\n        event: cpu-clock\n"
            ));
        }
        let cfg = Config::parse(&yaml, "n.yaml").unwrap();
        let t = crate::pmu::fixtures::table("vm-no-pmu");
        let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
        let mut old = Engine::for_config(k.clone(), t.clone(), &cfg, Fds::Unbounded);
        old.collect();
        let totals = old.totals();
        drop(old);
        let mut new = Engine::for_config(k, t, &cfg, Fds::Unbounded);
        COMPARISONS.with(|c| c.set(0));
        let continued = new.carry_over(totals);
        assert_eq!(continued.len(), N);
        assert_eq!(COMPARISONS.with(std::cell::Cell::get), N as u64);
    }

    fn metric(name: &str) -> ResolvedMetric {
        ResolvedMetric {
            set: "s".into(),
            metric: name.into(),
            help: String::new(),
            status: Status::Resolved,
            event: None,
            instances: Vec::new(),
            tried: Vec::new(),
            gauge: false,
            unit: String::new(),
            partial: Vec::new(),
        }
    }

    fn series(metric: usize, value: f64) -> SeriesTotal {
        SeriesTotal {
            key: (metric, vec![("cpu", "0".into())]),
            value,
            has_data: true,
            start_ns: 1,
        }
    }

    fn time(errors: u64) -> TimeTotal {
        TimeTotal {
            enabled: 1.0,
            running: 1.0,
            has_times: true,
            errors,
            start_ns: 1,
        }
    }

    fn names(p: &Parked) -> Vec<&str> {
        p.metrics().collect()
    }

    /// Parked one reload, no longer: of totals whose last part an earlier
    /// reload parked, only the engine's own part is parked again.
    #[test]
    fn parking_keeps_what_the_engine_before_counted_itself_only() {
        let old = Totals {
            metrics: vec![metric("own"), metric("parked_before")],
            series: vec![series(0, 1.0), series(1, 2.0)],
            times: vec![
                (("own".into(), None), time(1)),
                (("gone".into(), None), time(2)),
            ],
            known_cpus: vec![0],
            parked_from: Some((1, 1)),
        };
        let mut p = Parking::of(&old);
        for s in old.series.clone() {
            p.series(s);
        }
        for (i, (k, t)) in old.times.iter().enumerate() {
            p.times(i, k.clone(), *t);
        }
        let parked = p.done();
        assert_eq!(names(&parked), ["own"]);
        assert_eq!(parked.totals.series.len(), 1);
        assert_eq!(parked.totals.times.len(), 1);
        assert_eq!(parked.totals.times[0].0 .0, "own");
        // Without an earlier parking, everything not continued is parked.
        let fresh = Totals {
            parked_from: None,
            ..old.clone()
        };
        let mut p = Parking::of(&fresh);
        for s in fresh.series.clone() {
            p.series(s);
        }
        assert_eq!(names(&p.done()), ["own", "parked_before"]);
    }

    /// Every metric parked has a series to continue, renumbered.
    #[test]
    fn a_parked_metric_without_series_is_dropped() {
        let old = Totals {
            metrics: vec![metric("a"), metric("b"), metric("c")],
            ..Totals::default()
        };
        let mut p = Parking::of(&old);
        p.series(series(2, 5.0));
        let parked = p.done();
        assert_eq!(names(&parked), ["c"]);
        assert_eq!(parked.totals.series[0].key.0, 0);
        assert!(names(&Parked::default()).is_empty());
    }

    /// Appended after an engine's own totals, marking where it begins.
    #[test]
    fn parked_totals_follow_the_engines_own() {
        let parked = Parked {
            totals: Totals {
                metrics: vec![metric("p")],
                series: vec![series(0, 3.0)],
                times: vec![(("gone".into(), None), time(0))],
                ..Totals::default()
            },
        };
        let own = Totals {
            metrics: vec![metric("x"), metric("y")],
            series: vec![series(1, 1.0)],
            times: vec![(("s".into(), None), time(0))],
            ..Totals::default()
        };
        let all = parked.after(own);
        let m: Vec<&str> = all.metrics.iter().map(|m| m.metric.as_str()).collect();
        assert_eq!(m, ["x", "y", "p"]);
        assert_eq!(all.parked_from, Some((2, 1)));
        assert_eq!(
            all.series.last().map(|s| (s.key.0, s.value)),
            Some((2, 3.0))
        );
        assert_eq!(all.times.len(), 2);
    }

    /// Through engines: a set removed by a reload is parked, continued by
    /// the next reload that brings it back, dropped by one that does not.
    #[test]
    fn a_removed_set_is_parked_for_one_reload() {
        use crate::config::Config;
        use crate::engine::Fds;
        use crate::perf::sim::SimKernel;
        use std::sync::Arc;
        let sets = |n: usize| {
            let mut yaml = String::from("sets:\n");
            for i in 0..n {
                yaml.push_str(&format!(
                    "  - name: s{i}\n    events:\n      - metric: perf_s{i}_clock_seconds_total\n        event: cpu-clock\n"
                ));
            }
            Config::parse(&yaml, "n.yaml").unwrap()
        };
        let t = crate::pmu::fixtures::table("vm-no-pmu");
        let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
        let engine = |n: usize| Engine::for_config(k.clone(), t.clone(), &sets(n), Fds::Unbounded);
        let mut a = engine(2);
        a.collect();
        k.advance(1_000_000_000);
        a.collect();
        let before = a.totals();
        drop(a);
        let mut b = engine(1);
        assert_eq!(b.carry_over(before), ["perf_s0_clock_seconds_total"]);
        assert_eq!(b.parked_metrics(), ["perf_s1_clock_seconds_total"]);
        let after_b = b.totals();
        drop(b);
        let mut back = engine(2);
        let continued = back.carry_over(after_b.clone());
        assert!(
            continued.contains(&"perf_s1_clock_seconds_total".to_string()),
            "{continued:?}"
        );
        assert!(back.parked_metrics().is_empty());
        drop(back);
        let mut still_gone = engine(1);
        still_gone.carry_over(after_b);
        let after = still_gone.totals();
        drop(still_gone);
        let mut later = engine(2);
        assert_eq!(later.carry_over(after), ["perf_s0_clock_seconds_total"]);
    }

    #[test]
    fn the_earliest_known_start_wins() {
        assert_eq!(earliest(0, 0), 0);
        assert_eq!(earliest(0, 5), 5);
        assert_eq!(earliest(7, 0), 7);
        assert_eq!(earliest(7, 5), 5);
        assert_eq!(earliest(3, 5), 3);
    }
}
