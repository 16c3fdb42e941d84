//! The walk: which directories under the root the preset and the globs
//! select, with their labels. Only the levels a preset names are listed
//! (kubepods, its QoS levels, pods), and a glob is walked from its
//! literal prefix down to its depth, so a scan never lists the whole
//! tree.

use super::kube::{self, Qos};
use super::tree::{self, Tree};
use super::{name, Kind};
use crate::config::cgroups::{CgroupsConfig, Preset};
use globset::{GlobBuilder, GlobMatcher};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How deep a `**` glob is followed (cgroup trees are shallow; this
/// bounds a hostile one).
pub const MAX_DEPTH: usize = 32;

/// A directory the walk selected, before its id is read.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The path relative to the root as a label ([`name::label`]: the
    /// `cgroup` label).
    pub rel: String,
    /// The path relative to the root, as the kernel names it.
    pub path: OsString,
    /// The directory.
    pub dir: PathBuf,
    /// What it is.
    pub kind: Kind,
    /// Labels after `cgroup`.
    pub labels: Vec<(&'static str, String)>,
}

/// A compiled `paths:` glob: its literal prefix (walked from), how many
/// components below the root it reaches (None: `**`), and the matcher.
#[derive(Debug, Clone)]
pub struct PathGlob {
    base: Vec<String>,
    depth: Option<usize>,
    matcher: GlobMatcher,
}

impl PathGlob {
    /// Compiles a glob (relative to the root; `*` stays within one
    /// component, `**` crosses them).
    pub fn new(pattern: &str) -> Result<PathGlob, globset::Error> {
        let p = pattern.trim_matches('/');
        let matcher = GlobBuilder::new(p)
            .literal_separator(true)
            .backslash_escape(true)
            .build()?
            .compile_matcher();
        let comps: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
        let base = comps
            .iter()
            .take_while(|c| !c.contains(['*', '?', '[', '{', '\\']))
            .map(|c| c.to_string())
            .collect();
        let depth = (!comps.contains(&"**")).then_some(comps.len());
        Ok(PathGlob {
            base,
            depth,
            matcher,
        })
    }
}

/// Lists subdirectories, watching each listed directory first; with a
/// [`Tree`], a directory listed before is not listed again (the tree's
/// events keep its names current).
pub struct Visitor<'a> {
    /// The cgroup root.
    pub root: &'a Path,
    /// The listed tree (None: list every directory afresh, no watches).
    pub tree: Option<&'a mut Tree>,
    /// Directories at [`MAX_DEPTH`] with subdirectories a `**` glob did
    /// not follow, as labels (sorted, each once).
    pub too_deep: Vec<String>,
}

impl Visitor<'_> {
    /// The subdirectory names of `rel` (sorted). A directory that cannot
    /// be listed (gone, or not a directory) gives none: what was selected
    /// in it is found gone when its id is read.
    fn list(&mut self, rel: &OsStr) -> Vec<OsString> {
        if let Some(names) = self.tree.as_deref().and_then(|t| t.listing(rel)) {
            return names.to_vec();
        }
        let wd = self
            .tree
            .as_deref_mut()
            .and_then(|t| t.watch(self.root, rel));
        let dir = self.root.join(rel);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            self.watch_nearest(rel, &dir);
            return Vec::new();
        };
        let mut v: Vec<OsString> = rd
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name())
            .collect();
        v.sort();
        if let (Some(t), Some(wd)) = (self.tree.as_deref_mut(), wd) {
            t.insert(rel, wd, v.clone());
        }
        v
    }

    /// A directory that does not exist (yet: kubepods before the kubelet
    /// starts) is watched for through its nearest existing ancestor.
    fn watch_nearest(&mut self, rel: &OsStr, dir: &Path) {
        let Some(t) = self.tree.as_deref_mut() else {
            return;
        };
        let mut at = rel;
        while !at.is_empty() {
            let parent = tree::parent(at);
            if parent.is_empty() || self.root.join(parent).is_dir() {
                t.watch(self.root, parent);
                break;
            }
            at = parent;
        }
        // Created between the listing and the watch: walk again.
        if dir.exists() {
            t.missed();
        }
    }

    /// Selects by `config`: the preset's cgroups first, then the globs'
    /// (a cgroup both select keeps the preset's kind and labels).
    pub fn select(&mut self, config: &CgroupsConfig, globs: &[PathGlob]) -> Vec<Candidate> {
        // By label (one-to-one with the path): the selection's order.
        let mut out: BTreeMap<String, Candidate> = BTreeMap::new();
        let mut found = Vec::new();
        match config.preset {
            Preset::Kubernetes => self.kubernetes(config.containers, &mut found),
            Preset::Systemd => self.systemd(&mut found),
            Preset::None => {}
        }
        for g in globs {
            self.glob(g, &mut found);
        }
        for c in found {
            out.entry(c.rel.clone()).or_insert(c);
        }
        out.into_values().collect()
    }

    fn candidate(
        &self,
        path: OsString,
        kind: Kind,
        labels: Vec<(&'static str, String)>,
    ) -> Candidate {
        Candidate {
            dir: self.root.join(&path),
            rel: name::label(&path),
            path,
            kind,
            labels,
        }
    }

    fn systemd(&mut self, out: &mut Vec<Candidate>) {
        let slice = OsStr::new("system.slice");
        for n in self.list(slice) {
            if n.as_bytes().ends_with(b".service") {
                out.push(self.candidate(tree::join(slice, &n), Kind::Service, Vec::new()));
            }
        }
    }

    /// Kubernetes names are UTF-8 (a pod's uid, a container's id): a
    /// directory whose name is not is neither.
    fn kubernetes(&mut self, containers: bool, out: &mut Vec<Candidate>) {
        for base in kube::KUBEPODS {
            for child in self.list(OsStr::new(base)) {
                let Some(child) = child.to_str() else {
                    continue;
                };
                if let Some(qos) = kube::qos_level(child) {
                    let level = format!("{base}/{child}");
                    for pod in self.list(OsStr::new(&level)) {
                        if let Some(pod) = pod.to_str() {
                            self.pod(&level, pod, qos, containers, out);
                        }
                    }
                } else {
                    self.pod(base, child, Qos::Guaranteed, containers, out);
                }
            }
        }
    }

    fn pod(
        &mut self,
        parent: &str,
        name: &str,
        qos: Qos,
        containers: bool,
        out: &mut Vec<Candidate>,
    ) {
        let Some(uid) = kube::pod_uid(name) else {
            return;
        };
        let rel = format!("{parent}/{name}");
        let is_static = kube::is_static_uid(&uid);
        let mut labels = vec![("pod_uid", uid), ("qos_class", qos.as_str().to_string())];
        // Its UID is the kubelet's config hash, which kube_pod_info does
        // not list (see [`kube::is_static_uid`]): said, so it is not taken
        // for a pod kube-state-metrics has not seen yet.
        if is_static {
            labels.push(("static_pod", "true".to_string()));
        }
        if containers {
            for c in self.list(OsStr::new(&rel)) {
                let Some(c) = c.to_str() else {
                    continue;
                };
                if let Some(id) = kube::container_id(c) {
                    let mut l = labels.clone();
                    l.push(("container_id", id.to_string()));
                    out.push(self.candidate(format!("{rel}/{c}").into(), Kind::Container, l));
                }
            }
        }
        out.push(self.candidate(rel.into(), Kind::Pod, labels));
    }

    fn glob(&mut self, g: &PathGlob, out: &mut Vec<Candidate>) {
        let base = OsString::from(g.base.join("/"));
        if !base.is_empty() && g.matcher.is_match(&base) && self.root.join(&base).is_dir() {
            out.push(self.candidate(base.clone(), Kind::Path, Vec::new()));
        }
        let max = g.depth.unwrap_or(MAX_DEPTH).min(MAX_DEPTH);
        let mut stack = vec![(base, g.base.len())];
        while let Some((rel, depth)) = stack.pop() {
            if depth >= max {
                // A `**` stops here: said when there is more below.
                if g.depth.is_none() && has_subdir(&self.root.join(&rel)) {
                    let rel = name::label(&rel);
                    if let Err(at) = self.too_deep.binary_search(&rel) {
                        self.too_deep.insert(at, rel);
                    }
                }
                continue;
            }
            for n in self.list(&rel) {
                // Matched as bytes: `*` matches a name that is not UTF-8.
                let child = tree::join(&rel, &n);
                if g.matcher.is_match(Path::new(&child)) {
                    out.push(self.candidate(child.clone(), Kind::Path, Vec::new()));
                }
                stack.push((child, depth + 1));
            }
        }
    }
}

/// Whether `dir` has a subdirectory (read without a watch: only at the
/// depth bound).
fn has_subdir(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.filter_map(Result::ok)
            .any(|e| e.file_type().is_ok_and(|t| t.is_dir()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_know_their_base_and_depth() {
        let g = PathGlob::new("/app/*/x").unwrap();
        assert_eq!(
            (g.base.clone(), g.depth),
            (vec!["app".to_string()], Some(3))
        );
        assert!(g.matcher.is_match("app/a/x") && !g.matcher.is_match("app/a/b/x"));
        let g = PathGlob::new("app/**").unwrap();
        assert_eq!(g.depth, None);
        assert!(g.matcher.is_match("app/a/b"));
        assert!(PathGlob::new("a/[").is_err());
    }
}
