//! Sampled attribution as metric families, with a bounded number of
//! series:
//!
//! * `perf_sampled_events_total{event, process|cgroup|pod}`: the events the
//!   samples stand for (the sum of their periods). At each collection the
//!   samples since the previous one are ranked by events; the `top`
//!   biggest names add their events to their own series, everything else
//!   to `{…="other"}`. A series that stops being among the top keeps its
//!   total; once more than `2 × top` named series exist, the least
//!   recently fed is folded into `other` and dropped. So a family has at
//!   most `2 × top + 1` series, every series only grows, and the family
//!   sums to every sampled event.
//! * `perf_ring_lost_records_total{cpu}` and
//!   `perf_ring_throttle_events_total{cpu}`: the ring's health.
//!
//! The sampling task [publishes](SampledFamilies::publish) its cumulative
//! table after each drain; a collection reads the latest one.

use super::{CpuHealth, Table};
use crate::snapshot::{Family, Kind, Labels, Sample};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// The name of the bucket of everything outside the top entries.
pub const OTHER: &str = "other";

#[derive(Debug, Default)]
struct Inner {
    latest: Table,
    health: Vec<(u32, CpuHealth)>,
    prev: Table,
    /// Named series: total events and the collection that last fed it.
    series: HashMap<String, (u64, u64)>,
    other: u64,
    generation: u64,
}

/// The shared state between the sampling task and collections.
#[derive(Debug)]
pub struct SampledFamilies {
    event: String,
    label: &'static str,
    top: usize,
    inner: Mutex<Inner>,
}

impl SampledFamilies {
    /// Families for `event`, entries under `label`, `top` by name.
    pub fn new(event: &str, label: &'static str, top: usize) -> Self {
        SampledFamilies {
            event: event.to_string(),
            label,
            top: top.max(1),
            inner: Mutex::default(),
        }
    }

    /// Publishes the sampling's cumulative table and ring health.
    pub fn publish(&self, t: Table, health: Vec<(u32, CpuHealth)>) {
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        g.latest = t;
        g.health = health;
    }

    /// The families as of the latest publication, feeding the series with
    /// what was sampled since the previous call.
    pub fn families(&self) -> Vec<Family> {
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let g = &mut *g;
        let mut window = g.latest.since(&g.prev);
        g.prev = g.latest.clone();
        g.generation += 1;
        window
            .entries
            .sort_by(|a, b| b.sums.events.cmp(&a.sums.events).then(a.name.cmp(&b.name)));
        // Names can repeat (two processes of one name): merged.
        for (i, e) in window.entries.iter().enumerate() {
            if i < self.top && e.name != OTHER {
                let s = g.series.entry(e.name.clone()).or_default();
                s.0 += e.sums.events;
                s.1 = g.generation;
            } else if let Some(s) = g.series.get_mut(&e.name) {
                s.0 += e.sums.events;
            } else {
                g.other += e.sums.events;
            }
        }
        while g.series.len() > 2 * self.top {
            let Some(oldest) = g
                .series
                .iter()
                .min_by(|a, b| a.1 .1.cmp(&b.1 .1).then(a.0.cmp(b.0)))
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((v, _)) = g.series.remove(&oldest) {
                g.other += v;
            }
        }
        let mut names: Vec<(&String, u64)> = g.series.iter().map(|(k, v)| (k, v.0)).collect();
        names.sort();
        let mut samples: Vec<Sample> = names.into_iter().map(|(n, v)| self.sample(n, v)).collect();
        samples.push(self.sample(OTHER, g.other));
        vec![
            Family {
                name: "perf_sampled_events_total".into(),
                help: format!(
                    "Events of the sampled event, attributed by {} from the samples (the sum of their periods); at most 2 x {} names, the rest in \"other\".",
                    self.label, self.top
                ),
                kind: Kind::Counter,
                samples,
            },
            health_family(
                "perf_ring_lost_records_total",
                "Sample records the kernel dropped because the CPU's ring was full (PERF_RECORD_LOST).",
                &g.health,
                |h| h.lost,
            ),
            health_family(
                "perf_ring_throttle_events_total",
                "Times the kernel throttled the CPU's sampling event for interrupting too often (PERF_RECORD_THROTTLE).",
                &g.health,
                |h| h.throttled,
            ),
        ]
    }

    fn sample(&self, name: &str, v: u64) -> Sample {
        Sample {
            labels: Labels::new(vec![
                ("event", self.event.clone()),
                (self.label, name.to_string()),
            ]),
            value: v as f64,
            start_unix_nanos: 0,
        }
    }
}

fn health_family(
    name: &str,
    help: &str,
    health: &[(u32, CpuHealth)],
    f: fn(&CpuHealth) -> u64,
) -> Family {
    Family {
        name: name.into(),
        help: help.into(),
        kind: Kind::Counter,
        samples: health
            .iter()
            .map(|(cpu, h)| Sample {
                labels: Labels::new(vec![("cpu", cpu.to_string())]),
                value: f(h) as f64,
                start_unix_nanos: 0,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Entry, Sums};
    use super::*;

    fn table(rows: &[(&str, u64)]) -> Table {
        Table {
            samples: rows.iter().map(|r| r.1).sum(),
            lost: 0,
            throttled: 0,
            entries: rows
                .iter()
                .map(|(n, v)| Entry {
                    name: n.to_string(),
                    pid: None,
                    sums: Sums {
                        samples: *v,
                        events: *v,
                        members: vec![],
                    },
                })
                .collect(),
        }
    }

    fn values(f: &Family) -> Vec<(String, f64)> {
        f.samples
            .iter()
            .map(|s| (s.labels[1].1.clone(), s.value))
            .collect()
    }

    #[test]
    fn top_n_names_other_and_totals_stay_right() {
        let s = SampledFamilies::new("cpu-clock", "process", 1);
        s.publish(
            table(&[("a", 10), ("b", 5), ("c", 1)]),
            vec![(0, CpuHealth::default())],
        );
        let f = s.families();
        assert_eq!(
            values(&f[0]),
            vec![("a".into(), 10.0), ("other".into(), 6.0)]
        );
        // b grows the most in the next window: it gets a series, a keeps
        // its own; c stays in other.
        s.publish(table(&[("a", 11), ("b", 25), ("c", 2)]), vec![]);
        let f = s.families();
        assert_eq!(
            values(&f[0]),
            vec![
                ("a".into(), 11.0),
                ("b".into(), 20.0),
                ("other".into(), 7.0)
            ]
        );
        // A third name beyond 2 × top folds the least recently fed (a)
        // into other: nothing decreases but the dropped series, and the
        // family still sums to every event.
        s.publish(table(&[("a", 11), ("b", 25), ("c", 40)]), vec![]);
        let f = s.families();
        let v = values(&f[0]);
        assert_eq!(
            v,
            vec![
                ("b".into(), 20.0),
                ("c".into(), 38.0),
                ("other".into(), 18.0)
            ]
        );
        assert_eq!(v.iter().map(|x| x.1).sum::<f64>(), 76.0);
    }
}
