//! Constant folding: an expression with its constants combined, so that
//! what perf's formulas and the importer's unit conversions write as
//! `1000000 * ((bytes / 64) * 64 / 1e6 / duration_time)` reads
//! `bytes / duration_time`.
//!
//! Two rewrites, and only these:
//!
//! 1. **A subexpression that reads no operand and no `#` literal** (only
//!    numbers) is replaced by its value, computed by [`super::eval`]
//!    itself, so with perf's semantics (`d_ratio(1, 0)` is 0, `1 < 2` is
//!    1, an `if` takes its branch). It is the value the unfolded
//!    expression gives in every window, bit for bit. A subexpression whose
//!    value is not a finite number (`1 / 0`, `%` by zero) stays as
//!    written, so the evaluator still says why.
//! 2. **Constant factors of a chain of `*` and `/`** are gathered into
//!    one coefficient: the numbers multiplied, the numbers divided by,
//!    each kept as a product (numerator and denominator apart, so `x /
//!    64 * 64` is `64 / 64`, exactly 1), and written once, in front
//!    (`c * x / y`), or not at all when the numerator and denominator
//!    products are equal; a coefficient that is the reciprocal of a
//!    whole number is written as a divisor at the end (`x / 64`), a
//!    ratio of whole numbers as both (`2 * x / 3`). The
//!    other factors keep their order and
//!    grouping; the chain's value is the same real number, and what
//!    changes is only rounding: every factor of the chain is a finite,
//!    non-zero number (a `0`, `inf` or NaN factor is not gathered: `0 *
//!    SLOTS`, perf's way to make a formula read `SLOTS`, stays), so no
//!    division by zero appears or disappears, and each `*` or `/` by a
//!    constant that is removed is one IEEE rounding (half a unit in the
//!    last place) less. With powers of two (`x / 64 * 64`, `4 * (x /
//!    4)`) nothing is rounded at all: the result is exactly `x` unless
//!    `x / c` falls below the normal range (below 2^-1022 · c, which no
//!    count, rate or share reaches). A product of constants that would
//!    overflow or underflow to zero is not gathered.
//!
//! No other identity is used: `x - x`, `x * 0`, `x / x`, reordering of
//! sums and the distribution of a factor over a sum could change which
//! window has a value (a NaN or a division by zero) or cancel digits,
//! and are left alone. Operands, `#` literals, `has_event()` and
//! `source_count()` are never dropped, so a folded expression reads the
//! same inputs.
//!
//! [`to_source`] prints an expression in perf's grammar with only the
//! parentheses precedence needs (the form the importer writes).

use super::{eval, BinOp, Env, Expr, Literal, MAX_DEPTH};

/// `e` with its constants folded (module docs). A tree deeper than
/// [`MAX_DEPTH`] is returned as it is below that depth.
#[must_use]
pub fn fold(e: &Expr) -> Expr {
    fold_at(e, 0)
}

fn fold_at(e: &Expr, depth: usize) -> Expr {
    if depth > MAX_DEPTH {
        return e.clone();
    }
    match e {
        Expr::Binary(BinOp::Mul | BinOp::Div, _, _) => {
            let b = scaled(e, depth).build();
            constant(&b).unwrap_or(b)
        }
        _ => {
            let folded = children(e, depth);
            constant(&folded).unwrap_or(folded)
        }
    }
}

/// `e` with each child folded.
fn children(e: &Expr, depth: usize) -> Expr {
    e.map_children(&|x| fold_at(x, depth + 1))
}

/// An environment with no operands and no literals: an expression that
/// evaluates in it reads numbers only.
struct Nothing;

impl Env for Nothing {
    fn operand(&self, _: &str) -> Option<f64> {
        None
    }
    fn literal(&self, _: Literal) -> Result<f64, String> {
        Err(String::new())
    }
    fn cpuid_matches(&self, _: &str) -> Option<bool> {
        None
    }
}

/// The value of `e` when it reads numbers only and is finite (rewrite 1).
fn constant(e: &Expr) -> Option<Expr> {
    if matches!(e, Expr::Number(_)) {
        return None;
    }
    let mut reads = false;
    e.visit(&mut |x| {
        reads |= !matches!(
            x,
            Expr::Number(_) | Expr::Neg(_) | Expr::Binary(..) | Expr::Call(..) | Expr::If { .. }
        );
    });
    if reads {
        return None;
    }
    match eval(e, &Nothing) {
        Ok(v) if v.is_finite() => Some(Expr::Number(v)),
        _ => None,
    }
}

/// A chain of `*` and `/` as `p / q * num / den`: `p` and `q` the
/// products of its constant factors (finite, non-zero), `num` and `den`
/// the rest (`None`: 1).
struct Scaled {
    p: f64,
    q: f64,
    num: Option<Expr>,
    den: Option<Expr>,
}

fn usable(c: f64) -> bool {
    c.is_finite() && c != 0.0
}

impl Scaled {
    fn opaque(e: Expr) -> Scaled {
        Scaled {
            p: 1.0,
            q: 1.0,
            num: Some(e),
            den: None,
        }
    }

    fn is_constant(&self) -> bool {
        self.num.is_none() && self.den.is_none()
    }

    /// The non-constant part alone (`num / den`, `1 / den`), or `None`
    /// for a constant.
    fn rest(self) -> Option<Expr> {
        match (self.num, self.den) {
            (None, None) => None,
            (Some(n), None) => Some(n),
            (n, Some(d)) => Some(Expr::Binary(
                BinOp::Div,
                Box::new(n.unwrap_or(Expr::Number(1.0))),
                Box::new(d),
            )),
        }
    }

    /// Written out: the coefficient in front (`64 * x / y`), or as a
    /// divisor at the end when it is the reciprocal of a whole number
    /// (`x / y / 64`, `x / 64`), or as both products when they are
    /// whole numbers (`2 * x / 3`), or none when it is 1.
    fn build(self) -> Expr {
        let c = if self.p == self.q {
            1.0
        } else {
            self.p / self.q
        };
        let r = self.q / self.p;
        let div = |e: Expr, d: Expr| Expr::Binary(BinOp::Div, Box::new(e), Box::new(d));
        match (self.num, self.den) {
            (None, None) => Expr::Number(c),
            (None, Some(d)) => div(Expr::Number(c), d),
            (Some(n), den) => {
                let whole = |x: f64| x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15;
                let (front, back) = if c == 1.0 {
                    (None, None)
                } else if whole(c) {
                    (Some(c), None)
                } else if whole(r) {
                    (None, Some(r))
                } else if whole(self.p) && whole(self.q) {
                    (Some(self.p), Some(self.q))
                } else {
                    (Some(c), None)
                };
                let mut e = match front {
                    Some(c) => in_front(c, n),
                    None => n,
                };
                if let Some(d) = den {
                    e = div(e, d);
                }
                match back {
                    Some(r) => div(e, Expr::Number(r)),
                    None => e,
                }
            }
        }
    }
}

/// `c * e`, the factor put at the head of `e`'s chain (`c * x / y`
/// rather than `c * (x / y)`: the same real number).
fn in_front(c: f64, e: Expr) -> Expr {
    match e {
        Expr::Binary(op @ (BinOp::Mul | BinOp::Div), a, b) => {
            Expr::Binary(op, Box::new(in_front(c, *a)), b)
        }
        other => Expr::Binary(BinOp::Mul, Box::new(Expr::Number(c)), Box::new(other)),
    }
}

/// `e` as a [`Scaled`] chain (rewrite 2), its other parts folded.
fn scaled(e: &Expr, depth: usize) -> Scaled {
    if depth > MAX_DEPTH {
        return Scaled::opaque(e.clone());
    }
    match e {
        Expr::Binary(op @ (BinOp::Mul | BinOp::Div), a, b) => {
            let (x, y) = (scaled(a, depth + 1), scaled(b, depth + 1));
            let (p, q) = if *op == BinOp::Mul {
                (x.p * y.p, x.q * y.q)
            } else {
                (x.p * y.q, x.q * y.p)
            };
            if !usable(p) || !usable(q) {
                return Scaled::opaque(Expr::Binary(*op, Box::new(x.build()), Box::new(y.build())));
            }
            let (num, den) = match (*op, x.is_constant(), y.is_constant()) {
                (_, _, true) => (x.num, x.den),
                (BinOp::Mul, true, false) => (y.num, y.den),
                (_, true, false) => (None, y.rest()),
                (BinOp::Mul, false, false) => (
                    Some(Expr::Binary(
                        BinOp::Mul,
                        Box::new(x.rest().unwrap_or(Expr::Number(1.0))),
                        Box::new(y.rest().unwrap_or(Expr::Number(1.0))),
                    )),
                    None,
                ),
                (_, false, false) => (x.rest(), y.rest()),
            };
            Scaled { p, q, num, den }
        }
        other => match fold_at(other, depth) {
            Expr::Number(c) if usable(c) => Scaled {
                p: c,
                q: 1.0,
                num: None,
                den: None,
            },
            folded => Scaled::opaque(folded),
        },
    }
}

/// Prints `e` in perf's grammar with only the parentheses it needs
/// (left-associative operators, perf's precedence); it parses back to
/// the same tree, but for a negative number, which reads back as unary
/// minus on its magnitude (the same value).
#[must_use]
pub fn to_source(e: &Expr) -> String {
    let mut s = String::new();
    write(&mut s, e, 0);
    s
}

/// How tightly `e` binds: 0 for `if else`, the operator's precedence,
/// 7 for unary minus, 8 for what never needs parentheses.
fn binding(e: &Expr) -> u8 {
    match e {
        Expr::If { .. } => 0,
        Expr::Binary(op, _, _) => op.precedence(),
        Expr::Neg(_) => 7,
        Expr::Number(n) if *n < 0.0 || (*n == 0.0 && n.is_sign_negative()) => 7,
        _ => 8,
    }
}

fn child(s: &mut String, e: &Expr, at_least: u8, depth: usize) {
    if binding(e) < at_least {
        s.push('(');
        write(s, e, depth + 1);
        s.push(')');
    } else {
        write(s, e, depth + 1);
    }
}

fn write(s: &mut String, e: &Expr, depth: usize) {
    if depth > MAX_DEPTH {
        // Fully parenthesised below the limit (the parser refuses such a
        // tree anyway).
        s.push_str(&e.to_string());
        return;
    }
    match e {
        Expr::Number(n) if binding(e) == 7 => {
            s.push('-');
            s.push_str(&Expr::Number(-n).to_string());
        }
        Expr::Neg(a) => {
            s.push('-');
            child(s, a, 8, depth);
        }
        Expr::Binary(op, a, b) => {
            let p = op.precedence();
            child(s, a, p, depth);
            s.push(' ');
            s.push(op.symbol());
            s.push(' ');
            child(s, b, p + 1, depth);
        }
        Expr::Call(func, a, b) => {
            s.push_str(func.name());
            s.push('(');
            write(s, a, depth + 1);
            s.push_str(", ");
            write(s, b, depth + 1);
            s.push(')');
        }
        Expr::If {
            then,
            cond,
            otherwise,
        } => {
            child(s, then, 1, depth);
            s.push_str(" if ");
            child(s, cond, 1, depth);
            s.push_str(" else ");
            write(s, otherwise, depth + 1);
        }
        other => s.push_str(&other.to_string()),
    }
}
