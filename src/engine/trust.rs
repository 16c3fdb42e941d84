//! Counter states (issue 27): at every collection, from what the group
//! reads already return (`time_enabled`, `time_running`, the counts; no
//! other syscall), each counter series is `counting`, `multiplexed`,
//! `stalled` or `never_ran` ([`CounterState`], whose docs say what each
//! means), or `implausible` where the last plausibility check said so
//! (`plausible.rs`), exported as gauge families:
//!
//! * `perf_counter_states{metric, state}`: how many of the metric's
//!   per-CPU counters (CPUs, uncore instances) are in each state, every
//!   state always present (0 or more), whatever the set's `per:` level:
//!   bounded by the config (4 series per metric), whatever the number of
//!   CPUs;
//! * `perf_counter_state{metric, <the series' labels>, state}` = 1 and
//!   `perf_counter_running_ratio{metric, <the series' labels>}` (the
//!   share of the window the counter was on the PMU, `Δrunning /
//!   Δenabled`: below 1 multiplexed, 0 never ran): the per-CPU detail,
//!   **only for counter series that are not `counting`**, so a healthy
//!   host pays nothing per CPU, and the one it pays for a troubled
//!   counter is a single series (its current state), not one per state;
//! * `perf_counter_implausible_info{metric, <the series' labels>, reason}`
//!   = 1 for the series that are `implausible`: why
//!   ([`crate::problem::plausible::Implausible`]'s code).
//!
//! # Summed series (`per: core | socket | node`)
//!
//! A summed series is judged from the windows of every CPU it sums: its
//! `perf_counter_state` is the **worst** of their states, and its
//! `perf_counter_running_ratio` is `Σ Δrunning / Σ Δenabled` over them,
//! the share of its CPUs' time that was measured. So on 512 CPUs one CPU
//! whose counter never ran makes the node series `never_ran` with a ratio
//! of 511/512 (its value is short of that CPU), all of them `never_ran`
//! with a ratio of 0 (no value at all); and `perf_counter_states`, which
//! counts per-CPU counters, says `never_ran 1` and `counting 511` in the
//! first case, `never_ran 512` in the second. The per-CPU states stay in
//! the engine (the live view and `stat` show them per CPU). A series whose
//! groups' enabled time did not move in a window keeps its last state.

use super::{Engine, Member, SeriesState};
use crate::perf::EventAttr;
use crate::pmu::PmuTable;
use crate::problem::plausible::{Count, Implausible};
use crate::problem::state::STALL_COLLECTIONS;
use crate::problem::{CounterState, MetricStates, Reason};
use crate::resolve::chain::Status;
use crate::snapshot::{Family, Kind, Labels, Sample};

/// What one collection's windows say about a series, summed over its
/// groups (node-level series, and per-cgroup ones: `engine::cgroup`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Window {
    enabled: u64,
    running: u64,
    judged: u32,
    worst: CounterState,
    /// Why it is implausible, when a member's plausibility verdict says so.
    reason: Option<Implausible>,
}

impl Window {
    /// Adds one group's window (`time_enabled` and `time_running`
    /// increases) in state `state`.
    pub(crate) fn add(&mut self, d_enabled: u64, d_running: u64, state: CounterState) {
        self.enabled += d_enabled;
        self.running += d_running.min(d_enabled);
        self.judged += 1;
        self.worst = self.worst.max(state);
    }

    /// Adds one group's window judged by its times alone (no count looked
    /// at); a window whose enabled time did not move is not judged.
    pub(crate) fn add_times(&mut self, d_enabled: u64, d_running: u64) {
        if let Some(s) = CounterState::of_window(d_enabled, d_running) {
            self.add(d_enabled, d_running, s);
        }
    }

    /// Marks a judged window `implausible` for `why` (a window nothing
    /// judged keeps its last state).
    pub(crate) fn flag(&mut self, why: Implausible) {
        if self.judged > 0 {
            self.worst = CounterState::Implausible;
            self.reason = Some(why);
        }
    }

    /// Raises a judged window's state to `state` when that is worse (a
    /// window nothing judged keeps its last state): a per-cgroup counter
    /// found `stalled`.
    pub(crate) fn raise(&mut self, state: CounterState) {
        if self.judged > 0 {
            self.worst = self.worst.max(state);
        }
    }

    /// The worst state of the windows added so far (`None`: none judged).
    pub(crate) fn worst(&self) -> Option<CounterState> {
        (self.judged > 0).then_some(self.worst)
    }

    /// The verdict of the windows added since the last call: the worst
    /// state and the running share (`Δrunning / Δenabled`), `None` when
    /// none was judged; the window is cleared.
    pub(crate) fn take_verdict(&mut self) -> Option<(CounterState, f64)> {
        self.take_verdict_why().map(|(s, r, _)| (s, r))
    }

    /// [`take_verdict`](Self::take_verdict) with why it is implausible.
    fn take_verdict_why(&mut self) -> Option<(CounterState, f64, Option<Implausible>)> {
        let w = std::mem::take(self);
        let worst = w.worst()?;
        let ratio = if w.enabled > 0 {
            w.running as f64 / w.enabled as f64
        } else {
            0.0
        };
        Some((worst, ratio, w.reason))
    }
}

/// Per metric, `perf_counter_states`' labels for each state, in
/// [`CounterState::ALL`] order.
pub(super) fn count_labels(
    res: &crate::resolve::chain::Resolution,
) -> Vec<[Labels; CounterState::ALL.len()]> {
    res.metrics
        .iter()
        .map(|m| {
            CounterState::ALL.map(|s| {
                Labels::new(vec![
                    ("metric", m.metric.clone()),
                    ("state", s.as_str().to_string()),
                ])
            })
        })
        .collect()
}

/// `perf_counter_running_ratio`'s labels: `metric` and the series'.
pub(super) fn ratio_labels(metric: &str, series: &[(&'static str, String)]) -> Labels {
    let mut v = Vec::with_capacity(series.len() + 2);
    v.push(("metric", metric.to_string()));
    v.extend(series.iter().cloned());
    Labels::new(v)
}

/// `perf_counter_state`'s labels: the ratio's plus `state`.
pub(super) fn state_labels(ratio: &Labels, state: CounterState) -> Labels {
    let mut v = ratio.to_vec();
    v.push(("state", state.as_str().to_string()));
    Labels::new(v)
}

/// The event term of a spec as written (`cpu/cpu-cycles/` → `cpu-cycles`,
/// `cycles:u` → `cycles`).
fn event_term(spec: &str) -> &str {
    let inner = match spec.split_once('/') {
        Some((_, rest)) => rest.trim_end_matches('/'),
        None => spec,
    };
    inner.split([',', ':', '/']).next().unwrap_or(inner)
}

/// Whether a counter must move whenever its CPU runs, so standing still
/// while on the PMU means `stalled`, and which count it is for the
/// plausibility checks: cycles and instructions of a core PMU, generic
/// (`PERF_TYPE_HARDWARE` ids 0 and 1, whatever the extended type in the
/// high bits) or named (`cpu-cycles`, `cycles`, `cpu_cycles`,
/// `instructions`, `inst_retired`). Nothing else is judged: software
/// events, tracepoints, uncore and other hardware events may legitimately
/// not move.
pub(crate) fn role(table: &PmuTable, attr: &EventAttr) -> Option<Count> {
    if attr.type_ == crate::sys::abi::TYPE_HARDWARE {
        return match attr.config[0] & 0xffff_ffff {
            0 => Some(Count::Cycles),
            1 => Some(Count::Instructions),
            _ => None,
        };
    }
    let core = table
        .get(&attr.pmu)
        .is_some_and(|p| p.is_core() && p.type_ == attr.type_);
    if !core {
        return None;
    }
    match event_term(&attr.event) {
        "cpu-cycles" | "cycles" | "cpu_cycles" => Some(Count::Cycles),
        "instructions" | "inst_retired" => Some(Count::Instructions),
        _ => None,
    }
}

/// What stall detection remembers of one counter: its last raw count and
/// how many windows in a row it ran without that count moving.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stall {
    pub(crate) last_raw: u64,
    pub(crate) unmoved: u32,
}

impl Stall {
    /// The state of one counter's window from its group's times
    /// (`None`: its enabled time did not move, nothing to judge), and
    /// `stalled` when it must move (`must_move`: cycles or instructions)
    /// and ran for [`STALL_COLLECTIONS`] windows in a row without its
    /// count `raw` moving. Node-level members and per-cgroup ones
    /// (`engine::cgroup`) alike.
    pub(crate) fn state(
        &mut self,
        must_move: bool,
        d_enabled: u64,
        d_running: u64,
        raw: Option<u64>,
    ) -> Option<CounterState> {
        let mut state = CounterState::of_window(d_enabled, d_running)?;
        if must_move && d_running > 0 {
            if let Some(raw) = raw {
                self.unmoved = if raw == self.last_raw {
                    self.unmoved.saturating_add(1)
                } else {
                    0
                };
                self.last_raw = raw;
            }
            if self.unmoved >= STALL_COLLECTIONS {
                state = state.max(CounterState::Stalled);
            }
        }
        Some(state)
    }
}

/// Whether a per-cgroup counter must move whenever its cgroup runs (so
/// it is `stalled` when it does not): the generic hardware cycles and
/// instructions (`PERF_TYPE_HARDWARE` ids 0 and 1, whatever the extended
/// type), which is how a config's `cycles` and `instructions` open. Two
/// comparisons: cheap enough per counter and collection.
pub(crate) fn must_move(attr: &EventAttr) -> bool {
    attr.type_ == crate::sys::abi::TYPE_HARDWARE && attr.config[0] & 0xffff_ffff <= 1
}

/// Judges one member over its group's window and adds the verdict to its
/// series' window. `raw` is its count (`None`: the read did not have it).
pub(super) fn judge(
    series: &mut [SeriesState],
    m: &mut Member,
    d_enabled: u64,
    d_running: u64,
    raw: Option<u64>,
) {
    let mut stall = Stall {
        last_raw: m.last_raw,
        unmoved: m.unmoved,
    };
    let state = stall.state(m.role.is_some(), d_enabled, d_running, raw);
    (m.last_raw, m.unmoved) = (stall.last_raw, stall.unmoved);
    let Some(state) = state else {
        return;
    };
    if let Some(w) = series.get_mut(m.series).map(|s| &mut s.window) {
        w.add(d_enabled, d_running, state);
    }
    if m.detail != m.series {
        if let Some(w) = series.get_mut(m.detail).map(|s| &mut s.window) {
            w.add(d_enabled, d_running, state);
        }
    }
}

impl Engine {
    /// Turns this collection's windows into each series' state and ratio,
    /// and clears them. Allocates only when a state changes.
    pub(super) fn finish_states(&mut self) {
        let metrics = &self.resolution.metrics;
        for st in &mut self.series {
            let Some((worst, ratio, why)) = st.window.take_verdict_why() else {
                continue;
            };
            let previous = st.trust.map(|t| t.0);
            st.trust = Some((worst, ratio));
            let metric = metrics.get(st.metric).map_or("", |m| m.metric.as_str());
            // An exported series not counting needs its labels: built the
            // first time, the state's rebuilt when it changes.
            let stale = previous != Some(worst) || st.trouble_labels.is_none();
            if worst != CounterState::Counting && st.exported && stale {
                let ratio = st
                    .trouble_labels
                    .take()
                    .map_or_else(|| ratio_labels(metric, &st.labels), |(_, r)| r);
                st.trouble_labels = Some((state_labels(&ratio, worst), ratio));
            }
            let why = why.filter(|_| worst == CounterState::Implausible);
            match (why, st.implausible.as_deref_mut()) {
                // The same reason: its labels stay, its figures follow.
                (Some(w), Some((old, _))) if old.code() == w.code() => *old = w,
                (w, _) => {
                    st.implausible = w.map(|w| {
                        let mut v = match &st.trouble_labels {
                            Some((_, ratio)) => ratio.to_vec(),
                            None => ratio_labels(metric, &st.labels).to_vec(),
                        };
                        v.push(("reason", w.code().to_string()));
                        Box::new((w, Labels::new(v)))
                    });
                }
            }
        }
    }

    /// The judgement of one collection alone, for the benchmark of what
    /// the checks cost per scrape (`benches/hot_path.rs`): every open
    /// member judged over a one-second window (its count moved), the
    /// series' verdicts, the plausibility step and the state families, as
    /// a collection makes them after its reads. Returns the state
    /// families' series. Not for use outside benchmarks: it moves the
    /// stall detection's memory.
    #[doc(hidden)]
    pub fn judge_states_alone(&mut self) -> usize {
        const WINDOW: u64 = 1_000_000_000;
        let mut groups = std::mem::take(&mut self.groups);
        for g in &mut groups {
            for m in &mut g.members {
                let raw = m.last_raw.wrapping_add(1);
                judge(&mut self.series, m, WINDOW, WINDOW, Some(raw));
            }
        }
        self.groups = groups;
        self.plausibility();
        self.finish_states();
        let mut families = Vec::new();
        self.state_families(&mut families);
        families.iter().map(|f| f.samples.len()).sum()
    }

    /// Each counter series' state at the last collection, by metric name
    /// and labels (for tests and the landing page).
    pub fn counter_states(&self) -> Vec<(String, Labels, CounterState, f64)> {
        self.judged_series()
            .map(|(st, state, ratio)| {
                let metric = self.resolution.metrics[st.metric].metric.clone();
                (metric, st.labels.clone(), state, ratio)
            })
            .collect()
    }

    /// Each metric's counter states at the last collection, in config
    /// order: its per-CPU counters (CPUs, uncore instances) in each state,
    /// the lowest running share, and why (`check`, the landing page).
    pub fn metric_states(&self) -> Vec<MetricStates> {
        let res = &self.resolution.metrics;
        res.iter()
            .enumerate()
            .map(|(mi, m)| {
                let mut out = MetricStates::unavailable(&m.metric, None);
                for &i in self.series.order().get(mi).map_or(&[][..], Vec::as_slice) {
                    let st = &self.series[i];
                    let (true, true, Some((s, r))) = (st.live, st.detail, st.trust) else {
                        continue;
                    };
                    out.cpus[s.index()] += 1;
                    out.running_ratio = Some(out.running_ratio.map_or(r, |x| x.min(r)));
                    if s == CounterState::Implausible && out.implausible.is_none() {
                        out.implausible = st.implausible.as_ref().map(|x| x.0);
                    }
                }
                out.problem = if out.judged() > 0 {
                    self.unschedulable.get(&mi).cloned()
                } else {
                    m.problem()
                        .filter(|_| m.status == Status::Unavailable)
                        .or_else(|| self.runtime.get(mi).and_then(|rt| rt.reasons.first()))
                        .or_else(|| self.unschedulable.get(&mi))
                        .cloned()
                };
                out
            })
            .collect()
    }

    /// Live series that have been judged, in export order.
    fn judged_series(&self) -> impl Iterator<Item = (&SeriesState, CounterState, f64)> + '_ {
        self.series
            .order()
            .iter()
            .flatten()
            .map(|&i| &self.series[i])
            .filter(|st| st.live && st.exported)
            .filter_map(|st| st.trust.map(|(s, r)| (st, s, r)))
    }

    /// `perf_counter_states`, then `perf_counter_state` and
    /// `perf_counter_running_ratio` for the series not counting.
    pub(super) fn state_families(&self, families: &mut Vec<Family>) {
        let mut counts =
            Vec::with_capacity(self.state_count_labels.len() * CounterState::ALL.len());
        for (mi, order) in self.series.order().iter().enumerate() {
            let mut n = [0u32; CounterState::ALL.len()];
            let mut any = false;
            for &i in order {
                let st = &self.series[i];
                if let (true, true, Some((s, _))) = (st.live, st.detail, st.trust) {
                    n[s.index()] += 1;
                    any = true;
                }
            }
            if let (true, Some(labels)) = (any, self.state_count_labels.get(mi)) {
                for (l, c) in labels.iter().zip(n) {
                    counts.push(Sample {
                        labels: l.clone(),
                        value: f64::from(c),
                        start_unix_nanos: 0,
                    });
                }
            }
        }
        families.push(Family {
            name: "perf_counter_states".into(),
            help: "How many of a metric's counters (CPUs, uncore instances) are in each state at the last collection: counting, multiplexed (scaled by enabled/running), stalled, never_ran (no value), implausible (not a measurement: see perf_counter_implausible_info).".into(),
            kind: Kind::Gauge,
            samples: counts,
        });
        let troubled = || {
            self.judged_series()
                .filter(|(_, s, _)| *s != CounterState::Counting)
        };
        families.push(Family {
            name: "perf_counter_state".into(),
            help: "1 for the current state of each counter series that is not counting (multiplexed, stalled, never_ran, implausible; a series summed over CPUs takes its worst CPU's); counters that are counting have no series here (see perf_counter_states).".into(),
            kind: Kind::Gauge,
            samples: troubled()
                .filter_map(|(st, _, _)| {
                    Some(Sample {
                        labels: st.trouble_labels.as_ref()?.0.clone(),
                        value: 1.0,
                        start_unix_nanos: 0,
                    })
                })
                .collect(),
        });
        families.push(Family {
            name: "perf_counter_implausible_info".into(),
            help: "1 for each counter whose state is implausible, with why (reason: cycles_above_max_frequency, ipc_above_retire_width, near_zero_while_busy); checked at a bounded rate against /proc/stat busy time, the maximum frequency and the core's retire width.".into(),
            kind: Kind::Gauge,
            samples: self
                .judged_series()
                .filter_map(|(st, s, _)| {
                    let (_, l) = st.implausible.as_deref().filter(|_| s == CounterState::Implausible)?;
                    Some(Sample {
                        labels: l.clone(),
                        value: 1.0,
                        start_unix_nanos: 0,
                    })
                })
                .collect(),
        });
        families.push(Family {
            name: "perf_counter_running_ratio".into(),
            help: "The share of the last collection's window a counter series that is not counting was on the PMU (time_running / time_enabled, summed over the CPUs of a summed series): below 1 when multiplexed, 0 when it never ran; counters that are counting (1) have no series here.".into(),
            kind: Kind::Gauge,
            samples: troubled()
                .filter_map(|(st, _, ratio)| {
                    Some(Sample {
                        labels: st.trouble_labels.as_ref()?.1.clone(),
                        value: ratio,
                        start_unix_nanos: 0,
                    })
                })
                .collect(),
        });
    }
}
