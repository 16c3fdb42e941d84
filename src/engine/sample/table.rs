//! The sampled attribution as a table: entries named (process names from
//! `PERF_RECORD_COMM`, else `<procfs>/<pid>/comm`; cgroup paths from
//! `PERF_RECORD_CGROUP`, else the directory under the cgroupfs root whose
//! inode number is the id; pods by the kubelet's cgroup names) and sorted
//! by samples.

use super::agg::{Aggregate, By, Sums, MAX_TASKS, OVER_BOUND, OVER_BOUND_KEY};
use crate::cgroup::kube;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One row.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Process or thread name, cgroup path, or pod uid.
    pub name: String,
    /// The pid (process) or tid (thread).
    pub pid: Option<u32>,
    /// Samples and sums.
    pub sums: Sums,
}

/// A table of entries and the totals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Samples in total.
    pub samples: u64,
    /// Records lost.
    pub lost: u64,
    /// Throttle records.
    pub throttled: u64,
    /// Rows, most samples first.
    pub entries: Vec<Entry>,
}

impl Table {
    /// What changed since `prev` (an earlier table of the same run):
    /// entries with new samples only.
    pub fn since(&self, prev: &Table) -> Table {
        let old: HashMap<(&str, Option<u32>), &Sums> = prev
            .entries
            .iter()
            .map(|e| ((e.name.as_str(), e.pid), &e.sums))
            .collect();
        let mut entries: Vec<Entry> = self
            .entries
            .iter()
            .filter_map(|e| {
                let o = old.get(&(e.name.as_str(), e.pid));
                let samples = e.sums.samples - o.map_or(0, |o| o.samples);
                (samples > 0).then(|| Entry {
                    name: e.name.clone(),
                    pid: e.pid,
                    sums: Sums {
                        samples,
                        events: e.sums.events - o.map_or(0, |o| o.events),
                        members: e
                            .sums
                            .members
                            .iter()
                            .enumerate()
                            .map(|(i, v)| v - o.and_then(|o| o.members.get(i)).unwrap_or(&0))
                            .collect(),
                    },
                })
            })
            .collect();
        sort(&mut entries);
        Table {
            samples: self.samples - prev.samples,
            lost: self.lost - prev.lost,
            throttled: self.throttled - prev.throttled,
            entries,
        }
    }
}

fn sort(v: &mut [Entry]) {
    v.sort_by(|a, b| {
        b.sums
            .samples
            .cmp(&a.sums.samples)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.pid.cmp(&b.pid))
    });
}

/// Names of keys that no record named: read once and kept.
#[derive(Debug, Default)]
pub struct Namer {
    /// The procfs root.
    pub procfs: PathBuf,
    /// The cgroupfs root (cgroup v2), if known.
    pub cgroupfs: Option<PathBuf>,
    /// Names read from procfs, by pid/tid, with the window that last used
    /// each (see [`KEEP_WINDOWS`]).
    comm: HashMap<u32, (String, u64)>,
    /// Windows ended so far.
    window: u64,
    /// Cgroup id → path from the last walk of the cgroupfs root.
    walked: HashMap<u64, String>,
    /// Ids the last walk did not find (removed cgroups): not walked for
    /// again, so a dead cgroup's samples cost no walk per refresh/scrape.
    missing: std::collections::HashSet<u64>,
    /// How many parents deep a name is being looked for.
    depth: u32,
}

/// Windows a name read from procfs is kept without being used: a task
/// whose exit was drained before its samples (each CPU has its own ring)
/// or that was read as a zombie is never reported gone, so its name goes
/// when no sample has needed it for this many windows (a live task's is
/// read again if it needs one later).
const KEEP_WINDOWS: u64 = 10;

/// How deep the walk for cgroup ids goes.
const MAX_DEPTH: usize = 16;

/// Bound of the ids remembered as not found.
const MAX_MISSING: usize = 4096;

impl Namer {
    /// A namer reading `<procfs>/<pid>/comm` and walking `cgroupfs`.
    pub fn new(procfs: PathBuf, cgroupfs: Option<PathBuf>) -> Self {
        Namer {
            procfs,
            cgroupfs,
            ..Default::default()
        }
    }

    fn comm(&mut self, agg: &Aggregate, pid: u32, tid: u32, thread: bool) -> String {
        let id = if thread { tid } else { pid };
        if let Some(c) = agg.comms.get(&id) {
            return c.clone();
        }
        if id == 0 {
            return "swapper".into();
        }
        if let Some((c, used)) = self.comm.get_mut(&id) {
            *used = self.window;
            return c.clone();
        }
        let p = if thread {
            self.procfs.join(format!("{pid}/task/{tid}/comm"))
        } else {
            self.procfs.join(format!("{pid}/comm"))
        };
        let name = match crate::bounded::read_string(&p, 64) {
            Ok(s) => s.trim_end().to_string(),
            // Gone: a task forked while sampling has its parent's name
            // (it exited before exec'ing, or a COMM would have named it).
            Err(_) => match agg.parents.get(&id) {
                Some(&parent) if parent != id && self.depth < 8 => {
                    self.depth += 1;
                    let n = self.comm(agg, parent, parent, thread);
                    self.depth -= 1;
                    n
                }
                _ => format!("[{id}]"),
            },
        };
        self.comm.insert(id, (name.clone(), self.window));
        name
    }

    fn cgroup(&mut self, agg: &Aggregate, id: u64) -> String {
        if let Some(p) = agg.cgroups.get(&id) {
            return p.clone();
        }
        if !self.walked.contains_key(&id) && !self.missing.contains(&id) {
            if let Some(root) = &self.cgroupfs {
                self.walked.clear();
                walk(root, "", 0, &mut self.walked);
            }
            if !self.walked.contains_key(&id) {
                if self.missing.len() >= MAX_MISSING {
                    self.missing.clear();
                }
                self.missing.insert(id);
            }
        }
        self.walked
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("[cgroup {id}]"))
    }

    /// Reads now the names of processes (threads) that no record named
    /// and that were not read yet, so that a process that exits before
    /// the next refresh keeps its name: called after each drain.
    pub fn prefetch(&mut self, agg: &Aggregate) {
        if !matches!(agg.by, By::Process | By::Thread) {
            return;
        }
        let thread = agg.by == By::Thread;
        for &key in agg.sums.keys().filter(|k| **k != OVER_BOUND_KEY) {
            let id = key as u32;
            if !agg.comms.contains_key(&id) && !self.comm.contains_key(&id) {
                let pid = agg.pids.get(&key).copied().unwrap_or(id);
                self.comm(agg, pid, id, thread);
            }
        }
    }

    /// Forgets the names of the tasks `gone` (an aggregate's
    /// [`end_window`](Aggregate::end_window)); over [`MAX_TASKS`] names,
    /// all (they are read again from procfs when needed).
    pub fn end_window(&mut self, gone: &[u32]) {
        for id in gone {
            self.comm.remove(id);
        }
        self.window += 1;
        let now = self.window;
        self.comm.retain(|_, (_, used)| now - *used <= KEEP_WINDOWS);
        if self.comm.len() > MAX_TASKS {
            self.comm.clear();
        }
    }

    /// Names held (a bound's test).
    pub fn names(&self) -> usize {
        self.comm.len()
    }

    /// The name of `key` of `agg` (a process's or thread's name, a
    /// cgroup's path, a pod's uid), and its pid or tid (by process or
    /// thread).
    pub fn name(&mut self, agg: &Aggregate, key: u64) -> (String, Option<u32>) {
        match agg.by {
            _ if key == OVER_BOUND_KEY => (OVER_BOUND.to_string(), None),
            By::Process | By::Thread => {
                let pid = agg.pids.get(&key).copied().unwrap_or(key as u32);
                let thread = agg.by == By::Thread;
                (self.comm(agg, pid, key as u32, thread), Some(key as u32))
            }
            By::Cgroup => (self.cgroup(agg, key), None),
            By::Pod => (pod_of(&self.cgroup(agg, key)), None),
        }
    }

    /// The table of `agg`, entries named.
    pub fn table(&mut self, agg: &Aggregate) -> Table {
        let mut rows: HashMap<(String, Option<u32>), Sums> = HashMap::new();
        for (&key, sums) in &agg.sums {
            let (name, pid) = self.name(agg, key);
            let row = rows.entry((name, pid)).or_default();
            row.samples += sums.samples;
            row.events += sums.events;
            if row.members.len() < sums.members.len() {
                row.members.resize(sums.members.len(), 0);
            }
            for (r, v) in row.members.iter_mut().zip(&sums.members) {
                *r += v;
            }
        }
        let mut entries: Vec<Entry> = rows
            .into_iter()
            .map(|((name, pid), sums)| Entry { name, pid, sums })
            .collect();
        sort(&mut entries);
        Table {
            samples: agg.samples,
            lost: agg.lost(),
            throttled: agg.throttled(),
            entries,
        }
    }
}

/// The pod uid of a cgroup path (any component the kubelet names a pod
/// by), or `(no pod)`.
pub fn pod_of(path: &str) -> String {
    path.split('/')
        .find_map(kube::pod_uid)
        .unwrap_or_else(|| NO_POD.to_string())
}

/// The name of samples outside any pod.
pub const NO_POD: &str = "(no pod)";

/// Maps the inode number (the cgroup id on cgroup v2) of every directory
/// under `dir` to its path from the root (`/` for the root).
fn walk(dir: &Path, rel: &str, depth: usize, out: &mut HashMap<u64, String>) {
    use std::os::unix::fs::MetadataExt;
    if let Ok(m) = std::fs::metadata(dir) {
        out.insert(
            m.ino(),
            if rel.is_empty() {
                "/".into()
            } else {
                rel.into()
            },
        );
    }
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            let name = e.file_name();
            let child = format!("{rel}/{}", name.to_string_lossy());
            walk(&e.path(), &child, depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_from_cgroup_paths() {
        assert_eq!(
            pod_of("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c1d2e3f_4a5b_6c7d_8e9f_0a1b2c3d4e5f.slice/cri-containerd-01.scope"),
            "0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f"
        );
        assert_eq!(pod_of("/system.slice/ssh.service"), NO_POD);
    }

    #[test]
    fn an_id_not_found_is_not_walked_for_again() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let mut n = Namer::new(d.path().into(), Some(d.path().into()));
        let agg = Aggregate::new(By::Cgroup);
        assert_eq!(n.cgroup(&agg, u64::MAX), format!("[cgroup {}]", u64::MAX));
        std::fs::create_dir(d.path().join("late")).unwrap();
        let late = std::fs::metadata(d.path().join("late")).unwrap().ino();
        // The dead id again: no walk, so the new directory is not seen yet.
        n.cgroup(&agg, u64::MAX);
        assert!(!n.walked.contains_key(&late), "walked again for a dead id");
        // A new id walks, once.
        assert_eq!(n.cgroup(&agg, late), "/late");
    }

    #[test]
    fn cgroup_ids_are_directory_inodes_under_the_root() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        let ino = std::fs::metadata(d.path().join("a/b")).unwrap().ino();
        let mut n = Namer::new(d.path().into(), Some(d.path().into()));
        let mut agg = Aggregate::new(By::Cgroup);
        agg.sums.insert(
            ino,
            Sums {
                samples: 3,
                events: 9,
                members: vec![],
            },
        );
        agg.samples = 3;
        let t = n.table(&agg);
        assert_eq!(t.entries[0].name, "/a/b");
        assert_eq!(t.entries[0].pid, None);
    }

    #[test]
    fn a_child_that_exited_before_exec_has_its_parents_name() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("40")).unwrap();
        std::fs::write(d.path().join("40/comm"), "python3\n").unwrap();
        let mut n = Namer::new(d.path().into(), None);
        let mut agg = Aggregate::new(By::Process);
        agg.parents.insert(41, 40);
        agg.sums.insert(41, Sums::default());
        assert_eq!(n.table(&agg).entries[0].name, "python3");
    }

    #[test]
    fn a_process_named_after_a_drain_keeps_its_name_after_it_exits() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("42")).unwrap();
        std::fs::write(d.path().join("42/comm"), "brief\n").unwrap();
        let mut n = Namer::new(d.path().into(), None);
        let mut agg = Aggregate::new(By::Process);
        agg.sums.insert(42, Sums::default());
        n.prefetch(&agg);
        std::fs::remove_dir_all(d.path().join("42")).unwrap();
        assert_eq!(n.table(&agg).entries[0].name, "brief");
    }

    #[test]
    fn names_from_procfs_when_no_comm_record() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("42")).unwrap();
        std::fs::write(d.path().join("42/comm"), "worker\n").unwrap();
        let mut n = Namer::new(d.path().into(), None);
        let mut agg = Aggregate::new(By::Process);
        for (k, s) in [(42u64, 5u64), (0, 2), (77, 1)] {
            agg.sums.insert(
                k,
                Sums {
                    samples: s,
                    events: s,
                    members: vec![],
                },
            );
        }
        let t = n.table(&agg);
        let names: Vec<_> = t.entries.iter().map(|e| (e.name.as_str(), e.pid)).collect();
        assert_eq!(
            names,
            vec![
                ("worker", Some(42)),
                ("swapper", Some(0)),
                ("[77]", Some(77))
            ]
        );
        let prev = t.clone();
        agg.sums.get_mut(&42).unwrap().samples += 4;
        let d = n.table(&agg).since(&prev);
        assert_eq!(d.entries.len(), 1);
        assert_eq!(d.entries[0].sums.samples, 4);
    }

    /// A name read from procfs goes once no sample has needed it for
    /// `KEEP_WINDOWS` windows, even when the task's exit was never
    /// reported (drained from another CPU's ring before its samples): a
    /// fork storm under load otherwise left 1,400 names of dead tasks.
    #[test]
    fn names_unused_for_some_windows_are_forgotten() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("42")).unwrap();
        std::fs::write(d.path().join("42/comm"), "brief\n").unwrap();
        let mut n = Namer::new(d.path().into(), None);
        let mut agg = Aggregate::new(By::Process);
        agg.sums.insert(
            42,
            Sums {
                samples: 1,
                events: 1,
                members: vec![],
            },
        );
        n.table(&agg);
        assert_eq!(n.names(), 1);
        agg.sums.clear();
        for _ in 0..KEEP_WINDOWS {
            n.end_window(&[]);
        }
        assert_eq!(n.names(), 1, "kept while recently used");
        n.end_window(&[]);
        assert_eq!(n.names(), 0);
    }
}
