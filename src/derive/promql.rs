//! An expression as PromQL over `rate()` of the exported counters: how
//! `perf-exporter rules` writes a derived metric as a recording rule.
//!
//! A derived value is computed from one window's counter increases and
//! its length (`duration_time`). PromQL gives each counter's increase
//! over its range divided by that range (`rate()`), so the translation
//! is exact when the expression does not change if every increase and
//! the window's length are multiplied by one factor: ratios of counts
//! (`a / b`, `1000 * a / b`) and counts over the window (`a /
//! duration_time`), and sums and differences of such terms. There the
//! window's length becomes 1 and each count its summed rate.
//!
//! `d_ratio(a, b)` (0 when `b` is 0) is `(a / (b != 0) or 0 * b)`: the
//! comparison drops the series whose divisor is 0, and `or` gives 0 for
//! them (its divisor must read a counter: a constant one is refused).
//!
//! What the translation refuses, with why (the exporter evaluates those:
//! `stat`, the live view, OTLP): an expression whose value depends on the
//! window's length (a plain count, `a * b`, `a + 1`), and the parts
//! PromQL has no counterpart of here: `if else`, comparisons and logical
//! operators, `min`/`max`, `%`, `source_count`, `has_event`,
//! `strcmp_cpuid_str`, and the `#` literals (facts of the host that the
//! exporter would have to supply).
//!
//! The expression is constant-folded first ([`super::fold`]): the rule
//! reads `rate(x)` where perf's formula and the importer's unit
//! conversion wrote `1000000 * (x / 64 * 64 / 1e6 / duration_time)`.
//!
//! A division by zero (other than `d_ratio`'s) gives PromQL's `NaN` or
//! `±Inf` where the exporter gives no value.

use super::{BinOp, Expr, Func, Operand, MAX_DEPTH};

/// What an operand of the expression reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leaf {
    /// An exported counter family, by its name.
    Counter(String),
    /// The window's length (`duration_time`).
    Duration,
}

/// How the counters are selected and summed.
#[derive(Debug, Clone)]
pub struct Rates<'a> {
    /// The labels kept (`job, instance`).
    pub by: &'a str,
    /// The selector's matchers (`job="perf-exporter"`).
    pub selector: &'a str,
    /// The range of `rate()` (`5m`).
    pub range: &'a str,
}

/// `e` with every operand replaced by what `f` gives (another metric's
/// expression inlined, an operand renamed). Recursion is bounded by the
/// parser's depth limit; `f` bounds its own (the levels it inlines).
pub fn substitute(
    e: &Expr,
    f: &mut dyn FnMut(&Operand) -> Result<Expr, String>,
) -> Result<Expr, String> {
    Ok(match e {
        Expr::Operand(o) => f(o)?,
        Expr::Neg(a) => Expr::Neg(Box::new(substitute(a, f)?)),
        Expr::Binary(op, a, b) => Expr::Binary(
            *op,
            Box::new(substitute(a, f)?),
            Box::new(substitute(b, f)?),
        ),
        Expr::Call(func, a, b) => Expr::Call(
            *func,
            Box::new(substitute(a, f)?),
            Box::new(substitute(b, f)?),
        ),
        Expr::If {
            then,
            cond,
            otherwise,
        } => Expr::If {
            then: Box::new(substitute(then, f)?),
            cond: Box::new(substitute(cond, f)?),
            otherwise: Box::new(substitute(otherwise, f)?),
        },
        other => other.clone(),
    })
}

/// The power of the window's scale in `e`'s value (0: the same whatever
/// the window; 1: a count), or why PromQL cannot give it.
fn degree(e: &Expr, leaf: &dyn Fn(&str) -> Option<Leaf>, depth: usize) -> Result<i32, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nests deeper than {MAX_DEPTH} levels"));
    }
    let d = |x: &Expr| degree(x, leaf, depth + 1);
    match e {
        Expr::Number(_) => Ok(0),
        Expr::Operand(o) => leaf(&o.name)
            .map(|_| 1)
            .ok_or_else(|| format!("`{}` is not an exported counter", o.name)),
        Expr::Neg(a) => d(a),
        Expr::Binary(BinOp::Mul, a, b) => Ok(d(a)? + d(b)?),
        Expr::Binary(BinOp::Div, a, b) => Ok(d(a)? - d(b)?),
        // `x + 0 * y` (perf's way to make a metric read `y`): a zero term
        // takes the other's scale.
        Expr::Binary(BinOp::Add | BinOp::Sub, a, b) if is_zero_product(b) => d(a),
        Expr::Binary(BinOp::Add, a, b) if is_zero_product(a) => d(b),
        Expr::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) => {
            let (x, y) = (d(a)?, d(b)?);
            if x == y {
                Ok(x)
            } else {
                Err(format!(
                    "`{}` adds terms that scale differently with the window",
                    Expr::Binary(*op, a.clone(), b.clone())
                ))
            }
        }
        Expr::Binary(op, _, _) => Err(format!(
            "the operator `{}` has no rate form here",
            op.symbol()
        )),
        Expr::Call(Func::DRatio, a, b) => {
            if reads_counter(b, leaf) {
                Ok(d(a)? - d(b)?)
            } else {
                Err("`d_ratio()` of a divisor that reads no counter has no rate form here".into())
            }
        }
        // `max(x, n)` and `min(x, n)` with a number: `clamp_min`/`clamp_max`.
        Expr::Call(Func::Max | Func::Min, a, b) if clamp(a, b).is_some() => {
            clamp(a, b).map_or(Ok(0), |(x, _)| d(x))
        }
        Expr::Call(f, _, _) => Err(format!("`{}()` has no rate form here", f.name())),
        Expr::If { .. } => Err("`if else` has no rate form here".into()),
        Expr::Literal(l) => Err(format!("the literal `{l}` is a fact the exporter supplies")),
        Expr::SourceCount(_) => Err("`source_count()` is known to the exporter only".into()),
        Expr::HasEvent(_) => Err("`has_event()` is known to the exporter only".into()),
        Expr::CpuidIs(_) => Err("`strcmp_cpuid_str()` is known to the exporter only".into()),
    }
}

/// Whether `e` is `0 * x` or `x * 0`: zero whatever `x` scales as.
fn is_zero_product(e: &Expr) -> bool {
    matches!(e, Expr::Binary(BinOp::Mul, a, b)
        if matches!(**a, Expr::Number(n) if n == 0.0) || matches!(**b, Expr::Number(n) if n == 0.0))
}

/// The operand and the number of `max(x, n)`/`min(x, n)` (either order).
fn clamp<'e>(a: &'e Expr, b: &'e Expr) -> Option<(&'e Expr, f64)> {
    match (a, b) {
        (x, Expr::Number(n)) | (Expr::Number(n), x) => Some((x, *n)),
        _ => None,
    }
}

/// Whether `e` reads an exported counter (a PromQL vector, not a
/// number).
pub fn reads_counter(e: &Expr, leaf: &dyn Fn(&str) -> Option<Leaf>) -> bool {
    e.operands()
        .iter()
        .any(|o| matches!(leaf(&o.name), Some(Leaf::Counter(_))))
}

/// `e` as PromQL over the rates of the counters `leaf` names, each summed
/// `by` the labels kept, or why it has no such form (module docs). A
/// top-level division is written over three lines.
pub fn to_promql(
    e: &Expr,
    leaf: &dyn Fn(&str) -> Option<Leaf>,
    rates: &Rates<'_>,
) -> Result<String, String> {
    // Constants folded first: `1000000 * (x * 64 / 1e6 / duration_time)`
    // is the rate of `x` alone.
    let folded = super::fold(e);
    let e = &folded;
    match degree(e, leaf, 0)? {
        0 => {}
        1 => return Err("its value is a count over the window, not a rate or a ratio".into()),
        _ => return Err("its value scales with the window's length".into()),
    }
    let w = Writer { leaf, rates };
    Ok(match e {
        Expr::Binary(BinOp::Div, a, b) if !w.is_duration(b) => {
            let p = BinOp::Div.precedence();
            format!("{}\n/\n{}", w.child(a, p, false), w.child(b, p, true))
        }
        _ => w.write(e),
    })
}

struct Writer<'a> {
    leaf: &'a dyn Fn(&str) -> Option<Leaf>,
    rates: &'a Rates<'a>,
}

impl Writer<'_> {
    fn is_duration(&self, e: &Expr) -> bool {
        matches!(e, Expr::Operand(o) if (self.leaf)(&o.name) == Some(Leaf::Duration))
    }

    /// `e` under an operator of precedence `parent` (in parentheses when
    /// it binds less tightly, or as tightly on the right).
    fn child(&self, e: &Expr, parent: u8, right: bool) -> String {
        match e {
            // `x / duration_time` is written as `x` alone.
            Expr::Binary(BinOp::Div, a, b) if self.is_duration(b) => self.child(a, parent, right),
            Expr::Binary(op, _, _)
                if op.precedence() < parent || (right && op.precedence() == parent) =>
            {
                format!("({})", self.write(e))
            }
            _ => self.write(e),
        }
    }

    fn write(&self, e: &Expr) -> String {
        match e {
            Expr::Number(n) => format!("{n}"),
            Expr::Operand(o) => match (self.leaf)(&o.name) {
                Some(Leaf::Counter(m)) => format!(
                    "sum by ({}) (rate({m}{{{}}}[{}]))",
                    self.rates.by, self.rates.selector, self.rates.range
                ),
                // The window is 1 s long once counts are rates.
                _ => "1".into(),
            },
            Expr::Neg(a) => format!("-{}", self.child(a, u8::MAX, false)),
            Expr::Binary(BinOp::Div, a, b) if self.is_duration(b) => self.write(a),
            Expr::Binary(op, a, b) => {
                let p = op.precedence();
                format!(
                    "{} {} {}",
                    self.child(a, p, false),
                    op.symbol(),
                    self.child(b, p, true)
                )
            }
            // 0 where the divisor is 0: the comparison drops that series,
            // `or` puts 0 in its place (module docs).
            Expr::Call(Func::DRatio, a, b) => {
                let (div, mul) = (BinOp::Div.precedence(), BinOp::Mul.precedence());
                format!(
                    "({} / ({} != 0) or 0 * {})",
                    self.child(a, div, false),
                    self.write(b),
                    self.child(b, mul, true)
                )
            }
            // PromQL's clamps keep a NaN where perf's `max(NaN, 0)` gives 0:
            // a window with no slots has no share either way.
            Expr::Call(f @ (Func::Max | Func::Min), a, b) if clamp(a, b).is_some() => {
                let (x, n) = clamp(a, b).unwrap_or((a, 0.0));
                let name = if *f == Func::Max {
                    "clamp_min"
                } else {
                    "clamp_max"
                };
                format!("{name}({}, {n})", self.write(x))
            }
            // `degree` refused the rest.
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive::parse;

    fn leaf(n: &str) -> Option<Leaf> {
        match n {
            "duration_time" => Some(Leaf::Duration),
            "x" => None,
            _ => Some(Leaf::Counter(format!("perf_{n}_total"))),
        }
    }

    const R: Rates<'static> = Rates {
        by: "job, instance",
        selector: "job=\"p\"",
        range: "5m",
    };

    fn q(src: &str) -> Result<String, String> {
        to_promql(&parse(src).unwrap(), &leaf, &R)
    }

    fn rate(m: &str) -> String {
        format!("sum by (job, instance) (rate(perf_{m}_total{{job=\"p\"}}[5m]))")
    }

    #[test]
    fn ratios_and_rates() {
        let (a, b, c) = (rate("a"), rate("b"), rate("c"));
        assert_eq!(q("a / b").unwrap(), format!("{a}\n/\n{b}"));
        assert_eq!(q("1e3 * a / b").unwrap(), format!("1000 * {a}\n/\n{b}"));
        assert_eq!(q("a / duration_time").unwrap(), a);
        assert_eq!(q("a / (b + c)").unwrap(), format!("{a}\n/\n({b} + {c})"));
        assert_eq!(q("(a - b) / c").unwrap(), format!("({a} - {b})\n/\n{c}"));
        assert_eq!(
            q("a / b - c / b").unwrap(),
            format!("{a} / {b} - {c} / {b}")
        );
        assert_eq!(q("(a + b) / duration_time").unwrap(), format!("{a} + {b}"));
        assert_eq!(q("-(a / b)").unwrap(), format!("-({a} / {b})"));
        // d_ratio: 0 where the divisor is 0.
        assert_eq!(
            q("d_ratio(a, b)").unwrap(),
            format!("({a} / ({b} != 0) or 0 * {b})")
        );
        // Constants folded first: `6 * (b / 6)` is `b`.
        assert_eq!(
            q("1 - d_ratio(a - c, 6 * (b / 6))").unwrap(),
            format!("1 - (({a} - {c}) / ({b} != 0) or 0 * {b})")
        );
        assert_eq!(
            q("1000000 * ((a / 64) * 64 / 1e6 / duration_time)").unwrap(),
            a
        );
        assert_eq!(q("a / (4 * (b / 4))").unwrap(), format!("{a}\n/\n{b}"));
    }

    /// perf's `+ 0*SLOTS` and `max(x, 0)` (Alder Lake's top-down level 1)
    /// have PromQL forms: the zero term keeps the ratio's scale, the
    /// number bound is a clamp.
    #[test]
    fn zero_terms_and_number_bounds_have_promql_forms() {
        assert_eq!(
            q("a / b + 0 * b").unwrap(),
            format!("{} / {} + 0 * {}", rate("a"), rate("b"), rate("b"))
        );
        assert_eq!(
            q("max(1 - a / b, 0)").unwrap(),
            format!("clamp_min(1 - {} / {}, 0)", rate("a"), rate("b"))
        );
        assert_eq!(
            q("min(a / b, 1)").unwrap(),
            format!("clamp_max({} / {}, 1)", rate("a"), rate("b"))
        );
    }

    #[test]
    fn what_promql_cannot_give_says_why() {
        for (src, why) in [
            ("a", "a count over the window"),
            ("a * b", "scales with the window"),
            ("a + 1", "scale differently"),
            ("a / b if a > b else 0", "`if else`"),
            (
                "d_ratio(a, 4)",
                "`d_ratio()` of a divisor that reads no counter",
            ),
            ("d_ratio(a, b) * a", "a count over the window"),
            ("min(a, b)", "`min()`"),
            ("a / b * #num_cores", "`#num_cores`"),
            ("source_count(a)", "`source_count()`"),
            ("x / a", "`x` is not an exported counter"),
        ] {
            let e = q(src).unwrap_err();
            assert!(e.contains(why), "{src}: {e}");
        }
    }

    #[test]
    fn substitution_inlines_and_renames() {
        let e = parse("ipc * 2").unwrap();
        let inner = parse("instructions / cycles").unwrap();
        let got = substitute(&e, &mut |o| {
            if o.name == "ipc" {
                substitute(&inner, &mut |o| {
                    Ok(Expr::Operand(Operand {
                        name: format!("{}_n", o.name),
                        column: o.column,
                    }))
                })
            } else {
                Err("unknown".into())
            }
        })
        .unwrap();
        assert_eq!(got.to_string(), "((instructions_n / cycles_n) * 2)");
    }
}
