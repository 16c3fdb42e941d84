//! Work at a bounded rate, off the collection path (issue 27: "no extra
//! syscalls on the hot path"). A collection makes one `read()` per group
//! and nothing else; what the engine does besides, now and then, runs
//! where no scrape waits for it:
//!
//! * the plausibility check's busy-time reading (`/proc/stat`, at most
//!   every 10 s; `plausible.rs`): [`after_collection`], which the caller
//!   of a collection runs right after it (`serve`: on the collector
//!   thread once the scrape has its answer, and after each OTLP
//!   collection), reading the file without holding the engine;
//! * the counter budget's re-measure (probe groups on one CPU, about
//!   60 ms, at most every 5 minutes; `counters.rs`): [`follow_budget`], a
//!   thread that sleeps until one is due, takes the probe from the engine,
//!   runs it without holding the engine and hands the result back.
//!
//! `stat` runs both inline between its intervals
//! ([`Engine::run_upkeep`]).

use super::Engine;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// The longest the budget follower sleeps before it looks again: a reload
/// replaces the engine, whose budget is due at another time, and a
/// running-share drop asks for an early measurement, which is then made
/// within this.
const WAIT_AT_MOST: Duration = Duration::from_secs(5);

/// The work a collection leaves for after it: the plausibility check's
/// busy-time reading, when the collection asked for one, read without
/// holding the engine and handed back to it. Cheap when none is due (one
/// lock of the engine).
pub fn after_collection(engine: &Mutex<Engine>) {
    let read = engine
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .busy_read();
    if let Some(r) = read {
        let times = r.run();
        engine
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .judge_plausibility(times);
    }
}

/// Re-measures the counter budget of an engine when it is due, on a thread
/// of its own ([`follow_budget`]). Dropping it stops the thread.
#[derive(Debug)]
pub struct BudgetFollower {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for BudgetFollower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }
}

/// Starts a thread that re-measures the counter budget of `engine` when it
/// is due ([`Engine::budget_probe`]: at most every 5 minutes), without
/// holding the engine while the probes run, so no collection waits for
/// it; the next collection exports the result. The engine may be replaced
/// inside the mutex (a reload); the thread ends when the follower or the
/// mutex is dropped. `None` if no thread can be started (the budget then
/// stays as measured at start-up).
pub fn follow_budget(engine: &Arc<Mutex<Engine>>) -> Option<BudgetFollower> {
    let stop = Arc::new(AtomicBool::new(false));
    let weak = Arc::downgrade(engine);
    let thread = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("perf-budget".into())
            .stack_size(256 * 1024)
            .spawn(move || follow(&weak, &stop))
            .map_err(|e| tracing::warn!(error = %e, "cannot start the counter budget thread; the budget stays as measured at start-up"))
            .ok()?
    };
    Some(BudgetFollower {
        stop,
        thread: Some(thread),
    })
}

fn follow(engine: &Weak<Mutex<Engine>>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        let Some(e) = engine.upgrade() else {
            return;
        };
        let probe = {
            let mut g = e.lock().unwrap_or_else(PoisonError::into_inner);
            match g.budget_probe() {
                Some(p) => Ok(p),
                None => Err(g.budget_due_in()),
            }
        };
        match probe {
            Ok(p) => {
                drop(e);
                let m = p.run();
                let Some(e) = engine.upgrade() else {
                    return;
                };
                e.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .set_budget(m);
            }
            Err(wait) => {
                drop(e);
                std::thread::park_timeout(wait.min(WAIT_AT_MOST));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::engine::Fds;
    use crate::perf::sim::SimKernel;

    const SEC: u64 = 1_000_000_000;

    fn engine(setup: impl FnOnce(&SimKernel)) -> (Arc<SimKernel>, Engine) {
        let t = crate::pmu::fixtures::table("intel-skx");
        let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
        setup(&k);
        let cfg = Config::default_config();
        let mut e = Engine::for_config(k.clone(), t, &cfg, Fds::Unbounded);
        e.check_plausibility("/nonexistent/proc".into());
        (k, e)
    }

    /// Issue 27 item 1: a collection due a budget re-measure opens no
    /// probe; the re-measure off the collection path does, and its result
    /// is what the next collection exports.
    #[test]
    fn a_collection_never_probes_the_counter_budget() {
        let (k, mut e) = engine(|k| k.set_counters("cpu", 6));
        assert_eq!(e.counter_budgets()[0].free, Some(6));
        e.collect();
        k.set_other_user("cpu", 2);
        e.counters.expire();
        let opens = k.opens().len();
        k.advance(SEC);
        e.collect();
        k.advance(SEC);
        e.collect();
        assert_eq!(k.opens().len(), opens, "no probe opened by a collection");
        assert_eq!(e.counter_budgets()[0].free, Some(6), "not measured yet");
        // The probe, run without the engine, then handed back.
        let p = e.budget_probe().expect("a re-measure is due");
        assert!(e.budget_probe().is_none(), "one at a time");
        let m = p.run();
        assert!(k.opens().len() > opens, "the probe opened its groups");
        e.set_budget(m);
        assert_eq!(e.counter_budgets()[0].free, Some(4));
        let s = e.collect();
        let free = s
            .families
            .iter()
            .find(|f| f.name == "perf_pmu_counters")
            .and_then(|f| {
                f.samples
                    .iter()
                    .find(|x| x.labels.rendered().contains("kind=\"free\""))
            })
            .map(|x| x.value);
        assert_eq!(free, Some(4.0));
        // The next one is due 5 minutes later, not before.
        assert!(e.budget_probe().is_none());
        assert!(e.budget_due_in() > Duration::from_secs(290));
    }

    /// Issue 27 item 2: no collection reads the busy times (`/proc/stat`);
    /// the reading after the collection a check is due at does, once, and
    /// the check still judges.
    #[test]
    fn a_collection_never_reads_the_busy_times() {
        let (k, mut e) = engine(|k| k.set_guest_rate("cpu", Some(395.0)));
        for _ in 0..25 {
            e.collect();
            k.advance(SEC);
        }
        assert_eq!(k.cpu_time_reads(), 0, "no collection read /proc/stat");
        // Checks were due at 0, 10 and 20 s; a check whose reading never
        // came is dropped for the next: one reading is asked for (made at
        // 25 s, too late for its window: not judged), and only once.
        let m = Mutex::new(e);
        after_collection(&m);
        assert_eq!(k.cpu_time_reads(), 1, "one reading, for the last check");
        after_collection(&m);
        assert_eq!(k.cpu_time_reads(), 1, "asked for once");
        let mut e = m.into_inner().unwrap();
        // Every due collection followed by its reading: judged, and the
        // verdict counts from the next collection.
        let reads = k.cpu_time_reads();
        let implausible = |e: &Engine| {
            e.counter_states()
                .iter()
                .filter(|(m, _, s, _)| {
                    m == "perf_instructions_total"
                        && *s == crate::problem::CounterState::Implausible
                })
                .count()
        };
        // Collected at 25..=46 s: checks at 30 (the start of a window) and
        // 40 s (judged: implausible from 41 s).
        for _ in 0..22 {
            e.collect();
            e.run_upkeep();
            k.advance(SEC);
        }
        assert_eq!(k.cpu_time_reads(), reads + 2, "one per check");
        assert!(implausible(&e) > 0, "{:?}", e.counter_states());
    }
}
