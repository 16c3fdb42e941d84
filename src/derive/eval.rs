//! The value of an expression over one window, with perf's semantics
//! (`expr.y`, evaluation pass):
//!
//! * `+ - * < >`: NaN when either side is NaN; comparisons give 1 or 0;
//! * `/`: NaN when the divisor is zero (perf: "division by zero", no
//!   value), else IEEE division;
//! * `%`: on the values truncated to integers; NaN when either side is
//!   not finite; an error when the divisor truncates to zero (perf
//!   aborts the whole expression);
//! * `d_ratio(a, b)`: 0 when `b` is zero, else `a / b`;
//! * `|`, `&`, `^`: logical on zero / non-zero. With both sides finite
//!   the result is 1 or 0; with one side finite it decides when it can
//!   (`0 | x` is `x`, `1 | x` is 1, `0 & x` is 0, `1 & x` is `x`);
//!   otherwise NaN (perf's "any value");
//! * `min(a, b)` is `a < b ? a : b`, `max(a, b)` is `a > b ? a : b`
//!   (NaN propagates from the second argument only, as in perf);
//! * `a if c else b`: `b` when `c` is zero, else `a` (a NaN condition
//!   takes `a`). Only the branch taken is evaluated, as perf only
//!   collects the events of the branch a constant condition takes: an
//!   operand missing from the other branch is not an error;
//! * an operand with no value is an error naming it (perf would give
//!   NaN; here the caller says which input is missing);
//! * `has_event(x)`: 1 when `x` has a value, else 0.
//!
//! NaN is never a measurement: the caller shows it as "no value".

use super::{BinOp, DeriveError, Expr, Func, Literal};
use std::collections::BTreeMap;

/// What one window gives an expression.
pub trait Env {
    /// The operand's value in this window (a delta, or another derived
    /// metric's value), or `None` when it has none.
    fn operand(&self, name: &str) -> Option<f64>;

    /// How many counters were summed into the operand (perf's
    /// `source_count`): 1 unless the environment knows better.
    fn source_count(&self, name: &str) -> Option<f64> {
        self.operand(name).map(|_| 1.0)
    }

    /// A literal's value, or why there is none.
    fn literal(&self, lit: Literal) -> Result<f64, String>;

    /// Whether the CPU identity matches `pattern` (`strcmp_cpuid_str`),
    /// `None` when no identity is known.
    fn cpuid_matches(&self, pattern: &str) -> Option<bool>;
}

/// A plain environment: operand values, literal values, and the
/// `strcmp_cpuid_str` answers, each given by hand.
#[derive(Debug, Clone, Default)]
pub struct Values {
    /// Operand name → value.
    pub operands: BTreeMap<String, f64>,
    /// Operand name → `source_count` (1 when absent).
    pub source_counts: BTreeMap<String, f64>,
    /// Literal → value, or why there is none.
    pub literals: BTreeMap<Literal, Result<f64, String>>,
    /// `strcmp_cpuid_str` argument → answer.
    pub cpuids: BTreeMap<String, bool>,
}

impl Values {
    /// An environment with these operands.
    pub fn with<'a>(operands: impl IntoIterator<Item = (&'a str, f64)>) -> Self {
        Values {
            operands: operands
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            ..Values::default()
        }
    }

    /// Gives `lit` the value `v`.
    #[must_use]
    pub fn literal(mut self, lit: Literal, v: f64) -> Self {
        self.literals.insert(lit, Ok(v));
        self
    }
}

impl Env for Values {
    fn operand(&self, name: &str) -> Option<f64> {
        self.operands.get(name).copied()
    }

    fn source_count(&self, name: &str) -> Option<f64> {
        self.operand(name)?;
        Some(self.source_counts.get(name).copied().unwrap_or(1.0))
    }

    fn literal(&self, lit: Literal) -> Result<f64, String> {
        self.literals
            .get(&lit)
            .cloned()
            .unwrap_or_else(|| Err("not given".into()))
    }

    fn cpuid_matches(&self, pattern: &str) -> Option<bool> {
        self.cpuids.get(pattern).copied()
    }
}

fn zero(v: f64) -> bool {
    v == 0.0
}

fn truth(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// The value of `e` in `env` (NaN where perf gives no value; see the
/// module's notes). Recursion is bounded by the parser's depth limit.
pub fn eval(e: &Expr, env: &dyn Env) -> Result<f64, DeriveError> {
    Ok(match e {
        Expr::Number(n) => *n,
        Expr::Literal(l) => env.literal(*l).map_err(|why| DeriveError::Literal {
            literal: l.to_string(),
            why,
        })?,
        Expr::Operand(o) => env
            .operand(&o.name)
            .ok_or_else(|| DeriveError::Missing(o.name.clone()))?,
        Expr::SourceCount(o) => env
            .source_count(&o.name)
            .ok_or_else(|| DeriveError::Missing(o.name.clone()))?,
        Expr::HasEvent(o) => truth(env.operand(&o.name).is_some()),
        Expr::CpuidIs(o) => truth(
            env.cpuid_matches(&o.name)
                .ok_or_else(|| DeriveError::NoCpuid(o.name.clone()))?,
        ),
        Expr::Neg(a) => -eval(a, env)?,
        Expr::Binary(op, a, b) => binary(*op, eval(a, env)?, eval(b, env)?)?,
        Expr::Call(f, a, b) => {
            let (a, b) = (eval(a, env)?, eval(b, env)?);
            match f {
                Func::Min => {
                    if a < b {
                        a
                    } else {
                        b
                    }
                }
                Func::Max => {
                    if a > b {
                        a
                    } else {
                        b
                    }
                }
                Func::DRatio => {
                    if zero(b) {
                        0.0
                    } else {
                        a / b
                    }
                }
            }
        }
        Expr::If {
            then,
            cond,
            otherwise,
        } => {
            if zero(eval(cond, env)?) {
                eval(otherwise, env)?
            } else {
                eval(then, env)?
            }
        }
    })
}

fn binary(op: BinOp, a: f64, b: f64) -> Result<f64, DeriveError> {
    let nan = a.is_nan() || b.is_nan();
    Ok(match op {
        BinOp::Or | BinOp::And | BinOp::Xor => logical(op, a, b),
        _ if nan => f64::NAN,
        BinOp::Lt => truth(a < b),
        BinOp::Gt => truth(a > b),
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => {
            if zero(b) {
                f64::NAN
            } else {
                a / b
            }
        }
        BinOp::Rem => {
            if !a.is_finite() || !b.is_finite() {
                f64::NAN
            } else {
                // Truncation toward zero as C's `(long)` cast; the
                // values are finite, and `as` saturates out of range.
                #[allow(clippy::cast_possible_truncation)]
                let (x, y) = (a.trunc() as i64, b.trunc() as i64);
                if y == 0 {
                    return Err(DeriveError::ModuloByZero);
                }
                #[allow(clippy::cast_precision_loss)]
                let r = x.checked_rem(y).unwrap_or(0) as f64;
                r
            }
        }
    })
}

/// `|`, `&`, `^` with perf's treatment of values that are not finite
/// (its "not a constant"): a finite side decides when it can.
fn logical(op: BinOp, a: f64, b: f64) -> f64 {
    match (a.is_finite(), b.is_finite(), op) {
        (true, true, BinOp::Or) => truth(!zero(a) || !zero(b)),
        (true, true, BinOp::And) => truth(!zero(a) && !zero(b)),
        (true, true, _) => truth(zero(a) != zero(b)),
        (true, false, BinOp::Or) => {
            if zero(a) {
                b
            } else {
                1.0
            }
        }
        (false, true, BinOp::Or) => {
            if zero(b) {
                a
            } else {
                1.0
            }
        }
        (true, false, BinOp::And) => {
            if zero(a) {
                0.0
            } else {
                b
            }
        }
        (false, true, BinOp::And) => {
            if zero(b) {
                0.0
            } else {
                a
            }
        }
        _ => f64::NAN,
    }
}
