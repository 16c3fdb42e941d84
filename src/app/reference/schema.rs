//! The config page (`config.md`): the config keys with their defaults
//! (from the config types) and meaning, then the embedded default config.

use super::{cell, GENERATED};
use crate::config::{self, Config};
use std::fmt::Write as _;

/// A minimal config whose `cgroups:` and `sampling:` sections give only
/// what they must (a section that selects nothing is refused), so that
/// every other default below is the one the config types apply.
const DEFAULTS: &str = "sets:\n  - name: core\n    events:\n      - metric: perf_cpu_cycles_total\n        event: cycles\ncgroups: {paths: [x]}\nsampling: {}\n";

/// [`DEFAULTS`] selecting by a preset instead, for the default of `paths`.
const DEFAULT_PATHS: &str = "sets:\n  - name: core\n    events:\n      - metric: perf_cpu_cycles_total\n        event: cycles\ncgroups: {preset: systemd}\n";

/// `Debug` of a unit enum, as the YAML writes it.
fn lower(v: impl std::fmt::Debug) -> String {
    format!("`{}`", format!("{v:?}").to_lowercase())
}

/// The config keys: path, default (from the config types, by parsing
/// [`DEFAULTS`]) and meaning. The test below proves every key is accepted.
fn config_keys() -> Vec<(&'static str, String, String)> {
    use config::sampling::{MAX_FREQUENCY, MAX_RING_PAGES, MAX_TOP};
    let parsed = Config::parse(DEFAULTS, "<defaults>").ok();
    let cg = parsed.as_ref().and_then(|c| c.cgroups.clone());
    let by_preset = Config::parse(DEFAULT_PATHS, "<defaults>")
        .ok()
        .and_then(|c| c.cgroups);
    let sa = parsed.as_ref().and_then(|c| c.sampling.clone());
    let set = parsed.as_ref().and_then(|c| c.sets.first().cloned());
    let metric = set.as_ref().and_then(|s| s.events.first().cloned());
    let d = |f: &dyn Fn() -> Option<String>| f().unwrap_or_default();
    let none = String::new;
    vec![
        ("sets", none(), "The sets, in order (at least one). Each set is opened as one perf group per CPU, or per uncore PMU instance on its cpumask CPU.".to_string()),
        ("sets[].name", none(), "The set's name: the `set` label of the group self-metrics, and what `cgroups.sets` names.".into()),
        ("sets[].per", d(&|| set.as_ref().map(|s| format!("`{}`", s.per.as_str()))), "How far the set's series are summed before export: `cpu` (one per CPU), `core` (`core` label: the lowest CPU of sysfs `topology/core_cpus_list`), `socket` (`topology/physical_package_id`) or `node` (no label); gauges are averaged. Uncore series keep `pmu` and `socket`. The live view and `stat` stay per CPU. Replaces `per_cpu:` (`true` is `per: cpu`, `false` is `per: node`), which is refused.".into()),
        ("sets[].events", none(), "The metrics of the set (at least one).".into()),
        ("sets[].events[].metric", none(), "The metric name: a counter's ends in `_total`; `:`, a leading `__` and the exporter's own names are refused.".into()),
        ("sets[].events[].help", none(), "The HELP text.".into()),
        ("sets[].events[].gauge", d(&|| metric.as_ref().map(|m| format!("`{}`", m.gauge))), "A reading (a `.snapshot` event such as a temperature), named without `_total`.".into()),
        ("sets[].events[].event", none(), "One alternative or a list of them: a fallback chain of encodings of the same quantity, tried in order. An alternative is an event spec, or the long form below.".into()),
        ("sets[].events[].event[].event", none(), "Long form: one event spec.".into()),
        ("sets[].events[].event[].sum_of", none(), "Long form: several event specs, counted and summed.".into()),
        ("sets[].events[].event[].scale", none(), "Long form: multiply counts by this (replaces the sysfs `.scale`).".into()),
        ("sets[].events[].event[].unit", none(), "Long form: the base unit of the scaled value (`bytes`, `seconds`, `joules`).".into()),
        ("sets[].events[].event[].requires_format", none(), "Long form: used only where the PMU's format term is exactly this (`amd_df/umask=config:8-15`).".into()),
        ("sets[].events[].event[].requires_cpu", none(), "Long form: used only where the CPU identity of the PMU matches this whole regex (`GenuineIntel-6-55-.*`).".into()),
        ("cgroups", none(), "Per-workload counting: the sets of `cgroups.sets` counted per cgroup, in `perf_cgroup_*` families.".into()),
        ("cgroups.backend", d(&|| cg.as_ref().map(|c| lower(c.backend))), "`auto`, `perf` or `bpf` (`auto`: `bpf` where BPF loads, else `perf`).".into()),
        ("cgroups.preset", d(&|| cg.as_ref().map(|c| lower(c.preset))), "`kubernetes` (one cgroup per pod), `systemd` (`system.slice/*.service`) or `none` (only `paths`).".into()),
        ("cgroups.containers", d(&|| cg.as_ref().map(|c| format!("`{}`", c.containers))), "With `kubernetes`: each container as well as each pod.".into()),
        ("cgroups.paths", d(&|| by_preset.as_ref().map(|c| format!("`{:?}`", c.paths))), "Extra globs relative to the cgroup root (`*` within a component, `**` across).".into()),
        ("cgroups.max_cgroups", d(&|| cg.as_ref().map(|c| format!("`{}`", c.max_cgroups))), "At most this many cgroups are counted; the busiest (by `cpu.stat` usage) win.".into()),
        ("cgroups.rank_interval", d(&|| cg.as_ref().map(|c| format!("`{}s`", c.rank_interval.as_secs()))), "Over `max_cgroups`, how often to re-rank (at least `1s`).".into()),
        ("cgroups.sets", format!("`[{}]`", config::cgroups::DEFAULT_SETS.join(", ")), "The sets counted per cgroup (those of these the file has); uncore sets are refused.".into()),
        ("cgroups.per", d(&|| cg.as_ref().map(|c| format!("`{}`", c.per.as_str()))), "`node` (per-cgroup series summed over CPUs) or `cpu` (one per CPU); replaces `per_cpu:`, which is refused.".into()),
        ("sampling", none(), "Sampled attribution while serving: `perf_sampled_events_total` by process, cgroup or pod.".into()),
        ("sampling.frequency", d(&|| sa.as_ref().map(|s| format!("`{}`", s.frequency))), format!("Samples per second per CPU (1 to {MAX_FREQUENCY}).")),
        ("sampling.event", none(), "The event to sample (default: `cycles`, or `cpu-clock` without a hardware PMU).".into()),
        ("sampling.by", d(&|| sa.as_ref().map(|s| lower(s.by))), "`process`, `cgroup` or `pod` (pods by their UID, in `pod_uid`).".into()),
        ("sampling.top", d(&|| sa.as_ref().map(|s| format!("`{}`", s.top))), format!("Names with series of their own per collection; the rest add to `other`. At most {MAX_TOP}.")),
        ("sampling.ring_pages", d(&|| sa.as_ref().map(|s| format!("`{}`", s.ring_pages))), format!("Data pages per CPU ring (a power of two, at most {MAX_RING_PAGES}).")),
    ]
}

/// The config schema: the keys, then the embedded default config.
pub(super) fn config_page() -> String {
    let mut out = String::from(GENERATED);
    out.push_str("# Configuration file\n\n");
    out.push_str(
        "`--config.file` takes a YAML file; without it the embedded default below is used. \
         Unknown keys are refused, naming the file, line and column. The \
         [configuration guide](../guide/configuration.md) explains event specs, fallback \
         chains and modifiers.\n\n## Keys\n\n| key | default | what |\n|---|---|---|\n",
    );
    for (k, d, w) in config_keys() {
        let _ = writeln!(out, "| `{k}` | {d} | {} |", cell(&w));
    }
    out.push_str("\n## The embedded default config\n\n`config/default.yaml`, embedded in the binary:\n\n```yaml\n");
    out.push_str(config::DEFAULT_CONFIG);
    if !config::DEFAULT_CONFIG.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("```\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key of the table, in one file the config loader accepts.
    const EVERY_KEY: &str = "sets:
  - name: core
    per: node
    events:
      - metric: perf_cpu_cycles_total
        help: Cycles.
        gauge: false
        event:
          - event: cycles
            requires_cpu: \".*\"
          - sum_of: [cycles, instructions]
            scale: 1
            unit: events
          - event: cpu/event=0x3c/
            requires_format: \"cpu/event=config:0-7\"
cgroups:
  backend: auto
  preset: kubernetes
  containers: true
  paths: [\"app/*\"]
  max_cgroups: 10
  rank_interval: 10s
  sets: [core]
  per: node
sampling:
  frequency: 99
  event: cycles
  by: process
  top: 10
  ring_pages: 8
";

    #[test]
    fn every_config_key_is_accepted() {
        for text in [DEFAULTS, DEFAULT_PATHS] {
            if let Err(e) = Config::parse(text, "<defaults>") {
                panic!("{e}");
            }
        }
        if let Err(e) = Config::parse(EVERY_KEY, "<every key>") {
            panic!("{e}");
        }
        for (key, _, _) in config_keys() {
            let last = key.rsplit('.').next().unwrap_or(key).trim_end_matches("[]");
            assert!(
                EVERY_KEY.contains(&format!("{last}:")),
                "{key} is not in EVERY_KEY"
            );
        }
    }
}
