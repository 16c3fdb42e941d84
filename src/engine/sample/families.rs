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
//!   sums to every sampled event. Each series carries when its count
//!   began: a named series the start of the window that created it, so a
//!   name that was folded into `other` and comes back is a new series with
//!   a new start (over OTLP its count does not fall under the old start);
//!   `other` the start of sampling.
//! * `perf_ring_lost_records_total{cpu}` and
//!   `perf_ring_throttle_events_total{cpu}`: the ring's health.
//!
//! * `perf_sampled_tasks` and `perf_sampled_tasks_forgotten_total{reason}`:
//!   the task entries the sampler holds (names, parents), bounded by
//!   [`MAX_TASKS`](super::MAX_TASKS) per table, and the tasks it forgot:
//!   `exited` once their samples were published, `table_full` beyond the
//!   bound (see [`Aggregate::end_window`](super::Aggregate::end_window)).
//!
//! The sampling task [publishes](SampledFamilies::publish) the table of
//! each window it drained; a collection takes what was published since the
//! previous one (at most [`MAX_TASKS`](super::MAX_TASKS) names, the rest
//! in `other`).
//!
//! A name equal to the bucket's (a process named `other`) is exported as
//! [`OTHER_NAMED`], so the bucket is never mistaken for a process.

use super::super::now_unix_nanos;
use super::{CpuHealth, Forgotten, Table, MAX_TASKS, OVER_BOUND};
use crate::snapshot::{Family, FamilyDef, Kind, Labels, Sample};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// The sampler's families, in the order of a collection: what
/// [`SampledFamilies::families`] emits and the reference of metrics lists.
/// `{by}`, `{top}` and `{max_tasks}` in a help are the config's `by` and
/// `top` and [`MAX_TASKS`].
pub const FAMILIES: [FamilyDef; 5] = [
    FamilyDef {
        name: "perf_sampled_events_total",
        kind: Kind::Counter,
        help: "Events of the sampled event, attributed by {by} from the samples (the sum of their periods); at most 2 x {top} names, the rest in \"other\".",
        labels: &["event", "process|thread|cgroup|pod_uid"],
    },
    FamilyDef {
        name: "perf_ring_lost_records_total",
        kind: Kind::Counter,
        help: "Sample records the kernel dropped because the CPU's ring was full (PERF_RECORD_LOST).",
        labels: &["cpu"],
    },
    FamilyDef {
        name: "perf_ring_throttle_events_total",
        kind: Kind::Counter,
        help: "Times the kernel throttled the CPU's sampling event for interrupting too often (PERF_RECORD_THROTTLE).",
        labels: &["cpu"],
    },
    FamilyDef {
        name: "perf_sampled_tasks",
        kind: Kind::Gauge,
        help: "Task entries (names, parents) the sampler holds; bounded by {max_tasks} per table.",
        labels: &[],
    },
    FamilyDef {
        name: "perf_sampled_tasks_forgotten_total",
        kind: Kind::Counter,
        help: "Tasks the sampler forgot: exited (after their samples were published) or table_full (beyond the bound, not seen in the last second).",
        labels: &["reason"],
    },
];

/// The name of the bucket of everything outside the top entries.
pub const OTHER: &str = "other";

/// The label value of an entry whose own name is [`OTHER`].
pub(super) const OTHER_NAMED: &str = "other (its own name)";

#[derive(Debug, Default)]
struct Inner {
    /// Events by name published since the last collection.
    pending: HashMap<String, u64>,
    /// Events published since the last collection beyond the bound.
    pending_other: u64,
    health: Vec<(u32, CpuHealth)>,
    tasks: (usize, Forgotten),
    /// Named series: total events, the collection that last fed it and
    /// when its count began (Unix ns).
    series: HashMap<String, Named>,
    other: u64,
    generation: u64,
    /// When sampling began: `other`'s start (Unix ns).
    since: u64,
    /// When the previous collection took its window (Unix ns): the start
    /// of a series the next window creates.
    window_start: u64,
}

#[derive(Debug, Clone, Copy)]
struct Named {
    events: u64,
    fed: u64,
    start: u64,
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
        let now = now_unix_nanos();
        SampledFamilies {
            event: event.to_string(),
            label,
            top: top.max(1),
            inner: Mutex::new(Inner {
                since: now,
                window_start: now,
                ..Inner::default()
            }),
        }
    }

    /// Publishes the table of one window (what was sampled since the
    /// previous publication) and the ring health.
    pub fn publish(&self, t: Table, health: Vec<(u32, CpuHealth)>) {
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        for e in t.entries {
            let name = if e.name == OTHER {
                OTHER_NAMED.to_string()
            } else {
                e.name
            };
            let bounded = g.pending.len() < MAX_TASKS || g.pending.contains_key(&name);
            if name == OVER_BOUND || !bounded {
                g.pending_other += e.sums.events;
            } else {
                *g.pending.entry(name).or_default() += e.sums.events;
            }
        }
        g.health = health;
    }

    /// Publishes the task entries the sampler holds and how many it
    /// forgot.
    pub fn set_tasks(&self, held: usize, forgotten: Forgotten) {
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        g.tasks = (held, forgotten);
    }

    /// The families as of the latest publication, feeding the series with
    /// what was sampled since the previous call.
    pub fn families(&self) -> Vec<Family> {
        self.families_at(now_unix_nanos())
    }

    /// [`families`](Self::families) with the window taken at `now` (Unix
    /// ns).
    fn families_at(&self, now: u64) -> Vec<Family> {
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let g = &mut *g;
        let mut window: Vec<(String, u64)> = std::mem::take(&mut g.pending).into_iter().collect();
        g.other += std::mem::take(&mut g.pending_other);
        g.generation += 1;
        // The events of this window were sampled after the previous one.
        let next = now.max(g.window_start);
        let window_start = std::mem::replace(&mut g.window_start, next);
        window.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        // Names repeat across tasks (two processes of one name): merged
        // at publication.
        for (i, (name, events)) in window.into_iter().enumerate() {
            if i < self.top {
                let s = g.series.entry(name).or_insert(Named {
                    events: 0,
                    fed: 0,
                    start: window_start,
                });
                s.events += events;
                s.fed = g.generation;
            } else if let Some(s) = g.series.get_mut(&name) {
                s.events += events;
            } else {
                g.other += events;
            }
        }
        while g.series.len() > 2 * self.top {
            let Some(oldest) = g
                .series
                .iter()
                .min_by(|a, b| a.1.fed.cmp(&b.1.fed).then(a.0.cmp(b.0)))
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(s) = g.series.remove(&oldest) {
                g.other += s.events;
            }
        }
        let mut names: Vec<(&String, &Named)> = g.series.iter().collect();
        names.sort_by(|a, b| a.0.cmp(b.0));
        let mut samples: Vec<Sample> = names
            .into_iter()
            .map(|(n, s)| self.sample(n, s.events, s.start))
            .collect();
        samples.push(self.sample(OTHER, g.other, g.since));
        let top = self.top.to_string();
        let [events, lost, throttled, tasks, forgotten] = FAMILIES;
        vec![
            events.family_with(&[("by", self.label), ("top", &top)], samples),
            health_family(&lost, &g.health, |h| h.lost),
            health_family(&throttled, &g.health, |h| h.throttled),
            tasks.family_with(
                &[("max_tasks", &MAX_TASKS.to_string())],
                vec![Sample {
                    labels: Labels::new(vec![]),
                    value: g.tasks.0 as f64,
                    start_unix_nanos: 0,
                }],
            ),
            forgotten.family(
                [
                    ("exited", g.tasks.1.exited),
                    ("table_full", g.tasks.1.table_full),
                ]
                .into_iter()
                .map(|(why, n)| Sample {
                    labels: Labels::new(vec![("reason", why.to_string())]),
                    value: n as f64,
                    start_unix_nanos: g.since,
                })
                .collect(),
            ),
        ]
    }

    fn sample(&self, name: &str, v: u64, start: u64) -> Sample {
        Sample {
            labels: Labels::new(vec![
                ("event", self.event.clone()),
                (self.label, name.to_string()),
            ]),
            value: v as f64,
            start_unix_nanos: start,
        }
    }
}

fn health_family(def: &FamilyDef, health: &[(u32, CpuHealth)], f: fn(&CpuHealth) -> u64) -> Family {
    def.family(
        health
            .iter()
            .map(|(cpu, h)| Sample {
                labels: Labels::new(vec![("cpu", cpu.to_string())]),
                value: f(h) as f64,
                start_unix_nanos: 0,
            })
            .collect(),
    )
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
        // Each publication is one window: b grows the most in the next: it gets a series, a keeps
        // its own; c stays in other.
        s.publish(table(&[("a", 1), ("b", 20), ("c", 1)]), vec![]);
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
        s.publish(table(&[("c", 38)]), vec![]);
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

    fn starts(f: &Family) -> Vec<(String, u64)> {
        f.samples
            .iter()
            .map(|s| (s.labels[1].1.clone(), s.start_unix_nanos))
            .collect()
    }

    /// Issue 24 item 4: a name folded into `other` that came back restarted
    /// from 0 under the start of the exporter (over OTLP, 1.19e9 -> 0.57e9
    /// under the old start). It is a new series now, starting when the
    /// window that brought it back began; the others keep theirs.
    #[test]
    fn a_name_back_from_other_starts_anew() {
        let s = SampledFamilies::new("cpu-clock", "process", 1);
        let since = s.inner.lock().unwrap().since;
        let t = |sec: u64| since + sec * 1_000_000_000;
        s.publish(table(&[("a", 10)]), vec![]);
        let f = s.families_at(t(1));
        assert_eq!(
            starts(&f[0]),
            vec![("a".into(), since), ("other".into(), since)]
        );
        // b, then c, push a out (2 x top = 2 names at most).
        s.publish(table(&[("b", 5)]), vec![]);
        s.families_at(t(2));
        s.publish(table(&[("c", 5)]), vec![]);
        let f = s.families_at(t(3));
        assert_eq!(
            values(&f[0]),
            vec![("b".into(), 5.0), ("c".into(), 5.0), ("other".into(), 10.0)]
        );
        // a comes back: from 0 (its 10 are in other), under a new start.
        s.publish(table(&[("a", 20)]), vec![]);
        let f = s.families_at(t(4));
        assert_eq!(
            values(&f[0]),
            vec![
                ("a".into(), 20.0),
                ("c".into(), 5.0),
                ("other".into(), 15.0)
            ]
        );
        assert_eq!(
            starts(&f[0]),
            vec![
                ("a".into(), t(3)),
                ("c".into(), t(2)),
                ("other".into(), since)
            ]
        );
    }

    /// Issue 28 item 18: a process named `other` was added to the bucket
    /// of the rest; it is a series of its own, named apart from it.
    #[test]
    fn a_process_named_other_is_not_the_bucket() {
        let s = SampledFamilies::new("cpu-clock", "process", 2);
        s.publish(table(&[("other", 10), ("a", 5), ("b", 1)]), vec![]);
        let f = s.families();
        assert_eq!(
            values(&f[0]),
            vec![
                ("a".into(), 5.0),
                (OTHER_NAMED.into(), 10.0),
                ("other".into(), 1.0)
            ]
        );
    }

    /// Issue 28 item 6: what the sampler publishes between collections is
    /// bounded by names; samples over the bound are in `other`.
    #[test]
    fn published_windows_are_bounded_and_over_the_bound_is_other() {
        let s = SampledFamilies::new("cpu-clock", "process", 1);
        let many: Vec<(String, u64)> = (0..MAX_TASKS + 10).map(|i| (format!("p{i}"), 1)).collect();
        let rows: Vec<(&str, u64)> = many.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        s.publish(table(&rows), vec![]);
        s.publish(table(&[(OVER_BOUND, 7)]), vec![]);
        assert_eq!(s.inner.lock().unwrap().pending.len(), MAX_TASKS);
        let f = s.families();
        let total: f64 = values(&f[0]).iter().map(|v| v.1).sum();
        assert_eq!(total, (MAX_TASKS + 10 + 7) as f64, "no event lost");
        assert_eq!(f[0].samples.len(), 2, "one name and other");
        assert!(s.inner.lock().unwrap().pending.is_empty());
    }
}
