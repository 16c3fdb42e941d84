//! Validation: the raw sets and metrics of a file converted into the
//! typed ones, every rule checked with where it was broken (names, kinds,
//! the fallback rule, modifiers the kernel would ignore, guards).

use super::raw::{RawAlternative, RawMetric, RawSet};
use super::{names, per_cpu_replaced, Alternative, ConfigError, CpuRequirement, FormatRequirement};
use super::{Invalid, MetricConfig, Per, SetConfig, Spec};
use crate::spec;
use serde_saphyr::Spanned;
use std::collections::BTreeMap;

pub(super) fn convert_set(
    s: RawSet,
    set_names: &mut BTreeMap<String, ()>,
    families: &mut BTreeMap<String, String>,
    invalid: Invalid,
) -> Result<SetConfig, ConfigError> {
    if s.name.value.trim().is_empty() {
        return Err(invalid(
            &s.name.referenced,
            "a set needs a non-empty `name`".into(),
        ));
    }
    if set_names.insert(s.name.value.clone(), ()).is_some() {
        return Err(invalid(
            &s.name.referenced,
            format!("set `{}` is defined twice", s.name.value),
        ));
    }
    if s.events.is_empty() {
        return Err(invalid(
            &s.name.referenced,
            format!("set `{}` has no events", s.name.value),
        ));
    }
    if let Some(old) = &s.per_cpu {
        return Err(invalid(
            &old.referenced,
            per_cpu_replaced(old.value, &format!(" in set `{}`", s.name.value)),
        ));
    }
    let mut events = Vec::new();
    for m in s.events {
        events.push(convert_metric(m, families, invalid)?);
    }
    Ok(SetConfig {
        name: s.name,
        per: s.per.map_or(Per::Cpu, |p| p.value),
        events,
    })
}

fn convert_metric(
    m: RawMetric,
    families: &mut BTreeMap<String, String>,
    invalid: Invalid,
) -> Result<MetricConfig, ConfigError> {
    let name = &m.metric.value;
    let at = &m.metric.referenced;
    names::check(name, m.gauge).map_err(|e| invalid(at, e))?;
    if let Some(other) = families.insert(names::family(name).to_string(), name.clone()) {
        let msg = if &other == name {
            format!("metric `{name}` is defined twice")
        } else {
            format!("metric `{name}` collides with `{other}`: OpenMetrics names both families `{}`; rename one", names::family(name))
        };
        return Err(invalid(at, msg));
    }
    let event_at = m.event.referenced;
    let alts = m.event.value.into_vec();
    if alts.is_empty() {
        return Err(invalid(
            &event_at,
            format!("metric `{name}`: `event` is an empty list"),
        ));
    }
    let n = alts.len();
    let mut out = Vec::new();
    for (i, a) in alts.into_iter().enumerate() {
        let where_ = if n > 1 {
            format!("metric `{name}`, alternative {}", i + 1)
        } else {
            format!("metric `{name}`")
        };
        out.push(convert_alternative(a).map_err(|e| invalid(&event_at, format!("{where_}: {e}")))?);
    }
    same_modifiers(name, &out).map_err(|e| invalid(&event_at, e))?;
    Ok(MetricConfig {
        help: m.help,
        gauge: m.gauge,
        event: Spanned::new(out, event_at, m.event.defined),
        metric: m.metric,
    })
}

/// Parses a counted spec: modifiers the kernel would ignore when
/// counting (`cpu-clock:u`, `sched:sched_switch:k`) are refused here, at
/// load, with the line.
fn parse_spec(text: String) -> Result<Spec, String> {
    let parsed = spec::parse(&text).map_err(|e| e.0)?;
    parsed.check_modifiers(false).map_err(|e| e.to_string())?;
    Ok(Spec { text, parsed })
}

/// The fallback rule: the alternatives of one metric (and the specs of
/// one `sum_of`) are encodings of one quantity, so they carry the same
/// modifiers; `cycles:u` falling back to `cpu/cycles/` would change what
/// the series means with the host. Modifiers are compared by the exclude
/// bits they set (`uH` is `u`).
fn same_modifiers(name: &str, alts: &[Alternative]) -> Result<(), String> {
    let mut specs = alts
        .iter()
        .enumerate()
        .flat_map(|(i, a)| a.specs.iter().map(move |s| (i + 1, s)));
    let Some((_, first)) = specs.next() else {
        return Ok(());
    };
    let want = first.parsed.modifiers.exclude();
    let shown = |s: &Spec| match s.parsed.modifiers {
        m if m.is_empty() => "no modifiers".to_string(),
        m => format!("modifiers `{m}`"),
    };
    for (i, s) in specs {
        if s.parsed.modifiers.exclude() != want {
            let which = if alts.len() > 1 {
                format!("alternative {i}, ")
            } else {
                String::new()
            };
            return Err(format!(
                "metric `{name}`: {which}`{}` has {} but `{}` has {}: a fallback never changes what a metric means, so every alternative (and every `sum_of` spec) of one metric carries the same modifiers; give them all the same, or make separate metrics (e.g. `instructions_user_total` for `instructions:u`)",
                s.text,
                shown(s),
                first.text,
                shown(first),
            ));
        }
    }
    Ok(())
}

fn convert_alternative(a: RawAlternative) -> Result<Alternative, String> {
    let d = match a {
        RawAlternative::Spec(s) => {
            return Ok(Alternative {
                specs: vec![parse_spec(s)?],
                scale: None,
                unit: None,
                requires_format: None,
                requires_cpu: None,
            })
        }
        RawAlternative::Detailed(d) => d,
    };
    let texts = match (d.event, d.sum_of) {
        (Some(_), Some(_)) => return Err("give `event` or `sum_of`, not both".into()),
        (None, None) => return Err("needs `event` or `sum_of`".into()),
        (None, Some(v)) if v.is_empty() => return Err("`sum_of` is empty".into()),
        (Some(e), None) => vec![e],
        (None, Some(v)) => v,
    };
    if let Some(sc) = d.scale {
        spec::check_scale(sc).map_err(|why| format!("`scale: {sc}`: {why}"))?;
    }
    let specs = texts
        .into_iter()
        .map(parse_spec)
        .collect::<Result<Vec<_>, _>>()?;
    for (i, s) in specs.iter().enumerate() {
        if specs[..i].iter().any(|t| t.parsed == s.parsed) {
            return Err(format!(
                "`sum_of` lists `{}` twice (it would be counted twice)",
                s.text
            ));
        }
    }
    Ok(Alternative {
        specs,
        scale: d.scale,
        unit: d.unit,
        // Parsed here, so a malformed guard is refused at load with the
        // line, not found out when resolving.
        requires_format: d
            .requires_format
            .as_deref()
            .map(FormatRequirement::parse)
            .transpose()?,
        requires_cpu: d
            .requires_cpu
            .as_deref()
            .map(CpuRequirement::parse)
            .transpose()?,
    })
}
