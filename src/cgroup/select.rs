//! [`Selector`]: a scan (walk, ids, the bound), and whether the tree
//! changed since.

use super::{rank, tree::Tree, walk};
use super::{Cgroup, CgroupError, LeftOut, LeftOutReason, Root, Selection};
use crate::config::cgroups::CgroupsConfig;
use crate::problem::{log_reason, LogFields};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::time::Instant;
use tracing::Level;

/// Selects cgroups under a root by a `cgroups:` section, remembering the
/// previous scan's `cpu.stat` usage to rank by usage since then.
#[derive(Debug)]
pub struct Selector {
    root: Root,
    config: CgroupsConfig,
    globs: Vec<walk::PathGlob>,
    /// `usage_usec` by cgroup id at the last ranking.
    usage: HashMap<u64, u64>,
    /// The ids counted by the last selection (they keep their places
    /// between rankings and against near-equal newcomers).
    counted: HashSet<u64>,
    /// When the next ranking is due (None: at the next selection over
    /// the bound).
    next_rank: Option<Instant>,
    /// `cpu.stat` files read so far.
    usage_reads: u64,
    /// The listed tree and its watches (None: inotify unavailable, or
    /// without watches).
    tree: Option<Tree>,
    /// Walks from scratch so far.
    rewalks: u64,
    /// Whether a scan ran, and whether it left cgroups out over the
    /// limit (then a check re-ranks when the ranking is due).
    scanned: bool,
    over_limit: bool,
    /// The last walk's candidates (re-ranked without a walk).
    last: Vec<walk::Candidate>,
    /// The last walk's directories a `**` did not follow below (at
    /// [`walk::MAX_DEPTH`]).
    too_deep: Vec<String>,
    /// A change was seen since the last scan (the events are drained,
    /// so it is remembered until the next scan).
    dirty: bool,
    watch: bool,
    /// The counted cgroups of the last selection (path, directory), and
    /// the periodic read of their `cpu.stat` ([`rank::Usage`]).
    counted_dirs: Vec<(String, std::path::PathBuf)>,
    usage_reads_due: rank::UsageReads,
}

impl Selector {
    /// A selector for `root` by `config` (whose globs the config
    /// validated; one that does not compile selects nothing).
    pub fn new(root: Root, config: CgroupsConfig) -> Self {
        let globs = config
            .paths
            .iter()
            .filter_map(|p| walk::PathGlob::new(p).ok())
            .collect();
        Selector {
            root,
            config,
            globs,
            usage: HashMap::new(),
            counted: HashSet::new(),
            next_rank: None,
            usage_reads: 0,
            tree: None,
            rewalks: 0,
            scanned: false,
            over_limit: false,
            dirty: false,
            last: Vec::new(),
            too_deep: Vec::new(),
            watch: true,
            counted_dirs: Vec::new(),
            usage_reads_due: rank::UsageReads::default(),
        }
    }

    /// Without inotify: [`changed`](Self::changed) is always true (for
    /// tests and the benchmark of a plain rescan).
    pub fn without_watches(mut self) -> Self {
        self.watch = false;
        self
    }

    /// The root.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The section it selects by.
    pub fn config(&self) -> &CgroupsConfig {
        &self.config
    }

    /// How many directories the last scan watches (0 without inotify).
    pub fn watches(&self) -> usize {
        self.tree.as_ref().map_or(0, Tree::watches)
    }

    /// How many scans walked the tree from scratch (the first, then only
    /// after lost events or a failed watch; every scan without inotify).
    pub fn rewalks(&self) -> u64 {
        self.rewalks
    }

    /// How many `cpu.stat` files the rankings read so far.
    pub fn usage_reads(&self) -> u64 {
        self.usage_reads
    }

    /// Whether the selection may differ from the last scan's: no scan
    /// yet, a cgroup created or removed under a listed directory, a
    /// ranking due (cgroups left out over the limit: the ranking moves
    /// with usage), or no working inotify. Cheap: one non-blocking read.
    pub fn changed(&mut self) -> bool {
        self.tree_changed() || self.rank_due(Instant::now())
    }

    /// Over the bound, whether `rank_interval` passed since the last
    /// ranking.
    fn rank_due(&self, now: Instant) -> bool {
        self.over_limit && self.next_rank.is_none_or(|t| now >= t)
    }

    /// Whether a cgroup may have been created or removed since the last
    /// scan (remembered until the next scan: the events are drained).
    fn tree_changed(&mut self) -> bool {
        if !self.scanned || self.dirty {
            return true;
        }
        self.dirty = match self.tree.as_mut() {
            Some(t) => t.apply() || t.needs_rewalk(),
            None => true,
        };
        self.dirty
    }

    /// What the engine calls at each collection: `None` when the last
    /// selection stands; a [`scan`](Self::scan) when the tree changed;
    /// over the bound with an unchanged tree, once `rank_interval` passed,
    /// the last scan's cgroups re-ranked by their usage since (no walk).
    /// Between rankings no `cpu.stat` is read.
    pub fn scan_if_changed(&mut self) -> Result<Option<Selection>, CgroupError> {
        self.scan_if_changed_at(Instant::now())
    }

    /// [`scan_if_changed`](Self::scan_if_changed) at `now`.
    pub(crate) fn scan_if_changed_at(
        &mut self,
        now: Instant,
    ) -> Result<Option<Selection>, CgroupError> {
        let sel = if self.tree_changed() {
            self.scan_at(now).map(Some)
        } else if self.rank_due(now) {
            let last = self.last.clone();
            Ok(Some(self.settle(last, now)))
        } else {
            Ok(None)
        };
        self.read_usage_if_due(now);
        sel
    }

    /// Every `rank_interval`, reads the counted cgroups' `cpu.stat` (a
    /// ranking that just read them stands for it): [`take_usage`](Self::take_usage).
    fn read_usage_if_due(&mut self, now: Instant) {
        if !self.scanned || !self.usage_reads_due.due(now) {
            return;
        }
        let usec: Vec<(String, u64)> = self
            .counted_dirs
            .iter()
            .filter_map(|(rel, dir)| Some((rel.clone(), rank::read_usage(dir)?)))
            .collect();
        self.usage_reads += self.counted_dirs.len() as u64;
        let next = now + self.config.rank_interval;
        self.usage_reads_due.record(rank::Usage { usec }, next);
    }

    /// The counted cgroups' CPU time read since the last call (every
    /// `rank_interval`), if any.
    pub fn take_usage(&mut self) -> Option<rank::Usage> {
        self.usage_reads_due.take()
    }

    /// Walks the tree and selects: presets and globs, labels, then at
    /// most `max_cgroups`, the busiest by `cpu.stat` usage since the
    /// previous ranking. With inotify the walk goes over the listed tree
    /// as the events left it, listing only directories new to it; from
    /// scratch the first time and after lost events.
    pub fn scan(&mut self) -> Result<Selection, CgroupError> {
        self.scan_at(Instant::now())
    }

    fn scan_at(&mut self, now: Instant) -> Result<Selection, CgroupError> {
        let root = self.root.path.clone();
        std::fs::read_dir(&root).map_err(|source| CgroupError::Io {
            path: root.clone(),
            source,
        })?;
        // Events not yet applied first; from scratch (a fresh inotify
        // descriptor: closing the old one drops its watches) when they
        // were lost.
        let fresh = match &mut self.tree {
            Some(t) => {
                t.apply();
                t.needs_rewalk()
            }
            None => true,
        };
        if fresh {
            self.tree = if self.watch { Tree::new() } else { None };
            self.rewalks += 1;
        }
        let mut v = walk::Visitor {
            root: &root,
            tree: self.tree.as_mut(),
            too_deep: Vec::new(),
        };
        let candidates = v.select(&self.config, &self.globs);
        let too_deep = v.too_deep;
        for rel in too_deep.iter().filter(|r| !self.too_deep.contains(r)) {
            let p = LeftOut {
                rel: rel.clone(),
                reason: LeftOutReason::TooDeep {
                    max_depth: walk::MAX_DEPTH,
                },
            }
            .problem();
            log_reason!(
                Level::WARN,
                LogFields::of(&p),
                [cgroup = %rel,],
                [],
                "cgroups not matched below the depth bound"
            );
        }
        self.too_deep = too_deep;
        self.last = candidates.clone();
        let sel = self.settle(candidates, now);
        self.scanned = true;
        self.dirty = false;
        Ok(sel)
    }

    /// Reads the candidates' ids (one that vanished since the walk is
    /// left out as gone) and applies `max_cgroups`: over it, a ranking
    /// when one is due, else the counted keep their places.
    fn settle(&mut self, candidates: Vec<walk::Candidate>, now: Instant) -> Selection {
        let mut sel = Selection::default();
        let mut found = Vec::with_capacity(candidates.len());
        for c in candidates {
            // A cgroup's id is read once: the tree forgets it on removal.
            let known = self.tree.as_ref().and_then(|t| t.id(&c.path));
            let id = known.or_else(|| {
                let id = read_id(&c.dir)?;
                if let Some(t) = &mut self.tree {
                    t.remember_id(&c.path, id);
                }
                Some(id)
            });
            match id {
                Some(id) => found.push((c, id)),
                None => sel.left_out.push(LeftOut {
                    rel: c.rel,
                    reason: LeftOutReason::Gone,
                }),
            }
        }
        let max = self.config.max_cgroups;
        self.over_limit = found.len() > max;
        let keep: Vec<bool> = if self.over_limit {
            let won = self.rank(&found, now);
            let mut k = vec![false; found.len()];
            for i in won {
                k[i] = true;
            }
            k
        } else {
            self.usage.clear();
            self.next_rank = None;
            vec![true; found.len()]
        };
        self.counted = found
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|((_, id), _)| *id)
            .collect();
        self.counted_dirs.clear();
        for ((c, id), keep) in found.into_iter().zip(keep) {
            if keep {
                self.counted_dirs.push((c.rel.clone(), c.dir.clone()));
                let mut labels = vec![("cgroup", c.rel.clone())];
                labels.extend(c.labels);
                sel.counted.push(Cgroup {
                    rel: c.rel,
                    dir: c.dir,
                    id,
                    kind: c.kind,
                    labels,
                });
            } else {
                sel.left_out.push(LeftOut {
                    rel: c.rel,
                    reason: LeftOutReason::OverLimit { max_cgroups: max },
                });
            }
        }
        sel.left_out.extend(self.too_deep.iter().map(|rel| LeftOut {
            rel: rel.clone(),
            reason: LeftOutReason::TooDeep {
                max_depth: walk::MAX_DEPTH,
            },
        }));
        sel.left_out.sort_by(|a, b| a.rel.cmp(&b.rel));
        sel
    }

    /// The winners over the bound: ranked by `cpu.stat` usage when the
    /// ranking is due (then the next one is `rank_interval` later), else
    /// held without reading `cpu.stat` ([`rank::hold`]).
    fn rank(&mut self, found: &[(walk::Candidate, u64)], now: Instant) -> Vec<usize> {
        let due = self.next_rank.is_none_or(|t| now >= t);
        let entries: Vec<rank::Entry<'_>> = found
            .iter()
            .map(|(c, id)| rank::Entry {
                rel: c.rel.as_str(),
                id: *id,
                usage: None,
                counted: self.counted.contains(id),
            })
            .collect();
        let max = self.config.max_cgroups;
        if !due {
            return rank::hold(&entries, max);
        }
        let entries: Vec<rank::Entry<'_>> = entries
            .into_iter()
            .zip(found)
            .map(|(e, (c, _))| rank::Entry {
                usage: rank::read_usage(&c.dir),
                ..e
            })
            .collect();
        self.usage_reads += entries.len() as u64;
        let won = rank::winners(&entries, &self.usage, max);
        self.usage = entries
            .iter()
            .filter_map(|e| e.usage.map(|u| (e.id, u)))
            .collect();
        self.next_rank = Some(now + self.config.rank_interval);
        // The winners' CPU time, as read for the ranking.
        let usec = won
            .iter()
            .filter_map(|&i| entries.get(i))
            .filter_map(|e| Some((e.rel.to_string(), e.usage?)))
            .collect();
        let next = now + self.config.rank_interval;
        self.usage_reads_due.record(rank::Usage { usec }, next);
        won
    }
}

/// The cgroup id of a directory (its inode number), `None` when gone.
fn read_id(dir: &std::path::Path) -> Option<u64> {
    std::fs::metadata(dir)
        .ok()
        .filter(|m| m.is_dir())
        .map(|m| m.ino())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::{Hierarchy, Kind};
    use crate::config::cgroups::{Backend, Preset};

    fn config(paths: &[&str], max_cgroups: usize) -> CgroupsConfig {
        CgroupsConfig {
            backend: Backend::Auto,
            preset: Preset::None,
            containers: false,
            paths: paths.iter().map(|p| p.to_string()).collect(),
            max_cgroups,
            rank_interval: std::time::Duration::from_secs(30),
            sets: vec!["core".into()],
            per: crate::config::Per::Node,
        }
    }

    fn selector(dir: &std::path::Path, paths: &[&str], max: usize) -> Selector {
        let root = Root {
            path: dir.to_path_buf(),
            hierarchy: Hierarchy::V2,
        };
        Selector::new(root, config(paths, max))
    }

    /// A cgroup removed between the walk and the id read is left out as
    /// gone, and the others are counted.
    #[test]
    fn a_cgroup_gone_after_the_walk_is_left_out_as_gone() {
        let t = tempfile::tempdir().unwrap();
        for n in ["a", "b"] {
            std::fs::create_dir_all(t.path().join("app").join(n)).unwrap();
        }
        let mut s = selector(t.path(), &["app/*"], 10);
        let cands = walk::Visitor {
            root: t.path(),
            tree: None,
            too_deep: Vec::new(),
        }
        .select(&s.config, &s.globs);
        assert_eq!(cands.len(), 2);
        std::fs::remove_dir(t.path().join("app/a")).unwrap();
        let sel = s.settle(cands, Instant::now());
        assert_eq!(sel.counted.len(), 1);
        assert_eq!(sel.counted[0].rel, "app/b");
        assert_eq!(sel.counted[0].kind, Kind::Path);
        assert_eq!(
            sel.left_out,
            vec![LeftOut {
                rel: "app/a".into(),
                reason: LeftOutReason::Gone
            }]
        );
    }

    /// Over the bound, a check re-ranks once `rank_interval` passed;
    /// under it, only a change of the tree makes one.
    #[test]
    fn changed_follows_the_tree_and_the_bound() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("app/a")).unwrap();
        let mut s = selector(t.path(), &["app/*"], 1);
        assert!(s.changed());
        assert_eq!(s.scan_if_changed().unwrap().unwrap().counted.len(), 1);
        assert!(!s.changed(), "nothing changed");
        assert!(s.watches() >= 1);
        std::fs::create_dir(t.path().join("app/b")).unwrap();
        assert!(s.changed(), "a new directory is seen at once");
        let sel = s.scan_if_changed().unwrap().unwrap();
        assert_eq!((sel.counted.len(), sel.left_out.len()), (1, 1));
        assert!(
            !s.changed(),
            "over the bound, no ranking before rank_interval"
        );
        let later = Instant::now() + std::time::Duration::from_secs(31);
        assert!(
            s.scan_if_changed_at(later).unwrap().is_some(),
            "ranking due"
        );
        let mut s = selector(t.path(), &["app/*"], 5).without_watches();
        s.scan().unwrap();
        assert!(s.changed(), "without inotify every check rescans");
    }

    fn usage(dir: &std::path::Path, rel: &str, usec: u64) {
        let d = dir.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cpu.stat"), format!("usage_usec {usec}\n")).unwrap();
    }

    fn counted(sel: &Selection) -> Vec<&str> {
        sel.counted.iter().map(|c| c.rel.as_str()).collect()
    }

    /// Over the bound, `cpu.stat` is read at a ranking only, every
    /// `rank_interval`: checks between rankings read none, even when the
    /// usage moved; at the next ranking a clearly busier cgroup wins, a
    /// near-equal one does not displace a counted one.
    #[test]
    fn cpu_stat_is_read_only_at_rankings() {
        let t = tempfile::tempdir().unwrap();
        for (n, u) in [("a", 3_000_000), ("b", 2_000_000), ("c", 1_000_000)] {
            usage(t.path(), &format!("app/{n}"), u);
        }
        let mut s = selector(t.path(), &["app/*"], 2);
        let t0 = Instant::now();
        let sec = std::time::Duration::from_secs(1);
        let sel = s.scan_if_changed_at(t0).unwrap().unwrap();
        assert_eq!(counted(&sel), ["app/a", "app/b"]);
        assert_eq!(s.usage_reads(), 3);
        // c becomes the busiest: unseen until the ranking is due.
        usage(t.path(), "app/c", 9_000_000);
        for k in [1, 10, 29] {
            assert_eq!(s.scan_if_changed_at(t0 + k * sec).unwrap(), None, "{k}s");
        }
        assert_eq!(s.usage_reads(), 3, "no cpu.stat read between rankings");
        // At 30 s: c used 8 s since, b nothing: c takes b's place.
        let sel = s.scan_if_changed_at(t0 + 30 * sec).unwrap().unwrap();
        assert_eq!(counted(&sel), ["app/a", "app/c"]);
        assert_eq!(s.usage_reads(), 6);
        // Then b is a little busier than a (10%): no flap.
        usage(t.path(), "app/a", 4_000_000);
        usage(t.path(), "app/b", 3_100_000);
        usage(t.path(), "app/c", 10_000_000);
        let sel = s.scan_if_changed_at(t0 + 60 * sec).unwrap().unwrap();
        assert_eq!(counted(&sel), ["app/a", "app/c"]);
        assert_eq!(sel.left_out.len(), 1, "left out, and reported");
    }

    /// The counted cgroups' CPU time (`perf_cgroup_cpu_usage_seconds_total`)
    /// is read every `rank_interval`, under the bound too, and never in
    /// between; over it, the ranking's reads stand for it (no second read).
    #[test]
    fn counted_cpu_time_is_read_every_rank_interval() {
        let t = tempfile::tempdir().unwrap();
        usage(t.path(), "app/a", 1_000);
        usage(t.path(), "app/b", 2_000);
        let mut s = selector(t.path(), &["app/*"], 5);
        let t0 = Instant::now();
        let sec = std::time::Duration::from_secs(1);
        s.scan_if_changed_at(t0).unwrap().unwrap();
        let u = |v: &[(&str, u64)]| rank::Usage {
            usec: v.iter().map(|(r, x)| (r.to_string(), *x)).collect(),
        };
        assert_eq!(
            s.take_usage(),
            Some(u(&[("app/a", 1_000), ("app/b", 2_000)]))
        );
        assert_eq!(s.take_usage(), None, "taken");
        assert_eq!(s.usage_reads(), 2);
        usage(t.path(), "app/a", 5_000);
        for k in [1, 29] {
            assert_eq!(s.scan_if_changed_at(t0 + k * sec).unwrap(), None);
            assert_eq!(s.take_usage(), None, "{k}s: not due");
        }
        assert_eq!(s.usage_reads(), 2, "no read between intervals");
        s.scan_if_changed_at(t0 + 30 * sec).unwrap();
        assert_eq!(
            s.take_usage(),
            Some(u(&[("app/a", 5_000), ("app/b", 2_000)]))
        );
        assert_eq!(s.usage_reads(), 4);
        // Over the bound: the ranking's reads, of the winners only.
        let mut s = selector(t.path(), &["app/*"], 1);
        s.scan_if_changed_at(t0).unwrap().unwrap();
        assert_eq!(s.take_usage(), Some(u(&[("app/a", 5_000)])));
        assert_eq!(s.usage_reads(), 2, "one read per cgroup, for both");
    }

    /// kubepods created after the first scan (the kubelet started later)
    /// is noticed through the root's watch.
    #[test]
    fn a_tree_that_appears_later_is_noticed() {
        let t = tempfile::tempdir().unwrap();
        let mut c = config(&[], 10);
        c.preset = Preset::Kubernetes;
        let mut s = Selector::new(
            Root {
                path: t.path().to_path_buf(),
                hierarchy: Hierarchy::V2,
            },
            c,
        );
        assert!(s.scan().unwrap().counted.is_empty());
        assert!(!s.changed());
        std::fs::create_dir_all(t.path().join("kubepods/pod0123456789abcdef")).unwrap();
        assert!(s.changed());
        assert_eq!(s.scan().unwrap().counted.len(), 1);
    }

    /// Issue 28 item 8: a cgroup named with bytes that are not UTF-8 is
    /// counted under its own label (not reported gone), apart from its
    /// lossy twin, through the walk, the tree's events and a removal.
    #[test]
    fn names_that_are_not_utf8_are_counted_apart_from_their_lossy_twin() {
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().unwrap();
        let app = t.path().join("app");
        let bytes = app.join(std::ffi::OsStr::from_bytes(b"x\xff"));
        let lossy = app.join("x\u{FFFD}");
        let backslash = app.join(r"x\xff");
        for d in [&bytes, &lossy] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut s = selector(t.path(), &["app/*"], 10);
        let sel = s.scan_if_changed().unwrap().unwrap();
        assert_eq!(counted(&sel), [r"app/x\xff", "app/x\u{FFFD}"]);
        assert!(sel.left_out.is_empty(), "{:?}", sel.left_out);
        assert_eq!(sel.counted[0].dir, bytes);
        assert_eq!(sel.counted[1].dir, lossy);
        assert_ne!(sel.counted[0].id, sel.counted[1].id);
        // One more created (seen through the watch): a real backslash.
        std::fs::create_dir(&backslash).unwrap();
        let sel = s.scan_if_changed().unwrap().unwrap();
        assert_eq!(
            counted(&sel),
            [r"app/x\x5cxff", r"app/x\xff", "app/x\u{FFFD}"]
        );
        assert_eq!(sel.counted[0].dir, backslash);
        // The byte name removed: its twin stays.
        std::fs::remove_dir(&bytes).unwrap();
        let sel = s.scan_if_changed().unwrap().unwrap();
        assert_eq!(counted(&sel), [r"app/x\x5cxff", "app/x\u{FFFD}"]);
        assert!(sel.left_out.is_empty(), "{:?}", sel.left_out);
        // Without watches (a scan from scratch) the same.
        let mut s = selector(t.path(), &["app/**"], 10).without_watches();
        assert_eq!(
            counted(&s.scan().unwrap()),
            [r"app/x\x5cxff", "app/x\u{FFFD}"]
        );
    }

    #[test]
    fn a_vanished_root_is_an_error_naming_it() {
        let t = tempfile::tempdir().unwrap();
        let mut s = selector(&t.path().join("nope"), &["*"], 5);
        let e = s.scan().unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
    }
}
