//! Which file a thread is reading, and since when, so that the thread
//! waiting for it can give up on a read that never returns.
//!
//! `O_NONBLOCK` does not help there: for a regular file the kernel ignores
//! it, and a read (or an open, a `stat`, a directory listing) on a hung
//! NFS mount (`hard`, the default) or a FUSE mount whose daemon stopped
//! answering sleeps in the kernel until the server comes back, in an
//! uninterruptible sleep on NFS. No flag bounds it and no signal cancels
//! it. What can be bounded is the wait: the reads run on a helper thread
//! that carries a [`Watch`], every bounded read of this module records
//! its file on it, and the waiting thread asks [`Watch::stalled`] whether
//! one read, or one step between reads, has gone on for longer than its
//! timeout. The helper thread is then left behind (it ends if the read
//! ever returns); its result is dropped.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Where a watched thread is: the step it is in, the file it is reading
/// (if any), and when either last changed.
#[derive(Debug)]
pub struct Watch {
    state: Mutex<Position>,
}

#[derive(Debug)]
struct Position {
    step: String,
    file: Option<PathBuf>,
    since: Instant,
}

/// What a watched thread got stuck in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    /// The step (e.g. `the config file /etc/perf-exporter.yml`).
    pub step: String,
    /// The file whose read did not return, if one was being read.
    pub file: Option<PathBuf>,
}

impl std::fmt::Display for Stall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.file {
            Some(p) => write!(f, "reading {} ({})", p.display(), self.step),
            None => write!(f, "{}", self.step),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Watch {
    /// A watch whose first step is `step`.
    pub fn new(step: impl Into<String>) -> Arc<Watch> {
        Arc::new(Watch {
            state: Mutex::new(Position {
                step: step.into(),
                file: None,
                since: Instant::now(),
            }),
        })
    }

    /// Where the watched thread is stuck, when its current read (or its
    /// current step, between reads) has lasted longer than `limit`.
    pub fn stalled(&self, limit: Duration) -> Option<Stall> {
        let p = lock(&self.state);
        (p.since.elapsed() > limit).then(|| Stall {
            step: p.step.clone(),
            file: p.file.clone(),
        })
    }

    fn set(&self, step: Option<String>, file: Option<&Path>) {
        let mut p = lock(&self.state);
        if let Some(s) = step {
            p.step = s;
        }
        p.file = file.map(Path::to_path_buf);
        p.since = Instant::now();
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Watch>>> = const { RefCell::new(None) };
}

/// Runs `f` with `watch` recording this thread's steps and reads.
pub fn watched<T>(watch: &Arc<Watch>, f: impl FnOnce() -> T) -> T {
    struct Unset;
    impl Drop for Unset {
        fn drop(&mut self) {
            CURRENT.with(|c| c.borrow_mut().take());
        }
    }
    CURRENT.with(|c| *c.borrow_mut() = Some(watch.clone()));
    let _unset = Unset;
    f()
}

fn with_current(f: impl FnOnce(&Watch)) {
    CURRENT.with(|c| {
        if let Some(w) = c.borrow().as_ref() {
            f(w);
        }
    });
}

/// Records the step this thread starts, for the message if it gets stuck
/// in it (nothing when the thread is not watched).
pub fn step(what: impl Into<String>) {
    with_current(|w| w.set(Some(what.into()), None));
}

/// A read of `path` in progress, until dropped.
pub(super) struct Reading;

pub(super) fn reading(path: &Path) -> Reading {
    with_current(|w| w.set(None, Some(path)));
    Reading
}

impl Drop for Reading {
    fn drop(&mut self) {
        with_current(|w| w.set(None, None));
    }
}

/// Why a load's reads were given up on (`--config.read-timeout`:
/// `app::deadline` runs the loads).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReadTimeout {
    /// A read (or a step between reads) made no progress in time.
    #[error("{stall} did not return within {limit:?} (--config.read-timeout); a hung NFS or FUSE mount? Gave up waiting for it")]
    Stalled {
        /// Where.
        stall: Stall,
        /// `--config.read-timeout`.
        limit: Duration,
    },
    /// Too many earlier reads are still blocked.
    #[error("{count} earlier reads are still blocked (the last: {last}); no new read starts until one returns")]
    StillBlocked {
        /// How many.
        count: usize,
        /// The last one given up on.
        last: String,
    },
    /// The helper thread could not start or died.
    #[error("the {what} thread: {why}")]
    Thread {
        /// Which load.
        what: String,
        /// What happened.
        why: String,
    },
}

/// A test hook: a read that blocks, as one on a hung mount does.
#[cfg(test)]
pub mod hang {
    use super::lock;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Condvar, Mutex};

    type Gate = Arc<(Mutex<bool>, Condvar)>;

    static HANGING: Mutex<Vec<(PathBuf, Gate)>> = Mutex::new(Vec::new());

    /// Makes the next bounded read of `path` (one read only) block until
    /// the returned value is dropped.
    #[must_use]
    pub fn next_read_of(path: &Path) -> Release {
        let gate: Gate = Arc::new((Mutex::new(false), Condvar::new()));
        lock(&HANGING).push((path.to_path_buf(), gate.clone()));
        Release(gate)
    }

    /// Lets the hung read go on when dropped.
    pub struct Release(Gate);

    impl Drop for Release {
        fn drop(&mut self) {
            *lock(&self.0 .0) = true;
            self.0 .1.notify_all();
        }
    }

    pub(in crate::bounded) fn block_if_hung(path: &Path) {
        let gate = {
            let mut h = lock(&HANGING);
            let Some(i) = h.iter().position(|(p, _)| p == path) else {
                return;
            };
            h.remove(i).1
        };
        let mut released = lock(&gate.0);
        while !*released {
            released = gate.1.wait(released).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_names_the_file_in_flight_and_the_step() {
        let w = Watch::new("the config file c.yml");
        assert_eq!(w.stalled(Duration::from_secs(3600)), None);
        watched(&w, || {
            let _r = reading(Path::new("/x/c.yml"));
            std::thread::sleep(Duration::from_millis(20));
            let s = w.stalled(Duration::from_millis(10)).expect("stalled");
            assert_eq!(s.to_string(), "reading /x/c.yml (the config file c.yml)");
        });
        // The read returned: progress, and no file any more.
        assert_eq!(w.stalled(Duration::from_millis(10)), None);
        watched(&w, || step("PMU discovery under /sys"));
        std::thread::sleep(Duration::from_millis(20));
        let s = w.stalled(Duration::from_millis(10)).expect("stalled");
        assert_eq!(s.to_string(), "PMU discovery under /sys");
        // An unwatched thread records nothing.
        step("elsewhere");
        assert_eq!(w.stalled(Duration::ZERO).unwrap().step, s.step);
    }
}
