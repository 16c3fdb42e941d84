//! `perf-exporter top`, printed by [`crate::view::top`]: who the CPU time
//! (or cycles, cache misses...) goes to, from the kernel's samples: system-wide sampling on every
//! online CPU (or `-C`), a refreshing table of the top entries by process,
//! thread, cgroup or pod, and a summary at the end (after `-d`, or on
//! Ctrl-C/SIGTERM, after one last drain, exit 0).
//!
//! The event follows the config's fallback idea: `cycles` by default, and
//! `cpu-clock` where there is no hardware PMU, with a line saying so.
//! Sampling `cycles`, `instructions` is read with each sample (a group,
//! `PERF_SAMPLE_READ`), giving each entry's estimated IPC.
//!
//! `--call-graph`: call stacks with each sample (`PERF_SAMPLE_CALLCHAIN`),
//! and under each refresh's table the hottest stacks since the start,
//! symbolized in the refresh (not while draining).
//!
//! `--json`: one object per refresh (`event`, `samples`, `lost`,
//! `throttled`, `entries`: `name`, `pid` with `--by process|thread`,
//! `samples`, `share`, `events`), the refresh's own samples; then
//! `{"summary": object}` over the whole run.

use super::host::{Host, HostSettings};
use super::AppError;
use crate::engine::sample::{
    can_sample, By, ProfileFilter, SampleError, Sampling, SamplingSettings, Table,
};
use crate::perf::{CallchainSpec, EventAttr, Kernel, SampleRate, SampleSpec};
use crate::privilege::Privilege;
use crate::resolve::resolve_sampled;
use crate::spec::{self, EventSpec};
use crate::view::top::{Layout, Rate, View, STACK_ROWS};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};

/// `top`'s settings.
#[derive(Debug, Clone)]
pub struct TopSettings {
    /// `-F`: samples per second per CPU.
    pub freq: u64,
    /// `-c`: a fixed period instead of `-F`.
    pub period: Option<u64>,
    /// `-d`: stop after this long (default: at Ctrl-C).
    pub duration: Option<Duration>,
    /// `-I`: refresh interval.
    pub interval: Duration,
    /// `-e`: the event (default `cycles`, falling back to `cpu-clock`).
    pub event: Option<String>,
    /// `--by`.
    pub by: By,
    /// `--json`.
    pub json: bool,
    /// `--ring-pages`: data pages per CPU (a power of two).
    pub ring_pages: usize,
    /// `-C`: only these CPUs.
    pub cpus: Option<Vec<u32>>,
    /// `-n`: rows of the table.
    pub rows: usize,
    /// Call stacks with each sample (`record`, `/api/v1/profile`).
    pub callchain: Option<CallchainSpec>,
}

/// The event `top` samples, resolved for each CPU.
#[derive(Debug)]
pub(super) struct Resolved {
    /// The event's name.
    pub(super) event: String,
    /// Why the default was not used.
    pub(super) note: Option<String>,
    /// Per CPU, what to open.
    cpus: Vec<(u32, SampleSpec)>,
}

/// Each CPU's encoding of `name` (the instance whose CPUs hold it).
pub(super) fn per_cpu(h: &Host, name: &str, cpus: &[u32]) -> Result<Vec<(u32, EventAttr)>, String> {
    let inst = resolve_sampled(name, &h.table, &h.ctx).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for &cpu in cpus {
        if let Some(i) = inst
            .iter()
            .find(|i| i.cpus.is_empty() || i.cpus.contains(&cpu))
        {
            out.push((
                cpu,
                EventAttr {
                    type_: i.type_,
                    config: i.config,
                    event: name.to_string(),
                    pmu: i.pmu.clone(),
                    exclude: i.exclude,
                },
            ));
        }
    }
    if out.is_empty() {
        return Err(format!("{name} is counted on none of the CPUs {cpus:?}"));
    }
    Ok(out)
}

fn specs(
    s: &TopSettings,
    leader: Vec<(u32, EventAttr)>,
    members: &[(u32, EventAttr)],
) -> Vec<(u32, SampleSpec)> {
    leader
        .into_iter()
        .map(|(cpu, attr)| {
            let m = members
                .iter()
                .filter(|(c, _)| *c == cpu)
                .map(|(_, a)| a.clone())
                .collect();
            let rate = s
                .period
                .map_or(SampleRate::Frequency(s.freq), SampleRate::Period);
            (
                cpu,
                SampleSpec {
                    attr,
                    members: m,
                    rate,
                    cgroup: s.by.needs_cgroup(),
                    ring_pages: s.ring_pages,
                    watermark: 0,
                    callchain: s.callchain,
                },
            )
        })
        .collect()
}

/// The event and its per-CPU specs: `-e`, or `cycles` (with
/// `instructions` for IPC) falling back to `cpu-clock`.
fn resolve(h: &Host, s: &TopSettings) -> Result<Resolved, AppError> {
    let online = h.table.topology.online.clone();
    let cpus: Vec<u32> = match &s.cpus {
        Some(c) => {
            if let Some(bad) = c.iter().find(|c| !online.contains(c)) {
                return Err(AppError::Top(format!(
                    "-C: CPU {bad} is not online (online: {online:?})"
                )));
            }
            c.clone()
        }
        None => online,
    };
    let name = s.event.clone().unwrap_or_else(|| "cycles".into());
    match per_cpu(h, &name, &cpus) {
        Ok(leader) => {
            let members = match ipc_member(&name) {
                Some(m) => per_cpu(h, &m, &cpus).unwrap_or_default(),
                None => Vec::new(),
            };
            Ok(Resolved {
                cpus: specs(s, leader, &members),
                event: name,
                note: None,
            })
        }
        Err(why) if s.event.is_none() => Ok(Resolved {
            cpus: specs(s, per_cpu(h, FALLBACK, &cpus).map_err(AppError::Top)?, &[]),
            event: FALLBACK.into(),
            note: Some(format!(
                "no hardware PMU ({why}): sampling {FALLBACK} instead of cycles"
            )),
        }),
        Err(why) => Err(AppError::Top(format!("-e {name}: {why}"))),
    }
}

/// The member read with each sample of `cycles` (with its modifiers:
/// `cycles:u` reads `instructions:u`), for each entry's IPC.
fn ipc_member(leader: &str) -> Option<String> {
    let e = spec::parse(leader).ok()?;
    match e.spec {
        EventSpec::Hardware { id, .. } if id == crate::sys::abi::HW_CPU_CYCLES => {
            let m = e.modifiers;
            Some(if m.is_empty() {
                "instructions".into()
            } else {
                format!("instructions:{m}")
            })
        }
        _ => None,
    }
}

/// The event sampled where `cycles` cannot be.
const FALLBACK: &str = "cpu-clock";

/// Opens the samplers; a `cycles` group that the PMU refuses is retried
/// without its member, and `cycles` that no CPU opens falls back to
/// `cpu-clock` when it was the default.
pub(super) fn open(
    kernel: &Arc<dyn Kernel>,
    host: &HostSettings,
    h: &Host,
    s: &TopSettings,
) -> Result<(Sampling, Resolved), AppError> {
    let mut r = resolve(h, s)?;
    let settings = |cpus: Vec<(u32, SampleSpec)>| SamplingSettings {
        cpus,
        by: s.by,
        procfs: host.procfs.clone(),
        cgroupfs: cgroupfs(host, kernel.simulated()),
    };
    match Sampling::open(kernel, settings(r.cpus.clone())) {
        Ok(smp) => return Ok((smp, r)),
        Err(e) if r.cpus.iter().any(|(_, sp)| !sp.members.is_empty()) => {
            tracing::info!(error = %e, "sampling without the instructions member");
            for (_, sp) in &mut r.cpus {
                sp.members.clear();
            }
            if let Ok(smp) = Sampling::open(kernel, settings(r.cpus.clone())) {
                return Ok((smp, r));
            }
        }
        Err(e) if s.event.is_some() || r.event == FALLBACK => {
            return Err(not_sampled(kernel, host, &r.event, e))
        }
        Err(_) => {}
    }
    if s.event.is_some() || r.event == FALLBACK {
        return Err(AppError::Top(format!("cannot sample {}", r.event)));
    }
    let why = format!("{} cannot be sampled here", r.event);
    let cpus: Vec<u32> = r.cpus.iter().map(|(c, _)| *c).collect();
    let leader = per_cpu(h, FALLBACK, &cpus).map_err(AppError::Top)?;
    let r = Resolved {
        cpus: specs(s, leader, &[]),
        event: FALLBACK.into(),
        note: Some(format!("{why}: sampling {FALLBACK} instead of cycles")),
    };
    let smp = Sampling::open(kernel, settings(r.cpus.clone()))
        .map_err(|e| not_sampled(kernel, host, &r.event, e))?;
    Ok((smp, r))
}

/// Why `event` could not be sampled. A permission error is said as the
/// privilege problem it is, with what this process holds and what to
/// grant (`perf_event_paranoid`, `CAP_PERFMON`), and, for a PMU that
/// could not sample anyway (`msr`, ...), that too.
fn not_sampled(
    kernel: &Arc<dyn Kernel>,
    host: &HostSettings,
    event: &str,
    e: SampleError,
) -> AppError {
    let SampleError::Nothing(pe) = &e else {
        return AppError::Top(e.to_string());
    };
    let mut problem = pe.problem();
    if kernel.simulated() || !problem.is_permission() {
        return AppError::Top(e.to_string());
    }
    let privilege = Privilege::detect(&host.procfs);
    // Without privilege: what the process holds and what to grant (said
    // once); with it, why it was refused all the same (seccomp, an LSM).
    let why = match privilege.grant() {
        None => format!("{pe}: {}", privilege.summary()),
        Some(_) => {
            privilege.diagnose([&mut problem], false);
            problem.explain()
        }
    };
    let counts_only = if can_sample(&pe.pmu) {
        String::new()
    } else {
        format!(
            "; with that privilege still, PMU {} counts but cannot sample: sample an event of the core PMU (cycles), a software event (cpu-clock) or a tracepoint",
            pe.pmu
        )
    };
    AppError::Top(format!("cannot sample {event}: {why}{counts_only}"))
}

/// The root of the hierarchy `PERF_SAMPLE_CGROUP` ids belong to (the one
/// `perf_event` is bound to): `--path.cgroupfs`, else the one mountinfo
/// names.
fn cgroupfs(host: &HostSettings, simulated: bool) -> Option<std::path::PathBuf> {
    crate::cgroup::Lookup::new(&host.procfs, host.cgroupfs.as_deref())
        .simulated(simulated)
        .find()
        .ok()
        .map(|r| r.path)
}

/// Runs `top` until `-d` or SIGINT/SIGTERM, printing to standard output.
pub(super) fn top(host: HostSettings, s: TopSettings) -> Result<(), AppError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AppError::Runtime)?;
    rt.block_on(run(host, s))
}

async fn run(host: HostSettings, s: TopSettings) -> Result<(), AppError> {
    let mut int = signal(SignalKind::interrupt()).map_err(AppError::Runtime)?;
    let mut term = signal(SignalKind::terminate()).map_err(AppError::Runtime)?;
    let h = Host::open(&host)?;
    let Some(kernel) = h.kernel.clone() else {
        return Err(AppError::NotLive(host.sysfs.display().to_string()));
    };
    let (mut smp, r) = open(&kernel, &host, &h, &s)?;
    let out = &mut std::io::stdout().lock();
    let layout = Layout {
        json: s.json,
        by: s.by,
        rows: s.rows,
    };
    let rate = s.period.map_or(Rate::Freq(s.freq), Rate::Period);
    let view = View::new(layout, &r.event, rate, smp.cpus().len());
    if let Some(n) = &r.note {
        eprintln!("perf-exporter top: {n}");
    }
    for e in &smp.failed {
        eprintln!("perf-exporter top: not sampled: {e}");
    }
    let start = Instant::now();
    let end = s.duration.map(|d| start + d);
    let mut next = start + s.interval;
    let mut prev = Table::default();
    loop {
        let until = end.map_or(next, |e| e.min(next));
        let stopped = tokio::select! {
            _ = async { while Instant::now() < until { smp.wait(until.into()).await; } } => false,
            _ = int.recv() => true,
            _ = term.recv() => true,
        };
        smp.drain();
        smp.follow_hotplug(&host.sysfs);
        let now = Instant::now();
        let done = stopped || end.is_some_and(|e| now >= e);
        if !stopped && until == next {
            let cur = smp.table();
            view.refresh(out, &cur.since(&prev), &r.note, now.duration_since(start))?;
            if !s.json {
                if let Some(st) = smp.hottest(&ProfileFilter::All, Some(STACK_ROWS)) {
                    view.stacks(out, &st, smp.aggregate().samples)?;
                }
            }
            prev = cur;
        }
        if done {
            break;
        }
        next += s.interval;
    }
    let total = smp.table();
    Ok(view.summary(out, &total, start.elapsed(), &smp.health())?)
}
