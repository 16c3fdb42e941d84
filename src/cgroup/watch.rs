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
//! Each event names what changed, so a change is applied where it
//! happened ([`super::tree`]): `IN_CREATE` of a directory adds a name to
//! its parent's listing (the walk then lists and watches the new
//! directory if the selection goes into it), `IN_DELETE` drops the named
//! subtree. Only when the queue overflowed (`IN_Q_OVERFLOW`: more than
//! `fs.inotify.max_queued_events` events, 16,384 by default, between two
//! checks) or a watch could not be added is the tree walked again from
//! scratch.
//!
//! When inotify is unavailable (`fs.inotify.max_user_watches` or
//! `max_user_instances` exhausted, a seccomp profile), the selector falls
//! back to a full rescan at every check.

use inotify::{EventMask, Inotify, WatchMask};
use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::Path;

/// The events that change which cgroups exist under a directory.
const MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MOVE)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::ONLYDIR);

/// A watch: the kernel's watch descriptor number.
pub type Wd = i32;

/// One change the kernel reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A directory `name` appeared in the watched directory `wd`
    /// (`IN_CREATE`, `IN_MOVED_TO`).
    Created {
        /// The watched parent.
        wd: Wd,
        /// The new directory's name.
        name: OsString,
    },
    /// The directory `name` left the watched directory `wd` (`IN_DELETE`,
    /// `IN_MOVED_FROM`).
    Removed {
        /// The watched parent.
        wd: Wd,
        /// The name.
        name: OsString,
    },
    /// The watched directory itself was removed (`IN_DELETE_SELF`), or its
    /// watch was dropped (`IN_IGNORED`).
    Gone {
        /// The watch.
        wd: Wd,
    },
    /// Events were lost (`IN_Q_OVERFLOW`) or could not be read: walk the
    /// tree again.
    Lost,
}

/// The watches of one walk.
#[derive(Debug)]
pub struct Watcher {
    inotify: Inotify,
    /// A watch could not be added: changes may go unseen.
    broken: bool,
}

impl Watcher {
    /// A fresh set of watches, or `None` when inotify is unavailable.
    pub fn new() -> Option<Watcher> {
        Inotify::init().ok().map(|inotify| Watcher {
            inotify,
            broken: false,
        })
    }

    /// Watches `dir` for cgroups created or removed in it (before it is
    /// listed). A directory that vanished needs no watch (its parent's
    /// watch reports it): `None` then, and when the watch failed.
    pub fn watch(&mut self, dir: &Path) -> Option<Wd> {
        match self.inotify.watches().add(dir, MASK) {
            Ok(wd) => Some(wd.get_watch_descriptor_id()),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(_) => {
                self.broken = true;
                None
            }
        }
    }

    /// A change may have gone unseen: the next check walks again.
    pub fn missed(&mut self) {
        self.broken = true;
    }

    /// Whether every directory listed is watched.
    pub fn complete(&self) -> bool {
        !self.broken
    }

    /// Drains the queued events into `out` (directory events only: a
    /// file created in a watched directory is no cgroup). Returns whether
    /// any event was queued at all.
    pub fn drain(&mut self, out: &mut Vec<Event>) -> bool {
        let mut buf = [0u8; 4096];
        let mut any = false;
        loop {
            match self.inotify.read_events(&mut buf) {
                Ok(events) => {
                    for e in events {
                        any = true;
                        if let Some(ev) = event(e.wd.get_watch_descriptor_id(), e.mask, e.name) {
                            out.push(ev);
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return any,
                Err(_) => {
                    out.push(Event::Lost);
                    return true;
                }
            }
        }
    }
}

/// The typed event of a raw one, `None` for what changes no cgroup.
fn event(wd: Wd, mask: EventMask, name: Option<&std::ffi::OsStr>) -> Option<Event> {
    if mask.contains(EventMask::Q_OVERFLOW) {
        return Some(Event::Lost);
    }
    if mask.intersects(EventMask::DELETE_SELF | EventMask::IGNORED) {
        return Some(Event::Gone { wd });
    }
    if !mask.contains(EventMask::ISDIR) {
        return None;
    }
    let name = name?.to_os_string();
    if mask.intersects(EventMask::CREATE | EventMask::MOVED_TO) {
        Some(Event::Created { wd, name })
    } else if mask.intersects(EventMask::DELETE | EventMask::MOVED_FROM) {
        Some(Event::Removed { wd, name })
    } else {
        None
    }
}
