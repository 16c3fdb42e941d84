//! The simulated kernel's system call surface: the [`Kernel`] seam over
//! the fd table ([`table`](super::table)). Opens validate the encoding
//! ([`accept`](super::accept)), the CPU and the group as the kernel does;
//! a group read brings the group up to the clock and reports the leader's
//! times with every member's value, leader first.

use super::rates::privilege_share;
use super::table::{KindClass, NewSlot, State};
use super::{cgroup, lock, SimHandle, SimKernel, NEXT_ID};
use crate::perf::cgroup::{CgroupHandle, CgroupInner, CgroupOpenError};
use crate::perf::{Counter, CounterInner, EventAttr, GroupReading, Kernel, OpenAt};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl SimKernel {
    /// The slot index of a counter of this kernel, or EBADF.
    fn index_of(&self, st: &State, c: &Counter) -> Result<u32, i32> {
        let CounterInner::Sim(h) = &c.inner else {
            return Err(libc::EBADF);
        };
        if !std::ptr::eq(h.state.as_ptr(), Arc::as_ptr(&self.state)) {
            return Err(libc::EBADF);
        }
        match st.slot(h.idx) {
            Some(s) if s.id == c.id => Ok(h.idx),
            _ => Err(libc::EBADF),
        }
    }

    /// The group a new member would join: its leader's index, after the
    /// kernel's checks (EBADF, EINVAL).
    fn join(&self, st: &State, g: &Counter, cpu: u32, pmu: u16, sw: bool) -> Result<u32, i32> {
        let li = self.index_of(st, g)?;
        let l = st.slot(li).ok_or(libc::EBADF)?;
        if l.leader != li || l.cpu != cpu {
            return Err(libc::EINVAL);
        }
        if !sw && st.hw_conflict(l, pmu) {
            return Err(libc::EINVAL);
        }
        if let Some(&max) = st.max_group.get(st.pmu_name(pmu)) {
            if st.count_of_pmu(li, pmu) + 1 > max {
                return Err(libc::EINVAL);
            }
        }
        Ok(li)
    }

    /// Opens a counter that gets `share` of its CPU's count.
    fn open_share(
        &self,
        attr: &EventAttr,
        cpu: u32,
        group: Option<&Counter>,
        share: f64,
    ) -> Result<Counter, i32> {
        let acc = self.accept(attr, cpu)?;
        let mut st = self.state();
        if let Some(&errno) = st.refused.get(acc.pmu) {
            return Err(errno);
        }
        if st.online.binary_search(&cpu).is_err() {
            return Err(libc::ENODEV);
        }
        let kind = st
            .intern_kind(
                acc.pmu,
                if acc.sw {
                    KindClass::Software
                } else if self.is_metric_event(attr) {
                    KindClass::Metric
                } else {
                    KindClass::Hardware
                },
                acc.rate.times(privilege_share(attr)),
                attr.type_,
                attr.config,
                attr.exclude,
            )
            .ok_or(libc::ENFILE)?;
        let pmu = st.kind_of(kind).pmu;
        let now = st.now();
        let leader = match group {
            None => None,
            Some(g) => {
                let li = self.join(&st, g, cpu, pmu, acc.sw)?;
                // Membership changes the group's schedulability: account
                // the time so far under the old one.
                st.sync_group(li, now);
                Some(li)
            }
        };
        self.topdown_rule(attr, leader.and_then(|li| st.encoding(li)))?;
        let enabled = leader
            .and_then(|li| st.slot(li))
            .is_some_and(|l| l.enabled());
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let new = NewSlot {
            id,
            kind,
            cpu,
            share,
            enabled,
            now,
        };
        let idx = st.insert(new, leader).ok_or(libc::ENFILE)?;
        Ok(Counter {
            inner: CounterInner::Sim(SimHandle {
                idx,
                state: Arc::downgrade(&self.state),
            }),
            id,
        })
    }

    /// The leader of the group of `c`, or EBADF.
    fn leader_of(&self, st: &State, c: &Counter) -> Result<u32, i32> {
        let idx = self.index_of(st, c)?;
        st.slot(idx).map(|s| s.leader).ok_or(libc::EBADF)
    }
}

impl Kernel for SimKernel {
    /// A counter of the calling thread ([`OpenAt::this_thread`]) counts
    /// as a system-wide one on its CPU: the simulated thread has the CPU
    /// to itself while it runs ([`Kernel::thread_ran`]).
    /// A cgroup counter gets the cgroup's share of each CPU's counts, read
    /// from the fixture tree's `cpu.stat` files when its directory was
    /// opened ([`cgroup`]); a cgroup removed since fails with ENOENT.
    fn sys_open(&self, attr: &EventAttr, at: OpenAt<'_>) -> Result<Counter, i32> {
        self.open_delay();
        let share = match at.cgroup {
            None => 1.0,
            Some(CgroupHandle {
                inner: CgroupInner::Sim(Some(share)),
                dir,
            }) if dir.is_dir() => *share,
            Some(CgroupHandle {
                inner: CgroupInner::Sim(_),
                ..
            }) => return Err(libc::ENOENT),
            Some(_) => return Err(libc::EBADF),
        };
        self.open_share(attr, at.cpu, at.group, share)
    }

    /// A sampler whose ring fills with records of simulated tasks
    /// ([`samples`](super::samples)), for an event this PMU accepts.
    fn sys_open_sampler(
        &self,
        spec: &crate::perf::SampleSpec,
        cpu: u32,
    ) -> Result<crate::perf::Sampler, crate::perf::ring_open::OpenStep> {
        self.open_delay();
        let acc = self.accept(&spec.attr, cpu).map_err(|e| ("open", e))?;
        {
            let st = self.state();
            if let Some(&errno) = st.refused.get(acc.pmu) {
                return Err(("open", errno));
            }
            if st.online.binary_search(&cpu).is_err() {
                return Err(("open", libc::ENODEV));
            }
        }
        let mut ids = Vec::new();
        for _ in 0..=spec.members.len() {
            ids.push(NEXT_ID.fetch_add(1, Ordering::Relaxed));
        }
        let s = super::samples::SimSampler::new(spec, cpu, &ids);
        Ok(crate::perf::Sampler {
            inner: crate::perf::ring_open::SamplerInner::Sim(s),
            cpu,
            ids,
        })
    }

    fn open_cgroup(&self, dir: &std::path::Path) -> Result<CgroupHandle, CgroupOpenError> {
        let share = cgroup::share_of(dir).map_err(|errno| CgroupOpenError {
            dir: dir.to_path_buf(),
            errno,
        })?;
        let share = cgroup::has_perf_event_state(dir).then_some(share);
        Ok(CgroupHandle {
            dir: dir.to_path_buf(),
            inner: CgroupInner::Sim(share),
        })
    }

    /// Any online CPU ([`SimKernel::set_online`]), else EINVAL: the
    /// simulation does not move real threads.
    fn pin_thread(&self, cpu: u32) -> Result<(), i32> {
        if self.state().online.binary_search(&cpu).is_ok() {
            Ok(())
        } else {
            Err(libc::EINVAL)
        }
    }

    /// The simulated CPU runs them at its instruction rate (`clock.rs`).
    fn thread_ran(&self, instructions: u64) {
        self.sim_thread_ran(instructions);
    }

    fn sys_enable(&self, leader: &Counter) -> Result<(), i32> {
        let mut st = self.state();
        let li = self.leader_of(&st, leader)?;
        let now = st.now();
        st.sync_group(li, now);
        st.enable(li);
        Ok(())
    }

    /// Sleeps for the read delay first, if one is set
    /// ([`SimKernel::set_read_delay`]).
    fn sys_read(&self, leader: &Counter, out: &mut GroupReading) -> Result<(), i32> {
        super::knobs::sleep_for(&self.read_delay_ns);
        let mut st = lock(&self.state);
        st.reads += 1;
        let li = self.leader_of(&st, leader)?;
        let now = st.now();
        st.sync_group(li, now);
        let l = st.slot(li).ok_or(libc::EBADF)?;
        out.time_enabled = l.time_enabled;
        out.time_running = (l.time_running as u64).min(l.time_enabled);
        out.values.clear();
        out.values.push((l.id, st.reported(l)));
        for (_, s) in st.members(li) {
            out.values.push((s.id, st.reported(s)));
        }
        Ok(())
    }

    /// The simulation's own online set ([`SimKernel::set_online`]).
    fn online_cpus(&self, _sysfs: &std::path::Path) -> Option<Vec<u32>> {
        Some(self.state().online.clone())
    }

    /// Counts [`SimKernel::set_online`] calls.
    fn hotplug_generation(&self) -> Option<u64> {
        Some(self.state().hotplug_generation)
    }

    fn simulated(&self) -> bool {
        true
    }

    /// The budget of [`SimKernel::set_counters`].
    fn pmu_counters(&self, pmu: &str) -> Option<usize> {
        self.state().counters.get(pmu).copied()
    }

    /// Where [`SimKernel::set_counters`] set a budget.
    fn measures_counters(&self, pmu: &str) -> bool {
        self.state().counters.contains_key(pmu)
    }

    /// On a manual clock, moves it by `d`; on the real clock, sleeps a
    /// little (the simulation schedules exactly at any time).
    fn settle(&self, d: std::time::Duration) {
        if self.state().is_manual() {
            self.advance(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        } else {
            std::thread::sleep(d.min(std::time::Duration::from_millis(1)));
        }
    }

    /// The simulated clock.
    fn monotonic_ns(&self) -> u64 {
        self.now_ns()
    }

    /// The simulated CPUs' busy time ([`SimKernel::set_busy_share`]).
    fn cpu_times(
        &self,
        _procfs: &std::path::Path,
        out: &mut Vec<crate::pmu::cpuclock::CpuTime>,
    ) -> Result<(), String> {
        self.cpu_time_reads.fetch_add(1, Ordering::Relaxed);
        self.sim_cpu_times(out);
        Ok(())
    }

    /// [`SimKernel::set_max_freq`].
    fn max_freqs(
        &self,
        _sysfs: &std::path::Path,
        _procfs: &std::path::Path,
        cpus: &[u32],
    ) -> Vec<(u32, crate::pmu::cpuclock::MaxFreq)> {
        self.sim_max_freqs(cpus)
    }
}
