//! The `sampling:` section: sampled attribution in `serve`.
//!
//! ```yaml
//! sampling:
//!   frequency: 99      # samples per second per CPU (1-10000)
//!   event: cycles      # default: cycles, or cpu-clock without a hardware PMU
//!   by: process        # process | cgroup | pod
//!   top: 10            # series per event: at most 2 × top, plus `other`
//!   ring_pages: 8      # data pages per CPU ring (a power of two)
//! ```
//!
//! Plain data, no I/O.

use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

/// The default frequency.
pub const DEFAULT_FREQUENCY: u64 = 99;
/// The highest frequency accepted (the kernel's own limit,
/// `kernel.perf_event_max_sample_rate`, is usually 100000 over all events).
pub const MAX_FREQUENCY: u64 = 10_000;
/// The default number of top entries.
pub const DEFAULT_TOP: usize = 10;
/// The highest `top:`.
pub const MAX_TOP: usize = 100;
/// The default ring size in data pages (`perf::ring::DEFAULT_RING_PAGES`).
pub const DEFAULT_RING_PAGES: usize = 8;

/// What samples are attributed to in `serve` (no `thread`: thread ids
/// are unbounded label values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleBy {
    /// The process name (`process` label).
    #[default]
    Process,
    /// The cgroup path (`cgroup` label).
    Cgroup,
    /// The Kubernetes pod uid (`pod` label).
    Pod,
}

/// The section as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSampling {
    #[serde(default)]
    frequency: Option<Spanned<u64>>,
    #[serde(default)]
    event: Option<Spanned<String>>,
    #[serde(default)]
    by: SampleBy,
    #[serde(default)]
    top: Option<Spanned<usize>>,
    #[serde(default)]
    ring_pages: Option<Spanned<usize>>,
}

/// The validated section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingConfig {
    /// Samples per second per CPU.
    pub frequency: u64,
    /// The event (`None`: cycles, falling back to cpu-clock).
    pub event: Option<String>,
    /// The attribution.
    pub by: SampleBy,
    /// Entries exported by name per window; the rest go to `other`.
    pub top: usize,
    /// Data pages per ring.
    pub ring_pages: usize,
}

/// Validates the section.
pub(super) fn convert(
    raw: RawSampling,
    invalid: super::Invalid,
) -> Result<SamplingConfig, super::ConfigError> {
    let check = |v: &Option<Spanned<usize>>, ok: &dyn Fn(usize) -> bool, msg: &str| match v {
        Some(s) if !ok(s.value) => Err(invalid(&s.referenced, format!("{} {msg}", s.value))),
        _ => Ok(()),
    };
    if let Some(f) = &raw.frequency {
        if f.value == 0 || f.value > MAX_FREQUENCY {
            let at: &Location = &f.referenced;
            return Err(invalid(
                at,
                format!(
                    "`frequency: {}`: give 1 to {MAX_FREQUENCY} samples per second",
                    f.value
                ),
            ));
        }
    }
    check(
        &raw.top,
        &|t| (1..=MAX_TOP).contains(&t),
        &format!("is not a `top:` from 1 to {MAX_TOP}"),
    )?;
    check(
        &raw.ring_pages,
        &|p| p.is_power_of_two() && p <= 65536,
        "is not a power of two `ring_pages:` (1, 2, 4, ... 65536)",
    )?;
    if let Some(e) = &raw.event {
        // Parsed at load, so a bad spec or modifier is refused with its
        // line; sampling takes the modifiers that filter only samples
        // (`cpu-clock:u`).
        crate::spec::parse(&e.value)
            .map_err(|why| why.to_string())
            .and_then(|p| p.check_modifiers(true).map_err(|why| why.to_string()))
            .map_err(|why| invalid(&e.referenced, format!("`sampling.event`: {why}")))?;
    }
    Ok(SamplingConfig {
        frequency: raw.frequency.map_or(DEFAULT_FREQUENCY, |f| f.value),
        event: raw.event.map(|e| e.value),
        by: raw.by,
        top: raw.top.map_or(DEFAULT_TOP, |t| t.value),
        ring_pages: raw.ring_pages.map_or(DEFAULT_RING_PAGES, |p| p.value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    const SETS: &str = "sets:\n  - name: s\n    events:\n      - metric: perf_cpu_clock_seconds_total\n        event: cpu-clock\n";

    #[test]
    fn defaults_and_values() {
        let c = Config::parse(&format!("{SETS}sampling: {{}}\n"), "t.yaml").unwrap();
        assert_eq!(
            c.sampling,
            Some(SamplingConfig {
                frequency: DEFAULT_FREQUENCY,
                event: None,
                by: SampleBy::Process,
                top: DEFAULT_TOP,
                ring_pages: DEFAULT_RING_PAGES,
            })
        );
        let y = format!("{SETS}sampling:\n  frequency: 999\n  event: cpu-clock\n  by: pod\n  top: 5\n  ring_pages: 16\n");
        let s = Config::parse(&y, "t.yaml").unwrap().sampling.unwrap();
        assert_eq!(
            (s.frequency, s.by, s.top, s.ring_pages),
            (999, SampleBy::Pod, 5, 16)
        );
        assert_eq!(s.event.as_deref(), Some("cpu-clock"));
        assert!(Config::parse(SETS, "t.yaml").unwrap().sampling.is_none());
        let e = Config::parse(&format!("{SETS}sampling:\n  top: 0\n"), "t.yaml").unwrap_err();
        assert!(e.to_string().contains("t.yaml:7"), "{e}");
    }
}
