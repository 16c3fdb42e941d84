//! The `list` and `check` reports, as data (serialisable to JSON) and as
//! text for terminals.

use crate::perf::{EventAttr, Kernel};
use crate::pmu::PmuTable;
use crate::resolve::chain::{Probe, Resolution};
use crate::resolve::spec::{cache_event_names, HARDWARE, SOFTWARE};
use crate::resolve::{resolve_str, Context, Instance};
use serde::Serialize;
use std::fmt::Write as _;

/// Opens an instance on its first CPU and closes it again: the proof
/// that it is available on this host.
pub fn probe_instance(kernel: &dyn Kernel, spec: &str, inst: &Instance) -> Result<(), String> {
    let Some(&cpu) = inst.cpus.first() else {
        return Err("none of its CPUs is online".into());
    };
    let attr = EventAttr {
        type_: inst.type_,
        config: inst.config,
        event: spec.to_string(),
        pmu: inst.pmu.clone(),
    };
    kernel
        .open(&attr, cpu, None)
        .map(drop)
        .map_err(|e| e.reason())
}

/// A probe closure over a kernel, for [`crate::resolve::chain::resolve_config`].
pub fn prober(kernel: &dyn Kernel) -> impl Fn(&str, &Instance) -> Result<(), String> + '_ {
    move |spec, inst| probe_instance(kernel, spec, inst)
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// One PMU instance in the `check` report.
#[derive(Debug, Serialize)]
pub struct CheckInstance {
    /// PMU name.
    pub pmu: String,
    /// `perf_event_attr.type`.
    #[serde(rename = "type")]
    pub type_: u32,
    /// `config`, hex.
    pub config: String,
    /// `config1`, hex.
    pub config1: String,
    /// `config2`, hex.
    pub config2: String,
    /// CPUs it is opened on.
    pub cpus: Vec<u32>,
    /// Multiplier to base units.
    pub scale: f64,
    /// Base unit.
    pub unit: String,
}

/// One alternative tried.
#[derive(Debug, Serialize)]
pub struct CheckTried {
    /// The alternative.
    pub event: String,
    /// Why not (or `selected`).
    pub reason: String,
}

/// One metric in the `check` report.
#[derive(Debug, Serialize)]
pub struct CheckMetric {
    /// Metric name.
    pub metric: String,
    /// `resolved`, `fallback` or `unavailable`.
    pub status: String,
    /// The winning event spec.
    pub event: Option<String>,
    /// Where it is counted.
    pub instances: Vec<CheckInstance>,
    /// Every alternative tried.
    pub tried: Vec<CheckTried>,
}

/// The `check` report: `{"metrics": [...]}`.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    /// Every configured metric.
    pub metrics: Vec<CheckMetric>,
}

impl CheckReport {
    /// Builds the report from a resolution.
    pub fn new(r: &Resolution) -> Self {
        let metrics = r
            .metrics
            .iter()
            .map(|m| CheckMetric {
                metric: m.metric.clone(),
                status: m.status.as_str().into(),
                event: m.event.clone(),
                instances: m
                    .instances
                    .iter()
                    .map(|mi| CheckInstance {
                        pmu: mi.inst.pmu.clone(),
                        type_: mi.inst.type_,
                        config: hex(mi.inst.config[0]),
                        config1: hex(mi.inst.config[1]),
                        config2: hex(mi.inst.config[2]),
                        cpus: mi.inst.cpus.clone(),
                        scale: mi.inst.scale,
                        unit: mi.inst.unit.clone(),
                    })
                    .collect(),
                tried: m
                    .tried
                    .iter()
                    .map(|t| CheckTried {
                        event: t.event.clone(),
                        reason: t.reason.clone(),
                    })
                    .collect(),
            })
            .collect();
        CheckReport { metrics }
    }

    /// Human-readable text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let w = self
            .metrics
            .iter()
            .map(|m| m.metric.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let _ = writeln!(s, "{:w$}  {:11}  EVENT", "METRIC", "STATUS");
        for m in &self.metrics {
            let _ = writeln!(
                s,
                "{:w$}  {:11}  {}",
                m.metric,
                m.status,
                m.event.as_deref().unwrap_or("-")
            );
            for i in &m.instances {
                let _ = writeln!(
                    s,
                    "{:w$}    {} type={} config={} config1={} config2={} cpus={} scale={} {}",
                    "",
                    i.pmu,
                    i.type_,
                    i.config,
                    i.config1,
                    i.config2,
                    crate::pmu::format_cpu_list(&i.cpus),
                    i.scale,
                    i.unit
                );
            }
            for t in m
                .tried
                .iter()
                .filter(|t| t.reason != crate::resolve::chain::SELECTED)
            {
                let _ = writeln!(s, "{:w$}    tried {}: {}", "", t.event, t.reason);
            }
        }
        let n = |st: &str| self.metrics.iter().filter(|m| m.status == st).count();
        let _ = writeln!(
            s,
            "{} metrics: {} resolved, {} fallback, {} unavailable",
            self.metrics.len(),
            n("resolved"),
            n("fallback"),
            n("unavailable")
        );
        s
    }
}

/// One event in the `list` report.
#[derive(Debug, Serialize)]
pub struct ListEvent {
    /// The spec to write in a config.
    pub name: String,
    /// `hardware`, `cache`, `software`, `sysfs` or `tracepoint`.
    pub source: String,
    /// The PMU(s).
    pub pmu: String,
    /// `perf_event_attr.type`.
    #[serde(rename = "type")]
    pub type_: u32,
    /// `config`, hex.
    pub config: String,
    /// `true`/`false` when probed; `null` when not probed.
    pub available: Option<bool>,
    /// Why not available, or `not probed`.
    pub reason: Option<String>,
}

/// The `list` report.
#[derive(Debug, Serialize)]
pub struct ListReport {
    /// Every event.
    pub events: Vec<ListEvent>,
    /// Tracepoints under tracefs (listed one by one only on request).
    pub tracepoints: usize,
    /// How many events were proved available.
    pub available: usize,
    /// How many were listed.
    pub total: usize,
    /// Whether availability was probed (live host or simulation).
    pub probed: bool,
}

fn tracepoint_names(ctx: &Context) -> Vec<String> {
    let Some(tfs) = &ctx.tracefs else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Ok(subs) = std::fs::read_dir(tfs.join("events")) else {
        return out;
    };
    for sub in subs.filter_map(|e| e.ok()) {
        let Ok(evs) = std::fs::read_dir(sub.path()) else {
            continue;
        };
        for ev in evs.filter_map(|e| e.ok()) {
            if ev.path().join("id").is_file() {
                out.push(format!(
                    "{}:{}",
                    sub.file_name().to_string_lossy(),
                    ev.file_name().to_string_lossy()
                ));
            }
        }
    }
    out.sort();
    out
}

impl ListReport {
    /// Lists what the host offers. With a probe, each event is opened
    /// once to prove it is available.
    pub fn new(
        table: &PmuTable,
        ctx: &Context,
        probe: Option<Probe>,
        all_tracepoints: bool,
    ) -> Self {
        let mut specs: Vec<(String, &str)> = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (n, id) in HARDWARE {
            if seen.insert(("hw", *id)) {
                specs.push((n.to_string(), "hardware"));
            }
        }
        specs.extend(cache_event_names().into_iter().map(|n| (n, "cache")));
        for (n, id) in SOFTWARE {
            if seen.insert(("sw", *id)) {
                specs.push((n.to_string(), "software"));
            }
        }
        for p in &table.pmus {
            for e in p.events.keys() {
                specs.push((format!("{}/{e}/", p.name), "sysfs"));
            }
        }
        let tps = tracepoint_names(ctx);
        if all_tracepoints {
            specs.extend(tps.iter().map(|t| (t.clone(), "tracepoint")));
        } else if let Some(first) = tps.iter().find(|t| t.starts_with("sched:")).or(tps.first()) {
            // One representative proves the tracepoint PMU works.
            specs.push((first.clone(), "tracepoint"));
        }
        let mut events = Vec::new();
        for (name, source) in specs {
            let (pmu, type_, config, available, reason) = match resolve_str(&name, table, ctx) {
                Ok(insts) => {
                    let pmus: Vec<&str> = insts.iter().map(|i| i.pmu.as_str()).collect();
                    let (avail, reason) = match probe {
                        Some(pr) => match insts.iter().find_map(|i| pr(&name, i).err()) {
                            None => (Some(true), None),
                            Some(e) => (Some(false), Some(e)),
                        },
                        None => (None, Some("not probed".to_string())),
                    };
                    (
                        pmus.join(","),
                        insts[0].type_,
                        hex(insts[0].config[0]),
                        avail,
                        reason,
                    )
                }
                Err(e) => (
                    String::new(),
                    0,
                    String::new(),
                    Some(false),
                    Some(e.to_string()),
                ),
            };
            events.push(ListEvent {
                name,
                source: source.into(),
                pmu,
                type_,
                config,
                available,
                reason,
            });
        }
        let available = events.iter().filter(|e| e.available == Some(true)).count();
        ListReport {
            total: events.len(),
            available,
            events,
            tracepoints: tps.len(),
            probed: probe.is_some(),
        }
    }

    /// Human-readable text, ending with the summary line.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let w = self
            .events
            .iter()
            .map(|e| e.name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = writeln!(
            s,
            "{:w$}  {:10}  {:>4}  {:>18}  AVAILABLE",
            "EVENT", "SOURCE", "TYPE", "CONFIG"
        );
        for e in &self.events {
            let avail = match (e.available, &e.reason) {
                (Some(true), _) => "yes".to_string(),
                (Some(false), Some(r)) => format!("no: {r}"),
                (Some(false), None) => "no".to_string(),
                (None, _) => "not probed".to_string(),
            };
            let _ = writeln!(
                s,
                "{:w$}  {:10}  {:>4}  {:>18}  {avail}",
                e.name, e.source, e.type_, e.config
            );
        }
        let _ = writeln!(
            s,
            "tracepoints: {} (list them with --tracepoints)",
            self.tracepoints
        );
        if self.probed {
            let _ = writeln!(s, "{} of {} available", self.available, self.total);
        } else {
            let _ = writeln!(
                s,
                "{} of {} available ({} not probed: --path.sysfs is not the live /sys; use --simulate to probe against the simulated PMU)",
                self.available,
                self.total,
                self.total - self.events.iter().filter(|e| e.available.is_some()).count()
            );
        }
        s
    }
}
