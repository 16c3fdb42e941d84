//! Run-time state for people: per-metric status and problems (for the
//! landing page, `check` and the log), which series are live and in what
//! order they are exported, and the snapshot of one collection.

use super::plan::natural;
use super::{Avail, Engine, MemberPlan};
use crate::perf::PerfError;
use crate::problem::{log_reason, LogFields};
use crate::problem::{Class, Problem};
use crate::resolve::chain::{Resolution, Status};
use crate::snapshot::{Family, Kind, Labels, Sample, Snapshot};
use std::collections::HashSet;
use tracing::Level;

/// How a configured metric is doing at run time.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRuntime {
    /// The metric.
    pub metric: String,
    /// `resolved`, `fallback`, `unavailable`.
    pub status: Status,
    /// The winning spec.
    pub event: Option<String>,
    /// PMUs it counts on.
    pub pmus: Vec<String>,
    /// Open fds.
    pub open_fds: usize,
    /// Why not available, or open failures (deduplicated).
    pub reasons: Vec<Problem>,
}

/// Every metric's state before anything is opened.
pub(super) fn initial(resolution: &Resolution) -> Vec<MetricRuntime> {
    resolution
        .metrics
        .iter()
        .map(|m| {
            let mut pmus: Vec<String> = m.instances.iter().map(|i| i.inst.pmu.clone()).collect();
            pmus.dedup();
            MetricRuntime {
                metric: m.metric.clone(),
                status: m.status,
                event: m.event.clone(),
                pmus,
                open_fds: 0,
                reasons: if m.status == Status::Unavailable {
                    m.problem().cloned().into_iter().collect()
                } else {
                    m.partial.clone()
                },
            }
        })
        .collect()
}

impl Engine {
    /// Per-metric run-time state (for the landing page and logs).
    pub fn runtime(&self) -> &[MetricRuntime] {
        &self.runtime
    }

    pub(super) fn note(&mut self, metric: usize, reason: Problem) {
        let rt = &mut self.runtime[metric];
        if !rt.reasons.contains(&reason) && rt.reasons.len() < 16 {
            log_reason!(Level::WARN, LogFields::of(&reason), [metric = %rt.metric,], [], "counter unavailable");
            rt.reasons.push(reason);
        }
    }

    /// A counter left unopened for want of file descriptors.
    pub(super) fn note_fd_limit(&mut self, mp: &MemberPlan, e: &PerfError) {
        self.fds.starve(mp.metric);
        self.note(mp.metric, e.problem());
    }

    /// Why a metric is missing or partial, per metric. Metrics short of
    /// file descriptors come first: when nothing at all can be counted,
    /// that is the cause to fix before any other.
    pub fn problems(&self) -> Vec<(String, Problem)> {
        let mut out: Vec<(String, Problem)> = self
            .fds
            .exhausted()
            .into_iter()
            .map(|r| ("file descriptors".to_string(), r.clone()))
            .collect();
        let order = self
            .fds
            .starved()
            .iter()
            .copied()
            .chain((0..self.runtime.len()).filter(|m| !self.fds.starved().contains(m)));
        for mi in order {
            let rt = &self.runtime[mi];
            for r in &rt.reasons {
                out.push((rt.metric.clone(), r.clone()));
            }
            if let Some(u) = self.unschedulable.get(&mi) {
                out.push((rt.metric.clone(), u.clone()));
            }
        }
        out
    }

    /// Recomputes what depends on the set of open groups: which series are
    /// live, their export order, the availability samples and the fd
    /// counts. Runs when groups open or close, never per collection.
    pub(super) fn refresh(&mut self) {
        // Series that lost every group stay out of the output.
        let members = || self.groups.iter().flat_map(|g| &g.members);
        let both = |m: &super::Member| [m.series, m.detail];
        self.series.refresh(
            members().flat_map(both),
            members().filter(|m| m.plan.snapshot).flat_map(both),
        );
        self.times.refresh_order();
        self.refresh_availability();
    }

    /// Open fds per metric and availability per (metric, PMU).
    fn refresh_availability(&mut self) {
        for r in &mut self.runtime {
            r.open_fds = 0;
        }
        let mut open: HashSet<(usize, &str)> = HashSet::new();
        for g in &self.groups {
            for m in &g.members {
                self.runtime[m.plan.metric].open_fds += 1;
                open.insert((m.plan.metric, m.plan.attr.pmu.as_str()));
            }
        }
        let mut avail = Vec::new();
        for (mi, m) in self.resolution.metrics.iter().enumerate() {
            let alone = || vec![("metric", m.metric.clone())];
            if m.status == Status::Unavailable {
                let event = m.tried.first().map(|t| t.event.clone()).unwrap_or_default();
                avail.push(Avail {
                    metric: mi,
                    info: info_labels(&alone(), &event, m.problem()),
                    labels: Labels::new(alone()),
                    whole: None,
                    event,
                    open: false,
                });
                continue;
            }
            let mut pmus: Vec<&str> = m.instances.iter().map(|i| i.inst.pmu.as_str()).collect();
            pmus.sort_by_key(|p| natural(p));
            pmus.dedup();
            // Counted on every PMU: one sample for the metric; none for a
            // metric the resolution found partly countable (its samples
            // stay per PMU when it has several).
            let whole = m.partial.is_empty().then(|| Labels::new(alone()));
            let event = m.event.clone().unwrap_or_default();
            let several = pmus.len() > 1;
            for p in pmus {
                let mut pairs = alone();
                if several {
                    pairs.push(("pmu", p.to_string()));
                }
                let reasons = &self.runtime[mi].reasons;
                let why = reasons
                    .iter()
                    .find(|r| r.pmu() == Some(p))
                    .or(reasons.first())
                    .or(self.fds.exhausted());
                avail.push(Avail {
                    metric: mi,
                    info: info_labels(&pairs, &event, why),
                    labels: Labels::new(pairs),
                    whole: whole.clone(),
                    event: event.clone(),
                    open: open.contains(&(mi, p)),
                });
            }
        }
        self.avail = avail;
    }

    /// The counters as of the last [`read_groups`](Self::read_groups).
    pub fn snapshot(&self) -> Snapshot {
        let mut families = Vec::with_capacity(self.series.order().len() + 6);
        self.metric_families(&mut families);
        families.push(self.available());
        self.state_families(&mut families);
        self.counters.families(&mut families);
        families.extend(super::selftest::family(&self.self_test));
        self.times.families(|c| self.is_online(c), &mut families);
        self.cgroup_families(&mut families);
        if let Some(s) = &self.sampled {
            families.extend(s.families());
        }
        Snapshot { families }
    }

    /// `perf_event_available`: one sample per metric (1 when counted on
    /// every PMU it was resolved for); a metric resolved for several PMUs
    /// and not counted on all of them has one per PMU. A 0 sample says why
    /// in its `event`, `reason` and `class` labels.
    fn available(&self) -> Family {
        let sample = |a: &Avail| {
            let (labels, value) = if !a.open {
                (a.info.clone(), 0.0)
            } else if let Some(u) = self.unschedulable.get(&a.metric) {
                (info_labels(&a.labels, &a.event, Some(u)), 0.0)
            } else {
                (a.labels.clone(), 1.0)
            };
            Sample {
                labels,
                value,
                start_unix_nanos: 0,
            }
        };
        let up = |a: &Avail| a.open && !self.unschedulable.contains_key(&a.metric);
        let mut samples = Vec::with_capacity(self.resolution.metrics.len());
        for one in self.avail.chunk_by(|a, b| a.metric == b.metric) {
            match (&one[0].whole, one.iter().all(up)) {
                (Some(whole), true) => samples.push(Sample {
                    labels: whole.clone(),
                    value: 1.0,
                    start_unix_nanos: 0,
                }),
                _ => samples.extend(one.iter().map(sample)),
            }
        }
        Family {
            name: "perf_event_available".into(),
            help: "Whether a configured metric is counted on this host (1) or not (0, with the event tried, the reason and its class: not_on_platform or failed; `perf-exporter check` explains each).".into(),
            kind: Kind::Gauge,
            samples,
        }
    }

    /// The per-CPU families of the metrics whose sets are summed before
    /// export (`per: core | socket | node`), as of the last
    /// [`read_groups`](Self::read_groups): the full resolution the live
    /// view and `stat` show ([`crate::snapshot::full_resolution`] puts
    /// them in place of the summed ones). Empty when every set is `per:
    /// cpu`. Built on demand (the live view, `stat`, a snapshot), never
    /// for a scrape: [`detail_builds`](Self::detail_builds) counts them.
    pub fn detail_families(&self) -> Vec<Family> {
        self.detail_builds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let summed: Vec<bool> = self
            .series
            .order()
            .iter()
            .map(|o| {
                o.iter().any(|&i| {
                    self.series[i].live && self.series[i].detail && !self.series[i].exported
                })
            })
            .collect();
        let mut families = Vec::new();
        if summed.contains(&true) {
            let pick = |st: &super::SeriesState| st.detail && summed[st.metric];
            self.families_of(pick, &mut families);
        }
        families
    }

    /// How many times the per-CPU detail was built
    /// ([`detail_families`](Self::detail_families)) since start-up.
    pub fn detail_builds(&self) -> u64 {
        self.detail_builds
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The configured metrics' families, in config order.
    fn metric_families(&self, families: &mut Vec<Family>) {
        self.families_of(|st| st.exported, families);
    }

    /// The families of the series `pick` keeps, in config order.
    fn families_of(&self, pick: impl Fn(&super::SeriesState) -> bool, families: &mut Vec<Family>) {
        for (mi, order) in self.series.order().iter().enumerate() {
            let m = &self.resolution.metrics[mi];
            let mut samples = Vec::new();
            for &i in order {
                let st = &self.series[i];
                if st.live && st.has_data && pick(st) {
                    if samples.is_empty() {
                        samples.reserve_exact(order.len());
                    }
                    samples.push(Sample {
                        labels: st.labels.clone(),
                        value: st.value,
                        start_unix_nanos: if m.gauge { 0 } else { st.start_ns },
                    });
                }
            }
            if samples.is_empty() {
                continue;
            }
            let (name, help) = &self.family_text[mi];
            families.push(Family {
                name: name.clone(),
                help: help.clone(),
                kind: if m.gauge { Kind::Gauge } else { Kind::Counter },
                samples,
            });
        }
    }
}

/// The labels of a `perf_event_available` sample that is 0: its own plus
/// the encoding tried, `reason` and `class` (each from a small fixed set).
fn info_labels(pairs: &[(&'static str, String)], event: &str, why: Option<&Problem>) -> Labels {
    let mut v = pairs.to_vec();
    v.push(("event", event.to_string()));
    v.push(("reason", why.map_or("failed", Problem::code).into()));
    v.push((
        "class",
        why.map_or(Class::Failed, Problem::class).as_str().into(),
    ));
    Labels::new(v)
}
