//! Carry-over: an engine's accumulated counts as plain data, continued by
//! the engine of a reloaded config for every metric that counts exactly
//! the same events, with their start times, so unchanged counters neither
//! reset nor claim a new start.

use super::Engine;
use crate::resolve::chain::{ResolvedMetric, Status};

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
}

/// One series' total: its key (with the index into `Totals::metrics`).
#[derive(Debug, Clone)]
struct SeriesTotal {
    key: super::SeriesKey,
    value: f64,
    has_data: bool,
    start_ns: u64,
}

/// A group-time series by set name and CPU (`None`: summed over CPUs).
type TimeKey = (String, Option<u32>);

#[derive(Debug, Clone, Copy)]
struct TimeTotal {
    enabled: f64,
    running: f64,
    has_times: bool,
    errors: u64,
    start_ns: u64,
}

/// Whether two resolutions of a metric count the same thing the same way
/// (name, winning encodings, scale, kind); the CPUs may differ.
fn same_counting(a: &ResolvedMetric, b: &ResolvedMetric) -> bool {
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
        Totals {
            metrics: self.resolution.metrics.clone(),
            series: self
                .series_index
                .iter()
                .filter_map(|(key, &i)| {
                    self.series.get(i).map(|st| SeriesTotal {
                        key: key.clone(),
                        value: st.value,
                        has_data: st.has_data,
                        start_ns: st.start_ns,
                    })
                })
                .collect(),
            times: self
                .time_series
                .iter()
                .map(|t| {
                    (
                        (set_name(t.set), t.cpu),
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
        }
    }

    /// Continues `old`'s counters where this engine counts the same metric
    /// the same way: their series keep their totals and start times instead
    /// of restarting at zero. The group-time and read-error counters
    /// continue by set name, for every CPU, online or not (a CPU offline
    /// during the reload keeps its totals for its return). Returns the
    /// names of the metrics continued.
    pub fn carry_over(&mut self, old: Totals) -> Vec<String> {
        let map: Vec<Option<usize>> = old
            .metrics
            .iter()
            .map(|om| {
                self.resolution
                    .metrics
                    .iter()
                    .position(|nm| same_counting(om, nm))
            })
            .collect();
        for s in old.series {
            let (oi, labels) = s.key;
            let Some(ni) = map.get(oi).copied().flatten() else {
                continue;
            };
            let gauge = self.resolution.metrics[ni].gauge;
            let idx = self.series_of(&(ni, labels));
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
        for ((set, cpu), t) in old.times {
            let Some(si) = self.counting_set(&set) else {
                continue;
            };
            if cpu.is_some() != self.per_cpu(si) {
                // The set changed between per-CPU and summed series.
                continue;
            }
            let x = self.time_series_of(si, cpu);
            let ts = &mut self.time_series[x];
            ts.enabled += t.enabled;
            ts.running += t.running;
            ts.has_times |= t.has_times;
            ts.errors += t.errors;
            ts.start_ns = earliest(ts.start_ns, t.start_ns);
        }
        self.refresh();
        map.iter()
            .flatten()
            .map(|&ni| self.resolution.metrics[ni].metric.clone())
            .collect()
    }

    /// The index of set `name` when it has a metric that can be counted.
    fn counting_set(&self, name: &str) -> Option<usize> {
        let si = self.resolution.sets.iter().position(|s| s.name == name)?;
        self.resolution
            .metrics
            .iter()
            .any(|m| m.set == name && m.status != Status::Unavailable)
            .then_some(si)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_known_start_wins() {
        assert_eq!(earliest(0, 0), 0);
        assert_eq!(earliest(0, 5), 5);
        assert_eq!(earliest(7, 0), 7);
        assert_eq!(earliest(7, 5), 5);
        assert_eq!(earliest(3, 5), 3);
    }
}
