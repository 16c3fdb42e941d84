//! Noticing new and removed cgroups between scrapes without walking the
//! tree: inotify watches on the directories a scan listed.
//!
//! Creating a cgroup is a `mkdir(2)` in its parent, removing it an
//! `rmdir(2)`: the VFS reports both to an inotify watch on the parent
//! (`IN_CREATE`, `IN_DELETE`), on cgroupfs as on any filesystem. (The
//! parent's mtime is no signal on cgroupfs: kernfs updates it on mkdir
//! only once the directory's attributes were ever set.) A scan adds the
//! watch *before* it lists a directory, so a cgroup created while the
//! scan runs is either listed or reported. Checking is one non-blocking
//! `read(2)` of the inotify descriptor.
//!
//! When inotify is unavailable (`fs.inotify.max_user_watches` or
//! `max_user_instances` exhausted, a seccomp profile), the selector falls
//! back to a full rescan at every check.

use inotify::{Inotify, WatchMask};
use std::io::ErrorKind;
use std::path::Path;

/// The events that change which cgroups exist under a directory.
const MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MOVE)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::ONLYDIR);

/// The watches of one scan.
#[derive(Debug)]
pub struct Watcher {
    inotify: Inotify,
    /// A watch could not be added: changes may go unseen.
    broken: bool,
    /// Watches added.
    watches: usize,
}

impl Watcher {
    /// A fresh set of watches, or `None` when inotify is unavailable.
    pub fn new() -> Option<Watcher> {
        Inotify::init().ok().map(|inotify| Watcher {
            inotify,
            broken: false,
            watches: 0,
        })
    }

    /// Watches `dir` for cgroups created or removed in it. A directory
    /// that vanished needs no watch (its parent's watch reports it).
    pub fn watch(&mut self, dir: &Path) {
        match self.inotify.watches().add(dir, MASK) {
            Ok(_) => self.watches += 1,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(_) => self.broken = true,
        }
    }

    /// A change may have gone unseen: the next check says changed.
    pub fn missed(&mut self) {
        self.broken = true;
    }

    /// Whether every directory listed is watched.
    pub fn complete(&self) -> bool {
        !self.broken
    }

    /// How many directories are watched.
    pub fn watches(&self) -> usize {
        self.watches
    }

    /// Whether anything changed since the watches were added (or since
    /// the last call that said no): drains the queued events. An error
    /// other than "nothing queued" counts as a change.
    pub fn changed(&mut self) -> bool {
        let mut buf = [0u8; 4096];
        let mut any = false;
        loop {
            match self.inotify.read_events(&mut buf) {
                Ok(mut events) => any |= events.next().is_some(),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return any,
                Err(_) => return true,
            }
        }
    }
}
