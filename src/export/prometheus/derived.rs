//! The config's derived metrics on the Prometheus side, partitioned in
//! two: each entry whose expression PromQL can give over `rate()` of the
//! exported counters ([`crate::derive::promql`]) is a recording rule
//! (`perf-exporter rules` writes it; Prometheus evaluates it), every
//! other is a gauge of `/metrics`, evaluated by the exporter. Every entry
//! is exactly one of the two ([`partition`]).
//!
//! A gauge is named `perf_derived_<name>` (the OTLP gauges' name), with
//! the Prometheus base-unit suffix of the entry's `unit:` where it has
//! one and the name does not end in it already ([`gauge_name`]). Its
//! value is [`DerivedTable::evaluate`] over one window: the increases
//! between two consecutive collections of the engine and their distance
//! (both sides of a ratio from the same two collections). No window yet
//! (the first collection), an input without a value in the window (not
//! counted, never ran) or an undefined value (a zero divisor): no sample.
//!
//! Availability follows `perf_event_available`: one sample per gauge,
//! `metric="perf_derived_<name>"`, 1 when the host takes an alternative
//! of its `expr:`, else 0 with the expression tried (`event`), the
//! fixed problem code of its first input without a value (`reason`) and
//! `class` (as `check` reports the derived metric).

use crate::config::derived::{Derived, DerivedTable, Source, DURATION};
use crate::derive::promql::{self, Leaf, Rates};
use crate::derive::{Expr, Operand};
use crate::export::live::{Frame, Framer, PerCpuDetail, Reasons};
use crate::problem::{Class, Problem};
use crate::resolve::chain::Status;
use crate::resolve::derived::DerivedResolution;
use crate::snapshot::{Family, Kind, Labels, Sample};
use std::sync::Arc;
use std::time::Instant;

/// The prefix of the derived gauges' names.
pub const PREFIX: &str = "perf_derived_";

/// The selector every rule's counters have.
pub const SELECTOR: &str = "job=\"perf-exporter\"";

/// How deep derived metrics may read each other for a rule (each level
/// inlined into the rule's expression).
const MAX_INLINE: usize = 8;

/// `d`'s expression with its inputs as exported names: event metrics by
/// name, derived metrics inlined, `duration_time` kept.
fn inlined(table: &DerivedTable, d: &Derived, depth: usize) -> Result<Expr, String> {
    if depth > MAX_INLINE {
        return Err(format!(
            "reads derived metrics more than {MAX_INLINE} levels deep"
        ));
    }
    promql::substitute(&d.formula.expr, &mut |o: &Operand| {
        let source = d
            .formula
            .inputs
            .iter()
            .find(|i| i.operand == o.name)
            .map(|i| &i.source);
        let name = match source {
            Some(Source::Metric(m)) => m.clone(),
            Some(Source::Duration) => DURATION.to_string(),
            Some(Source::Derived(x)) => {
                let inner = table
                    .get(x)
                    .ok_or_else(|| format!("`{x}` is not in the table"))?;
                return inlined(table, inner, depth + 1);
            }
            None => return Err(format!("`{}` is not resolved", o.name)),
        };
        Ok(Expr::Operand(Operand {
            name,
            column: o.column,
        }))
    })
}

/// `d`'s recording rule expression (PromQL over the node's summed
/// 5-minute rates), or why PromQL cannot give it: then `d` is a gauge.
pub fn rule_expr(table: &DerivedTable, d: &Derived) -> Result<String, String> {
    let rates = Rates {
        by: "job, instance",
        selector: SELECTOR,
        range: "5m",
    };
    let leaf = |n: &str| {
        Some(if n == DURATION {
            Leaf::Duration
        } else {
            Leaf::Counter(n.to_string())
        })
    };
    inlined(table, d, 0).and_then(|e| promql::to_promql(&e, &leaf, &rates))
}

/// How Prometheus gets a derived metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Form {
    /// A recording rule with this expression.
    Rule(String),
    /// A gauge of `/metrics`, because PromQL cannot express it (why).
    Gauge(String),
}

/// Every entry of `table` (the config's, first alternatives: what
/// `rules` reads), in its order, as a rule or a gauge: each exactly one.
pub fn partition(table: &DerivedTable) -> Vec<(&Derived, Form)> {
    table
        .metrics
        .iter()
        .map(|d| {
            let form = match rule_expr(table, d) {
                Ok(q) => Form::Rule(q),
                Err(why) => Form::Gauge(why),
            };
            (d, form)
        })
        .collect()
}

/// The base-unit suffix of a `unit:` as written, where it names a
/// Prometheus base unit (the others, `instructions per cycle`, are no
/// unit Prometheus names).
fn unit_suffix(unit: &str) -> Option<&'static str> {
    let u = unit.trim().to_ascii_lowercase();
    Some(match u.as_str() {
        "s" | "second" | "seconds" => "seconds",
        "byte" | "bytes" => "bytes",
        "joule" | "joules" => "joules",
        "1" | "ratio" => "ratio",
        "%" | "percent" => "percent",
        "hz" | "hertz" => "hertz",
        "celsius" => "celsius",
        "watt" | "watts" => "watts",
        "volt" | "volts" => "volts",
        "bytes per second" | "bytes/s" | "b/s" => "bytes_per_second",
        "per second" | "/s" | "1/s" => "per_second",
        _ => return None,
    })
}

/// The gauge's family name: `perf_derived_<name>`, plus the base unit
/// of `unit:` when the name does not end in it.
pub fn gauge_name(d: &Derived) -> String {
    let mut name = format!("{PREFIX}{}", d.name);
    if let Some(s) = d.unit.as_deref().and_then(unit_suffix) {
        if name != s && !name.ends_with(&format!("_{s}")) {
            name.push('_');
            name.push_str(s);
        }
    }
    name
}

/// The gauges of a config's table: each entry's name, family name and
/// help (in the table's order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    /// Entry name, family name, help.
    pub gauges: Vec<(String, String, String)>,
}

impl Gauges {
    /// The gauges of `config` (the config's table: [`partition`]).
    pub fn of(config: &DerivedTable) -> Self {
        let gauges = partition(config)
            .into_iter()
            .filter_map(|(d, f)| match f {
                Form::Rule(_) => None,
                Form::Gauge(why) => Some((
                    d.name.clone(),
                    gauge_name(d),
                    format!(
                        "{} (evaluated by the exporter over the last collection window: {why})",
                        d.help.clone().unwrap_or_else(|| format!(
                            "Derived metric {}: {}",
                            d.name, d.formula.text
                        ))
                    ),
                )),
            })
            .collect();
        Gauges { gauges }
    }

    /// Whether there is none (nothing to evaluate).
    pub fn is_empty(&self) -> bool {
        self.gauges.is_empty()
    }

    /// The `perf_event_available` samples of the gauges, as `res`
    /// resolves them on this host.
    pub fn available(&self, res: &DerivedResolution) -> Vec<Sample> {
        self.gauges
            .iter()
            .map(|(name, family, _)| {
                let mut pairs = vec![("metric", family.clone())];
                let d = res.get(name);
                let value = match d {
                    Some(d) if d.status == Status::Unavailable => {
                        let why = d.problem();
                        let event = d.tried.first().map(|t| t.event.clone());
                        pairs.push(("event", event.unwrap_or_default()));
                        pairs.push(("reason", why.map_or("failed", Problem::code).into()));
                        let class = d.class().unwrap_or(Class::Failed);
                        pairs.push(("class", class.as_str().into()));
                        0.0
                    }
                    _ => 1.0,
                };
                Sample {
                    labels: Labels::new(pairs),
                    value,
                    start_unix_nanos: 0,
                }
            })
            .collect()
    }
}

/// The previous collection, and what frames are built with: a window
/// of derived values between two consecutive collections (the
/// `/metrics` gauges', and the OTLP gauges' between two exports).
#[derive(Debug, Default)]
pub struct Window {
    prev: Option<(Instant, Arc<Vec<Family>>)>,
    framer: Framer,
}

impl Window {
    /// The frame (without per-CPU columns) over the window from the
    /// previous call's collection to `families`, collected at `at`, its
    /// derived values evaluated with `table`. None on the first call.
    pub fn frame(
        &mut self,
        families: &Arc<Vec<Family>>,
        at: Instant,
        table: &DerivedTable,
    ) -> Option<Frame> {
        let (t0, old) = self.prev.replace((at, families.clone()))?;
        let secs = at.saturating_duration_since(t0).as_secs_f64();
        Some(self.framer.frame(
            &old,
            families,
            secs,
            &Reasons::new(),
            PerCpuDetail::Off,
            table,
        ))
    }
}

/// The gauge families of `names` (derived name, family name, help) with
/// a value in `f`: one unlabelled sample each.
pub fn gauge_families<'a>(
    f: &Frame,
    names: impl Iterator<Item = (&'a str, String, String)>,
) -> Vec<Family> {
    names
        .filter_map(|(name, family, help)| {
            let v = f.derived.get(name).copied().flatten()?;
            Some(Family {
                name: family,
                help,
                kind: Kind::Gauge,
                samples: vec![Sample {
                    labels: Labels::new(Vec::new()),
                    value: v,
                    start_unix_nanos: 0,
                }],
            })
        })
        .collect()
}

impl Gauges {
    /// The gauge families over the window `w` makes of `families`
    /// (collected at `at`), evaluated with `table` (the host's). None on
    /// the first collection.
    pub fn families(
        &self,
        w: &mut Window,
        families: &Arc<Vec<Family>>,
        at: Instant,
        table: &DerivedTable,
    ) -> Vec<Family> {
        match w.frame(families, at, table) {
            Some(f) if !self.is_empty() => gauge_families(
                &f,
                self.gauges
                    .iter()
                    .map(|(n, fam, help)| (n.as_str(), fam.clone(), help.clone())),
            ),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    const CFG: &str = "sets:\n  - name: s\n    events:\n      - metric: perf_a_total\n        event: instructions\n      - metric: perf_b_total\n        event: cycles\nderived:\n  - name: ab\n    expr: perf_a_total / perf_b_total\n  - name: capped\n    unit: ratio\n    expr: min(ab, 1)\n  - name: twice\n    expr: 2 * ab\n  - name: count\n    unit: seconds\n    expr: perf_a_total\n  - name: smt\n    expr: \"ab if #smt_on else 0\"\n  - name: a_per_second\n    unit: per second\n    expr: perf_a_total / duration_time\n";

    /// Every derived metric is exactly one of a rule and a gauge: the
    /// rules `perf-exporter rules` writes and the gauges `/metrics`
    /// exposes partition the table, in the default config and in one
    /// with entries PromQL cannot express.
    #[test]
    fn rules_and_gauges_partition_the_table() {
        for cfg in [
            Config::default_config(),
            Config::parse(CFG, "t.yaml").unwrap(),
        ] {
            let table = &cfg.derived;
            let items = crate::export::prometheus::derived::partition(table);
            let gauges = Gauges::of(table);
            let rules: Vec<&str> = items
                .iter()
                .filter(|(_, f)| matches!(f, Form::Rule(_)))
                .map(|(d, _)| d.name.as_str())
                .collect();
            let gauged: Vec<&str> = gauges.gauges.iter().map(|g| g.0.as_str()).collect();
            for d in &table.metrics {
                let n = d.name.as_str();
                assert!(
                    rules.contains(&n) != gauged.contains(&n),
                    "{n}: rule {rules:?} gauge {gauged:?}"
                );
            }
            assert_eq!(rules.len() + gauged.len(), table.metrics.len());
        }
        let cfg = Config::parse(CFG, "t.yaml").unwrap();
        let names: Vec<String> = Gauges::of(&cfg.derived)
            .gauges
            .into_iter()
            .map(|g| g.1)
            .collect();
        assert_eq!(
            names,
            [
                "perf_derived_capped_ratio",
                "perf_derived_count_seconds",
                "perf_derived_smt"
            ]
        );
    }

    #[test]
    fn unit_suffixes_are_prometheus_base_units_once() {
        let cfg = Config::parse(CFG, "t.yaml").unwrap();
        let d = |n: &str| cfg.derived.get(n).unwrap().clone();
        assert_eq!(gauge_name(&d("a_per_second")), "perf_derived_a_per_second");
        assert_eq!(gauge_name(&d("ab")), "perf_derived_ab");
        let mut x = d("ab");
        x.unit = Some("instructions per cycle".into());
        assert_eq!(gauge_name(&x), "perf_derived_ab");
        x.unit = Some("Bytes".into());
        assert_eq!(gauge_name(&x), "perf_derived_ab_bytes");
    }
}
