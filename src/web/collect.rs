//! One collection shared by concurrent scrapes: a scrape arriving while a
//! collection is in progress waits for it instead of reading every group
//! again. One collection runs at a time, wherever it runs.
//!
//! A scrape's collection runs on the scrape's own thread (the runtime's)
//! when the last scrape's collection, its body included, took less than
//! [`INLINE_BELOW`] and the engine's lock is free at once: a few perf
//! groups (the five software events of a small host take about 100 µs
//! with their gzip body) cost less than handing them to another thread
//! and back, which took six of a scrape's eleven syscalls (two futex
//! calls, an eventfd `write` and its `epoll_wait` each way) and two
//! context switches. The first collection (and the first after a
//! reload), those of a large host, and a viewer's (which builds the
//! per-CPU detail) run on a thread of their
//! own (the `collector`), never on the runtime thread, which stays free
//! for timeouts and other connections: a large host's collection would
//! hold it for milliseconds. As only one collection runs at a time, one
//! thread is enough, and handing work to a parked thread over a channel
//! costs about two futex calls per scrape, where tokio's blocking pool
//! (shared with bcrypt and the landing page) cost about five on a busy
//! machine: its lock is met by both threads.
//!
//! The scrape that starts a collection says which body it wants
//! ([`Want`]: format and compression), and that body is encoded right
//! after collecting, on the same thread, once for every scrape that
//! joins: the 17,000 samples of a 512-CPU host are then read by the
//! thread that just wrote them, not by a runtime thread on another core
//! (that cost about a third more CPU per sample). A scrape that joins
//! asking for another body encodes it from the same samples, once too.
//!
//! A scrape reads what it exports and nothing more: the per-CPU detail
//! of summed sets (the live view's and `/api/v1/snapshot`'s full
//! resolution) is built only for a collection a viewer asked for
//! ([`State::shared_collect`]), whether it started it or joined it in
//! time; a viewer that joined a scrape's collection too late for its
//! detail collects again. After the collection, once its scrapes have
//! their answer, the collector runs the work the engine leaves for after
//! a collection ([`crate::engine::after_collection`]: the plausibility
//! check's busy-time reading, at most every 10 s), also after a
//! collection that ran on a scrape's thread (it reads files).

use super::scrape::{self, Encoded, Want};
use super::State;
use crate::bounded::lock;
use crate::engine::{Engine, HostDerived};
use crate::export::prometheus::derived::{Gauges, Window};
use crate::snapshot::{Family, Kind, Snapshot};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, MutexGuard, OnceLock, TryLockError};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// One shared collection: the snapshot, the exporter's own metrics taken
/// with it (how long it took among them), and its encoded bodies.
#[derive(Debug)]
pub(super) struct Collected {
    /// The engine's families, shared by every scrape that joined.
    pub(super) families: Arc<Vec<Family>>,
    /// The per-CPU families of the metrics `families` has summed (`per:`
    /// of their sets), for the live view ([`Collected::full`]); `None`
    /// when no viewer asked for them (a scrape's collection).
    pub(super) detail: Option<Arc<Vec<Family>>>,
    /// When it began (the live view's windows run between these).
    pub(super) at: Instant,
    /// The exporter's own metrics as of the end of this collection: before
    /// (`.0`) and after (`.1`) the engine's families in a scrape.
    pub(super) own: (Arc<Vec<Family>>, Arc<Vec<Family>>),
    /// The derived gauges of `/metrics` over the window ending with this
    /// collection, and their `perf_event_available` samples
    /// ([`crate::export::prometheus::derived`]): a scrape's only.
    pub(super) derived: Arc<Vec<Family>>,
    /// The `/metrics` bodies made from it, one slot per [`Want`].
    bodies: [OnceLock<Encoded>; Want::ALL.len()],
    /// The thread it ran on.
    #[cfg(test)]
    thread: std::thread::ThreadId,
}

impl Collected {
    /// The families at full resolution (per CPU whatever the sets' `per:`
    /// levels): what the live view and `/api/v1/snapshot` read.
    pub(super) fn full(&self) -> Arc<Vec<Family>> {
        match &self.detail {
            Some(d) if !d.is_empty() => Arc::new(crate::snapshot::full_resolution(
                self.families.to_vec(),
                d.to_vec(),
            )),
            _ => self.families.clone(),
        }
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
            scrape::encode(state, &parts, &self.derived, want)
        })
    }
}

/// The collection in progress: its result, and whether a viewer joined
/// it in time for the per-CPU detail.
#[derive(Debug)]
pub(super) struct Flight {
    rx: watch::Receiver<Option<Arc<Collected>>>,
    detail: Arc<AtomicBool>,
}

/// How many collections a viewer tries for one with the per-CPU detail
/// (each but the first begins after a scrape's collection it joined too
/// late, so the second has it unless another scrape came first).
const DETAIL_TRIES: usize = 3;

/// A scrape's collection runs on its own thread when the last scrape's
/// collection took less than this, its body included (wall time, so a
/// collection preempted on a busy machine sends the next one to the
/// collector, which measures again). A 2-CPU host's five software events
/// take about 100 µs; the default config's 512-CPU simulation, 1.6 ms.
pub(super) const INLINE_BELOW: Duration = Duration::from_micros(500);

/// Work for the collector thread.
pub(super) type Job = Box<dyn FnOnce() + Send>;

impl State {
    /// One collection with the per-CPU detail (the live view and
    /// `/api/v1/snapshot`), shared: a request arriving while a collection
    /// is in progress waits for it instead of reading every group again.
    /// `None` if the collection died.
    pub(super) async fn shared_collect(self: &Arc<Self>) -> Option<Arc<Collected>> {
        let mut got = None;
        for _ in 0..DETAIL_TRIES {
            let c = self.collect_shared(None, true).await?;
            if c.detail.is_some() {
                return Some(c);
            }
            got = Some(c);
        }
        got
    }

    /// One collection for a scrape, shared like
    /// [`shared_collect`](Self::shared_collect), without the per-CPU detail
    /// unless a viewer joins it; a collection this call starts also
    /// encodes the `/metrics` body `want` asks for, on the collector
    /// thread.
    pub(super) async fn shared_collect_for(
        self: &Arc<Self>,
        want: Option<Want>,
    ) -> Option<Arc<Collected>> {
        self.collect_shared(want, false).await
    }

    /// Joins the collection in progress or starts one; `detail`: a viewer
    /// asks for the per-CPU detail (a collection it joins builds it unless
    /// its reads are already done).
    async fn collect_shared(
        self: &Arc<Self>,
        want: Option<Want>,
        detail: bool,
    ) -> Option<Arc<Collected>> {
        let (mut rx, lead) = {
            let mut f = lock(&self.flight);
            match &*f {
                Some(fl) => {
                    if detail {
                        fl.detail.store(true, Ordering::SeqCst);
                    }
                    (fl.rx.clone(), None)
                }
                None => {
                    let (tx, rx) = watch::channel(None);
                    let asked = Arc::new(AtomicBool::new(detail));
                    *f = Some(Flight {
                        rx: rx.clone(),
                        detail: asked.clone(),
                    });
                    (rx, Some((tx, asked)))
                }
            }
        };
        if let Some((tx, asked)) = lead {
            match self.inline_engine(detail) {
                // A scrape's short collection runs here, on its own
                // thread: handing it to the collector and back costs
                // more than it does.
                Some(engine) => {
                    let run = AssertUnwindSafe(|| self.run_collection(engine, &asked, want, tx));
                    // A panicking collection fails its scrapes (the
                    // flight is cleared, its sender dropped), as on the
                    // collector thread.
                    let _ = std::panic::catch_unwind(run);
                    // The busy-time reading a check is due at reads files:
                    // on the collector thread, as after its collections.
                    if let Some(r) = lock(&self.engine).busy_read() {
                        let engine = self.engine.clone();
                        self.on_collector(Box::new(move || {
                            let times = r.run();
                            lock(&engine).judge_plausibility(times);
                        }));
                    }
                }
                None => {
                    let st = self.clone();
                    // Runs to the end even if every scrape waiting for it
                    // gives up.
                    self.on_collector(Box::new(move || {
                        st.run_collection(lock(&st.engine), &asked, want, tx);
                        // Between scrapes: what the collection left for
                        // after it.
                        crate::engine::after_collection(&st.engine);
                    }));
                }
            }
        }
        let got = match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone(),
            Err(_) => None,
        };
        got
    }

    /// The engine, locked, when a collection may run on the calling
    /// thread: a scrape's (`detail` false; a viewer's builds the per-CPU
    /// detail), the last scrape's collection took less than
    /// [`INLINE_BELOW`] with its body, and the engine is not in use (a
    /// reload, the OTLP push, the collector's busy-time reading), so that
    /// the runtime thread never waits for a lock.
    fn inline_engine(&self, detail: bool) -> Option<MutexGuard<'_, Engine>> {
        let below = self.inline_below.load(Ordering::Relaxed);
        if detail || self.last_took.load(Ordering::Relaxed) >= below {
            return None;
        }
        match self.engine.try_lock() {
            Ok(e) => Some(e),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// One collection with `engine` (locked until its reads are done),
    /// its self-metrics and derived gauges, and the body `want` asks for;
    /// sent to the scrapes waiting on `tx`. Clears the flight however it
    /// ends. How long it took (body included) is kept for a scrape's
    /// collection, for the next scrape's choice of thread.
    fn run_collection(
        &self,
        mut engine: MutexGuard<'_, Engine>,
        asked: &AtomicBool,
        want: Option<Want>,
        tx: watch::Sender<Option<Arc<Collected>>>,
    ) {
        // Clears the flight however the collection ends.
        struct Clear<'a>(&'a State);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                *lock(&self.0.flight) = None;
                *lock(&self.0.flight_started) = None;
            }
        }
        *lock(&self.flight_started) = Some(Instant::now());
        let clear = Clear(self);
        let start = Instant::now();
        let (snap, detail, host) = collect(&mut engine, asked);
        drop(engine);
        let secs = start.elapsed().as_secs_f64();
        let own = scrape::own_metrics(self, secs);
        let families = Arc::new(snap.families);
        let derived = lock(&self.derived).families(&families, start, host);
        let c = Arc::new(Collected {
            families,
            derived: Arc::new(derived),
            detail: detail.map(Arc::new),
            at: start,
            own: (Arc::new(own.0), Arc::new(own.1)),
            bodies: Default::default(),
            #[cfg(test)]
            thread: std::thread::current().id(),
        });
        if let Some(w) = want {
            c.body(self, w);
        }
        if c.detail.is_none() {
            let took = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.last_took.store(took, Ordering::Relaxed);
        }
        drop(clear);
        let _ = tx.send(Some(c));
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

/// One engine collection, the per-CPU families of the metrics it sums
/// when a viewer asked for them (`detail`, read once the reads are
/// done), and the engine's derived metrics.
fn collect(
    e: &mut Engine,
    detail: &AtomicBool,
) -> (Snapshot, Option<Vec<Family>>, Arc<HostDerived>) {
    let s = e.collect();
    let d = detail.load(Ordering::SeqCst).then(|| e.detail_families());
    (s, d, e.host_derived().clone())
}

/// The `/metrics` derived gauges between collections: the window, and
/// the gauges of the engine's derived table (worked out again when a
/// reload changes it).
#[derive(Debug, Default)]
pub(super) struct DerivedGauges {
    window: Window,
    of: Option<(Arc<HostDerived>, Gauges)>,
}

impl DerivedGauges {
    /// The gauges over the window ending with `families` (collected at
    /// `at`) and, when there are gauges, their `perf_event_available`
    /// samples.
    fn families(
        &mut self,
        families: &Arc<Vec<Family>>,
        at: Instant,
        host: Arc<HostDerived>,
    ) -> Vec<Family> {
        if !self.of.as_ref().is_some_and(|(h, _)| Arc::ptr_eq(h, &host)) {
            let gauges = Gauges::of(&host.config);
            self.of = Some((host, gauges));
        }
        let Some((host, gauges)) = &self.of else {
            return Vec::new();
        };
        let mut out = gauges.families(&mut self.window, families, at, &host.table);
        if !gauges.is_empty() {
            out.push(Family {
                name: "perf_event_available".into(),
                help: "Whether a configured metric is counted on this host (1) or not (0).".into(),
                kind: Kind::Gauge,
                samples: gauges.available(&host.resolution),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::engine::Fds;
    use crate::perf::sim::SimKernel;
    use crate::pmu::fixtures::table;
    use std::sync::Mutex;
    use std::time::Duration;

    /// A server's state over the default config on intel-skx's simulated
    /// PMU (its core sets summed per socket: per-CPU detail to build).
    fn state() -> (Arc<State>, Arc<Mutex<Engine>>, Arc<SimKernel>) {
        let t = table("intel-skx");
        let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
        let mut e = Engine::for_config(k.clone(), t, &Config::default_config(), Fds::Unbounded);
        e.check_plausibility("/nonexistent/proc".into());
        let engine = Arc::new(Mutex::new(e));
        let st = State::new(crate::web::Options::for_tests(engine.clone()));
        (st, engine, k)
    }

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Issue 29 (what a scrape pays for): a scrape's collection builds no
    /// per-CPU detail; a viewer's does, and its full resolution is what
    /// the engine's detail makes of the same collection.
    #[test]
    fn a_scrape_builds_no_per_cpu_detail() {
        let (st, engine, k) = state();
        for _ in 0..3 {
            let c = block_on(st.shared_collect_for(Some(Want::Text))).unwrap();
            assert!(c.detail.is_none());
            k.advance(1_000_000_000);
        }
        assert_eq!(lock(&engine).detail_builds(), 0, "no scrape built detail");
        let c = block_on(st.shared_collect()).unwrap();
        assert_eq!(lock(&engine).detail_builds(), 1);
        let detail = lock(&engine).detail_families();
        assert!(!detail.is_empty(), "summed sets have per-CPU detail");
        let full = crate::snapshot::full_resolution(c.families.to_vec(), detail);
        assert_eq!(*c.full(), full);
        assert_ne!(*c.full(), *c.families);
    }

    /// Issue 27 items 1 and 2 through the server: scrapes open no counter
    /// and read no busy time; the collector reads the busy times after the
    /// collection a check is due at, once, whether the scrape collected on
    /// its own thread or on the collector's.
    #[test]
    fn a_scrape_opens_nothing_and_reads_no_busy_time() {
        for inline in [false, true] {
            let (st, _engine, k) = state();
            set_inline(&st, inline);
            let opens = k.opens().len();
            block_on(async {
                for _ in 0..12 {
                    st.shared_collect_for(Some(Want::Text)).await.unwrap();
                    k.advance(1_000_000_000);
                }
            });
            // The reading runs on the collector thread after the answer:
            // wait for it (the 0 s and 10 s checks).
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while k.cpu_time_reads() < 2 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(k.cpu_time_reads(), 2, "one reading per check, after it");
            assert_eq!(k.opens().len(), opens, "no counter opened by a scrape");
        }
    }

    /// Whether every scrape's collection may run on the scrape's thread
    /// (whatever it took: a debug build on a busy machine is slow) or
    /// none may.
    fn set_inline(st: &State, inline: bool) {
        let below = if inline { u64::MAX - 1 } else { 0 };
        st.inline_below.store(below, Ordering::Relaxed);
    }

    /// Waits until the collector thread has run every job given to it
    /// (the busy-time reading after a collection holds the engine).
    fn collector_idle(st: &State) {
        let (tx, rx) = mpsc::channel();
        st.on_collector(Box::new(move || {
            let _ = tx.send(());
        }));
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
    }

    /// Issue 29 (the hand-off): once a scrape's collection has been short,
    /// the next scrape collects on its own thread; the first, a viewer's
    /// (per-CPU detail), one after a long collection and the first after
    /// a reload go to the collector. Inline or not, the body and the flight are the same.
    #[test]
    fn a_short_collection_runs_on_the_scrapes_thread() {
        let (st, _engine, k) = state();
        set_inline(&st, true);
        let here = std::thread::current().id();
        let on = |want| {
            let c = block_on(st.shared_collect_for(Some(want))).unwrap();
            k.advance(1_000_000_000);
            assert!(lock(&st.flight).is_none(), "the flight is cleared");
            collector_idle(&st);
            c
        };
        let first = on(Want::TextGzip);
        assert_ne!(first.thread, here, "nothing measured yet: the collector");
        let second = on(Want::TextGzip);
        assert_eq!(second.thread, here, "short: on the scrape's thread");
        assert!(second.body(&st, Want::TextGzip).gzip);
        assert!(second.detail.is_none());
        let viewer = block_on(st.shared_collect()).unwrap();
        assert_ne!(viewer.thread, here, "a viewer's collection: the collector");
        assert!(viewer.detail.is_some());
        assert_eq!(on(Want::Text).thread, here);
        // A bound no collection is under.
        set_inline(&st, false);
        assert_ne!(on(Want::Text).thread, here, "long: the collector");
        set_inline(&st, true);
        assert_eq!(on(Want::Text).thread, here);
        // A new config's cost is not known: the collector, then here.
        st.record_reload(true);
        assert_ne!(on(Want::Text).thread, here, "after a reload: the collector");
        assert_eq!(on(Want::Text).thread, here);
    }

    /// A scrape never waits for the engine's lock on its own thread: with
    /// the engine in use (a reload, the OTLP push), its collection goes to
    /// the collector, which waits for it.
    #[test]
    fn an_engine_in_use_sends_the_collection_to_the_collector() {
        let (st, engine, _k) = state();
        set_inline(&st, true);
        block_on(st.shared_collect_for(Some(Want::Text))).unwrap();
        let (locked_tx, locked) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let g = lock(&engine);
            locked_tx.send(()).unwrap();
            let _ = release_rx.recv();
            drop(g);
        });
        locked.recv().unwrap();
        let st2 = st.clone();
        let scrape = std::thread::spawn(move || {
            let c = block_on(st2.shared_collect_for(Some(Want::Text))).unwrap();
            (c.thread, std::thread::current().id())
        });
        // Release the engine once the scrape's collection is in flight.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while lock(&st.flight).is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            lock(&st.flight).is_some(),
            "the scrape started a collection"
        );
        release.send(()).unwrap();
        holder.join().unwrap();
        let (ran_on, scraped_on) = scrape.join().unwrap();
        assert_ne!(ran_on, scraped_on, "the collector waited for the engine");
    }
}
