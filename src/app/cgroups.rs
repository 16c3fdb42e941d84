//! Per-workload counting at start-up and reload: which backend counts
//! (and why), where the cgroup root is, and attaching the counting to a
//! freshly opened engine, with the previous engine's per-cgroup totals.

use super::host::HostSettings;
use crate::cgroup::{Lookup, Purpose, Root, Selector};
use crate::config::cgroups::CgroupsConfig;
use crate::engine::cgroup::choice::choose;
use crate::engine::cgroup::{
    BackendChoice, BackendKind, BpfBackend, BpfUnavailable, CgroupBackend, CgroupCounting,
    CgroupTotals, PerfBackend, Why,
};
use crate::engine::Engine;
use crate::perf::Kernel;
use crate::privilege::Privilege;
use crate::problem::{log_reason, LogFields};
use crate::resolve::chain::{Resolution, Status};
use std::sync::Arc;
use tracing::Level;

/// The backend `cfg` asks for on this host, before loading anything
/// (`kernel` `None`: no kernel to count with, as `check` on a fixture):
/// `bpf` also needs a cgroup2 hierarchy, whose cgroup ids the program
/// reads.
fn choice(
    cfg: &CgroupsConfig,
    kernel: Option<&dyn Kernel>,
    host: &HostSettings,
) -> Result<BackendChoice, BpfUnavailable> {
    let privilege = kernel
        .filter(|k| !k.simulated())
        .map(|_| Privilege::detect(&host.procfs));
    let chosen = choose(cfg.backend, privilege.as_ref(), &host.sysfs)?;
    if chosen.kind != BackendKind::Bpf {
        return Ok(chosen);
    }
    match lookup(host, kernel).purpose(Purpose::CgroupId).find() {
        Ok(_) => Ok(chosen),
        Err(e) if chosen.why == Why::Configured(BackendKind::Bpf) => {
            Err(BpfUnavailable::new(Why::NoUnifiedHierarchy(e.to_string())))
        }
        Err(e) => Ok(BackendChoice {
            kind: BackendKind::Perf,
            why: Why::NoUnifiedHierarchy(e.to_string()),
        }),
    }
}

/// Where the cgroup root is looked for: `--path.cgroupfs` is taken as it
/// is when no live kernel counts it (the simulated PMU, or `check` on a
/// fixture sysfs), which is when it is a fixture tree.
fn lookup<'a>(host: &'a HostSettings, kernel: Option<&dyn Kernel>) -> Lookup<'a> {
    Lookup::new(&host.procfs, host.cgroupfs.as_deref())
        .simulated(kernel.is_none_or(|k| k.simulated()))
}

/// The hierarchy the backend reads: the one `perf_event` is bound to for
/// `perf`, cgroup2 for `bpf`.
fn purpose(kind: BackendKind) -> Purpose {
    match kind {
        BackendKind::Perf => Purpose::PerfEvent,
        BackendKind::Bpf => Purpose::CgroupId,
    }
}

/// What `check` lists: the root of the chosen backend's hierarchy and one
/// scan of it, with the cgroups the `bpf` backend cannot reach left out
/// as it leaves them out.
pub(super) fn check_discover(
    cfg: &CgroupsConfig,
    kernel: Option<&dyn Kernel>,
    host: &HostSettings,
) -> Result<(Root, crate::cgroup::Selection), crate::cgroup::CgroupError> {
    let kind = choice(cfg, kernel, host).map_or(BackendKind::Perf, |c| c.kind);
    let found = crate::cgroup::discover(&lookup(host, kernel).purpose(purpose(kind)), cfg);
    found.map(|(root, mut sel)| {
        if kind == BackendKind::Bpf {
            crate::engine::cgroup::leave_out_unreachable(&mut sel);
        }
        (root, sel)
    })
}

/// The root of `kind`'s hierarchy, or `None` (logged: per-workload
/// counting is then off, the node-level counters still serve).
fn root_for(host: &HostSettings, kernel: &dyn Kernel, kind: BackendKind) -> Option<Root> {
    match lookup(host, Some(kernel)).purpose(purpose(kind)).find() {
        Ok(r) => Some(r),
        Err(e) => {
            log_reason!(
                Level::WARN,
                LogFields::of(&e.problem()),
                [error = %e,],
                [],
                "per-workload counting is off: no cgroup root"
            );
            None
        }
    }
}

/// Opens the chosen backend. A `bpf` backend that does not load falls
/// back to `perf` under `auto` (the choice then says why), and is an error
/// when `bpf` is configured.
fn open_backend(
    engine: &Engine,
    kernel: Arc<dyn Kernel>,
    cfg: &CgroupsConfig,
    mut choice: BackendChoice,
) -> Result<(Box<dyn CgroupBackend>, BackendChoice), BpfUnavailable> {
    let (res, cpus) = (engine.resolution(), engine.online_cpus());
    if choice.kind == BackendKind::Bpf {
        let max = cfg.max_cgroups;
        match BpfBackend::new(kernel.clone(), res, &cfg.sets, cpus, cfg.per_cpu(), max) {
            Ok(b) => return Ok((Box::new(b), choice)),
            Err(e) if choice.why == Why::Configured(BackendKind::Bpf) => {
                return Err(BpfUnavailable::new(Why::LoadFailed(e.to_string())));
            }
            Err(e) => {
                choice = BackendChoice {
                    kind: BackendKind::Perf,
                    why: Why::LoadFailed(e.to_string()),
                };
            }
        }
    }
    let room = engine.cgroup_fd_room();
    let b = PerfBackend::new(kernel, res, &cfg.sets, cpus, cfg.per_cpu(), room)
        .within_counters(engine.counter_budgets());
    Ok((Box::new(b), choice))
}

/// Descriptors per-cgroup counting may need at most: `max_cgroups` times
/// (the directory plus one counter per CPU of every metric of the sets),
/// so the fd budget asks for them up front.
pub(super) fn wanted_fds(cfg: Option<&CgroupsConfig>, res: &Resolution) -> usize {
    let Some(c) = cfg else {
        return 0;
    };
    let per: usize = res
        .metrics
        .iter()
        .filter(|m| c.sets.contains(&m.set) && m.status != Status::Unavailable)
        .flat_map(|m| &m.instances)
        .filter(|i| !i.inst.uncore)
        .map(|i| i.inst.cpus.len())
        .sum();
    c.max_cgroups.saturating_mul(per + 1)
}

/// Attaches per-cgroup counting to `engine` when `cfg` asks for it,
/// continuing `old` totals. A missing cgroup root is logged, not fatal:
/// the node-level counters still serve. A configured `bpf` backend that
/// cannot count is an error.
pub(super) fn attach(
    engine: &mut Engine,
    kernel: Arc<dyn Kernel>,
    cfg: Option<&CgroupsConfig>,
    host: &HostSettings,
    old: Option<CgroupTotals>,
) -> Result<(), BpfUnavailable> {
    let Some(cfg) = cfg else {
        return Ok(());
    };
    let chosen = choice(cfg, Some(kernel.as_ref()), host)?;
    let Some(root) = root_for(host, kernel.as_ref(), chosen.kind) else {
        return Ok(());
    };
    let first = chosen.kind;
    let (b, chosen) = open_backend(engine, kernel.clone(), cfg, chosen)?;
    // A bpf backend that did not load falls back to perf, which reads the
    // hierarchy perf_event is bound to.
    let root = if chosen.kind == first {
        root
    } else {
        match root_for(host, kernel.as_ref(), chosen.kind) {
            Some(r) => r,
            None => return Ok(()),
        }
    };
    let (backend, why) = (chosen.kind.name(), &chosen.why);
    // A fallback for want of privilege or BTF is a choice, not a fault; a
    // program that did not load is.
    let root_dir = root.path.display();
    if !matches!(why, Why::LoadFailed(_)) {
        log_reason!(Level::INFO, LogFields::of(why), [backend,], [root = %root_dir,], "per-workload counting");
    } else {
        log_reason!(Level::WARN, LogFields::of(why), [backend,], [root = %root_dir,], "per-workload counting");
    }
    let mut c = CgroupCounting::new(Box::new(Selector::new(root, cfg.clone())), b);
    c.set_choice(chosen);
    if let Some(t) = old {
        let n = c.carry_over(t);
        tracing::info!(continued = n, "per-cgroup series continue their counts");
    }
    let sel = c.selection();
    tracing::info!(
        counted = c.backend().counted().len(),
        left_out = sel.left_out.len(),
        fds = c.backend().open_fds(),
        "cgroups counted"
    );
    engine.attach_cgroups(c);
    Ok(())
}

/// `check`'s line on which per-cgroup backend counts and why (the
/// cgroups themselves are listed by [`crate::report::CheckCgroups`]).
/// `check` loads nothing: `bpf` is what would be tried first.
pub(super) fn check_choice(
    cfg: Option<&CgroupsConfig>,
    kernel: Option<&dyn Kernel>,
    host: &HostSettings,
) -> Option<Result<BackendChoice, BpfUnavailable>> {
    Some(choice(cfg?, kernel, host))
}

/// The check report's text with the backend line just before its cgroup
/// section (which stays last).
pub(super) fn with_backend(r: &crate::report::CheckReport, backend: &str) -> String {
    let text = r.text();
    let section = r.cgroups.as_ref().map(|c| c.text()).unwrap_or_default();
    match text.strip_suffix(section.as_str()) {
        Some(head) if !backend.is_empty() => format!("{head}{backend}{section}"),
        _ => text,
    }
}
