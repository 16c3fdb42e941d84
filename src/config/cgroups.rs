//! The `cgroups:` section: which workloads are counted, and how.
//!
//! ```yaml
//! cgroups:
//!   backend: auto          # auto | perf | bpf (auto: bpf where BPF loads, else perf)
//!   preset: kubernetes     # kubernetes | systemd | none
//!   containers: false      # kubernetes: also one cgroup per container
//!   paths: ["app/*"]       # extra globs, relative to the cgroup root
//!   max_cgroups: 256       # the busiest win beyond it (cpu.stat usage)
//!   rank_interval: 30s     # beyond it, how often the busiest are re-ranked
//!   sets: [core, cache, software]   # sets of this file counted per cgroup
//!   per: node              # node (default): per-cgroup series summed over CPUs; cpu: one per CPU
//! ```
//!
//! Plain data, no I/O: which cgroups exist is found by [`crate::cgroup`].

use serde::Deserialize;
use serde_saphyr::{Location, Spanned};
use std::time::Duration;

/// The default bound on counted cgroups.
pub const DEFAULT_MAX_CGROUPS: usize = 256;

/// How often cgroups are re-ranked by usage when more than
/// `max_cgroups` match, unless `rank_interval:` is given.
pub const DEFAULT_RANK_INTERVAL: Duration = Duration::from_secs(30);

/// The shortest `rank_interval:`: each re-ranking reads every matched
/// cgroup's `cpu.stat`.
pub const MIN_RANK_INTERVAL: Duration = Duration::from_secs(1);

/// The sets counted per cgroup when `sets:` is not given, where the
/// config has them: the core and cache sets plus software events.
pub const DEFAULT_SETS: &[&str] = &["core", "cache", "software"];

/// Which per-cgroup backend counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// `bpf` where the process may load BPF programs and the kernel has
    /// BTF, else `perf`.
    #[default]
    Auto,
    /// One perf group per cgroup per CPU (`PERF_FLAG_PID_CGROUP`).
    Perf,
    /// Counters once per CPU, charged to cgroups by a BPF program.
    Bpf,
}

/// Which cgroups a preset selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// Only `paths`.
    #[default]
    None,
    /// One cgroup per pod (and per container with `containers: true`),
    /// under the systemd or cgroupfs driver's layout.
    Kubernetes,
    /// `system.slice/*.service`.
    Systemd,
}

/// The `cgroups:` section, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupsConfig {
    /// The backend asked for.
    pub backend: Backend,
    /// The preset.
    pub preset: Preset,
    /// Kubernetes preset: count each container as well as each pod.
    pub containers: bool,
    /// Extra globs relative to the cgroup root (`*` within one path
    /// component, `**` across components).
    pub paths: Vec<String>,
    /// At most this many cgroups are counted.
    pub max_cgroups: usize,
    /// Over `max_cgroups`, how often the counted cgroups are re-ranked by
    /// `cpu.stat` usage (between re-rankings no `cpu.stat` is read).
    pub rank_interval: Duration,
    /// Names of the config's sets counted per cgroup (each exists).
    pub sets: Vec<String>,
    /// How far per-cgroup series are summed: `node` (the default) or
    /// `cpu` (keep the `cpu` label); `core` and `socket` are refused.
    pub per: super::Per,
}

impl CgroupsConfig {
    /// Whether per-cgroup series keep the `cpu` label (`per: cpu`).
    pub fn per_cpu(&self) -> bool {
        self.per == super::Per::Cpu
    }
}

/// The section as serde reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCgroups {
    #[serde(default)]
    pub backend: Backend,
    #[serde(default)]
    pub preset: Preset,
    #[serde(default)]
    pub containers: bool,
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub max_cgroups: Option<Spanned<usize>>,
    #[serde(default)]
    pub rank_interval: Option<Spanned<String>>,
    #[serde(default)]
    pub sets: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub per: Option<Spanned<super::Per>>,
    /// The boolean `per` replaced: refused with the replacement named.
    #[serde(default)]
    pub per_cpu: Option<Spanned<bool>>,
}

/// Validates the section against the config's set names.
pub(super) fn convert(
    raw: RawCgroups,
    at: &Location,
    set_names: &[&str],
    invalid: super::Invalid,
) -> Result<CgroupsConfig, super::ConfigError> {
    let per = per_of(&raw, invalid)?;
    let max_cgroups = match raw.max_cgroups {
        Some(m) if m.value == 0 => {
            return Err(invalid(
                &m.referenced,
                "`max_cgroups: 0` would count no cgroup: remove the `cgroups:` section instead, or give at least 1".into(),
            ))
        }
        Some(m) => m.value,
        None => DEFAULT_MAX_CGROUPS,
    };
    let rank_interval = match raw.rank_interval {
        Some(r) => rank_interval(&r.value)
            .map_err(|why| invalid(&r.referenced, format!("`cgroups.rank_interval`: {why}")))?,
        None => DEFAULT_RANK_INTERVAL,
    };
    let sets = match raw.sets {
        Some(s) => {
            if s.value.is_empty() {
                return Err(invalid(
                    &s.referenced,
                    "`cgroups.sets` is empty: name at least one set to count per cgroup".into(),
                ));
            }
            for name in &s.value {
                if !set_names.contains(&name.as_str()) {
                    let close = crate::spec::suggest(name, set_names.iter().copied());
                    let hint = match close.first() {
                        Some(c) => format!("; did you mean `{c}`?"),
                        None => format!("; the sets are {}", set_names.join(", ")),
                    };
                    return Err(invalid(
                        &s.referenced,
                        format!(
                            "`cgroups.sets` names `{name}`, which is not a set of this file{hint}"
                        ),
                    ));
                }
            }
            s.value
        }
        None => {
            let d: Vec<String> = DEFAULT_SETS
                .iter()
                .filter(|n| set_names.contains(n))
                .map(|n| n.to_string())
                .collect();
            if d.is_empty() {
                return Err(invalid(
                    at,
                    format!(
                        "`cgroups:` has no `sets:` and this file has none of the default sets ({}): name the sets to count per cgroup",
                        DEFAULT_SETS.join(", ")
                    ),
                ));
            }
            d
        }
    };
    if raw.preset != Preset::Kubernetes && raw.containers {
        return Err(invalid(
            at,
            "`containers: true` applies to `preset: kubernetes` only".into(),
        ));
    }
    for p in &raw.paths {
        if let Err(e) = globset::Glob::new(p.trim_matches('/')) {
            return Err(invalid(
                at,
                format!("`cgroups.paths` has `{p}`, which is not a glob: {e}"),
            ));
        }
        if p.split('/').any(|c| c == "..") {
            return Err(invalid(
                at,
                format!("`cgroups.paths` has `{p}`: globs stay under the cgroup root (no `..`)"),
            ));
        }
    }
    if raw.preset == Preset::None && raw.paths.is_empty() {
        return Err(invalid(
            at,
            "`cgroups:` selects nothing: give `preset: kubernetes` or `preset: systemd`, or `paths:` globs relative to the cgroup root".into(),
        ));
    }
    Ok(CgroupsConfig {
        backend: raw.backend,
        preset: raw.preset,
        containers: raw.containers,
        paths: raw.paths,
        max_cgroups,
        rank_interval,
        sets,
        per,
    })
}

/// `cgroups.per`: `node` (the default) or `cpu`; the boolean `per_cpu`
/// it replaced is refused with the replacement named.
fn per_of(raw: &RawCgroups, invalid: super::Invalid) -> Result<super::Per, super::ConfigError> {
    if let Some(old) = &raw.per_cpu {
        return Err(invalid(
            &old.referenced,
            super::per_cpu_replaced(old.value, " in `cgroups:`"),
        ));
    }
    match &raw.per {
        None => Ok(super::Per::Node),
        Some(p) if matches!(p.value, super::Per::Cpu | super::Per::Node) => Ok(p.value),
        Some(p) => Err(invalid(
            &p.referenced,
            format!(
                "`cgroups.per: {}`: per-cgroup series are either per CPU (`per: cpu`) or summed over the node (`per: node`, the default)",
                p.value.as_str()
            ),
        )),
    }
}

/// A `rank_interval:` text: a duration (`30s`, `5m`) of at least
/// [`MIN_RANK_INTERVAL`].
fn rank_interval(text: &str) -> Result<Duration, String> {
    let d = crate::duration::parse(text)?;
    if d < MIN_RANK_INTERVAL {
        return Err(format!(
            "`{text}` is shorter than 1s: each re-ranking reads every matched cgroup's cpu.stat; give e.g. `30s` (the default)"
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const BASE: &str = "sets:\n  - name: core\n    events:\n      - metric: perf_cpu_clock_seconds_total\n        event: cpu-clock\n";

    fn parse(extra: &str) -> Result<Config, String> {
        Config::parse(&format!("{BASE}{extra}"), "c.yaml").map_err(|e| e.to_string())
    }

    #[test]
    fn absent_section_is_none() {
        assert_eq!(parse("").unwrap().cgroups, None);
    }

    #[test]
    fn defaults_pick_existing_default_sets() {
        let c = parse("cgroups:\n  preset: kubernetes\n").unwrap();
        let g = c.cgroups.unwrap();
        assert_eq!(g.sets, vec!["core".to_string()]);
        assert_eq!(g.max_cgroups, super::DEFAULT_MAX_CGROUPS);
        assert_eq!(g.rank_interval, super::DEFAULT_RANK_INTERVAL);
        assert_eq!(g.backend, super::Backend::Auto);
        assert!(!g.per_cpu());
    }

    /// `per:` takes `cpu` or `node`; the boolean it replaced is refused
    /// at its line with the replacement named.
    #[test]
    fn per_is_cpu_or_node_and_per_cpu_is_replaced() {
        let c = parse("cgroups:\n  preset: kubernetes\n  per: cpu\n").unwrap();
        assert!(c.cgroups.unwrap().per_cpu());
        let e = parse("cgroups:\n  preset: kubernetes\n  per: socket\n").unwrap_err();
        assert!(e.starts_with("c.yaml:8:"), "{e}");
        assert!(e.contains("`cgroups.per: socket`"), "{e}");
        let e = parse("cgroups:\n  preset: kubernetes\n  per_cpu: true\n").unwrap_err();
        assert!(e.starts_with("c.yaml:8:"), "{e}");
        assert!(
            e.contains("`per_cpu: true` is replaced by `per: cpu`"),
            "{e}"
        );
    }

    #[test]
    fn unknown_set_is_refused_with_a_suggestion() {
        let e = parse("cgroups:\n  paths: [\"app/*\"]\n  sets: [cor]\n").unwrap_err();
        assert!(e.contains("c.yaml:"), "{e}");
        assert!(e.contains("did you mean `core`"), "{e}");
    }

    #[test]
    fn selecting_nothing_is_refused() {
        let e = parse("cgroups:\n  max_cgroups: 3\n").unwrap_err();
        assert!(e.contains("selects nothing"), "{e}");
        let e = parse("cgroups:\n  preset: systemd\n  max_cgroups: 0\n").unwrap_err();
        assert!(e.contains("max_cgroups: 0"), "{e}");
    }

    #[test]
    fn bad_globs_are_refused() {
        let e = parse("cgroups:\n  paths: [\"app/[\"]\n").unwrap_err();
        assert!(e.contains("`app/[`, which is not a glob"), "{e}");
        let e = parse("cgroups:\n  paths: [\"../x\"]\n").unwrap_err();
        assert!(e.contains("no `..`"), "{e}");
    }

    #[test]
    fn rank_interval_is_a_duration_of_at_least_a_second() {
        let c = parse("cgroups:\n  preset: systemd\n  rank_interval: 1m30s\n").unwrap();
        assert_eq!(
            c.cgroups.unwrap().rank_interval,
            std::time::Duration::from_secs(90)
        );
        let e = parse("cgroups:\n  preset: systemd\n  rank_interval: 30\n").unwrap_err();
        assert!(e.contains("c.yaml:") && e.contains("rank_interval"), "{e}");
        assert!(e.contains("`30s`"), "{e}");
        let e = parse("cgroups:\n  preset: systemd\n  rank_interval: 100ms\n").unwrap_err();
        assert!(e.contains("shorter than 1s"), "{e}");
    }

    #[test]
    fn unknown_backend_is_refused() {
        let e = parse("cgroups:\n  backend: ebpf\n  preset: systemd\n").unwrap_err();
        assert!(e.contains("c.yaml:"), "{e}");
    }
}
