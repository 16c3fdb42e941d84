//! One load path for start-up and every reload (SIGHUP, `POST /-/reload`):
//! read the config and the web config, rediscover the PMUs, resolve, and
//! refuse what would count nothing. Reloads run on a thread of their own,
//! away from the threads scrapes collect on, and are coalesced: at most
//! one runs and one is pending, however many are asked for (a config path
//! that blocks, a FIFO or a hung mount, holds one thread, never the
//! scrapes). Its reads run on a helper thread bounded by
//! `--config.read-timeout` (`app::deadline`): a read that never returns
//! fails that reload, and the next one starts afresh. A refused reload
//! keeps the previous configuration serving and sets
//! `perf_config_last_reload_successful` to 0.

use super::deadline::Deadline;
use super::host::{Host, HostSettings};
use super::opening::{log_problems, open_engine, open_engine_beside};
use super::AppError;
use crate::bounded::lock;
use crate::bounded::watch::step;
use crate::config::cgroups::CgroupsConfig;
use crate::engine::{Engine, Fds};
use crate::perf::Kernel;
use crate::pmu::host::Tracepoints;
use crate::pmu::PmuTable;
use crate::privilege::Privilege;
use crate::probe::prober;
use crate::report::{nothing_to_count, Counting};
use crate::resolve::chain::{resolve_config, Resolution, Status};
use crate::resolve::Context;
use crate::web::config::WebConfig;
pub use crate::web::ReloadError;
use crate::web::{Lifecycle, Reloaded, State};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use tokio::sync::watch;

/// What start-up and every reload read.
#[derive(Debug, Clone)]
pub(super) struct Sources {
    pub host: HostSettings,
    pub web_config_file: Option<PathBuf>,
    pub allow_downgrade: bool,
    /// `--config.read-timeout`, shared by start-up and every reload.
    pub deadline: Deadline,
}

/// One load: the web config (when a file is given), the PMU table and
/// the config's resolution on it.
pub(super) struct Loaded {
    pub web: Option<WebConfig>,
    pub table: PmuTable,
    pub res: Resolution,
    /// The `cgroups:` section.
    pub cgroups: Option<CgroupsConfig>,
    /// The `sampling:` section (applied at start-up only).
    pub sampling: Option<crate::config::sampling::SamplingConfig>,
    /// What this process holds (`None` on the simulated PMU).
    pub privilege: Option<Privilege>,
    /// The `derived:` section.
    pub derived: Arc<crate::config::derived::DerivedTable>,
}

/// Reads and resolves everything a (re)load needs. `table` is the PMU
/// table found at start: a live host is discovered again (a module may
/// have been loaded), a simulated one is its fixture.
pub(super) fn load(
    src: &Sources,
    table: &PmuTable,
    ctx: &Context,
    kernel: &dyn Kernel,
) -> Result<Loaded, ReloadError> {
    let web = match &src.web_config_file {
        Some(p) => {
            step(format!(
                "the web config file {} or a file it names",
                p.display()
            ));
            Some(WebConfig::load(p).map_err(|err| ReloadError::WebConfig {
                file: p.display().to_string(),
                err,
            })?)
        }
        None => None,
    };
    if let Some(p) = &src.host.config_file {
        step(format!("the config file {}", p.display()));
    }
    let cfg = src.host.load_config()?;
    let table = if kernel.simulated() {
        table.clone()
    } else {
        step(format!("PMU discovery under {}", table.sysfs.display()));
        let mut t = PmuTable::discover(&table.sysfs).map_err(ReloadError::Pmu)?;
        // The CPU model does not change while running.
        t.identities = table.identities.clone();
        t.host_identity = table.host_identity.clone();
        for w in &t.warnings {
            tracing::warn!(warning = %w, "sysfs entry skipped");
        }
        t
    };
    // The tracepoints too (a module loaded since may add some); resolving
    // reads no file.
    let fresh;
    let ctx = match &ctx.tracefs {
        Some(t) if !kernel.simulated() => {
            step(format!("tracepoint discovery under {}", t.display()));
            fresh = Context {
                tracepoints: Tracepoints::discover(t),
                ..ctx.clone()
            };
            &fresh
        }
        _ => ctx,
    };
    step("probing the config's events");
    let probe = prober(kernel);
    let mut res = resolve_config(&cfg, &table, ctx, Some(&probe));
    let privilege = (!kernel.simulated()).then(|| Privilege::detect(&src.host.procfs));
    if let Some(p) = &privilege {
        // Permission errors explained with what this process holds.
        crate::report::diagnose(&mut res, p, true);
    }
    Ok(Loaded {
        web,
        table,
        res,
        cgroups: cfg.cgroups.clone(),
        sampling: cfg.sampling.clone(),
        privilege,
        derived: Arc::new(cfg.derived.clone()),
    })
}

/// What the start-up thread reads.
pub(super) struct Prepared {
    pub host: Host,
    pub kernel: Arc<dyn Kernel>,
    pub loaded: Loaded,
}

/// The start-up reads: the host (PMU discovery) and the first load.
pub(super) fn prepare(src: &Sources) -> Result<Prepared, AppError> {
    step(format!("PMU discovery under {}", src.host.sysfs.display()));
    let host = Host::open(&src.host)?;
    let Some(kernel) = host.kernel.clone() else {
        return Err(AppError::NotLive(src.host.sysfs.display().to_string()));
    };
    let loaded = load(src, &host.table, &host.ctx, kernel.as_ref())?;
    Ok(Prepared {
        host,
        kernel,
        loaded,
    })
}

/// The security a web config gives the listener, which a reload may not
/// take away unless allowed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Guard {
    tls: bool,
    auth: bool,
}

impl Guard {
    pub(super) fn of(w: &WebConfig) -> Guard {
        Guard {
            tls: w.tls.is_some(),
            auth: !w.users.is_empty(),
        }
    }

    fn check(self, new: &WebConfig) -> Result<(), ReloadError> {
        if self.tls && new.tls.is_none() {
            return Err(ReloadError::Downgrade("turns TLS off on a TLS listener"));
        }
        if self.auth && new.users.is_empty() {
            return Err(ReloadError::Downgrade("drops basic authentication"));
        }
        Ok(())
    }
}

/// What a reload swaps, and where it reports.
pub(super) struct Job {
    pub sources: Sources,
    pub table: PmuTable,
    pub ctx: Context,
    pub kernel: Arc<dyn Kernel>,
    pub engine: Arc<Mutex<Engine>>,
    pub state: Arc<State>,
    pub guard: Guard,
}

impl Job {
    /// One reload: logs the outcome and records it for the self-metrics.
    pub(super) fn run(&mut self) -> Reloaded {
        let out = self.try_reload();
        self.state.record_reload(out.is_ok());
        match &out {
            Ok(summary) => tracing::info!(%summary, "configuration reloaded"),
            Err(e) => {
                tracing::error!(error = %e, "configuration reload refused; the previous configuration keeps serving")
            }
        }
        out.map_err(Arc::new)
    }

    fn try_reload(&mut self) -> Result<String, ReloadError> {
        let (src, table, ctx) = (self.sources.clone(), self.table.clone(), self.ctx.clone());
        let kernel = self.kernel.clone();
        let l = self.sources.deadline.run("reload-reads", move || {
            load(&src, &table, &ctx, kernel.as_ref())
        })?;
        if let Some(w) = &l.web {
            if !self.sources.allow_downgrade {
                self.guard.check(w)?;
            }
        }
        if let Some(why) = nothing_to_count(Counting::Resolved(&l.res), l.privilege.as_ref()) {
            return Err(ReloadError::NothingToCount(why));
        }
        let summary = self.swap(l.table, l.res, l.cgroups.as_ref(), &l.derived);
        if let Some(w) = l.web {
            tracing::info!(web_config = %w.describe(), "web config reloaded");
            for warn in &w.warnings {
                tracing::warn!(warning = %warn, "web config");
            }
            self.guard = Guard::of(&w);
            self.state.set_web_config(w);
        }
        Ok(summary)
    }

    /// Builds the new engine beside the serving one, outside its lock
    /// (scrapes are answered meanwhile: issue 28), its groups opened
    /// disabled; then, under the lock, a last read of the old engine, its
    /// counters closed, the new ones enabled (no event counted by both),
    /// the totals carried over and the engines swapped. Metrics counting
    /// the same events keep their totals. When the descriptors do not
    /// suffice for both engines at once, the new engine is opened after
    /// the old one closes, under the lock, as at start-up.
    fn swap(
        &self,
        table: PmuTable,
        res: Resolution,
        cgroups: Option<&CgroupsConfig>,
        derived: &Arc<crate::config::derived::DerivedTable>,
    ) -> String {
        let held = {
            let e = lock(&self.engine);
            e.open_fds() + e.cgroups().map_or(0, |c| c.backend().open_fds())
        };
        tracing::debug!(
            held,
            "reload: opening the new counters beside the serving ones (scrapes are answered meanwhile)"
        );
        let ne = open_engine_beside(
            self.kernel.clone(),
            table.clone(),
            res.clone(),
            cgroups,
            held,
            &self.sources.host.procfs,
        );
        let beside = if ne.lacks_fds() {
            // Its descriptors close before the old engine's lock is taken.
            drop(ne);
            tracing::info!(
                held,
                "too few file descriptors to open the reloaded config beside the serving one: it opens after the old counters close, while scrapes wait"
            );
            None
        } else {
            Some(ne)
        };
        let mut e = lock(&self.engine);
        // A last read, so the totals carried over are current; then the
        // old counters close before the new ones count.
        e.collect();
        let totals = e.totals();
        let cg_totals = e.cgroups().map(|c| c.totals());
        let old_problems = e.problems();
        let self_test = e.self_test().to_vec();
        let sampled = e.set_sampled(None);
        let nothing = Resolution {
            sets: Vec::new(),
            metrics: Vec::new(),
        };
        *e = Engine::for_config(self.kernel.clone(), table.clone(), nothing, Fds::Unbounded);
        let host = &self.sources.host;
        let mut ne = match beside {
            Some(mut ne) => {
                ne.enable();
                ne
            }
            None => open_engine(self.kernel.clone(), table, res, cgroups, &host.procfs),
        };
        ne.set_host_facts(host.facts());
        ne.set_self_test(self_test);
        ne.set_derived(derived.clone());
        ne.host_derived().log_left_out();
        let continued = ne.carry_over(totals);
        if let Err(e) =
            super::cgroups::attach(&mut ne, self.kernel.clone(), cgroups, host, cg_totals)
        {
            tracing::error!(error = %e, "per-workload counting is off after this reload");
        }
        ne.set_sampled(sampled);
        // Only what changed: the rest was logged at start or last reload.
        let problems = ne.problems();
        log_problems(
            problems
                .iter()
                .filter(|mp| !old_problems.contains(mp))
                .map(|(m, p)| (m.as_str(), p)),
        );
        let counted = ne
            .resolution()
            .metrics
            .iter()
            .filter(|m| m.status != Status::Unavailable)
            .count();
        let mut s = format!(
            "{counted} of {} metrics counted: {} continue their counts, {} start from zero (new or changed); {} of {} planned counters open",
            ne.resolution().metrics.len(),
            continued.len(),
            counted.saturating_sub(continued.len()),
            ne.open_fds(),
            ne.planned_fds()
        );
        // Removed metrics keep their totals until the next reload, which
        // continues them if they come back (a bad-then-fixed config).
        let parked = ne.parked_metrics();
        if !parked.is_empty() {
            s.push_str(&format!(
                "; the totals of {} removed or changed metrics are kept until the next reload",
                parked.len()
            ));
        }
        *e = ne;
        s
    }
}

/// The outcome of the reload that served requests up to `generation`.
#[derive(Debug, Clone)]
struct Outcome {
    generation: u64,
    result: Reloaded,
}

#[derive(Debug)]
struct Shared {
    /// Reloads asked for so far.
    requested: Mutex<u64>,
    wake: Condvar,
    done: watch::Sender<Outcome>,
}

/// The reload thread's handle: asking for a reload never blocks, and
/// requests that arrive while one runs are served by one more.
#[derive(Debug, Clone)]
pub(super) struct Reloader {
    shared: Arc<Shared>,
}

impl Reloader {
    /// Starts the reload thread, which runs `work` for each (coalesced)
    /// request.
    pub(super) fn start(
        mut work: impl FnMut() -> Reloaded + Send + 'static,
    ) -> std::io::Result<Reloader> {
        let (done, _) = watch::channel(Outcome {
            generation: 0,
            result: Ok(String::new()),
        });
        let shared = Arc::new(Shared {
            requested: Mutex::new(0),
            wake: Condvar::new(),
            done,
        });
        let s = shared.clone();
        std::thread::Builder::new()
            .name("reload".into())
            .spawn(move || {
                let mut served = 0;
                loop {
                    let target = {
                        let mut r = lock(&s.requested);
                        while *r == served {
                            r = s.wake.wait(r).unwrap_or_else(PoisonError::into_inner);
                        }
                        *r
                    };
                    let result = work();
                    served = target;
                    s.done.send_replace(Outcome {
                        generation: target,
                        result,
                    });
                }
            })?;
        Ok(Reloader { shared })
    }

    /// Asks for a reload; returns the request's generation and where its
    /// outcome will appear.
    fn request(&self) -> (u64, watch::Receiver<Outcome>) {
        let rx = self.shared.done.subscribe();
        let mut r = lock(&self.shared.requested);
        *r += 1;
        self.shared.wake.notify_one();
        (*r, rx)
    }

    /// Asks for a reload and does not wait for it (SIGHUP).
    pub(super) fn request_detached(&self) {
        drop(self.request());
    }
}

impl Lifecycle for Reloader {
    fn reload(&self) -> Pin<Box<dyn Future<Output = Reloaded> + Send>> {
        let (generation, mut rx) = self.request();
        Box::pin(async move {
            let out = match rx.wait_for(|o| o.generation >= generation).await {
                Ok(o) => o.result.clone(),
                Err(_) => Err(Arc::new(ReloadError::Stopped)),
            };
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    /// Issue 11: each SIGHUP queued a reload of its own. Requests that
    /// arrive while one runs are served by one more, however many.
    #[test]
    fn requests_during_a_reload_are_coalesced_into_one() {
        let runs = Arc::new(AtomicUsize::new(0));
        let (gate_tx, gate) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel::<()>();
        let r = runs.clone();
        let reloader = Reloader::start(move || {
            let n = r.fetch_add(1, Ordering::SeqCst) + 1;
            let _ = started_tx.send(());
            // Blocks like a hung mount until the test lets it go.
            let _ = gate.recv();
            Ok(format!("reload {n}"))
        })
        .expect("thread");
        let (first, _rx) = reloader.request();
        started
            .recv_timeout(Duration::from_secs(5))
            .expect("first reload runs");
        let waiting: Vec<_> = (0..50).map(|_| reloader.request()).collect();
        let (last_gen, mut rx) = waiting.last().map(|(g, rx)| (*g, rx.clone())).expect("50");
        assert_eq!(last_gen, first + 50);
        gate_tx.send(()).expect("release the first");
        started
            .recv_timeout(Duration::from_secs(5))
            .expect("one more reload runs");
        gate_tx.send(()).expect("release the second");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let out = rt.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(5),
                rx.wait_for(|o| o.generation >= last_gen),
            )
            .await
            .expect("in time")
            .expect("outcome")
            .result
            .clone()
        });
        assert_eq!(out.ok(), Some("reload 2".to_string()));
        assert!(started.recv_timeout(Duration::from_millis(200)).is_err());
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }
}

#[cfg(test)]
#[path = "reload_timeout_tests.rs"]
mod timeout_tests;
