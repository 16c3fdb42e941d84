//! The directories a walk listed, kept current by inotify events, so a
//! change costs work where it happened, not a walk of the whole tree.
//!
//! A walk lists a directory once: it adds the watch, lists the
//! subdirectories and keeps the names here. From then on the watch's
//! events keep the names current: `IN_CREATE` of a directory adds its name
//! (the next walk lists and watches it, if the selection goes into it),
//! `IN_DELETE` removes the name and forgets the subtree below it (the
//! kernel drops the watches of removed directories itself: `IN_IGNORED`).
//! Events queued between adding a watch and listing the directory are
//! applied afterwards; adding a name twice or removing an absent one
//! changes nothing, so the names end up right whichever came first.
//!
//! Only when events were lost (`IN_Q_OVERFLOW`) or a watch could not be
//! added does the selector throw the tree away and walk from scratch.
//!
//! Paths are bytes ([`OsString`], `/`-separated, relative to the root), as
//! the kernel names the directories: a name that is not UTF-8 is kept
//! apart from its lossy twin (its label is made by [`super::name`]).

use super::watch::{Event, Watcher, Wd};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A listed directory: its watch and its subdirectories' names, sorted.
#[derive(Debug)]
struct Listing {
    wd: Wd,
    names: Vec<OsString>,
}

/// The listed part of the cgroup tree. See the [module docs](self).
#[derive(Debug)]
pub struct Tree {
    watcher: Watcher,
    /// Listed directories by path relative to the root (`""`: the root).
    listed: BTreeMap<OsString, Listing>,
    /// Each watch's directory.
    by_wd: HashMap<Wd, OsString>,
    /// The cgroup ids (inode numbers) of the last selection, by path: a
    /// cgroup keeps its id until its removal is seen.
    ids: BTreeMap<OsString, u64>,
    /// Events were lost: walk from scratch.
    lost: bool,
    events: Vec<Event>,
}

/// `parent/name` (`name` under the root when `parent` is empty).
pub fn join(parent: &OsStr, name: &OsStr) -> OsString {
    if parent.is_empty() {
        return name.to_os_string();
    }
    let mut p = OsString::with_capacity(parent.len() + 1 + name.len());
    p.push(parent);
    p.push("/");
    p.push(name);
    p
}

/// The parent of `rel` (`""`: the root).
pub fn parent(rel: &OsStr) -> &OsStr {
    let b = rel.as_bytes();
    OsStr::from_bytes(
        b.iter()
            .rposition(|&c| c == b'/')
            .map_or(&[], |at| &b[..at]),
    )
}

impl Tree {
    /// An empty tree, or `None` when inotify is unavailable.
    pub fn new() -> Option<Tree> {
        Watcher::new().map(|watcher| Tree {
            watcher,
            listed: BTreeMap::new(),
            by_wd: HashMap::new(),
            ids: BTreeMap::new(),
            lost: false,
            events: Vec::new(),
        })
    }

    /// Whether the tree must be walked from scratch: events were lost or
    /// a directory listed is not watched.
    pub fn needs_rewalk(&self) -> bool {
        self.lost || !self.watcher.complete()
    }

    /// How many directories are watched.
    pub fn watches(&self) -> usize {
        self.by_wd.len()
    }

    /// The subdirectories of `rel` as last listed and kept current.
    pub fn listing(&self, rel: &OsStr) -> Option<&[OsString]> {
        self.listed.get(rel).map(|l| l.names.as_slice())
    }

    /// Watches the directory `rel` under `root` (before it is listed).
    pub fn watch(&mut self, root: &Path, rel: &OsStr) -> Option<Wd> {
        let wd = self.watcher.watch(&root.join(rel))?;
        self.by_wd.insert(wd, rel.to_os_string());
        Some(wd)
    }

    /// Keeps the listing of `rel`, watched by `wd`.
    pub fn insert(&mut self, rel: &OsStr, wd: Wd, names: Vec<OsString>) {
        self.listed
            .insert(rel.to_os_string(), Listing { wd, names });
    }

    /// A change may have gone unseen: walk from scratch next time.
    pub fn missed(&mut self) {
        self.watcher.missed();
    }

    /// The id of `rel` as of the last selection.
    pub fn id(&self, rel: &OsStr) -> Option<u64> {
        self.ids.get(rel).copied()
    }

    /// Remembers the id of `rel`, read once (forgotten with its removal).
    pub fn remember_id(&mut self, rel: &OsStr, id: u64) {
        self.ids.insert(rel.to_os_string(), id);
    }

    /// Applies the queued events. Returns whether any may change the
    /// selection.
    pub fn apply(&mut self) -> bool {
        let mut events = std::mem::take(&mut self.events);
        self.watcher.drain(&mut events);
        let mut changed = false;
        for e in events.drain(..) {
            changed |= self.apply_one(e);
        }
        self.events = events;
        changed
    }

    fn apply_one(&mut self, e: Event) -> bool {
        match e {
            Event::Created { wd, name } => {
                if let Some(l) = self.listing_of(wd) {
                    if let Err(at) = l.names.binary_search(&name) {
                        l.names.insert(at, name);
                    }
                }
                true
            }
            Event::Removed { wd, name } => {
                if let Some(l) = self.listing_of(wd) {
                    if let Ok(at) = l.names.binary_search(&name) {
                        l.names.remove(at);
                    }
                }
                if let Some(rel) = self.by_wd.get(&wd) {
                    let child = join(rel, &name);
                    self.forget(&child);
                }
                true
            }
            Event::Gone { wd } => match self.by_wd.remove(&wd) {
                Some(rel) if self.listed.get(&rel).is_some_and(|l| l.wd == wd) => {
                    self.forget(&rel);
                    true
                }
                _ => false,
            },
            Event::Lost => {
                self.lost = true;
                true
            }
        }
    }

    /// The listing watched by `wd` (not an older one of the same path).
    fn listing_of(&mut self, wd: Wd) -> Option<&mut Listing> {
        let rel = self.by_wd.get(&wd)?;
        self.listed.get_mut(rel).filter(|l| l.wd == wd)
    }

    /// Forgets `rel` and everything below it.
    fn forget(&mut self, rel: &OsStr) {
        if rel.is_empty() {
            self.listed.clear();
            self.by_wd.clear();
            self.ids.clear();
            return;
        }
        for l in forget_below(&mut self.listed, rel) {
            // The kernel drops the watch of a removed directory itself.
            self.by_wd.remove(&l.wd);
        }
        forget_below(&mut self.ids, rel);
    }
}

/// Removes `rel` and the keys below it (`rel/...`: one range of the
/// map); returns the values removed.
fn forget_below<V>(map: &mut BTreeMap<OsString, V>, rel: &OsStr) -> Vec<V> {
    let below = join(rel, OsStr::new(""));
    let keys: Vec<OsString> = map
        .range(below.clone()..)
        .take_while(|(k, _)| k.as_bytes().starts_with(below.as_bytes()))
        .map(|(k, _)| k.clone())
        .collect();
    map.remove(rel)
        .into_iter()
        .chain(keys.iter().filter_map(|k| map.remove(k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    fn names(t: &Tree, rel: &str) -> Option<Vec<String>> {
        t.listing(o(rel))
            .map(|v| v.iter().map(|n| n.to_string_lossy().into_owned()).collect())
    }

    /// Events edit the listings; a late `IN_IGNORED` of a removed
    /// directory's old watch leaves the listing of the directory created
    /// since under the same name alone.
    #[test]
    fn events_edit_listings_and_old_watches_are_told_apart() {
        let mut t = Tree::new().expect("inotify");
        t.by_wd.insert(1, "app".into());
        t.insert(o("app"), 1, vec!["a".into()]);
        t.by_wd.insert(2, "app/a".into());
        t.insert(o("app/a"), 2, vec!["x".into()]);
        t.by_wd.insert(3, "app/a/x".into());
        t.insert(o("app/a/x"), 3, Vec::new());
        t.ids.insert("app/a".into(), 7);
        t.ids.insert("app/ab".into(), 8);
        let created = |name: &str| Event::Created {
            wd: 1,
            name: name.into(),
        };
        assert!(t.apply_one(created("b")));
        assert!(t.apply_one(created("b")), "twice: still one name");
        assert_eq!(names(&t, "app").unwrap(), ["a", "b"]);
        assert!(t.apply_one(Event::Removed {
            wd: 1,
            name: "a".into()
        }));
        assert_eq!(names(&t, "app").unwrap(), ["b"]);
        assert_eq!((names(&t, "app/a"), names(&t, "app/a/x")), (None, None));
        assert_eq!((t.id(o("app/a")), t.id(o("app/ab"))), (None, Some(8)));
        assert_eq!(t.watches(), 1, "the subtree's watches are forgotten");
        // app/b listed under watch 4, then a stale watch 5 of an older
        // app/b is dropped by the kernel.
        t.by_wd.insert(4, "app/b".into());
        t.insert(o("app/b"), 4, Vec::new());
        t.by_wd.insert(5, "app/b".into());
        assert!(!t.apply_one(Event::Gone { wd: 5 }));
        assert!(names(&t, "app/b").is_some());
        assert!(t.apply_one(Event::Gone { wd: 4 }));
        assert!(names(&t, "app/b").is_none());
        assert!(!t.needs_rewalk());
        assert!(t.apply_one(Event::Lost));
        assert!(t.needs_rewalk());
    }

    /// A name that is not UTF-8 and its lossy twin are two directories:
    /// removing one forgets it alone.
    #[test]
    fn names_that_are_not_utf8_stay_apart_from_their_lossy_twin() {
        use std::os::unix::ffi::OsStringExt;
        let bytes = OsString::from_vec(b"x\xff".to_vec());
        let lossy = OsString::from("x\u{FFFD}");
        let mut t = Tree::new().expect("inotify");
        t.by_wd.insert(1, "".into());
        // Sorted as bytes: U+FFFD is 0xef 0xbf 0xbd.
        t.insert(o(""), 1, vec![lossy.clone(), bytes.clone()]);
        for (wd, n) in [(2, &bytes), (3, &lossy)] {
            t.by_wd.insert(wd, n.clone());
            t.insert(n, wd, vec!["c".into()]);
            t.remember_id(&join(n, o("c")), wd as u64);
        }
        assert!(t.apply_one(Event::Removed {
            wd: 1,
            name: bytes.clone()
        }));
        assert_eq!(
            t.listing(o("")).map(<[OsString]>::to_vec),
            Some(vec![lossy.clone()])
        );
        assert!(t.listing(&bytes).is_none());
        assert_eq!(t.listing(&lossy).map(<[OsString]>::len), Some(1));
        assert_eq!(t.id(&join(&bytes, o("c"))), None);
        assert_eq!(t.id(&join(&lossy, o("c"))), Some(3));
        assert_eq!(parent(&join(&bytes, o("c"))), bytes.as_os_str());
        assert_eq!(parent(o("a")), o(""));
    }
}
