//! Per-workload counting at start-up and reload: which backend counts
//! (and why), where the cgroup root is, and attaching the counting to a
//! freshly opened engine, with the previous engine's per-cgroup totals.

use super::host::HostSettings;
use crate::cgroup::{find_root, Selector};
use crate::config::cgroups::{Backend, CgroupsConfig};
use crate::engine::cgroup::{CgroupCounting, CgroupTotals, PerfBackend};
use crate::engine::Engine;
use crate::perf::Kernel;
use crate::resolve::chain::{Resolution, Status};
use std::sync::Arc;

/// The backend that counts for a `backend:` setting, and why.
pub(super) fn choose(b: Backend) -> (&'static str, &'static str) {
    match b {
        Backend::Auto => ("perf", "backend auto: the BPF backend is not part of this build yet, so perf (one PERF_FLAG_PID_CGROUP group per cgroup, set and CPU)"),
        Backend::Perf => ("perf", "backend perf, as configured"),
        Backend::Bpf => ("perf", "backend bpf asked for, but the BPF backend is not part of this build yet: counting with perf"),
    }
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
/// the node-level counters still serve.
pub(super) fn attach(
    engine: &mut Engine,
    kernel: Arc<dyn Kernel>,
    cfg: Option<&CgroupsConfig>,
    host: &HostSettings,
    old: Option<CgroupTotals>,
) {
    let Some(cfg) = cfg else {
        return;
    };
    let (backend, why) = choose(cfg.backend);
    let root = match find_root(&host.procfs, host.cgroupfs.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "per-workload counting is off: no cgroup root (give --path.cgroupfs)");
            return;
        }
    };
    tracing::info!(backend, why, root = %root.path.display(), "per-workload counting");
    let b = PerfBackend::new(
        kernel,
        engine.resolution(),
        &cfg.sets,
        engine.online_cpus(),
        cfg.per_cpu,
        engine.cgroup_fd_room(),
    );
    let mut c = CgroupCounting::new(Box::new(Selector::new(root, cfg.clone())), Box::new(b));
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
}

/// `check`'s line on which per-cgroup backend counts and why (the
/// cgroups themselves are listed by [`crate::report::CheckCgroups`]).
pub(super) fn check_text(cfg: Option<&CgroupsConfig>) -> String {
    cfg.map_or_else(String::new, |c| {
        let (backend, why) = choose(c.backend);
        format!("Per-cgroup backend: {backend} ({why})\n")
    })
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
