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
//!
//! The scrape that starts a collection says which body it wants
//! ([`Want`]: format and compression), and the collector encodes that body
//! right after collecting, on the same thread, once for every scrape that
//! joins: the 17,000 samples of a 512-CPU host are then read by the
//! thread that just wrote them, not by a runtime thread on another core
//! (that cost about a third more CPU per sample). A scrape that joins
//! asking for another body encodes it from the same samples, once too.

use super::scrape::{self, Encoded, Want};
use super::State;
use crate::bounded::lock;
use crate::engine::Engine;
use crate::snapshot::{Family, Snapshot};
use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Instant;
use tokio::sync::watch;

/// One shared collection: the snapshot, the exporter's own metrics taken
/// with it (how long it took among them), and its encoded bodies.
#[derive(Debug)]
pub(super) struct Collected {
    /// The engine's families, shared by every scrape that joined.
    pub(super) families: Arc<Vec<Family>>,
    /// The per-CPU families of the metrics `families` has summed (`per:`
    /// of their sets), for the live view ([`Collected::full`]).
    pub(super) detail: Arc<Vec<Family>>,
    /// When it began (the live view's windows run between these).
    pub(super) at: Instant,
    /// The exporter's own metrics as of the end of this collection: before
    /// (`.0`) and after (`.1`) the engine's families in a scrape.
    pub(super) own: (Arc<Vec<Family>>, Arc<Vec<Family>>),
    /// The `/metrics` bodies made from it, one slot per [`Want`].
    bodies: [OnceLock<Encoded>; Want::ALL.len()],
}

impl Collected {
    /// The families at full resolution (per CPU whatever the sets' `per:`
    /// levels): what the live view and `/api/v1/snapshot` read.
    pub(super) fn full(&self) -> Arc<Vec<Family>> {
        if self.detail.is_empty() {
            return self.families.clone();
        }
        Arc::new(crate::snapshot::full_resolution(
            self.families.to_vec(),
            self.detail.to_vec(),
        ))
    }

    /// The `/metrics` body `want` asks for: encoded by the first scrape
    /// that needs it, shared by the others.
    pub(super) fn body(&self, state: &State, want: Want) -> &Encoded {
        self.bodies[want.slot()].get_or_init(|| {
            let parts = [
                self.own.0.clone(),
                self.families.clone(),
                self.own.1.clone(),
            ];
            scrape::encode(state, &parts, want)
        })
    }
}

pub(super) type Flight = watch::Receiver<Option<Arc<Collected>>>;

/// Work for the collector thread.
pub(super) type Job = Box<dyn FnOnce() + Send>;

impl State {
    /// One collection, shared: a scrape arriving while a collection is in
    /// progress waits for it instead of reading every group again. `None`
    /// if the collection died.
    pub(super) async fn shared_collect(self: &Arc<Self>) -> Option<Arc<Collected>> {
        self.shared_collect_for(None).await
    }

    /// Like [`shared_collect`](Self::shared_collect); a collection this
    /// call starts also encodes the `/metrics` body `want` asks for, on the
    /// collector thread.
    pub(super) async fn shared_collect_for(
        self: &Arc<Self>,
        want: Option<Want>,
    ) -> Option<Arc<Collected>> {
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
                let (snap, detail) = collect(&st.engine);
                let secs = start.elapsed().as_secs_f64();
                let own = scrape::own_metrics(&st, secs);
                let c = Arc::new(Collected {
                    families: Arc::new(snap.families),
                    detail: Arc::new(detail),
                    at: start,
                    own: (Arc::new(own.0), Arc::new(own.1)),
                    bodies: Default::default(),
                });
                if let Some(w) = want {
                    c.body(&st, w);
                }
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

/// One engine collection, and the per-CPU families of the metrics it
/// sums. A poisoned lock's engine is used as it is, as scrapes always did.
fn collect(engine: &Mutex<Engine>) -> (Snapshot, Vec<Family>) {
    let mut e = lock(engine);
    let s = e.collect();
    (s, e.detail_families())
}
