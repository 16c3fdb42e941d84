//! Aggregation of decoded records: samples, estimated events and group
//! read deltas per key (process, thread or cgroup id), the names the
//! side-band records give, and lost/throttle counts per CPU.

use crate::perf::record::{Record, Sample};
use std::collections::HashMap;

/// What samples are attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum By {
    /// The process (thread group): its pid.
    #[default]
    Process,
    /// The thread: its tid.
    Thread,
    /// The cgroup (`PERF_SAMPLE_CGROUP`): its path.
    Cgroup,
    /// The Kubernetes pod of the cgroup: its uid.
    Pod,
}

impl By {
    /// The word of the command line and the config.
    pub fn as_str(self) -> &'static str {
        match self {
            By::Process => "process",
            By::Thread => "thread",
            By::Cgroup => "cgroup",
            By::Pod => "pod",
        }
    }

    /// The label of the sampled families' names: the word, except for
    /// pods, whose names are their UIDs: `pod_uid` (a label named `pod`
    /// always holds a pod's name, and Kubernetes service discovery adds
    /// one of its own).
    pub fn label(self) -> &'static str {
        match self {
            By::Pod => "pod_uid",
            other => other.as_str(),
        }
    }

    /// Whether samples need `PERF_SAMPLE_CGROUP`.
    pub fn needs_cgroup(self) -> bool {
        matches!(self, By::Cgroup | By::Pod)
    }
}

/// One key's sums.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sums {
    /// Samples.
    pub samples: u64,
    /// Sum of the samples' periods: the estimated events.
    pub events: u64,
    /// Per group member (leader first): what it counted between the
    /// previous sample on the CPU and this one, summed.
    pub members: Vec<u64>,
}

/// Per-CPU ring health.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuHealth {
    /// Records the kernel dropped (`PERF_RECORD_LOST`'s counts).
    pub lost: u64,
    /// `PERF_RECORD_LOST` records seen.
    pub lost_records: u64,
    /// `PERF_RECORD_THROTTLE` records seen.
    pub throttled: u64,
    /// Records that could not be decoded, and corrupt drains.
    pub errors: u64,
}

/// The running aggregate.
#[derive(Debug, Default)]
pub struct Aggregate {
    /// How samples are keyed.
    pub by: By,
    /// Sums per key (pid, tid or cgroup id).
    pub sums: HashMap<u64, Sums>,
    /// Task names from `PERF_RECORD_COMM`, by tid.
    pub comms: HashMap<u32, String>,
    /// Each key's process id (thread mode: tid → pid).
    pub pids: HashMap<u64, u32>,
    /// Each task forked while sampling: its parent's tid (a child is
    /// named as its parent until it execs).
    pub parents: HashMap<u32, u32>,
    /// Cgroup paths from `PERF_RECORD_CGROUP`, by id.
    pub cgroups: HashMap<u64, String>,
    /// Ring health, by CPU.
    pub health: HashMap<u32, CpuHealth>,
    /// Samples in total.
    pub samples: u64,
    /// The previous group read per CPU (values by member position).
    last_read: HashMap<u32, Vec<u64>>,
}

impl Aggregate {
    /// An empty aggregate keyed `by`.
    pub fn new(by: By) -> Self {
        Aggregate {
            by,
            ..Default::default()
        }
    }

    /// Adds one decoded record, from the ring of `cpu`.
    pub fn add(&mut self, cpu: u32, r: &Record<'_>) {
        match r {
            Record::Sample(s) => self.sample(cpu, s),
            Record::Comm { pid, tid, comm } => {
                let name = String::from_utf8_lossy(comm).into_owned();
                self.comms.insert(*tid, name);
                let _ = pid;
            }
            Record::Fork { tid, ptid, .. } => match self.comms.get(ptid).cloned() {
                Some(c) => {
                    self.comms.insert(*tid, c);
                }
                None => {
                    self.parents.insert(*tid, *ptid);
                }
            },
            Record::Lost { lost, .. } => {
                let h = self.health.entry(cpu).or_default();
                h.lost += lost;
                h.lost_records += 1;
            }
            Record::Throttle {
                throttled: true, ..
            } => self.health.entry(cpu).or_default().throttled += 1,
            Record::Cgroup { id, path } => {
                self.cgroups
                    .insert(*id, String::from_utf8_lossy(path).into_owned());
            }
            _ => {}
        }
    }

    /// Counts a record or drain that could not be decoded.
    pub fn error(&mut self, cpu: u32) {
        self.health.entry(cpu).or_default().errors += 1;
    }

    fn sample(&mut self, cpu: u32, s: &Sample<'_>) {
        let key = match self.by {
            By::Process => u64::from(s.pid),
            By::Thread => u64::from(s.tid),
            By::Cgroup | By::Pod => s.cgroup.unwrap_or(0),
        };
        if matches!(self.by, By::Process | By::Thread) {
            self.pids.entry(key).or_insert(s.pid);
        }
        self.samples += 1;
        let e = self.sums.entry(key).or_default();
        e.samples += 1;
        e.events += s.period;
        if let Some(read) = &s.read {
            let last = self.last_read.entry(cpu).or_default();
            let n = read.len();
            if e.members.len() < n {
                e.members.resize(n, 0);
            }
            for (i, (value, _id)) in read.iter().enumerate() {
                // The first sample on a CPU has no previous read: its
                // counts since the group started are attributed to it.
                let prev = last.get(i).copied().unwrap_or(0);
                e.members[i] += value.saturating_sub(prev);
            }
            last.clear();
            last.extend(read.iter().map(|(v, _)| v));
        }
    }

    /// Lost records, summed over CPUs.
    pub fn lost(&self) -> u64 {
        self.health.values().map(|h| h.lost).sum()
    }

    /// Throttle records, summed over CPUs.
    pub fn throttled(&self) -> u64 {
        self.health.values().map(|h| h.throttled).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::record::{decode, encode, Format};
    use crate::sys::abi;

    #[test]
    fn samples_names_and_health_per_cpu() {
        let fmt = Format {
            sample_type: abi::SAMPLE_TID | abi::SAMPLE_TIME | abi::SAMPLE_CPU | abi::SAMPLE_PERIOD,
            read_format: 0,
        };
        let mut a = Aggregate::new(By::Process);
        let recs = [
            encode::record(abi::RECORD_COMM, &encode::comm_body(7, 7, "busy")),
            encode::record(
                abi::RECORD_SAMPLE,
                &encode::sample_body(7, 8, 1, 1, 100, None),
            ),
            encode::record(
                abi::RECORD_SAMPLE,
                &encode::sample_body(7, 7, 2, 1, 50, None),
            ),
            encode::record(
                abi::RECORD_SAMPLE,
                &encode::sample_body(9, 9, 3, 1, 10, None),
            ),
            encode::lost(1, 12),
            encode::throttle(true, 1),
            encode::throttle(false, 1),
        ];
        for r in &recs {
            a.add(1, &decode(r, &fmt).unwrap());
        }
        assert_eq!(a.samples, 3);
        assert_eq!(a.sums[&7].samples, 2);
        assert_eq!(a.sums[&7].events, 150);
        assert_eq!(a.comms[&7], "busy");
        assert_eq!(
            a.health[&1],
            CpuHealth {
                lost: 12,
                lost_records: 1,
                throttled: 1,
                errors: 0
            }
        );
    }
}
