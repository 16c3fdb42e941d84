//! The metrics page (`metrics.md`): every family of the default config
//! and of the engine, counted on the simulated PMU of every sysfs
//! fixture, then the tables of [`families`](super::families) and the
//! [`derived`](super::derived) metrics.

use super::derived::derived_section;
use super::families::{cgroup_section, defined_sections, unit};
use super::{cell, GENERATED};
use crate::app::host::Host;
use crate::app::HostSettings;
use crate::config::Config;
use crate::engine::{Engine, Fds};
use crate::perf::sim::SimKernel;
use crate::probe::prober;
use crate::resolve::chain::resolve_config;
use crate::snapshot::Kind;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

/// What one family looked like on the fixtures.
#[derive(Default)]
struct Seen {
    help: String,
    counter: bool,
    labels: BTreeSet<&'static str>,
    fixtures: BTreeSet<String>,
}

/// The default config counted by the engine on one fixture's simulated
/// PMU (manual clock, two collections 10 s apart), with the fixtures'
/// tracefs; `squeeze` leaves a PMU that many counters, so that counters
/// multiplex and the per-counter state families have series.
fn count_on(
    sysfs: &Path,
    procfs: &Path,
    tracefs: &Path,
    squeeze: Option<(&str, usize)>,
    seen: &mut BTreeMap<String, Seen>,
) {
    let settings = HostSettings {
        tracefs: Some(tracefs.to_path_buf()),
        ..HostSettings::simulated(sysfs.to_path_buf(), procfs.to_path_buf())
    };
    let Ok(h) = Host::open(&settings) else {
        return;
    };
    let kernel = Arc::new(SimKernel::with_manual_clock(h.table.clone()));
    if let Some((pmu, n)) = squeeze {
        kernel.set_counters(pmu, n);
    }
    let probe = prober(kernel.as_ref());
    let res = resolve_config(&Config::default_config(), &h.table, &h.ctx, Some(&probe));
    // The start-up self-test's family, once (it passes on the simulation).
    let self_test = squeeze.map(|_| {
        let online = h.table.topology.online.clone();
        crate::engine::selftest::run(kernel.as_ref(), &h.table, &online, procfs)
    });
    let mut engine = Engine::for_config(kernel.clone(), h.table, res, Fds::Unbounded);
    engine.set_self_test(self_test.unwrap_or_default());
    engine.collect();
    kernel.advance(10_000_000_000);
    let fixture = sysfs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for f in engine.collect().families {
        let s = seen.entry(f.name.to_string()).or_default();
        s.help = f.help.to_string();
        s.counter = f.kind == Kind::Counter;
        for sample in &f.samples {
            s.labels.extend(sample.labels.iter().map(|(k, _)| *k));
        }
        if !f.samples.is_empty() && squeeze.is_none() {
            s.fixtures.insert(fixture.clone());
        }
    }
}

/// A family's labels, as a cell.
fn labels(s: &Seen) -> String {
    if s.labels.is_empty() {
        "none".into()
    } else {
        s.labels
            .iter()
            .map(|l| format!("`{l}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every family of the default config and of the engine itself.
pub(super) fn metrics_page(fixtures: &Path) -> String {
    let mut seen = BTreeMap::new();
    let mut names = Vec::new();
    if let Ok(dir) = std::fs::read_dir(fixtures.join("sysfs")) {
        names = dir
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
    }
    names.sort();
    let tracefs = fixtures.join("tracefs");
    for n in &names {
        count_on(
            &fixtures.join("sysfs").join(n),
            &fixtures.join("procfs").join(n),
            &tracefs,
            None,
            &mut seen,
        );
    }
    // Counters that multiplex, for the families of counters not counting.
    count_on(
        &fixtures.join("sysfs/intel-skx"),
        &fixtures.join("procfs/intel-skx"),
        &tracefs,
        Some(("cpu", 2)),
        &mut seen,
    );
    let cfg = Config::default_config();
    let mut out = String::from(GENERATED);
    out.push_str("# Metrics\n\n");
    let _ = write!(
        out,
        "Counted by the engine with the embedded default config on the simulated PMU of \
         each sysfs fixture ({}), with `tests/fixtures/tracefs` (and once more on `intel-skx` \
         with 2 counters on its core PMU, so that counters multiplex). Counters end in `_total` and are in base units. \
         Labels are those the series carry at the default config's `per:` levels (`socket` for \
         the core-PMU sets, plus `pmu` for a hybrid part's core types; none for the `node` sets); \
         at `per: cpu` or `core` a set has `cpu` or `core` in place of `socket` \
         ([configuration guide](../guide/configuration.md)). The [metrics guide](../guide/metrics.md) \
         explains them. The families of per-cgroup counting, of sampling and \
         of the exporter itself follow, from the tables the code emits them by.\n\n",
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out.push_str("## The default config's metrics\n\n");
    out.push_str("| metric | set | type | unit | labels | counted on | help |\n|---|---|---|---|---|---|---|\n");
    let mut from_config = BTreeSet::new();
    for set in &cfg.sets {
        for m in &set.events {
            let name = m.metric.value.as_str();
            from_config.insert(name.to_string());
            let empty = Seen::default();
            let s = seen.get(name).unwrap_or(&empty);
            let counted = if s.fixtures.is_empty() {
                "none (see the [problems](problems.md))".to_string()
            } else {
                s.fixtures
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                out,
                "| `{name}` | `{}` | {} | {} | {} | {} | {} |",
                set.name.value,
                if m.gauge { "gauge" } else { "counter" },
                unit(name),
                labels(s),
                counted,
                cell(m.help.as_deref().unwrap_or(""))
            );
        }
    }
    out.push_str("\n## The engine's own families\n\n");
    out.push_str("| family | type | unit | labels | help |\n|---|---|---|---|---|\n");
    for (name, s) in seen.iter().filter(|(n, _)| !from_config.contains(*n)) {
        let _ = writeln!(
            out,
            "| `{name}` | {} | {} | {} | {} |",
            if s.counter { "counter" } else { "gauge" },
            unit(name),
            labels(s),
            cell(&s.help)
        );
    }
    out.push_str(&cgroup_section(&cfg));
    out.push_str(&derived_section(&cfg.derived));
    out.push_str(&defined_sections());
    out
}
