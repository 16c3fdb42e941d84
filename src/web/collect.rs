//! One collection shared by concurrent scrapes: a scrape arriving while a
//! collection is in progress waits for it instead of reading every group
//! again.
//!
//! Collections run on a thread of their own (the `collector`), never on
//! the runtime thread, which stays free for timeouts and other
//! connections. As only one collection runs at a time, one thread is
//! enough, and handing work to a parked thread over a channel costs about
//! two futex calls per scrape, where tokio's blocking pool (shared with
//! bcrypt and the landing page) cost about five on a busy machine: its
//! lock is met by both threads.

use super::{lock, State};
use crate::engine::Engine;
use crate::snapshot::{Family, Snapshot};
use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;
use tokio::sync::watch;

/// One shared collection: the snapshot and how long it took.
#[derive(Debug)]
pub(super) struct Collected {
    /// The engine's families, shared by every scrape that joined.
    pub(super) families: Arc<Vec<Family>>,
    pub(super) secs: f64,
    /// When it began (the live view's windows run between these).
    pub(super) at: Instant,
}

pub(super) type Flight = watch::Receiver<Option<Arc<Collected>>>;

/// Work for the collector thread.
pub(super) type Job = Box<dyn FnOnce() + Send>;

impl State {
    /// One collection, shared: a scrape arriving while a collection is in
    /// progress waits for it instead of reading every group again. `None`
    /// if the collection died.
    pub(super) async fn shared_collect(self: &Arc<Self>) -> Option<Arc<Collected>> {
        let (mut rx, lead) = {
            let mut f = lock(&self.flight);
            match &*f {
                Some(rx) => (rx.clone(), None),
                None => {
                    let (tx, rx) = watch::channel(None);
                    *f = Some(rx.clone());
                    (rx, Some(tx))
                }
            }
        };
        if let Some(tx) = lead {
            let st = self.clone();
            // Runs to the end even if every scrape waiting for it gives up.
            self.on_collector(Box::new(move || {
                // Clears the flight however the collection ends.
                struct Clear<'a>(&'a State);
                impl Drop for Clear<'_> {
                    fn drop(&mut self) {
                        *lock(&self.0.flight) = None;
                        *lock(&self.0.flight_started) = None;
                    }
                }
                *lock(&st.flight_started) = Some(Instant::now());
                let clear = Clear(&st);
                let start = Instant::now();
                let snap = collect(&st.engine);
                let c = Arc::new(Collected {
                    families: Arc::new(snap.families),
                    secs: start.elapsed().as_secs_f64(),
                    at: start,
                });
                drop(clear);
                let _ = tx.send(Some(c));
            }));
        }
        let got = match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone(),
            Err(_) => None,
        };
        got
    }

    /// Runs `job` on the collector thread (started on first use); on the
    /// blocking pool if that thread cannot be had.
    fn on_collector(&self, job: Job) {
        let tx = self.collector.get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name("collector".into())
                .spawn(move || {
                    for job in rx {
                        // A panicking collection fails its scrapes (the
                        // flight is cleared, its sender dropped), not the
                        // thread.
                        let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "no collector thread; collecting on the blocking pool");
            }
            tx
        });
        if let Err(mpsc::SendError(job)) = tx.send(job) {
            drop(tokio::task::spawn_blocking(job));
        }
    }

    /// Whether the collection in progress has run longer than
    /// `--web.request-timeout`: no scrape can succeed until it ends.
    pub(super) fn collection_stuck(&self) -> bool {
        lock(&self.flight_started).is_some_and(|t| t.elapsed() > self.request_timeout)
    }
}

/// One engine collection. A poisoned lock's engine is used as it is, as
/// scrapes always did.
fn collect(engine: &Mutex<Engine>) -> Snapshot {
    lock(engine).collect()
}
