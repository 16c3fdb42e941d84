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
use crate::config::Config;
use crate::engine::Engine;
use crate::export::live::{self, Formula, Frame, PerCpuDetail, DERIVED};
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

/// The derived values' inputs.
fn inputs(form: Formula) -> Vec<&'static str> {
    match form {
        Formula::Ratio(n, d) => vec![n, d],
        Formula::Rate(m) => vec![m],
    }
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
        } else if let Some((_, f, _)) = DERIVED.iter().find(|(d, _, _)| d == name) {
            need.extend(inputs(*f).into_iter().map(String::from));
        } else {
            let mut known: Vec<&str> = metrics.clone();
            known.extend(DERIVED.iter().map(|(d, _, _)| *d));
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
                frame(&mut framer, &prev, &(now, cur.clone()), &reasons, detail),
                &select,
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
        frame(&mut framer, &(start, first), &prev, &reasons, detail),
        &select,
    );
    Ok(view.summary(out, &total, &causes)?)
}

fn frame(
    framer: &mut live::Framer,
    a: &(Instant, Vec<Family>),
    b: &(Instant, Vec<Family>),
    r: &live::Reasons,
    per_cpu: PerCpuDetail,
) -> Frame {
    let secs = b.0.duration_since(a.0).as_secs_f64();
    framer.frame(&a.1, &b.1, secs, r, per_cpu)
}

/// Keeps what `-e` asked for (everything when it asked for nothing).
fn narrow(mut f: Frame, select: &BTreeSet<String>) -> Frame {
    if select.is_empty() {
        return f;
    }
    let shown = |k: &str| {
        select.contains(k)
            || DERIVED
                .iter()
                .any(|(d, form, _)| *d == k && inputs(*form).iter().all(|m| select.contains(*m)))
    };
    let derived = |k: &str| DERIVED.iter().any(|(d, _, _)| *d == k);
    f.derived.retain(|k, _| shown(k));
    // The config holds only what `-e` needs: its metrics all stay.
    f.unavailable.retain(|k, _| shown(k) || !derived(k));
    if let Some(c) = f.per_cpu.as_mut() {
        c.retain_derived(shown);
    }
    f
}
