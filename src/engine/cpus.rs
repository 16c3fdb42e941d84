//! The CPUs the engine counts on, and what it knows of hotplug: the online
//! list (and a mask of it, to look a CPU up without searching), every CPU
//! ever seen online (while one of them is offline the list is re-read at
//! every collection), the kernel's hotplug generation at the last read,
//! and an open to retry on a CPU that just came online.
//!
//! Invariants: `mask[c]` is true exactly for the CPUs of `online`, and
//! `known` holds every CPU of `online`.

use std::collections::BTreeSet;

#[derive(Debug)]
pub(super) struct Cpus {
    /// The online CPUs, ascending (as the kernel lists them).
    online: Vec<u32>,
    /// `online` as a mask indexed by CPU.
    mask: Vec<bool>,
    /// Every CPU ever seen online.
    known: BTreeSet<u32>,
    /// The kernel's hotplug generation when the online list was last read
    /// (`None`: the kernel has no signal; read it at every collection).
    pub(super) hotplug_seen: Option<u64>,
    /// How many times the online list was read after start-up.
    reads: u64,
    /// An open failed with ENODEV on a CPU the online list already shows
    /// (the kernel brings perf up on a CPU slightly after it appears):
    /// retry at the next collection.
    pub(super) retry_open: bool,
}

fn mask_of(online: &[u32]) -> Vec<bool> {
    let n = online.iter().max().map_or(0, |&m| m as usize + 1);
    let mut mask = vec![false; n];
    for &c in online {
        mask[c as usize] = true;
    }
    mask
}

impl Cpus {
    /// `online` at start-up, every one of them known.
    pub(super) fn new(online: Vec<u32>) -> Cpus {
        Cpus {
            mask: mask_of(&online),
            known: online.iter().copied().collect(),
            online,
            hotplug_seen: None,
            reads: 0,
            retry_open: false,
        }
    }

    /// The CPUs online now.
    pub(super) fn online(&self) -> &[u32] {
        &self.online
    }

    pub(super) fn is_online(&self, cpu: u32) -> bool {
        self.mask.get(cpu as usize).copied().unwrap_or(false)
    }

    /// Takes a new online list; returns the previous one when it changed
    /// (`None`: unchanged).
    pub(super) fn set(&mut self, online: Vec<u32>) -> Option<Vec<u32>> {
        if online == self.online {
            return None;
        }
        self.mask = mask_of(&online);
        self.known.extend(online.iter().copied());
        Some(std::mem::replace(&mut self.online, online))
    }

    /// Counts a read of the online list.
    pub(super) fn count_read(&mut self) {
        self.reads += 1;
    }

    /// How many times the online list was read after start-up.
    pub(super) fn reads(&self) -> u64 {
        self.reads
    }

    /// Whether a CPU seen online before is offline now.
    pub(super) fn known_offline(&self) -> bool {
        self.online.len() < self.known.len()
    }

    /// Every CPU ever seen online, ascending.
    pub(super) fn known(&self) -> impl Iterator<Item = u32> + '_ {
        self.known.iter().copied()
    }

    /// Watches `cpus` for their return too (seen by an earlier engine).
    pub(super) fn remember(&mut self, cpus: impl IntoIterator<Item = u32>) {
        self.known.extend(cpus);
    }

    /// Takes the retry an open on a CPU not ready asked for.
    pub(super) fn take_retry(&mut self) -> bool {
        std::mem::take(&mut self.retry_open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds(c: &Cpus) {
        for cpu in 0..c.mask.len() as u32 + 2 {
            assert_eq!(c.is_online(cpu), c.online.contains(&cpu), "cpu {cpu}");
        }
        assert!(c.online.iter().all(|x| c.known.contains(x)));
    }

    #[test]
    fn the_mask_follows_the_online_list() {
        let mut c = Cpus::new(vec![0, 1, 3]);
        holds(&c);
        assert!(!c.is_online(2));
        assert_eq!(c.set(vec![0, 1, 3]), None, "unchanged");
        assert_eq!(c.set(vec![0, 3]), Some(vec![0, 1, 3]));
        holds(&c);
        assert_eq!(c.online(), [0, 3]);
        assert!(!c.is_online(1) && !c.is_online(64));
        assert_eq!(c.set(Vec::new()), Some(vec![0, 3]));
        holds(&c);
    }

    #[test]
    fn a_cpu_seen_once_is_watched_until_it_returns() {
        let mut c = Cpus::new(vec![0, 1]);
        assert!(!c.known_offline());
        c.set(vec![0]);
        assert!(c.known_offline());
        c.set(vec![0, 1]);
        assert!(!c.known_offline());
        // One an earlier engine saw (a reload while it was offline).
        c.remember([5]);
        assert!(c.known_offline());
        assert_eq!(c.known().collect::<Vec<_>>(), [0, 1, 5]);
        c.set(vec![0, 1, 5]);
        holds(&c);
        assert!(!c.known_offline());
    }

    #[test]
    fn a_retry_is_taken_once() {
        let mut c = Cpus::new(vec![0]);
        assert!(!c.take_retry());
        c.retry_open = true;
        assert!(c.take_retry());
        assert!(!c.take_retry());
        c.count_read();
        c.count_read();
        assert_eq!(c.reads(), 2);
    }
}
