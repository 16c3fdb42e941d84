//! [`Selector`]: a scan (walk, ids, the bound), and whether the tree
//! changed since.

use super::{rank, walk, watch};
use super::{Cgroup, CgroupError, LeftOut, LeftOutReason, Root, Selection};
use crate::config::cgroups::CgroupsConfig;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

/// Selects cgroups under a root by a `cgroups:` section, remembering the
/// previous scan's `cpu.stat` usage to rank by usage since then.
#[derive(Debug)]
pub struct Selector {
    root: Root,
    config: CgroupsConfig,
    globs: Vec<walk::PathGlob>,
    /// `usage_usec` by cgroup id at the last ranking.
    usage: HashMap<u64, u64>,
    /// The watches of the last scan (None: inotify unavailable).
    watcher: Option<watch::Watcher>,
    /// Whether a scan ran, and whether it left cgroups out over the
    /// limit (then every check re-ranks).
    scanned: bool,
    over_limit: bool,
    /// The last walk's candidates (re-ranked without a walk).
    last: Vec<walk::Candidate>,
    /// A change was seen since the last scan (the events are drained,
    /// so it is remembered until the next scan).
    dirty: bool,
    watch: bool,
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
            watcher: None,
            scanned: false,
            over_limit: false,
            dirty: false,
            last: Vec::new(),
            watch: true,
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
        self.watcher.as_ref().map_or(0, watch::Watcher::watches)
    }

    /// Whether the selection may differ from the last scan's: no scan
    /// yet, a cgroup created or removed under a listed directory, cgroups
    /// left out over the limit (the ranking moves with usage), or no
    /// working inotify. Cheap: one non-blocking read.
    pub fn changed(&mut self) -> bool {
        self.over_limit || self.tree_changed()
    }

    /// Whether a cgroup may have been created or removed since the last
    /// scan (remembered until the next scan: the events are drained).
    fn tree_changed(&mut self) -> bool {
        if !self.scanned || self.dirty {
            return true;
        }
        self.dirty = match self.watcher.as_mut() {
            Some(w) => !w.complete() || w.changed(),
            None => true,
        };
        self.dirty
    }

    /// What the engine calls at each collection: `None` when the last
    /// selection stands; a [`scan`](Self::scan) when the tree changed;
    /// over the bound with an unchanged tree, the last scan's cgroups
    /// re-ranked by their usage since (no walk).
    pub fn scan_if_changed(&mut self) -> Result<Option<Selection>, CgroupError> {
        if self.tree_changed() {
            self.scan().map(Some)
        } else if self.over_limit {
            let last = self.last.clone();
            Ok(Some(self.settle(last)))
        } else {
            Ok(None)
        }
    }

    /// Walks the tree and selects: presets and globs, labels, then at
    /// most `max_cgroups`, the busiest by `cpu.stat` usage since the
    /// previous scan.
    pub fn scan(&mut self) -> Result<Selection, CgroupError> {
        let root = self.root.path.clone();
        std::fs::read_dir(&root).map_err(|source| CgroupError::Io {
            path: root.clone(),
            source,
        })?;
        // Fresh watches (closing the old descriptor drops the old ones),
        // each added before its directory is listed.
        self.watcher = if self.watch {
            watch::Watcher::new()
        } else {
            None
        };
        let candidates = walk::Visitor {
            root: &root,
            watcher: self.watcher.as_mut(),
        }
        .select(&self.config, &self.globs);
        self.last = candidates.clone();
        let sel = self.settle(candidates);
        self.scanned = true;
        self.dirty = false;
        Ok(sel)
    }

    /// Reads the candidates' ids (one that vanished since the walk is
    /// left out as gone) and applies `max_cgroups`.
    fn settle(&mut self, candidates: Vec<walk::Candidate>) -> Selection {
        let mut sel = Selection::default();
        let mut found = Vec::with_capacity(candidates.len());
        for c in candidates {
            match std::fs::metadata(&c.dir) {
                Ok(m) if m.is_dir() => found.push((c, m.ino())),
                _ => sel.left_out.push(LeftOut {
                    rel: c.rel,
                    reason: LeftOutReason::Gone,
                }),
            }
        }
        let max = self.config.max_cgroups;
        self.over_limit = found.len() > max;
        let keep: Vec<bool> = if self.over_limit {
            let entries: Vec<(&str, u64, Option<u64>)> = found
                .iter()
                .map(|(c, id)| (c.rel.as_str(), *id, rank::read_usage(&c.dir)))
                .collect();
            let won = rank::winners(&entries, &self.usage, max);
            self.usage = entries
                .iter()
                .filter_map(|(_, id, u)| u.map(|u| (*id, u)))
                .collect();
            let mut k = vec![false; found.len()];
            for i in won {
                k[i] = true;
            }
            k
        } else {
            self.usage.clear();
            vec![true; found.len()]
        };
        for ((c, id), keep) in found.into_iter().zip(keep) {
            if keep {
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
        sel.left_out.sort_by(|a, b| a.rel.cmp(&b.rel));
        sel
    }
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
            sets: vec!["core".into()],
            per_cpu: false,
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
            watcher: None,
        }
        .select(&s.config, &s.globs);
        assert_eq!(cands.len(), 2);
        std::fs::remove_dir(t.path().join("app/a")).unwrap();
        let sel = s.settle(cands);
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

    /// Over the bound, every check re-ranks; under it, only a change of
    /// the tree makes one.
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
        assert!(s.changed(), "over the bound, every check re-ranks");
        let mut s = selector(t.path(), &["app/*"], 5).without_watches();
        s.scan().unwrap();
        assert!(s.changed(), "without inotify every check rescans");
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

    #[test]
    fn a_vanished_root_is_an_error_naming_it() {
        let t = tempfile::tempdir().unwrap();
        let mut s = selector(&t.path().join("nope"), &["*"], 5);
        let e = s.scan().unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
    }
}
