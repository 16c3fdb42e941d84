//! Call stacks of samples (`PERF_SAMPLE_CALLCHAIN`), counted per
//! attribution key, process and stack: what a profile is made of. Only
//! collected when asked ([`Aggregate::with_stacks`](super::Aggregate)).
//!
//! **Bounds.** At most [`MAX_STACKS`] distinct (key, process, stack)
//! entries are held; samples of further stacks are counted
//! ([`Stacks::dropped`]) and their time kept under the key with an empty
//! stack, never lost. A stack holds at most
//! [`MAX_CALLCHAIN`](crate::perf::record::MAX_CALLCHAIN) frames (the
//! decoder refuses deeper chains). Processes whose maps are wanted later
//! are at most [`MAX_PIDS`].

use crate::perf::record::{Callchain, Space};
use std::collections::{BTreeSet, HashMap};

/// Distinct stacks held at most (about 100 bytes + 8 per frame each: at
/// 127 frames, about 70 MiB in the worst case).
pub const MAX_STACKS: usize = 65_536;

/// Processes remembered for symbolization at most.
pub const MAX_PIDS: usize = 16_384;

/// One stack's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackKey {
    /// The attribution key (pid, tid or cgroup id, as the aggregate's).
    pub key: u64,
    /// The process the sample ran in.
    pub pid: u32,
    /// The frames, innermost first.
    pub frames: Box<[(Space, u64)]>,
}

/// Samples and events of one stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackSums {
    /// Samples.
    pub samples: u64,
    /// Sum of their periods.
    pub events: u64,
}

/// The stacks sampled so far.
#[derive(Debug, Default)]
pub struct Stacks {
    /// Sums per stack.
    pub map: HashMap<StackKey, StackSums>,
    /// Samples whose stack was not kept (over [`MAX_STACKS`]): counted
    /// under their key with an empty stack.
    pub dropped: u64,
    /// Processes with user frames, for reading their maps (bounded).
    pub pids: BTreeSet<u32>,
    /// Processes with user frames not remembered (over [`MAX_PIDS`]).
    pub pids_dropped: u64,
}

impl Stacks {
    /// Adds a sample of `key` in `pid` with `chain`.
    pub fn add(&mut self, key: u64, pid: u32, period: u64, chain: &Callchain<'_>) {
        let frames: Box<[(Space, u64)]> = chain.frames().collect();
        if pid != 0 && frames.iter().any(|(s, _)| *s == Space::User) && !self.pids.contains(&pid) {
            if self.pids.len() < MAX_PIDS {
                self.pids.insert(pid);
            } else {
                self.pids_dropped += 1;
            }
        }
        let mut k = StackKey { key, pid, frames };
        if !self.map.contains_key(&k) && self.map.len() >= MAX_STACKS {
            self.dropped += 1;
            k.frames = Box::new([]);
        }
        let e = self.map.entry(k).or_default();
        e.samples += 1;
        e.events += period;
    }

    /// Samples held, in all.
    pub fn samples(&self) -> u64 {
        self.map.values().map(|s| s.samples).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::record::encode::{record, sample_body_with_chain, CHAIN_FORMAT};
    use crate::perf::record::{context, decode, Record};
    use crate::sys::abi;

    fn add(s: &mut Stacks, pid: u32, chain: &[u64]) {
        let fmt = CHAIN_FORMAT;
        let r = record(
            abi::RECORD_SAMPLE,
            &sample_body_with_chain(pid, 10, chain, None),
        );
        let Ok(Record::Sample(smp)) = decode(&r, &fmt) else {
            panic!("not a sample")
        };
        s.add(u64::from(pid), pid, smp.period, &smp.callchain.unwrap());
    }

    #[test]
    fn equal_stacks_are_summed_and_the_bound_holds() {
        let mut s = Stacks::default();
        add(&mut s, 5, &[context::USER, 1, 2]);
        add(&mut s, 5, &[context::USER, 1, 2]);
        add(&mut s, 5, &[context::KERNEL, 0xffff_0000, context::USER, 1]);
        assert_eq!(s.map.len(), 2);
        assert_eq!(s.samples(), 3);
        assert_eq!(s.pids.iter().copied().collect::<Vec<_>>(), vec![5]);
        // A kernel-only stack (pid 0, the idle task) remembers no pid.
        add(&mut s, 0, &[context::KERNEL, 0xffff_0001]);
        assert!(!s.pids.contains(&0));
        for i in 0..MAX_STACKS as u64 + 10 {
            add(&mut s, 6, &[context::USER, 100 + i]);
        }
        assert!(s.map.len() <= MAX_STACKS + 1, "{}", s.map.len());
        assert!(s.dropped >= 10);
        assert_eq!(s.samples(), 4 + MAX_STACKS as u64 + 10, "no sample lost");
    }
}
