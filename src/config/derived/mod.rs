//! The `derived:` section: metrics computed from the counted ones, in
//! perf's metric-expression language ([`crate::derive`]).
//!
//! ```yaml
//! derived:
//!   - name: ipc
//!     help: Instructions per cycle.
//!     expr: instructions / cycles
//!   - name: l1d_mpki
//!     unit: misses per 1000 instructions
//!     group: cache
//!     expr: 1e3 * L1\-dcache\-load\-misses / instructions
//!     threshold: l1d_mpki > 20
//!     record: instance:perf_l1d:mpki_rate5m     # the recording rule's name
//!   - name: context_switches_per_second
//!     expr: perf_context_switches_total / duration_time
//!     per_cpu: true           # also per CPU (the live page's heatmap)
//!   - name: slots_per_thread
//!     expr: "slots / 2 if #smt_on else slots"   # quoted: ` #` starts a YAML comment
//! ```
//!
//! An operand names, in this order of preference:
//!
//! 1. an event metric of the config (`perf_instructions_total`);
//! 2. another derived metric (`ipc`), which is evaluated first; a cycle
//!    is refused with its path;
//! 3. an event spec that one metric of the config counts (`instructions`
//!    for the metric whose chain holds `instructions`; `cpu@event=0x3c@`
//!    for `cpu/event=0x3c/`), compared as parsed specs, modifiers
//!    included; a spec two metrics count is refused as ambiguous;
//! 4. `duration_time`: the window's length in seconds (perf's tool
//!    event, which perf also gives in seconds).
//!
//! Anything else is refused at load with the file, the line, the
//! operand's column in the expression and the names that come closest.
//! `has_event(..)` probes may name anything (they are 0 when it is not
//! counted). A `threshold:` is an expression too, whose operands follow
//! the same rules and may name the metric itself.
//!
//! Plain data, no I/O: [`RawDerived`] is the section as written,
//! [`DerivedTable`] the section resolved against the config's metrics;
//! `default_table.rs` narrows the default config's table to what a
//! config without the section counts ([`DerivedTable::for_metrics`],
//! [`LeftOut`]).

mod default_table;

pub use default_table::LeftOut;

use serde::Deserialize;
use serde_saphyr::{Location, Spanned};
use std::collections::{BTreeMap, BTreeSet};

use super::{names, ConfigError, CpuRequirement, SetConfig};
use crate::derive::{self, DeriveError, Env, Expr, Literal};
use crate::spec::{self, quote_list, suggest, Event};

/// The most derived metrics one config may hold.
pub const MAX_DERIVED: usize = 1024;

/// The operand that stands for the window's length in seconds.
pub const DURATION: &str = "duration_time";

/// One entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDerived {
    name: Spanned<String>,
    #[serde(default)]
    help: Option<String>,
    #[serde(default)]
    unit: Option<String>,
    expr: Spanned<RawExprs>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    threshold: Option<Spanned<String>>,
    #[serde(default)]
    record: Option<Spanned<String>>,
    #[serde(default)]
    per_cpu: Option<Spanned<bool>>,
}

/// `expr:` as written: one expression, or a list of alternatives tried in
/// order (as `event:` takes a fallback chain).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawExprs {
    One(String),
    Chain(Vec<RawAlternative>),
}

/// One alternative of an `expr:` list: an expression, or the long form
/// with a CPU guard (`{expr: "...", requires_cpu: "GenuineIntel-.*"}`):
/// tried only where the host's CPU identity matches, as an event
/// alternative's `requires_cpu`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawAlternative {
    Text(String),
    Guarded(RawGuarded),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGuarded {
    expr: String,
    requires_cpu: String,
}

impl RawAlternative {
    fn parts(&self) -> (&str, Option<&str>) {
        match self {
            RawAlternative::Text(t) => (t, None),
            RawAlternative::Guarded(g) => (&g.expr, Some(&g.requires_cpu)),
        }
    }
}

/// The most alternatives one `expr:` may list.
pub const MAX_ALTERNATIVES: usize = 16;

/// What an operand reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An event metric of the config, by its name.
    Metric(String),
    /// Another derived metric, by its name.
    Derived(String),
    /// The window's length in seconds.
    Duration,
}

/// An operand and what it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// As the expression names it (escapes removed).
    pub operand: String,
    /// What it reads.
    pub source: Source,
}

/// An expression as written and as parsed, with its inputs resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Formula {
    /// As written.
    pub text: String,
    /// As parsed.
    pub expr: Expr,
    /// Every operand the value depends on, resolved.
    pub inputs: Vec<Input>,
    /// The `has_event(..)` probes that name something the config counts
    /// (the others are 0).
    pub probes: Vec<Input>,
    /// The CPU guard of the long form (`requires_cpu`): the alternative
    /// is taken only where the host's CPU identity matches it.
    pub requires_cpu: Option<CpuRequirement>,
}

/// One derived metric, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    /// Its name.
    pub name: String,
    /// The HELP text.
    pub help: Option<String>,
    /// The unit of the value, as written.
    pub unit: Option<String>,
    /// A group it is shown in (`topdown`, `cache`).
    pub group: Option<String>,
    /// The value: the first alternative of `expr:` (or, in a table
    /// chosen for one host by [`DerivedTable::choose`], the alternative
    /// that host takes).
    pub formula: Formula,
    /// The alternatives after the first, in the order written (empty for
    /// a single expression, and in a chosen table).
    pub fallbacks: Vec<Formula>,
    /// When the value deserves attention (non-zero means yes).
    pub threshold: Option<Formula>,
    /// The name of its Prometheus recording rule (`record:`;
    /// `perf-exporter rules` names it `instance:perf_<name>:rate5m`
    /// otherwise).
    pub record: Option<String>,
    /// Whether the value is also computed per CPU (`per_cpu: true`: the
    /// live page's per-CPU heat map), from the per-CPU counts of its
    /// inputs ([`Formula::per_cpu`] is its form). A value that sums over
    /// CPUs (`cpus_utilized`: the CPUs counted) is not.
    pub per_cpu: bool,
    /// Where `name:` is written (line, column).
    pub at: (u64, u64),
}

/// The section resolved: every entry after the derived metrics it reads
/// (so one pass in this order evaluates them all).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DerivedTable {
    /// In evaluation order.
    pub metrics: Vec<Derived>,
    /// Set when this is the default config's table, taken because the
    /// config has no `derived:` section ([`DerivedTable::for_metrics`]):
    /// the default entries left out because the config does not count
    /// their inputs (empty when every one applies).
    pub implicit: Option<Vec<LeftOut>>,
}

/// How a per-CPU value is computed from its inputs' per-CPU counts
/// ([`Formula::per_cpu`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerCpuForm {
    /// `numerator / denominator`, two event metrics.
    Ratio(String, String),
    /// An event metric over `duration_time`: a rate per second.
    Rate(String),
}

impl Formula {
    /// The form this value takes per CPU: `a / b` of two event metrics
    /// (a ratio) or of one and `duration_time` (a rate); `None` for any
    /// other expression.
    pub fn per_cpu(&self) -> Option<PerCpuForm> {
        let Expr::Binary(derive::BinOp::Div, a, b) = &self.expr else {
            return None;
        };
        let source = |e: &Expr| match e {
            Expr::Operand(o) => self
                .inputs
                .iter()
                .find(|i| i.operand == o.name)
                .map(|i| &i.source),
            _ => None,
        };
        match (source(a)?, source(b)?) {
            (Source::Metric(n), Source::Metric(m)) => Some(PerCpuForm::Ratio(n.clone(), m.clone())),
            (Source::Metric(n), Source::Duration) => Some(PerCpuForm::Rate(n.clone())),
            _ => None,
        }
    }
}

impl Derived {
    /// Every alternative, in the order written.
    pub fn formulas(&self) -> impl Iterator<Item = &Formula> {
        std::iter::once(&self.formula).chain(&self.fallbacks)
    }
}

impl DerivedTable {
    /// The table one host evaluates: each entry's `formula` is the
    /// alternative `choice` gives for it (by index among
    /// [`Derived::formulas`]; the first when `None` or out of range),
    /// and no fallbacks are left.
    #[must_use]
    pub fn choose(&self, choice: &dyn Fn(&str) -> Option<usize>) -> DerivedTable {
        let metrics = self
            .metrics
            .iter()
            .map(|d| {
                let pick = choice(&d.name)
                    .and_then(|i| d.formulas().nth(i))
                    .unwrap_or(&d.formula);
                Derived {
                    formula: pick.clone(),
                    fallbacks: Vec::new(),
                    ..d.clone()
                }
            })
            .collect();
        DerivedTable {
            metrics,
            implicit: self.implicit.clone(),
        }
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&Derived> {
        self.metrics.iter().find(|d| d.name == name)
    }

    /// Every derived value of one window, in evaluation order: `deltas`
    /// gives an event metric's delta in the window (by metric name;
    /// `None` when it has none), `duration` the window's length in
    /// seconds, `literals` the host's literals. Every input comes from
    /// the same window: a value never mixes collections. A value that is
    /// NaN is [`DeriveError::Undefined`], never a number.
    pub fn evaluate(
        &self,
        deltas: &dyn Fn(&str) -> Option<f64>,
        duration: Option<f64>,
        literals: &dyn Fn(Literal) -> Result<f64, String>,
    ) -> Vec<(&str, Result<f64, DeriveError>)> {
        let mut done: BTreeMap<&str, Option<f64>> = BTreeMap::new();
        let mut out = Vec::with_capacity(self.metrics.len());
        for d in &self.metrics {
            let env = Window {
                formula: &d.formula,
                deltas,
                duration,
                literals,
                done: &done,
            };
            let v = match derive::eval(&d.formula.expr, &env) {
                Ok(v) if v.is_nan() => Err(DeriveError::Undefined),
                other => other,
            };
            done.insert(d.name.as_str(), v.as_ref().ok().copied());
            out.push((d.name.as_str(), v));
        }
        out
    }
}

/// One window, as one formula's operands see it.
struct Window<'a> {
    formula: &'a Formula,
    deltas: &'a dyn Fn(&str) -> Option<f64>,
    duration: Option<f64>,
    literals: &'a dyn Fn(Literal) -> Result<f64, String>,
    done: &'a BTreeMap<&'a str, Option<f64>>,
}

impl Window<'_> {
    fn read(&self, source: &Source) -> Option<f64> {
        match source {
            Source::Metric(m) => (self.deltas)(m),
            Source::Derived(d) => self.done.get(d.as_str()).copied().flatten(),
            Source::Duration => self.duration,
        }
    }
}

impl Env for Window<'_> {
    fn operand(&self, name: &str) -> Option<f64> {
        let f = self.formula;
        let input = f
            .inputs
            .iter()
            .chain(&f.probes)
            .find(|i| i.operand == name)?;
        self.read(&input.source)
    }

    fn literal(&self, lit: Literal) -> Result<f64, String> {
        (self.literals)(lit)
    }

    fn cpuid_matches(&self, _: &str) -> Option<bool> {
        // The CPU identity is matched per alternative (`requires_cpu`)
        // in the config; expressions do not branch on it yet.
        None
    }
}

/// The config's metrics, as operands see them.
struct Names<'a> {
    /// Metric names.
    metrics: BTreeSet<&'a str>,
    /// Every spec of every alternative: parsed, its text, its metric.
    specs: Vec<(&'a Event, &'a str, &'a str)>,
    /// Derived names (written order).
    derived: Vec<&'a str>,
}

impl Names<'_> {
    fn resolve(&self, operand: &str) -> Result<Source, String> {
        if self.metrics.contains(operand) {
            return Ok(Source::Metric(operand.to_string()));
        }
        if self.derived.contains(&operand) {
            return Ok(Source::Derived(operand.to_string()));
        }
        let event_form = operand.replace('@', "/");
        let parsed = spec::parse(&event_form);
        if let Ok(parsed) = &parsed {
            let mut owners: Vec<&str> = self
                .specs
                .iter()
                .filter(|(e, _, _)| *e == parsed)
                .map(|(_, _, m)| *m)
                .collect();
            owners.dedup();
            match owners.as_slice() {
                [one] => return Ok(Source::Metric((*one).to_string())),
                [] => {}
                many => {
                    let many: Vec<String> = many.iter().map(|m| (*m).to_string()).collect();
                    return Err(format!(
                        "`{operand}` is counted by {}: name the metric instead",
                        quote_list(&many)
                    ));
                }
            }
        }
        if operand == DURATION {
            return Ok(Source::Duration);
        }
        let candidates = self
            .metrics
            .iter()
            .copied()
            .chain(self.derived.iter().copied())
            .chain(self.specs.iter().map(|(_, t, _)| *t))
            .chain(std::iter::once(DURATION));
        let near = suggest(operand, candidates);
        let hint = if near.is_empty() {
            // Nothing close: the names of the config that come closest
            // all the same, so the message says what there is.
            let mut all: Vec<&str> = self
                .metrics
                .iter()
                .copied()
                .chain(self.derived.iter().copied())
                .collect();
            let score = |n: &str| strsim::jaro_winkler(operand, n);
            all.sort_by(|a, b| score(b).total_cmp(&score(a)).then(a.cmp(b)));
            let closest: Vec<String> = all.iter().take(3).map(|n| (*n).to_string()).collect();
            let what = if parsed.is_ok() {
                "no metric or derived metric of the config has this name and none of its metrics counts this event"
            } else {
                "no metric or derived metric of the config has this name"
            };
            format!(
                "{what} (the closest names: {}); an operand is a metric of the config, an event spec one of its metrics counts, another derived metric, or `duration_time`",
                quote_list(&closest)
            )
        } else {
            format!("did you mean {}?", quote_list(&near))
        };
        Err(format!("unknown operand `{operand}`: {hint}"))
    }
}

/// Where in the YAML a column of an expression is: the location of the
/// value, moved right by the column (exact for a plain value on one line;
/// quotes shift it, so the message names the column in the expression
/// too).
fn shifted(at: &Location, column: usize) -> (u64, u64) {
    let col = at.column() + u64::try_from(column.saturating_sub(1)).unwrap_or(0);
    (at.line(), col)
}

/// Parses one expression of entry `name` (`what` is `expr` or
/// `threshold`) and resolves its operands.
fn formula(
    names: &Names,
    invalid_at: &dyn Fn((u64, u64), String) -> ConfigError,
    name: &str,
    text: &str,
    at: &Location,
    what: &str,
) -> Result<Formula, ConfigError> {
    let expr = derive::parse(text).map_err(|e| {
        let column = match &e {
            derive::DeriveError::Syntax { column, .. }
            | derive::DeriveError::TooDeep { column } => *column,
            _ => 1,
        };
        // YAML drops ` #...` from a plain value as a comment, so an
        // expression cut short may have lost a literal.
        let cut = column > text.chars().count();
        let hint = if cut {
            " (in YAML ` #` starts a comment: quote an expression that holds a `#` literal)"
        } else {
            ""
        };
        invalid_at(
            shifted(at, column),
            format!("derived metric `{name}`: `{what}`: {e}{hint}"),
        )
    })?;
    let mut inputs = Vec::new();
    for op in expr.operands() {
        let source = names.resolve(&op.name).map_err(|why| {
            invalid_at(
                shifted(at, op.column),
                format!(
                    "derived metric `{name}`: `{what}` column {}: {why}",
                    op.column
                ),
            )
        })?;
        inputs.push(Input {
            operand: op.name.clone(),
            source,
        });
    }
    let probes = expr
        .probes()
        .into_iter()
        .filter_map(|op| {
            let source = names.resolve(&op.name).ok()?;
            Some(Input {
                operand: op.name.clone(),
                source,
            })
        })
        .collect();
    Ok(Formula {
        text: text.to_string(),
        expr,
        inputs,
        probes,
        requires_cpu: None,
    })
}

/// Parses and resolves the alternatives of one `expr:` (one or a list):
/// the first and the rest.
fn alternatives(
    names: &Names,
    invalid_at: &dyn Fn((u64, u64), String) -> ConfigError,
    name: &str,
    expr: &Spanned<RawExprs>,
) -> Result<(Formula, Vec<Formula>), ConfigError> {
    let texts: Vec<(&str, Option<&str>)> = match &expr.value {
        RawExprs::One(t) => vec![(t.as_str(), None)],
        RawExprs::Chain(v) => v.iter().map(RawAlternative::parts).collect(),
    };
    let at = &expr.referenced;
    if texts.is_empty() || texts.len() > MAX_ALTERNATIVES {
        return Err(invalid_at(
            (at.line(), at.column()),
            format!(
                "derived metric `{name}`: `expr` lists {} alternatives; give 1 to {MAX_ALTERNATIVES}",
                texts.len()
            ),
        ));
    }
    let many = texts.len() > 1;
    let mut formulas = Vec::with_capacity(texts.len());
    for (i, (t, guard)) in texts.iter().enumerate() {
        // A list's items share its location: the message names the
        // alternative.
        let what = if many {
            format!("expr` alternative {} `{t}", i + 1)
        } else {
            "expr".to_string()
        };
        let mut f = formula(names, invalid_at, name, t, at, &what)?;
        if let Some(g) = guard {
            f.requires_cpu = Some(CpuRequirement::parse(g).map_err(|e| {
                invalid_at(
                    (at.line(), at.column()),
                    format!("derived metric `{name}`: {e}"),
                )
            })?);
        }
        formulas.push(f);
    }
    let first = formulas.remove(0);
    Ok((first, formulas))
}

/// The names a derived expression may read: the config's event metrics
/// and specs, and the derived metrics (each checked: valid, not an event
/// metric's, not twice).
fn names_of<'a>(
    raw: &'a [RawDerived],
    sets: &'a [SetConfig],
    invalid: &impl Fn(&Location, String) -> ConfigError,
) -> Result<Names<'a>, ConfigError> {
    let mut names = Names {
        metrics: BTreeSet::new(),
        specs: Vec::new(),
        derived: Vec::new(),
    };
    for m in sets.iter().flat_map(|s| &s.events) {
        names.metrics.insert(m.metric.value.as_str());
        for alt in &m.event.value {
            for s in &alt.specs {
                names
                    .specs
                    .push((&s.parsed, s.text.as_str(), m.metric.value.as_str()));
            }
        }
    }
    for r in raw {
        let n = r.name.value.as_str();
        let at = &r.name.referenced;
        if !names::valid_syntax(n) {
            return Err(invalid(
                at,
                format!("derived metric `{n}` is not a valid metric name (letters, digits and `_`, not starting with a digit)"),
            ));
        }
        if names.metrics.contains(n) {
            return Err(invalid(
                at,
                format!("derived metric `{n}` has the name of an event metric of the config: rename one"),
            ));
        }
        if names.derived.contains(&n) {
            return Err(invalid(
                at,
                format!("derived metric `{n}` is defined twice"),
            ));
        }
        names.derived.push(n);
    }
    Ok(names)
}

/// Parses and resolves the section.
pub(super) fn convert(
    raw: Vec<RawDerived>,
    sets: &[SetConfig],
    file: &str,
) -> Result<DerivedTable, ConfigError> {
    let invalid_at = |(line, column): (u64, u64), msg: String| ConfigError::Invalid {
        file: file.into(),
        line,
        column,
        msg,
    };
    let invalid = |at: &Location, msg: String| invalid_at((at.line(), at.column()), msg);
    if let Some(r) = raw.get(MAX_DERIVED) {
        return Err(invalid(
            &r.name.referenced,
            format!("more than {MAX_DERIVED} derived metrics"),
        ));
    }
    let names = names_of(&raw, sets, &invalid)?;
    let mut by_name: BTreeMap<String, Derived> = BTreeMap::new();
    let mut written = Vec::new();
    for r in &raw {
        let name = r.name.value.clone();
        let (f, formulas) = alternatives(&names, &invalid_at, &name, &r.expr)?;
        let threshold = r
            .threshold
            .as_ref()
            .map(|t| {
                formula(
                    &names,
                    &invalid_at,
                    &name,
                    &t.value,
                    &t.referenced,
                    "threshold",
                )
            })
            .transpose()?;
        if let Some(rec) = &r.record {
            if !valid_record(&rec.value) {
                return Err(invalid(
                    &rec.referenced,
                    format!("record `{}` is not a valid Prometheus metric name (letters, digits, `_` and `:`, not starting with a digit)", rec.value),
                ));
            }
        }
        let per_cpu = r.per_cpu.as_ref().is_some_and(|p| p.value);
        if let Some(p) = r.per_cpu.as_ref().filter(|p| p.value) {
            if let Some(g) = std::iter::once(&f)
                .chain(&formulas)
                .find(|g| g.per_cpu().is_none())
            {
                return Err(invalid(
                    &p.referenced,
                    format!("derived metric `{name}` has `per_cpu: true`, but `{}` has no per-CPU form: per CPU, a value is `a / b` of two event metrics or `a / duration_time`", g.text),
                ));
            }
        }
        written.push(name.clone());
        by_name.insert(
            name.clone(),
            Derived {
                name,
                help: r.help.clone(),
                unit: r.unit.clone(),
                group: r.group.clone(),
                formula: f,
                fallbacks: formulas,
                threshold,
                record: r.record.as_ref().map(|x| x.value.clone()),
                per_cpu,
                at: (r.name.referenced.line(), r.name.referenced.column()),
            },
        );
    }
    let order = evaluation_order(&written, &by_name).map_err(|cycle| {
        let first = by_name.get(&cycle[0]).map_or((0, 0), |d| d.at);
        invalid_at(
            first,
            format!(
                "derived metrics read each other in a cycle: {}; a derived metric cannot depend on its own value",
                cycle.join(" → ")
            ),
        )
    })?;
    let metrics = order
        .into_iter()
        .filter_map(|n| by_name.remove(&n))
        .collect();
    Ok(DerivedTable {
        metrics,
        implicit: None,
    })
}

/// Whether `s` is a Prometheus metric name (a recording rule's `record`).
fn valid_record(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The names in an order where each comes after the derived metrics its
/// value reads (written order otherwise); a cycle is returned as its path
/// (`a → b → a`).
fn evaluation_order(
    written: &[String],
    by_name: &BTreeMap<String, Derived>,
) -> Result<Vec<String>, Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let deps = |n: &str| -> Vec<String> {
        by_name.get(n).map_or_else(Vec::new, |d| {
            d.formulas()
                .flat_map(|f| &f.inputs)
                .filter_map(|i| match &i.source {
                    Source::Derived(x) => Some(x.clone()),
                    _ => None,
                })
                .collect()
        })
    };
    let mut mark: BTreeMap<&str, Mark> = written.iter().map(|n| (n.as_str(), Mark::New)).collect();
    let mut out = Vec::new();
    for start in written {
        if mark.get(start.as_str()) != Some(&Mark::New) {
            continue;
        }
        // Iterative depth-first search (the depth is bounded by
        // MAX_DERIVED, but the stack is explicit anyway).
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), deps(start))];
        mark.insert(start.as_str(), Mark::Open);
        while let Some((node, pending)) = stack.last_mut() {
            if let Some(next) = pending.pop() {
                match mark.get(next.as_str()).copied() {
                    Some(Mark::New) => {
                        let key = written.iter().find(|w| **w == next).map(String::as_str);
                        if let Some(k) = key {
                            mark.insert(k, Mark::Open);
                        }
                        let d = deps(&next);
                        stack.push((next, d));
                    }
                    Some(Mark::Open) => {
                        let from = stack.iter().position(|(n, _)| *n == next).unwrap_or(0);
                        let mut cycle: Vec<String> =
                            stack[from..].iter().map(|(n, _)| n.clone()).collect();
                        cycle.push(next);
                        return Err(cycle);
                    }
                    _ => {}
                }
            } else {
                let done = node.clone();
                stack.pop();
                if let Some(k) = written.iter().find(|w| **w == done).map(String::as_str) {
                    mark.insert(k, Mark::Done);
                }
                out.push(done);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
