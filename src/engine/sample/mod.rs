//! Sampling: one sampler per online CPU (system-wide, `pid = -1`), drained
//! when the kernel says there is enough to read, decoded and aggregated by
//! process, thread, cgroup or pod.
//!
//! * **Readiness.** Each live sampler's fd is registered with tokio
//!   ([`AsyncFd`]). With `watermark = 1` the kernel makes the fd readable
//!   once `wakeup_watermark` bytes (half the ring by default) are in it, so
//!   the process sleeps between batches; [`Sampling::wait`] returns at
//!   the first readable fd or at the caller's deadline (a refresh), and
//!   drains every ring either way, so a quiet CPU's samples are never
//!   older than one refresh. The simulated PMU has no fd and is drained at
//!   the deadlines only.
//! * **Loss.** When a ring is full the kernel drops records and later
//!   writes a `PERF_RECORD_LOST` with how many; those counts, and
//!   `PERF_RECORD_THROTTLE`s (the kernel lowering the rate of an event
//!   that interrupts too often), are kept per CPU ([`CpuHealth`]) and
//!   shown, never hidden. A corrupt ring is skipped to its head and
//!   counted as an error; reading goes on.
//! * **Hotplug.** A CPU that goes offline stops sampling, and the kernel
//!   never re-enables its event when it returns. [`Sampling::follow_hotplug`]
//!   (called at each refresh) watches the kernel's hotplug signal (or the
//!   online list when there is none) and, when it moved, drains every ring
//!   and reopens the samplers of the CPUs online now.

mod agg;
mod families;
mod profile;
mod stacks;
mod symbolize;
mod table;

pub use agg::{Aggregate, By, CpuHealth, Forgotten, Sums, MAX_TASKS, OVER_BOUND};
pub use families::{SampledFamilies, FAMILIES, OTHER};
pub use profile::{ProfileFilter, ProfileSample};
pub use stacks::{StackKey, StackSums, Stacks, MAX_PIDS, MAX_STACKS};
pub use symbolize::{
    Frame, Symbolizer, KERNEL_MODULE, MAX_MAPPED_PIDS, MAX_MAPPINGS, MAX_MODULES, MAX_SYMBOLS,
    UNKNOWN_MODULE,
};
pub use table::{pod_of, Entry, Namer, Table, NO_POD};

use crate::perf::record::{decode, Format};
use crate::perf::{Kernel, PerfError, SampleSpec, Sampler};
use futures_util::FutureExt;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::unix::AsyncFd;

/// Sampling could not start.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// No CPU's sampler opened: the first CPU's error.
    #[error("no CPU could be sampled: {0}")]
    Nothing(PerfError),
    /// No CPU to sample.
    #[error("no CPU to sample")]
    NoCpu,
    /// The PMU refused a sampling event on every CPU (EINVAL or
    /// EOPNOTSUPP) and is not one that samples: it counts, but its driver
    /// takes no sample period (`msr`, uncore PMUs, RAPL, ...).
    #[error("no CPU could be sampled: PMU {pmu} refuses to sample {event} (errno {errno}): it counts but cannot sample; sample an event of the core PMU (cycles), a software event (cpu-clock) or a tracepoint")]
    CannotSample {
        /// The PMU.
        pmu: String,
        /// The event.
        event: String,
        /// The errno of the first CPU.
        errno: i32,
    },
    /// The readiness registration (epoll) failed.
    #[error("cannot wait on the sampler of CPU {cpu}: {err}")]
    Register {
        /// The CPU.
        cpu: u32,
        /// Why.
        err: std::io::Error,
    },
}

/// One CPU's sampler and its readiness registration.
#[derive(Debug)]
struct Ring {
    ready: Option<AsyncFd<OwnedFd>>,
    sampler: Sampler,
}

/// What to sample, and where names come from.
#[derive(Debug, Clone)]
pub struct SamplingSettings {
    /// Per CPU, the spec to open there (the event resolved for that
    /// CPU's PMU).
    pub cpus: Vec<(u32, SampleSpec)>,
    /// How samples are attributed.
    pub by: By,
    /// The procfs root (names of processes no record named).
    pub procfs: PathBuf,
    /// The cgroupfs root (paths of cgroup ids no record named).
    pub cgroupfs: Option<PathBuf>,
}

/// Sampling on every CPU of its settings.
#[derive(Debug)]
pub struct Sampling {
    kernel: Arc<dyn Kernel>,
    /// What to open on each CPU (all of them, sampled or not).
    specs: Vec<(u32, SampleSpec)>,
    /// The hotplug generation the rings were opened at, and the online
    /// list at the last check (for a kernel without the signal).
    seen: (Option<u64>, Vec<u32>),
    rings: Vec<Ring>,
    fmt: Format,
    agg: Aggregate,
    namer: Namer,
    /// With call stacks: the maps of their processes, read after drains.
    symbols: Option<Symbolizer>,
    /// CPUs that could not be sampled, with why.
    pub failed: Vec<PerfError>,
}

impl Sampling {
    /// Opens a sampler per CPU; a CPU that fails is named in
    /// [`failed`](Self::failed), and only when none opens is it an error.
    /// Must run inside a tokio runtime with I/O enabled.
    pub fn open(kernel: &Arc<dyn Kernel>, s: SamplingSettings) -> Result<Sampling, SampleError> {
        let Some((_, first)) = s.cpus.first() else {
            return Err(SampleError::NoCpu);
        };
        let fmt = Format {
            sample_type: first.sample_type(),
            read_format: first.read_format(),
        };
        let stacks = first.callchain.is_some();
        let seen = (kernel.hotplug_generation(), Vec::new());
        let (rings, mut failed) = open_rings(kernel, &s.cpus)?;
        if rings.is_empty() {
            return Err(nothing_sampled(failed.remove(0)));
        }
        Ok(Sampling {
            kernel: kernel.clone(),
            specs: s.cpus,
            seen,
            rings,
            fmt,
            agg: if stacks {
                Aggregate::new(s.by).with_stacks()
            } else {
                Aggregate::new(s.by)
            },
            symbols: stacks.then(|| Symbolizer::new(&s.procfs)),
            namer: Namer::new(s.procfs, s.cgroupfs),
            failed,
        })
    }

    /// Reopens the samplers when CPUs went offline or online since they
    /// were opened (the hotplug generation moved, or without one the
    /// online list under `sysfs` changed): every ring is drained first,
    /// then each CPU of the settings that is online gets a new sampler.
    /// Returns whether it reopened.
    pub fn follow_hotplug(&mut self, sysfs: &std::path::Path) -> bool {
        let generation = self.kernel.hotplug_generation();
        let moved = match (generation, self.seen.0) {
            (Some(g), Some(s)) => g != s,
            _ => {
                // No signal: the online list, compared with the last one
                // (the first call only takes it).
                let online = self.kernel.online_cpus(sysfs).unwrap_or_default();
                let moved = !self.seen.1.is_empty() && online != self.seen.1;
                self.seen.1 = online;
                moved
            }
        };
        if !moved {
            return false;
        }
        self.seen.0 = generation;
        self.drain();
        self.rings.clear();
        let online = self.kernel.online_cpus(sysfs).unwrap_or_default();
        let specs: Vec<(u32, SampleSpec)> = self
            .specs
            .iter()
            .filter(|(c, _)| online.contains(c))
            .cloned()
            .collect();
        match open_rings(&self.kernel, &specs) {
            Ok((rings, failed)) => {
                tracing::info!(
                    cpus = rings.len(),
                    "sampling: CPUs went offline or online; samplers reopened"
                );
                for e in &failed {
                    tracing::warn!(error = %e, "sampling: CPU not sampled");
                }
                self.rings = rings;
                self.failed = failed;
            }
            Err(e) => tracing::warn!(error = %e, "sampling: cannot reopen after hotplug"),
        }
        true
    }
}

/// Whether events of PMU `pmu` can be sampled: the core PMUs, software
/// events, tracepoints, breakpoints and probes; others (`msr`, uncore,
/// RAPL, ...) only count.
pub fn can_sample(pmu: &str) -> bool {
    matches!(
        pmu,
        "cpu"
            | "cpu_core"
            | "cpu_atom"
            | "software"
            | "tracepoint"
            | "breakpoint"
            | "kprobe"
            | "uprobe"
    ) || pmu.starts_with("armv")
        || pmu.is_empty()
}

/// Why no CPU could be sampled, from the first CPU's error: a PMU that
/// only counts says so (its EINVAL is not a wrong encoding).
fn nothing_sampled(e: PerfError) -> SampleError {
    if !can_sample(&e.pmu) && matches!(e.errno, libc::EINVAL | libc::EOPNOTSUPP) {
        return SampleError::CannotSample {
            pmu: e.pmu,
            event: e.event,
            errno: e.errno,
        };
    }
    SampleError::Nothing(e)
}

/// Opens a sampler per CPU of `cpus`: the rings, and the CPUs that
/// failed (with why).
fn open_rings(
    kernel: &Arc<dyn Kernel>,
    cpus: &[(u32, SampleSpec)],
) -> Result<(Vec<Ring>, Vec<PerfError>), SampleError> {
    let mut rings = Vec::new();
    let mut failed = Vec::new();
    {
        for (cpu, spec) in cpus {
            match kernel.open_sampler(spec, *cpu) {
                Ok(sampler) => {
                    let ready = sampler
                        .readiness()
                        .transpose()
                        .map_err(|err| SampleError::Register { cpu: *cpu, err })?;
                    rings.push(Ring { ready, sampler });
                }
                // Said by the caller ([`Sampling::failed`]), or in the
                // error when no CPU opened.
                Err(e) => failed.push(e),
            }
        }
    }
    Ok((rings, failed))
}

impl Sampling {
    /// The CPUs sampled.
    pub fn cpus(&self) -> Vec<u32> {
        self.rings.iter().map(|r| r.sampler.cpu).collect()
    }

    /// The bytes the rings map.
    pub fn ring_bytes(&self) -> usize {
        self.rings.iter().map(|r| r.sampler.ring_bytes()).sum()
    }

    /// Drains every ring now; returns the records read.
    pub fn drain(&mut self) -> u64 {
        let mut n = 0;
        let (fmt, agg) = (&self.fmt, &mut self.agg);
        for r in &mut self.rings {
            let cpu = r.sampler.cpu;
            let res = r.sampler.drain(&mut |rec| match decode(rec, fmt) {
                Ok(rec) => agg.add(cpu, &rec),
                Err(e) => {
                    tracing::debug!(cpu, error = %e, "undecodable record skipped");
                    agg.error(cpu);
                }
            });
            match res {
                Ok(d) => n += d.records,
                Err(e) => {
                    tracing::warn!(cpu, error = %e, "corrupt ring skipped to its head");
                    agg.error(cpu);
                }
            }
        }
        n
    }

    /// Sleeps until a ring reaches its wakeup watermark or `until`, then
    /// drains every ring. Returns the records read.
    pub async fn wait(&mut self, until: tokio::time::Instant) -> u64 {
        {
            let ready: Vec<_> = self
                .rings
                .iter()
                .filter_map(|r| r.ready.as_ref())
                .map(|a| Box::pin(a.readable()))
                .collect();
            if ready.is_empty() {
                tokio::time::sleep_until(until).await;
            } else {
                tokio::select! {
                    _ = futures_util::future::select_all(ready) => {}
                    _ = tokio::time::sleep_until(until) => {}
                }
            }
        }
        // Clear the readiness of every fd before draining: a wakeup after
        // this point sets it again, so no batch is missed, and a drained
        // ring does not stay readable (which would spin).
        for a in self.rings.iter().filter_map(|r| r.ready.as_ref()) {
            if let Some(Ok(mut g)) = a.readable().now_or_never() {
                g.clear_ready();
            }
        }
        let n = self.drain();
        self.namer.prefetch(&self.agg);
        if let (Some(sy), Some(st)) = (&mut self.symbols, &self.agg.stacks) {
            sy.prefetch(&st.pids);
        }
        n
    }

    /// The stacks sampled so far that `filter` keeps, named and
    /// symbolized (`None` when stacks were not asked for). Symbolizing
    /// reads files: called once, at the end of a profile.
    pub fn profile(&mut self, filter: &ProfileFilter) -> Option<Vec<ProfileSample>> {
        self.hottest(filter, None)
    }

    /// [`profile`](Self::profile), only the `limit` hottest stacks (when
    /// given) symbolized and returned.
    pub fn hottest(
        &mut self,
        filter: &ProfileFilter,
        limit: Option<usize>,
    ) -> Option<Vec<ProfileSample>> {
        let (Some(sy), Some(st)) = (&mut self.symbols, &self.agg.stacks) else {
            return None;
        };
        sy.prefetch(&st.pids);
        Some(profile::build(
            st,
            sy,
            &self.agg,
            &mut self.namer,
            filter,
            limit,
        ))
    }

    /// Samples whose stacks were not kept (over [`MAX_STACKS`]).
    pub fn stacks_dropped(&self) -> u64 {
        self.agg.stacks.as_ref().map_or(0, |s| s.dropped)
    }

    /// The aggregate so far.
    pub fn aggregate(&self) -> &Aggregate {
        &self.agg
    }

    /// The table so far (cumulative), entries named.
    pub fn table(&mut self) -> Table {
        self.namer.table(&self.agg)
    }

    /// The table of what was sampled since the last window (entries
    /// named), then a new window: what `serve` publishes. Exited tasks
    /// are forgotten once in a window taken, and the tables stay within
    /// [`MAX_TASKS`] (see [`Aggregate::end_window`]).
    pub fn take_window(&mut self) -> Table {
        let t = self.namer.table(&self.agg);
        let gone = self.agg.end_window();
        self.namer.end_window(&gone);
        t
    }

    /// Task entries held (names, parents, keys, and names read from
    /// procfs), and the tasks forgotten so far.
    pub fn tasks(&self) -> (usize, Forgotten) {
        (self.agg.tasks() + self.namer.names(), self.agg.forgotten)
    }

    /// Ring health by CPU.
    pub fn health(&self) -> Vec<(u32, CpuHealth)> {
        let mut v: Vec<_> = self
            .cpus()
            .into_iter()
            .map(|c| (c, self.agg.health.get(&c).copied().unwrap_or_default()))
            .collect();
        v.sort_by_key(|(c, _)| *c);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::sim::SimKernel;
    use crate::perf::SampleRate;
    use crate::pmu::PmuTable;

    #[test]
    fn samplers_follow_cpu_hotplug() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/intel-skx");
        let sim = Arc::new(SimKernel::new(PmuTable::discover(&root).unwrap()));
        let kernel: Arc<dyn Kernel> = sim.clone();
        let spec = SampleSpec::cpu_clock(SampleRate::Frequency(99));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let settings = SamplingSettings {
                cpus: (0..8).map(|c| (c, spec.clone())).collect(),
                by: By::Process,
                procfs: "/nonexistent".into(),
                cgroupfs: None,
            };
            let mut s = Sampling::open(&kernel, settings).unwrap();
            assert!(!s.follow_hotplug(&root));
            sim.set_online(3, false);
            assert!(s.follow_hotplug(&root));
            assert_eq!(s.cpus(), vec![0, 1, 2, 4, 5, 6, 7]);
            assert!(!s.follow_hotplug(&root));
            sim.set_online(3, true);
            assert!(s.follow_hotplug(&root));
            assert_eq!(s.cpus(), (0..8).collect::<Vec<_>>());
        });
    }
}
