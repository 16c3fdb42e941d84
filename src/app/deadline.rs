//! `--config.read-timeout`: the files start-up and every reload read (the
//! config, the web config and the PEM files it names, sysfs and procfs)
//! are read on a helper thread, and the wait for it gives up when one
//! read, or one step between reads, makes no progress for that long (see
//! [`crate::bounded::watch`] for why a read can block whatever the flags).
//!
//! The stuck thread is left behind, holding nothing the next reload needs:
//! the next reload starts a helper of its own. So that a mount that stays
//! hung cannot pile up threads, at most [`MAX_BLOCKED`] may be left behind
//! at once; while that many are, a reload is refused at once.

pub(super) use crate::bounded::watch::ReadTimeout;
use crate::bounded::watch::{self, Watch};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

/// Helper threads left blocked in a read at most; then loads are refused
/// until one returns.
pub(super) const MAX_BLOCKED: usize = 4;

/// Runs loads on helper threads, waiting for each at most its timeout
/// without progress.
#[derive(Debug, Clone)]
pub(super) struct Deadline {
    limit: Duration,
    /// Helper threads still running (at the start of a load: those left
    /// behind).
    running: Arc<AtomicUsize>,
    last: Arc<Mutex<String>>,
}

/// Counts a helper thread as running until dropped (also on a panic).
struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Deadline {
    /// Gives up after `limit` without progress.
    pub(super) fn new(limit: Duration) -> Self {
        Deadline {
            limit,
            running: Arc::new(AtomicUsize::new(0)),
            last: Arc::new(Mutex::new(String::new())),
        }
    }

    /// Runs `f` on a helper thread named `what` and returns its result, or
    /// gives up when it stalls for longer than the limit.
    pub(super) fn run<T, E>(
        &self,
        what: &str,
        f: impl FnOnce() -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<ReadTimeout> + Send + 'static,
    {
        let blocked = self.running.load(Ordering::SeqCst);
        if blocked >= MAX_BLOCKED {
            let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            return Err(ReadTimeout::StillBlocked {
                count: blocked,
                last: last.clone(),
            }
            .into());
        }
        let w = Watch::new(what);
        let (tx, rx) = mpsc::channel();
        self.running.fetch_add(1, Ordering::SeqCst);
        let running = Running(self.running.clone());
        let watch = w.clone();
        let name = what.to_string();
        std::thread::Builder::new()
            .name(what.into())
            .spawn(move || {
                let _running = running;
                if tx.send(watch::watched(&watch, f)).is_err() {
                    tracing::info!(thread = %name, "a read given up on (--config.read-timeout) has returned; its result is dropped");
                }
            })
            .map_err(|e| thread_error(what, e.to_string()))?;
        let tick = (self.limit / 4).clamp(Duration::from_millis(1), Duration::from_millis(100));
        loop {
            match rx.recv_timeout(tick) {
                Ok(r) => return r,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(thread_error(what, "ended without a result".into()))
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(stall) = w.stalled(self.limit) {
                        let e = ReadTimeout::Stalled {
                            stall,
                            limit: self.limit,
                        };
                        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = e.to_string();
                        return Err(e.into());
                    }
                }
            }
        }
    }
}

fn thread_error<E: From<ReadTimeout>>(what: &str, why: String) -> E {
    ReadTimeout::Thread {
        what: what.into(),
        why,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounded::watch::hang;

    #[test]
    fn a_blocked_read_is_given_up_and_bounded_in_number() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.yml");
        std::fs::write(&p, "x").unwrap();
        let d = Deadline::new(Duration::from_millis(50));
        let mut held = Vec::new();
        for i in 0..MAX_BLOCKED {
            held.push(hang::next_read_of(&p));
            let q = p.clone();
            let e = d
                .run("reload", move || {
                    watch::step("the config file");
                    read(&q)
                })
                .unwrap_err()
                .0;
            assert!(
                e.starts_with(&format!(
                    "reading {} (the config file) did not return within 50ms",
                    p.display()
                )),
                "{i}: {e}"
            );
        }
        let q = p.clone();
        let e = d.run("reload", move || read(&q)).unwrap_err().0;
        assert!(e.starts_with("4 earlier reads are still blocked"), "{e}");
        // One returns: loads run again.
        held.pop();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while d.running.load(Ordering::SeqCst) >= MAX_BLOCKED {
            assert!(std::time::Instant::now() < deadline, "the thread ends");
            std::thread::sleep(Duration::from_millis(5));
        }
        let q = p.clone();
        assert_eq!(d.run("reload", move || read(&q)).unwrap(), "x");
    }

    fn read(p: &std::path::Path) -> Result<String, ReadTimeoutOr> {
        crate::bounded::read_string(p, 10).map_err(|e| ReadTimeoutOr(e.to_string()))
    }

    /// A string error for the tests.
    #[derive(Debug)]
    struct ReadTimeoutOr(String);

    impl From<ReadTimeout> for ReadTimeoutOr {
        fn from(e: ReadTimeout) -> Self {
            ReadTimeoutOr(e.to_string())
        }
    }
}
