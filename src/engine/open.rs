//! Opening: series and group-time slots by index, groups opened leader
//! first (members the PMU refuses to group get groups of their own),
//! reconciling the open groups with the plan, and splitting groups that
//! are never scheduled.

use super::{now_unix_nanos, Engine, Group, GroupKey, Member, MemberPlan};
use crate::perf::{Counter, ErrorKind, PerfError};
use crate::problem::Problem;
use crate::problem::{log_reason, LogFields};
use std::collections::HashSet;
use tracing::Level;

/// A group opened disabled: its key, its split number and its members,
/// the leader first.
pub(super) type Disabled = (GroupKey, usize, Vec<(MemberPlan, Counter)>);

impl Engine {
    /// Enables the groups opened disabled ([`Opening::disabled`](super::Opening::disabled)):
    /// they count from now on, and groups opened later are enabled as they
    /// open.
    pub fn enable(&mut self) {
        let Some(pending) = self.disabled.take() else {
            return;
        };
        for (key, split, opened) in pending {
            if let Some(g) = self.enable_opened(&key, split, opened) {
                self.groups.push(g);
            }
        }
        self.refresh();
    }

    /// Enables a group opened disabled: the group, or `None` (the problem
    /// noted for its metrics, its descriptors closed) when the kernel
    /// refuses.
    fn enable_opened(
        &mut self,
        key: &GroupKey,
        split: usize,
        opened: Vec<(MemberPlan, Counter)>,
    ) -> Option<Group> {
        let first = opened.first()?;
        if let Err(e) = self.kernel.enable_group(&first.1, &first.0.attr, key.cpu) {
            for m in &opened {
                self.note(m.0.metric, e.problem());
            }
            self.fds.closed(opened.len());
            return None;
        }
        Some(self.enabled_group(key, split, opened))
    }

    /// Starts a round of opening: how many fds the budget still allows.
    pub(super) fn begin_opening(&mut self) {
        let open = self.open_fds();
        self.fds.begin(open);
    }

    /// Opens one member through the kernel, within the fd budget.
    fn open_member(
        &mut self,
        mp: &MemberPlan,
        cpu: u32,
        leader: Option<&Counter>,
    ) -> Result<Counter, PerfError> {
        if !self.fds.has_room() {
            // What the kernel would say past the limit, without asking it.
            return Err(PerfError::new("open", &mp.attr, cpu, libc::EMFILE));
        }
        let c = self.kernel.open(&mp.attr, cpu, leader)?;
        self.fds.opened();
        Ok(c)
    }

    /// Opens `members` as one group, or, when they need more counters
    /// than the PMU has free (where they were measured:
    /// [`Engine::counter_budgets`]), as
    /// groups that fit, reporting [`Problem::GroupTooLarge`] first: a
    /// group that can never be scheduled is split before it is opened,
    /// not discovered as zeros later. Returns the groups opened.
    fn open_group(&mut self, key: GroupKey, members: Vec<MemberPlan>) -> Vec<Group> {
        let Some(chunks) = self.fit_to_counters(&key, &members) else {
            return self.open_one_group(key, members);
        };
        let mut out = Vec::new();
        let mut k = key.split;
        for chunk in chunks {
            let gs = self.open_one_group(
                GroupKey {
                    split: k,
                    ..key.clone()
                },
                chunk,
            );
            k += gs.len().max(1);
            out.extend(gs);
        }
        out
    }

    /// `members` cut into groups of at most the PMU's free counters (a
    /// perf-metrics `slots` unit stays whole), with the problem noted for
    /// each metric; `None` when they fit as one group, or nothing says how
    /// many counters there are.
    fn fit_to_counters(
        &mut self,
        key: &GroupKey,
        members: &[MemberPlan],
    ) -> Option<Vec<Vec<MemberPlan>>> {
        let free = self.counters.free(&key.pmu)?;
        if key.split != 0 {
            return None;
        }
        let chunks = super::plan::fit_chunks(&self.table, members, free)?;
        let set = self
            .resolution
            .sets
            .get(key.set)
            .map_or_else(String::new, |s| s.name.clone());
        let problem = Problem::GroupTooLarge {
            set,
            pmu: key.pmu.clone(),
            events: members.len(),
            counters: free,
        };
        let first_time = members.first().is_some_and(|m| {
            self.runtime
                .get(m.metric)
                .is_some_and(|rt| !rt.reasons.contains(&problem))
        });
        if first_time {
            // Once, not per CPU.
            log_reason!(
                Level::WARN,
                LogFields::of(&problem),
                [pmu = %key.pmu,],
                [],
                "group larger than the PMU's free counters; opening it as groups that fit"
            );
        }
        for m in members {
            // Counted (multiplexed), so not through `note`, which logs
            // the metric as unavailable.
            if let Some(rt) = self.runtime.get_mut(m.metric) {
                if !rt.reasons.contains(&problem) {
                    rt.reasons.push(problem.clone());
                }
            }
        }
        Some(chunks)
    }

    /// Opens `members` as one group (leader first), splitting off members
    /// the PMU refuses to group. Returns the groups opened.
    fn open_one_group(&mut self, key: GroupKey, members: Vec<MemberPlan>) -> Vec<Group> {
        let mut out = Vec::new();
        let mut pending = members;
        let mut split = key.split;
        while !pending.is_empty() {
            let mut opened: Vec<(MemberPlan, Counter)> = Vec::new();
            let mut deferred = Vec::new();
            for mp in pending.drain(..) {
                let leader = opened.first().map(|m| &m.1);
                match self.open_member(&mp, key.cpu, leader) {
                    Ok(counter) => opened.push((mp, counter)),
                    Err(e)
                        if leader.is_some()
                            && matches!(e.kind, ErrorKind::Invalid | ErrorKind::Busy) =>
                    {
                        // The PMU will not take it in this group (too many
                        // events, one-event-per-group drivers): own group.
                        deferred.push(mp);
                    }
                    Err(e) => self.open_failed(&mp, e),
                }
            }
            if let Some(d) = self.disabled.as_mut().filter(|_| !opened.is_empty()) {
                d.push((key.clone(), split, opened));
                split += 1;
            } else if let Some(g) = self.enable_opened(&key, split, opened) {
                out.push(g);
                split += 1;
            }
            pending = deferred;
        }
        out
    }

    /// A group the kernel counts from now on: its series become live, and
    /// those that never counted before start now.
    fn enabled_group(
        &mut self,
        key: &GroupKey,
        split: usize,
        opened: Vec<(MemberPlan, Counter)>,
    ) -> Group {
        let now = now_unix_nanos();
        let mut members = Vec::with_capacity(opened.len());
        for (plan, counter) in opened {
            let series = self.series.of(&plan.series);
            let detail = self.series.of(&plan.detail);
            for (i, exported) in [(series, true), (detail, false)] {
                let st = &mut self.series[i];
                st.live = true;
                if exported {
                    st.exported = true;
                }
                if i == detail {
                    st.detail = true;
                }
                if st.start_ns == 0 && !plan.snapshot {
                    st.start_ns = now;
                }
            }
            let role = super::trust::role(&self.table, &plan.attr);
            members.push(Member {
                role,
                check: role.map(|_| Box::default()),
                plan,
                series,
                detail,
                counter,
                high: 0.0,
                last_raw: 0,
                unmoved: 0,
            });
        }
        let at = super::plan::level_label(&self.table, self.per(key.set), key.cpu);
        let time_slot = self.times.slot_of(&self.resolution, key.set, key.cpu, at);
        self.times.opened(time_slot, now);
        Group {
            key: GroupKey {
                split,
                ..key.clone()
            },
            members,
            time_slot,
            last_enabled: 0,
            last_running: 0,
            never_ran: 0,
            share: None,
            stalled: false,
            split: false,
        }
    }

    fn open_failed(&mut self, mp: &MemberPlan, e: PerfError) {
        match e.kind {
            ErrorKind::CpuOffline => self.cpus.retry_open = true,
            ErrorKind::FdLimit => self.note_fd_limit(mp, &e),
            _ => self.note(mp.metric, e.problem()),
        }
    }

    /// Brings open groups in line with the plan on the current CPUs:
    /// groups no longer planned (their CPU went offline) are read one last
    /// time and closed, planned groups that are not open are opened.
    pub(super) fn reconcile(&mut self) {
        let plan = self.plan();
        let planned: HashSet<(usize, &str, u32)> = plan
            .keys()
            .map(|k| (k.set, k.pmu.as_str(), k.cpu))
            .collect();
        let (keep, gone): (Vec<Group>, Vec<Group>) = std::mem::take(&mut self.groups)
            .into_iter()
            .partition(|g| planned.contains(&(g.key.set, g.key.pmu.as_str(), g.key.cpu)));
        self.groups = keep;
        if !gone.is_empty() {
            tracing::info!(
                closed = gone.len(),
                "closing groups of offline CPUs after a last read"
            );
            self.close_after_last_read(gone);
        }
        self.begin_opening();
        let open: HashSet<(usize, String, u32)> = self
            .groups
            .iter()
            .map(|g| (g.key.set, g.key.pmu.clone(), g.key.cpu))
            .collect();
        for (key, members) in plan {
            if !open.contains(&(key.set, key.pmu.clone(), key.cpu)) {
                let gs = self.open_group(key, members);
                self.groups.extend(gs);
            }
        }
        self.refresh();
    }

    /// Splits a group that never runs into single-event groups (a
    /// perf-metrics `slots` leader keeps its metric events).
    pub(super) fn split_group(&mut self, idx: usize) {
        let g = self.groups.remove(idx);
        tracing::warn!(set = g.key.set, pmu = %g.key.pmu, cpu = g.key.cpu, members = g.members.len(),
            "group never scheduled on the PMU (more events than counters?); splitting it into single-event groups");
        let next_split = self
            .groups
            .iter()
            .filter(|o| o.key.set == g.key.set && o.key.pmu == g.key.pmu && o.key.cpu == g.key.cpu)
            .map(|o| o.key.split + 1)
            .max()
            .unwrap_or(1)
            .max(g.key.split + 1);
        let mut k = next_split;
        let plans: Vec<MemberPlan> = g.members.iter().map(|m| m.plan.clone()).collect();
        let key = g.key.clone();
        close_group(g);
        self.begin_opening();
        for unit in super::plan::split_units(&self.table, plans) {
            let gs = self.open_group(
                GroupKey {
                    split: k,
                    ..key.clone()
                },
                unit,
            );
            k += gs.len().max(1);
            self.groups.extend(gs);
        }
    }
}

/// Closes a group's fds, members before the leader (closing a leader first
/// would turn the members into singleton groups for a moment).
pub(super) fn close_group(mut g: Group) {
    while g.members.len() > 1 {
        g.members.pop();
    }
}
