//! `perf-exporter stat`: the counters in the terminal, like
//! `perf stat -a -I`, printed by [`crate::view::stat`]: a block per
//! interval (each counter's increase, the derived ratios and rates, what
//! is not available) and a summary over
//! the whole run at the end, also on Ctrl-C (SIGINT) or SIGTERM, after one
//! last collection, so no count is lost. `--json`: each interval's frame
//! (the live view's, [`crate::export::live`]) on a line of its own, then
//! `{"summary": frame}`.
//!
//! `-e NAME` (repeatable, or comma-separated) keeps a metric of the
//! config or a derived value (`ipc`, `l1d_miss_ratio`, ...): only those
//! metrics and the inputs of those derived values are opened.

use super::host::{Host, HostSettings};
use super::AppError;
use crate::config::derived::{DerivedTable, Source};
use crate::config::Config;
use crate::engine::Engine;
use crate::export::live::{self, Frame, PerCpuDetail};
use crate::privilege::Privilege;
use crate::probe::prober;
use crate::resolve::chain::resolve_config;
use crate::snapshot::Family;
use crate::view::stat::StatView;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};

/// `stat`'s settings.
#[derive(Debug, Clone)]
pub struct StatSettings {
    /// `-I`: the interval.
    pub interval: Duration,
    /// `-d`: stop after this long (default: at Ctrl-C).
    pub duration: Option<Duration>,
    /// `--per-cpu`: a line per CPU.
    pub per_cpu: bool,
    /// `--json`: a frame per line.
    pub json: bool,
    /// `-e`: metrics or derived values to show (empty: all).
    pub select: Vec<String>,
}

/// The event metrics a derived value reads, through the derived values
/// it reads (the table is in evaluation order: those come first).
fn inputs(table: &DerivedTable, name: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(d) = table.get(name) else {
        return out;
    };
    for i in d.formula.inputs.iter().chain(&d.formula.probes) {
        match &i.source {
            Source::Metric(m) => {
                out.insert(m.clone());
            }
            Source::Derived(x) if x != name => out.extend(inputs(table, x)),
            Source::Derived(_) | Source::Duration => {}
        }
    }
    out
}

/// The metrics `-e` needs counted; an unknown name is refused with the
/// names that exist (the closest first).
fn needed(cfg: &Config, select: &[String]) -> Result<BTreeSet<String>, AppError> {
    let metrics: Vec<&str> = cfg
        .sets
        .iter()
        .flat_map(|s| &s.events)
        .map(|m| m.metric.value.as_str())
        .collect();
    let mut need = BTreeSet::new();
    for name in select {
        if metrics.contains(&name.as_str()) {
            need.insert(name.clone());
        } else if cfg.derived.get(name).is_some() {
            need.extend(inputs(&cfg.derived, name));
        } else {
            let mut known: Vec<&str> = metrics.clone();
            known.extend(cfg.derived.metrics.iter().map(|d| d.name.as_str()));
            known.sort_by(|a, b| {
                strsim::jaro_winkler(b, name).total_cmp(&strsim::jaro_winkler(a, name))
            });
            return Err(AppError::Stat(format!(
                "-e {name}: no such metric in the config or derived value; closest: {}",
                known[..known.len().min(5)].join(", ")
            )));
        }
    }
    Ok(need)
}

/// Opens the engine on the config (narrowed to `-e`).
fn open(host: &HostSettings, s: &StatSettings) -> Result<Engine, AppError> {
    let h = Host::open(host)?;
    let Some(kernel) = h.kernel.clone() else {
        return Err(AppError::NotLive(host.sysfs.display().to_string()));
    };
    let mut cfg = host.load_config()?;
    if !s.select.is_empty() {
        let need = needed(&cfg, &s.select)?;
        for set in &mut cfg.sets {
            set.events.retain(|m| need.contains(&m.metric.value));
        }
        cfg.sets.retain(|set| !set.events.is_empty());
    }
    let mut res = resolve_config(&cfg, &h.table, &h.ctx, Some(&prober(kernel.as_ref())));
    let privilege = (!kernel.simulated()).then(|| Privilege::detect(&host.procfs));
    if let Some(p) = &privilege {
        crate::report::diagnose(&mut res, p, true);
    }
    let mut engine = super::opening::open_engine(kernel, h.table, res, None, &host.procfs);
    engine.set_host_facts(host.facts());
    engine.set_derived(std::sync::Arc::new(cfg.derived.clone()));
    let counting = crate::report::Counting::Opened(&engine);
    if let Some(why) = crate::report::nothing_to_count(counting, privilege.as_ref()) {
        return Err(AppError::NothingToCount(why));
    }
    Ok(engine)
}

/// Runs `stat` until `-d` or SIGINT/SIGTERM, printing to standard output.
pub(super) fn stat(host: HostSettings, s: StatSettings) -> Result<(), AppError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AppError::Runtime)?;
    rt.block_on(run(host, s))
}

async fn run(host: HostSettings, s: StatSettings) -> Result<(), AppError> {
    let mut int = signal(SignalKind::interrupt()).map_err(AppError::Runtime)?;
    let mut term = signal(SignalKind::terminate()).map_err(AppError::Runtime)?;
    let mut engine = open(&host, &s)?;
    let reasons = crate::web::reasons(&engine);
    let causes = crate::web::causes(&engine);
    let select: BTreeSet<String> = s.select.iter().cloned().collect();
    let derived = engine.derived().clone();
    let shown = shown(&derived, &select);
    let out = &mut std::io::stdout().lock();
    let start = Instant::now();
    let first = engine.collect_full().families;
    engine.run_upkeep();
    let mut prev = (start, first.clone());
    // `--json` prints the whole frame, every per-CPU counter included (as
    // `--per-cpu` shows them all, as `perf stat -A` does).
    let detail = if s.per_cpu || s.json {
        PerCpuDetail::All
    } else {
        PerCpuDetail::Off
    };
    let mut framer = live::Framer::default();
    let view = StatView {
        json: s.json,
        per_cpu: s.per_cpu,
    };
    view.header(out)?;
    let end = s.duration.map(|d| start + d);
    let mut next = start + s.interval;
    loop {
        let until = end.map_or(next, |e| e.min(next));
        let stopped = tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => false,
            _ = int.recv() => true,
            _ = term.recv() => true,
        };
        let now = Instant::now();
        let cur = engine.collect_full().families;
        // Off the interval's reads: a check's busy times, a budget due.
        engine.run_upkeep();
        let done = stopped || end.is_some_and(|e| now >= e);
        // A partial last interval (Ctrl-C, or -d not a multiple of -I) is
        // in the summary, not printed as an interval of its own.
        if !stopped && until == next {
            let f = narrow(
                frame(
                    &mut framer,
                    &prev,
                    &(now, cur.clone()),
                    &reasons,
                    detail,
                    &derived,
                ),
                &shown,
            );
            view.interval(out, now.duration_since(start), &f)?;
        }
        prev = (now, cur);
        if done {
            break;
        }
        next += s.interval;
    }
    let total = narrow(
        frame(
            &mut framer,
            &(start, first),
            &prev,
            &reasons,
            detail,
            &derived,
        ),
        &shown,
    );
    Ok(view.summary(out, &total, &causes)?)
}

fn frame(
    framer: &mut live::Framer,
    a: &(Instant, Vec<Family>),
    b: &(Instant, Vec<Family>),
    r: &live::Reasons,
    per_cpu: PerCpuDetail,
    derived: &DerivedTable,
) -> Frame {
    let secs = b.0.duration_since(a.0).as_secs_f64();
    framer.frame(&a.1, &b.1, secs, r, per_cpu, derived)
}

/// What `-e` shows: `None` (everything) when it asked for nothing, else
/// the metrics it named, and the derived values it named or whose inputs
/// it all named; with every derived name, to tell them from metrics.
struct Shown {
    keep: Option<BTreeSet<String>>,
    derived: BTreeSet<String>,
}

fn shown(table: &DerivedTable, select: &BTreeSet<String>) -> Shown {
    let derived: BTreeSet<String> = table.metrics.iter().map(|d| d.name.clone()).collect();
    if select.is_empty() {
        return Shown {
            keep: None,
            derived,
        };
    }
    let mut keep = select.clone();
    for d in &table.metrics {
        let need = inputs(table, &d.name);
        if !need.is_empty() && need.iter().all(|m| select.contains(m)) {
            keep.insert(d.name.clone());
        }
    }
    Shown {
        keep: Some(keep),
        derived,
    }
}

/// Keeps what `-e` asked for (everything when it asked for nothing).
fn narrow(mut f: Frame, s: &Shown) -> Frame {
    let Some(keep) = &s.keep else {
        return f;
    };
    let shown = |k: &str| keep.contains(k);
    f.derived.retain(|k, _| shown(k));
    // The config holds only what `-e` needs: its metrics all stay.
    f.unavailable
        .retain(|k, _| shown(k) || !s.derived.contains(k));
    if let Some(c) = f.per_cpu.as_mut() {
        c.retain_derived(shown);
    }
    f
}
