//! The config's derived metrics on the Prometheus side, partitioned in
//! two: each entry whose every alternative PromQL can give over `rate()`
//! of the exported counters ([`crate::derive::promql`]) is a recording
//! rule (`perf-exporter rules` writes it, the alternatives joined with
//! `or`; Prometheus evaluates it), every other is a gauge of `/metrics`,
//! evaluated by the exporter. Every entry is exactly one of the two
//! ([`partition`], [`rule_expr`]).
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

use crate::config::derived::{Derived, DerivedTable, Formula, Source, DURATION};
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

/// The most expressions one rule joins with `or` (its alternatives, and
/// those of the derived metrics it reads, combined).
const MAX_JOINED: usize = 16;

/// Every expression `f` stands for with its inputs as exported names:
/// event metrics by name, `duration_time` kept, and each derived metric
/// it reads inlined, once per alternative of that one (every
/// combination, in the order written: the first is every first
/// alternative).
fn expansions(table: &DerivedTable, f: &Formula, depth: usize) -> Result<Vec<Expr>, String> {
    if depth > MAX_INLINE {
        return Err(format!(
            "reads derived metrics more than {MAX_INLINE} levels deep"
        ));
    }
    let mut inner: Vec<(&str, Vec<Expr>)> = Vec::new();
    for i in &f.inputs {
        if let Source::Derived(x) = &i.source {
            let d = table
                .get(x)
                .ok_or_else(|| format!("`{x}` is not in the table"))?;
            let mut all: Vec<Expr> = Vec::new();
            for g in d.formulas() {
                for e in expansions(table, g, depth + 1)? {
                    if !all.contains(&e) {
                        all.push(e);
                    }
                }
            }
            inner.push((i.operand.as_str(), all));
        }
    }
    let combinations = inner
        .iter()
        .try_fold(1usize, |n, (_, v)| n.checked_mul(v.len()))
        .filter(|n| *n <= MAX_JOINED)
        .ok_or_else(|| {
            format!("the derived metrics it reads have more than {MAX_JOINED} combinations of alternatives")
        })?;
    let mut out = Vec::with_capacity(combinations);
    for k in 0..combinations {
        // The k-th combination, the last input's alternative varying
        // fastest.
        let mut picks = vec![0; inner.len()];
        let mut rest = k;
        for (p, (_, v)) in picks.iter_mut().zip(&inner).rev() {
            *p = rest % v.len();
            rest /= v.len();
        }
        let e = promql::substitute(&f.expr, &mut |o: &Operand| {
            let source = f
                .inputs
                .iter()
                .find(|i| i.operand == o.name)
                .map(|i| &i.source);
            let name = match source {
                Some(Source::Metric(m)) => m.clone(),
                Some(Source::Duration) => DURATION.to_string(),
                Some(Source::Derived(_)) => {
                    let at = inner.iter().position(|(n, _)| *n == o.name);
                    return at
                        .map(|j| inner[j].1[picks[j]].clone())
                        .ok_or_else(|| format!("`{}` is not resolved", o.name));
                }
                None => return Err(format!("`{}` is not resolved", o.name)),
            };
            Ok(Expr::Operand(Operand {
                name,
                column: o.column,
            }))
        })?;
        out.push(e);
    }
    Ok(out)
}

/// `d`'s recording rule expression (PromQL over the node's summed
/// 5-minute rates), or why PromQL cannot give it: then `d` is a gauge.
///
/// Every alternative of its `expr:` (and of the derived metrics it
/// reads) is in the rule, joined with `or` in the order written, so each
/// platform's series give the value its alternative gives there (`or`
/// keeps the left side's series for a `job, instance` and adds the
/// others'). An entry is a rule only when PromQL can give every one of
/// its alternatives: one it cannot makes the whole entry a gauge (the
/// exporter evaluates the alternative each host takes), so an entry is
/// one of the two on every host.
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
    let many = !d.fallbacks.is_empty();
    let mut joined: Vec<String> = Vec::new();
    for (i, f) in d.formulas().enumerate() {
        let named = |why: String| {
            if many {
                format!("alternative {} ({}): {why}", i + 1, f.text)
            } else {
                why
            }
        };
        let exprs = expansions(table, f, 0).map_err(named)?;
        let several = many || exprs.len() > 1;
        for e in exprs {
            let q = promql::to_promql(&e, &leaf, &rates).map_err(named)?;
            if several && !promql::reads_counter(&e, &leaf) {
                return Err(named(
                    "it reads no counter, so no series can select it among alternatives".into(),
                ));
            }
            if !joined.contains(&q) {
                joined.push(q);
            }
        }
    }
    if joined.len() > MAX_JOINED {
        return Err(format!(
            "it has more than {MAX_JOINED} alternatives with their inputs' alternatives"
        ));
    }
    if let [one] = joined.as_slice() {
        return Ok(one.clone());
    }
    let parts: Vec<String> = joined
        .iter()
        .map(|q| {
            let body: Vec<String> = q.lines().map(|l| format!("  {l}")).collect();
            format!("(\n{}\n)", body.join("\n"))
        })
        .collect();
    Ok(parts.join("\nor\n"))
}

/// How Prometheus gets a derived metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Form {
    /// A recording rule with this expression.
    Rule(String),
    /// A gauge of `/metrics`, because PromQL cannot express it (why).
    Gauge(String),
}

/// Every entry of `table` (the config's, every alternative: what
/// `rules` reads), in its order, as a rule or a gauge: each exactly one
/// ([`rule_expr`]: a rule only when PromQL gives every alternative).
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
                name: family.into(),
                help: help.into(),
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
        // No gauge, no frame: the window's frame evaluates the whole table
        // and was a seventh of a scrape's CPU on a config without gauges.
        // (Nor a previous collection: a window starts again when gauges
        // come back, after a reload.)
        if self.is_empty() {
            w.prev = None;
            return Vec::new();
        }
        match w.frame(families, at, table) {
            Some(f) => gauge_families(
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

    const CFG: &str = "sets:\n  - name: s\n    events:\n      - metric: perf_a_total\n        event: instructions\n      - metric: perf_b_total\n        event: cycles\nderived:\n  - name: ab\n    expr: perf_a_total / perf_b_total\n  - name: capped\n    unit: ratio\n    expr: min(ab, perf_b_total / perf_b_total)\n  - name: twice\n    expr: 2 * ab\n  - name: count\n    unit: seconds\n    expr: perf_a_total\n  - name: smt\n    expr: \"ab if #smt_on else 0\"\n  - name: a_per_second\n    unit: per second\n    expr: perf_a_total / duration_time\n";

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

    /// A rule holds every alternative, joined with `or` in the order
    /// written (those of a derived input too, each combination); one
    /// alternative PromQL cannot give makes the entry a gauge, naming it.
    #[test]
    fn a_rule_joins_every_alternative_and_one_inexpressible_makes_a_gauge() {
        let yaml = "sets:\n  - name: s\n    events:\n      - metric: perf_a_total\n        event: instructions\n      - metric: perf_b_total\n        event: cycles\n      - metric: perf_c_total\n        event: ref-cycles\nderived:\n  - name: ab\n    expr: [perf_a_total / perf_b_total, \"d_ratio(perf_a_total, perf_c_total)\"]\n  - name: half\n    expr: ab / 2\n  - name: same\n    expr: [perf_a_total / perf_b_total, perf_a_total / perf_b_total]\n  - name: smt\n    expr: [perf_a_total / perf_b_total, \"ab if #smt_on else 0\"]\n";
        let cfg = Config::parse(yaml, "t.yaml").unwrap();
        let t = &cfg.derived;
        let r =
            |m: &str| format!("sum by (job, instance) (rate(perf_{m}_total{{{SELECTOR}}}[5m]))");
        let (a, b, c) = (r("a"), r("b"), r("c"));
        let forms: Vec<(&str, Form)> = partition(t)
            .into_iter()
            .map(|(d, f)| (d.name.as_str(), f))
            .collect();
        assert_eq!(
            forms[0],
            (
                "ab",
                Form::Rule(format!(
                    "(\n  {a}\n  /\n  {b}\n)\nor\n(\n  ({a} / ({c} != 0) or 0 * {c})\n)"
                ))
            )
        );
        assert_eq!(
            forms[1],
            (
                "half",
                Form::Rule(format!(
                    "(\n  {a} / {b}\n  /\n  2\n)\nor\n(\n  ({a} / ({c} != 0) or 0 * {c})\n  /\n  2\n)"
                ))
            )
        );
        // Alternatives PromQL writes alike are one.
        assert_eq!(forms[2], ("same", Form::Rule(format!("{a}\n/\n{b}"))));
        assert_eq!(
            forms[3],
            (
                "smt",
                Form::Gauge(
                    "alternative 2 (ab if #smt_on else 0): `if else` has no rate form here".into()
                )
            )
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
