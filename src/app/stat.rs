//! `perf-exporter stat`: the counters in the terminal, like
//! `perf stat -a -I`: a block per interval (each counter's increase, the
//! derived ratios and rates, what is not available) and a summary over
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
use crate::problem::{group, Problem};
use crate::resolve::chain::resolve_config;
use crate::snapshot::Family;
use crate::terminal::escape;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
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
    let engine = super::serve::open_engine(kernel, h.table, res);
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
    let first = engine.collect().families;
    let mut prev = (start, first.clone());
    // `--json` prints the whole frame, every per-CPU counter included (as
    // `--per-cpu` shows them all, as `perf stat -A` does).
    let detail = if s.per_cpu || s.json {
        PerCpuDetail::All
    } else {
        PerCpuDetail::Off
    };
    let mut framer = live::Framer::default();
    if !s.json {
        header(out, &s)?;
    }
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
        let cur = engine.collect().families;
        let done = stopped || end.is_some_and(|e| now >= e);
        // A partial last interval (Ctrl-C, or -d not a multiple of -I) is
        // in the summary, not printed as an interval of its own.
        if !stopped && until == next {
            let f = narrow(
                frame(&mut framer, &prev, &(now, cur.clone()), &reasons, detail),
                &select,
            );
            emit(out, &s, now.duration_since(start), &f)?;
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
    summary(out, &s, &total, &causes)
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

fn io(e: std::io::Error) -> AppError {
    AppError::Runtime(e)
}

fn header(out: &mut impl Write, s: &StatSettings) -> Result<(), AppError> {
    let cpu = if s.per_cpu { " cpu  " } else { "" };
    writeln!(out, "#          time{cpu}                counts  name").map_err(io)
}

/// A count: whole numbers as such, others with six decimals.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.6}")
    }
}

fn emit(out: &mut impl Write, s: &StatSettings, t: Duration, f: &Frame) -> Result<(), AppError> {
    if s.json {
        writeln!(out, "{}", f.to_json()).map_err(io)?;
        return out.flush().map_err(io);
    }
    let t = t.as_secs_f64();
    block(out, &format!("{t:>15.6}"), f, s.per_cpu, false)?;
    out.flush().map_err(io)
}

/// One interval's (or the summary's) lines, each starting with `lead`.
fn block(
    out: &mut impl Write,
    lead: &str,
    f: &Frame,
    per_cpu: bool,
    reasons: bool,
) -> Result<(), AppError> {
    if let (true, Some(c)) = (per_cpu, &f.per_cpu) {
        for (i, cpu) in c.cpus.iter().enumerate() {
            for (k, col) in c.counts() {
                if let Some(v) = col[i] {
                    writeln!(out, "{lead} CPU{cpu:<4}{:>20}  {}", num(v), escape(k)).map_err(io)?;
                }
            }
            for k in c.derived_names() {
                let v = ratio(c.derived(k, *cpu));
                writeln!(out, "{lead} CPU{cpu:<4}{v:>20}  {}", escape(k)).map_err(io)?;
            }
        }
    } else {
        for (k, v) in &f.counts {
            writeln!(out, "{lead}{:>22}  {}{}", num(*v), escape(k), share(f, k)).map_err(io)?;
        }
    }
    let pad = if per_cpu { "      " } else { "" };
    for (k, v) in &f.derived {
        writeln!(out, "{lead}{pad}{:>22}  {}", ratio(*v), escape(k)).map_err(io)?;
    }
    // What is not available is the same in every interval: only the
    // summary names it, with each cause said once. A counter that opened
    // and never ran is perf's `<not counted>`, in every interval.
    for k in f.unavailable.keys() {
        let not_counted = f.not_counted.contains(k);
        if reasons || not_counted {
            let what = if not_counted {
                "<not counted>"
            } else {
                "<not available>"
            };
            writeln!(out, "{lead}{pad}{what:>22}  {}", escape(k)).map_err(io)?;
        }
    }
    Ok(())
}

/// Why the summary's `<not available>` rows are not available: a `#` line
/// per cause, naming the rows it applies to; a row without a known cause
/// (not in the config, ...) gets its own line.
fn why_not_available(
    out: &mut impl Write,
    f: &Frame,
    causes: &BTreeMap<String, Problem>,
) -> Result<(), AppError> {
    if f.unavailable.is_empty() {
        return Ok(());
    }
    writeln!(out).map_err(io)?;
    let known = f
        .unavailable
        .keys()
        .filter_map(|k| Some((k.as_str(), causes.get(k)?)));
    for g in group(known) {
        writeln!(out, "# {}", g.explain("of these")).map_err(io)?;
    }
    for (k, why) in f
        .unavailable
        .iter()
        .filter(|(k, _)| !causes.contains_key(*k))
    {
        writeln!(out, "# {k}: {why}").map_err(io)?;
    }
    Ok(())
}

/// perf's `  (xx.xx%)` after a multiplexed counter: the share of the
/// window it ran on the PMU; nothing for one that counted all the time.
fn share(f: &Frame, metric: &str) -> String {
    f.multiplexed
        .get(metric)
        .map_or_else(String::new, |r| format!("  ({:.2}%)", r * 100.0))
}

/// A derived value; `-` where its denominator did not move.
fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

fn summary(
    out: &mut impl Write,
    s: &StatSettings,
    f: &Frame,
    causes: &BTreeMap<String, Problem>,
) -> Result<(), AppError> {
    if s.json {
        writeln!(out, "{{\"summary\":{}}}", f.to_json()).map_err(io)?;
        return out.flush().map_err(io);
    }
    writeln!(out, "\n Summary over {:.6} s:\n", f.interval_seconds).map_err(io)?;
    block(out, "", f, s.per_cpu, true)?;
    why_not_available(out, f, causes)?;
    out.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::CounterState;

    /// perf's conventions: a multiplexed count with its `(xx.xx%)`, a
    /// counter that never ran as `<not counted>` (never a number), one not
    /// counted on this host as `<not available>`.
    #[test]
    fn multiplexed_and_never_ran_counters_are_shown_as_perf_does() {
        let mut f = Frame {
            interval_seconds: 1.0,
            ..Frame::default()
        };
        f.counts.insert("perf_cpu_cycles_total".into(), 2e9);
        f.counts.insert("perf_instructions_total".into(), 3e9);
        f.multiplexed.insert("perf_cpu_cycles_total".into(), 0.75);
        let why = CounterState::NeverRan.explain().to_string();
        f.unavailable.insert("perf_branches_total".into(), why);
        f.not_counted.insert("perf_branches_total".into());
        f.unavailable
            .insert("perf_l1i_loads_total".into(), "not supported".into());
        // The summary (reasons: the causes follow in `#` lines) has every
        // row; an interval has the `<not counted>` one, not the one this
        // host cannot count at all.
        let mut out = Vec::new();
        block(&mut out, "", &f, false, true).unwrap();
        let expected = "            2000000000  perf_cpu_cycles_total  (75.00%)\n\
             \x20           3000000000  perf_instructions_total\n\
             \x20        <not counted>  perf_branches_total\n\
             \x20      <not available>  perf_l1i_loads_total\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        let mut out = Vec::new();
        block(&mut out, "", &f, false, false).unwrap();
        let expected = "            2000000000  perf_cpu_cycles_total  (75.00%)\n\
             \x20           3000000000  perf_instructions_total\n\
             \x20        <not counted>  perf_branches_total\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }
}
