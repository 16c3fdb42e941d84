//! One collection shared by concurrent scrapes: a scrape arriving while a
//! collection is in progress waits for it instead of reading every group
//! again.

use super::{lock, State};
use crate::engine::Engine;
use crate::snapshot::{Family, Snapshot};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::watch;

/// One shared collection: the snapshot and how long it took.
#[derive(Debug)]
pub(super) struct Collected {
    /// The engine's families, shared by every scrape that joined.
    pub(super) families: Arc<Vec<Family>>,
    pub(super) secs: f64,
}

pub(super) type Flight = watch::Receiver<Option<Arc<Collected>>>;

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
            drop(tokio::task::spawn_blocking(move || {
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
