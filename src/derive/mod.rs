//! Derived metrics in perf's metric-expression language: the language
//! of the `MetricExpr` strings in the kernel's
//! `tools/perf/pmu-events/arch/**/*metrics*.json` and of `perf stat -M`
//! (`tools/perf/util/expr.y` and `expr.l`).
//!
//! ```text
//! expr if cond else expr          lowest; the else part may be another `if`
//! |   ^   &                       logical or, xor, and (on zero / non-zero)
//! <   >                           comparisons (1 or 0); perf has no `==`, `<=`, `!`
//! +   -                           \
//! *   /   %                        } left-associative, usual precedence
//! -x                              unary minus, tightest
//! min(a, b)  max(a, b)  d_ratio(a, b)
//! source_count(ID)  has_event(ID)  strcmp_cpuid_str(ID)
//! 12  1.5  .5  5.  1e3  2.5e-3    numbers: a lowercase `e` and an optional `-`;
//!                                 perf has no `k`/`M` suffixes and no `E`
//! #smt_on  #num_cpus_online …     literals: facts of the host, not counts
//! instructions  duration_time     operands: events and other metrics
//! cpu@event=0x3c\,umask=1@        `@` stands for `/`; `\-`, `\,`, `\=` escape
//! topdown\-retiring               the characters that would end a name
//! ```
//!
//! The lexer takes the longest match, as flex does: `1e3x` is one name,
//! `maxx` is a name, `max(` the function. A name is made of letters,
//! digits and `_ . : @ ?` plus the escapes; a literal of `#` then
//! letters, digits and `_ . -` (so `#smt_on-1` is one, unknown, literal:
//! write `#smt_on - 1`). Where perf silently skips a character it does
//! not know (`=`, `!`, `$`), this parser refuses it with its column.
//!
//! The values follow perf (`expr.y`) and are documented on [`eval`]:
//! division by zero gives NaN (not a measurement), `d_ratio` gives 0,
//! `%` by zero is an error, an `if` evaluates only the branch it takes.
//!
//! A leaf of the pipeline: it depends on nothing else of the crate. The
//! configuration (`derived:`) parses with it; the stages that hold one
//! window's deltas evaluate with it.
//!
//! [`fold`] combines an expression's constants (the rewrites it allows,
//! and why they change no value beyond rounding, are in its module);
//! the importer writes and the recording rules are generated from the
//! folded form.
//!
//! Input is hostile: an expression is at most [`MAX_LEN`] bytes and its
//! tree at most [`MAX_DEPTH`] deep (parentheses, chains of operators and
//! `if`s all count), so parsing, printing and evaluating use bounded
//! stack.

mod eval;
mod fold;
mod lex;
mod parse;
pub mod promql;
#[cfg(test)]
mod tests;

pub use eval::{eval, Env, Values};
pub use fold::{fold, to_source};
pub use parse::parse;

/// `src` with the names `f` maps renamed, the rest kept as written
/// (spacing, numbers, literals): how an expression written against one
/// set of names (perf's event names) is carried over to another (the
/// config's metric names). `f` sees each name with its escapes removed;
/// a name it maps to `None` is kept.
pub fn rename(src: &str, f: &mut dyn FnMut(&str) -> Option<String>) -> Result<String, DeriveError> {
    if src.len() > MAX_LEN {
        return Err(DeriveError::TooLong { len: src.len() });
    }
    lex::rename(src, f)
}

use std::fmt;

/// The longest expression accepted, in bytes (perf's longest published
/// formulas are under 4 KiB).
pub const MAX_LEN: usize = 16 * 1024;

/// The deepest expression tree accepted (perf's published formulas stay
/// under 40).
pub const MAX_DEPTH: usize = 128;

/// Why an expression does not parse or does not evaluate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeriveError {
    /// Not in perf's grammar; `column` is 1-based, in characters.
    #[error("column {column}: {msg}")]
    Syntax {
        /// Where (1-based, characters).
        column: usize,
        /// What is wrong and what to write instead.
        msg: String,
    },
    /// Longer than [`MAX_LEN`].
    #[error("the expression is {len} bytes long; at most {MAX_LEN} are accepted")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Deeper than [`MAX_DEPTH`].
    #[error("column {column}: the expression nests deeper than {MAX_DEPTH} levels")]
    TooDeep {
        /// Where the limit was reached.
        column: usize,
    },
    /// An operand without a value in this window.
    #[error("`{0}` has no value")]
    Missing(String),
    /// A `#` literal this host (or this exporter) cannot give.
    #[error("the literal `{literal}` has no value: {why}")]
    Literal {
        /// As written (`#slots`).
        literal: String,
        /// Why, and what to do.
        why: String,
    },
    /// `strcmp_cpuid_str(..)` without a CPU identity to compare.
    #[error("`strcmp_cpuid_str({0})`: no CPU identity is known to compare with")]
    NoCpuid(String),
    /// `a % b` where `b` truncates to zero (perf aborts the expression).
    #[error("`%` by zero (perf gives no value either)")]
    ModuloByZero,
    /// The value is NaN: a division by zero in this window, or an input
    /// that is itself undefined.
    #[error("no value in this window (a division by zero, or an input without a value)")]
    Undefined,
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `|`: 1 when either side is non-zero.
    Or,
    /// `^`: 1 when exactly one side is non-zero.
    Xor,
    /// `&`: 1 when both sides are non-zero.
    And,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (NaN on a zero divisor)
    Div,
    /// `%` on integers (truncated)
    Rem,
}

impl BinOp {
    /// Binding strength, perf's `%left` order: higher binds tighter.
    pub(crate) fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::Xor => 2,
            BinOp::And => 3,
            BinOp::Lt | BinOp::Gt => 4,
            BinOp::Add | BinOp::Sub => 5,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 6,
        }
    }

    fn symbol(self) -> char {
        match self {
            BinOp::Or => '|',
            BinOp::Xor => '^',
            BinOp::And => '&',
            BinOp::Lt => '<',
            BinOp::Gt => '>',
            BinOp::Add => '+',
            BinOp::Sub => '-',
            BinOp::Mul => '*',
            BinOp::Div => '/',
            BinOp::Rem => '%',
        }
    }
}

/// A two-argument function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    /// `min(a, b)`: `a` when `a < b`, else `b` (so `min(NaN, 1)` is 1
    /// and `min(1, NaN)` NaN, as in perf).
    Min,
    /// `max(a, b)`: `a` when `a > b`, else `b`.
    Max,
    /// `d_ratio(a, b)`: `a / b`, 0 when `b` is 0.
    DRatio,
}

impl Func {
    fn name(self) -> &'static str {
        match self {
            Func::Min => "min",
            Func::Max => "max",
            Func::DRatio => "d_ratio",
        }
    }
}

/// A `#` literal: a fact of the host perf reads once (its tool PMU's
/// constant events, and `#core_wide`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Literal {
    /// `#smt_on`: 1 when SMT is active.
    SmtOn,
    /// `#num_cpus`: CPUs present.
    NumCpus,
    /// `#num_cpus_online`: CPUs online.
    NumCpusOnline,
    /// `#num_cores`: cores (online).
    NumCores,
    /// `#num_dies`: dies (online).
    NumDies,
    /// `#num_packages`: packages (sockets, online).
    NumPackages,
    /// `#slots`: pipeline slots per cycle (arm64 only in perf).
    Slots,
    /// `#system_tsc_freq`: the TSC frequency, in Hz (x86).
    SystemTscFreq,
    /// `#has_pmem`: 1 when the firmware lists persistent memory.
    HasPmem,
    /// `#core_wide`: 1 when counting covers whole cores (system-wide, or
    /// every CPU of each core).
    CoreWide,
}

impl Literal {
    /// Every literal, in the order of [`Literal::name`]s.
    pub const ALL: [Literal; 10] = [
        Literal::SmtOn,
        Literal::NumCpus,
        Literal::NumCpusOnline,
        Literal::NumCores,
        Literal::NumDies,
        Literal::NumPackages,
        Literal::Slots,
        Literal::SystemTscFreq,
        Literal::HasPmem,
        Literal::CoreWide,
    ];

    /// As written after the `#`.
    pub fn name(self) -> &'static str {
        match self {
            Literal::SmtOn => "smt_on",
            Literal::NumCpus => "num_cpus",
            Literal::NumCpusOnline => "num_cpus_online",
            Literal::NumCores => "num_cores",
            Literal::NumDies => "num_dies",
            Literal::NumPackages => "num_packages",
            Literal::Slots => "slots",
            Literal::SystemTscFreq => "system_tsc_freq",
            Literal::HasPmem => "has_pmem",
            Literal::CoreWide => "core_wide",
        }
    }

    /// The literal named `s` (without the `#`; case-insensitive, as perf).
    pub fn from_name(s: &str) -> Option<Literal> {
        Literal::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.name())
    }
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A number as written.
    Number(f64),
    /// A `#` literal.
    Literal(Literal),
    /// An event or metric name, escapes removed (`topdown-retiring`,
    /// `cpu@event=0x3c@`, `duration_time`), and its 1-based column.
    Operand(Operand),
    /// `source_count(ID)`: how many counters were summed into `ID`.
    SourceCount(Operand),
    /// `has_event(ID)`: 1 when `ID` has a value here, else 0.
    HasEvent(Operand),
    /// `strcmp_cpuid_str(ID)`: 1 when the CPU identity matches `ID`.
    CpuidIs(Operand),
    /// `-x`
    Neg(Box<Expr>),
    /// `a op b`
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `f(a, b)`
    Call(Func, Box<Expr>, Box<Expr>),
    /// `then if cond else otherwise`
    If {
        /// The value when `cond` is non-zero (NaN counts as non-zero).
        then: Box<Expr>,
        /// The condition.
        cond: Box<Expr>,
        /// The value when `cond` is zero.
        otherwise: Box<Expr>,
    },
}

/// A name in an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operand {
    /// The name, escapes removed.
    pub name: String,
    /// Where it starts (1-based, characters).
    pub column: usize,
}

impl Operand {
    /// The name as an event spec of the crate's grammar: perf writes
    /// `pmu@terms@` for `pmu/terms/` (a `/` would divide).
    pub fn event_form(&self) -> String {
        self.name.replace('@', "/")
    }
}

impl Expr {
    /// Every name the value depends on (operands and `source_count`
    /// arguments, not `has_event` probes), in order of appearance,
    /// each once.
    pub fn operands(&self) -> Vec<&Operand> {
        let mut out: Vec<&Operand> = Vec::new();
        self.visit(&mut |e| {
            if let Expr::Operand(o) | Expr::SourceCount(o) = e {
                if !out.iter().any(|p| p.name == o.name) {
                    out.push(o);
                }
            }
        });
        out
    }

    /// The names `has_event(..)` probes, each once.
    pub fn probes(&self) -> Vec<&Operand> {
        let mut out: Vec<&Operand> = Vec::new();
        self.visit(&mut |e| {
            if let Expr::HasEvent(o) = e {
                if !out.iter().any(|p| p.name == o.name) {
                    out.push(o);
                }
            }
        });
        out
    }

    /// Every literal used, each once.
    pub fn literals(&self) -> Vec<Literal> {
        let mut out = Vec::new();
        self.visit(&mut |e| {
            if let Expr::Literal(l) = e {
                if !out.contains(l) {
                    out.push(*l);
                }
            }
        });
        out
    }

    /// `self` with each `#` literal that `value` gives replaced by that
    /// number (a host's literals are constant: folded in once, when the
    /// config is resolved on the host); the others stay.
    #[must_use]
    pub fn fold_literals(&self, value: &dyn Fn(Literal) -> Option<f64>) -> Expr {
        match self {
            Expr::Literal(l) => value(*l).map_or(Expr::Literal(*l), Expr::Number),
            other => other.map_children(&|e| e.fold_literals(value)),
        }
    }

    /// `self` with `f` applied to each direct child (a leaf is cloned as
    /// it is): the one shape of a rewrite that rebuilds the tree
    /// ([`Expr::fold_literals`], `fold.rs`).
    #[must_use]
    pub fn map_children(&self, f: &dyn Fn(&Expr) -> Expr) -> Expr {
        let g = |e: &Expr| Box::new(f(e));
        match self {
            Expr::Neg(a) => Expr::Neg(g(a)),
            Expr::Binary(op, a, b) => Expr::Binary(*op, g(a), g(b)),
            Expr::Call(func, a, b) => Expr::Call(*func, g(a), g(b)),
            Expr::If {
                then,
                cond,
                otherwise,
            } => Expr::If {
                then: g(then),
                cond: g(cond),
                otherwise: g(otherwise),
            },
            other => other.clone(),
        }
    }

    /// Pre-order walk (recursion bounded by [`MAX_DEPTH`]).
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Neg(a) => a.visit(f),
            Expr::Binary(_, a, b) | Expr::Call(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Expr::If {
                then,
                cond,
                otherwise,
            } => {
                then.visit(f);
                cond.visit(f);
                otherwise.visit(f);
            }
            _ => {}
        }
    }
}

/// Writes a name so that it lexes back as the same name: the characters
/// perf lets a name hold only escaped (`-`, `,`, `=`) get a backslash.
fn write_name(f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
    for c in name.chars() {
        if matches!(c, '-' | ',' | '=') {
            write!(f, "\\")?;
        }
        write!(f, "{c}")?;
    }
    Ok(())
}

/// Prints in perf's grammar, every operation in parentheses (so the
/// printed form shows how the expression was grouped, and parses back to
/// the same tree).
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Number(n) => {
                // Both forms are perf's number syntax (digits, `.`, a
                // lowercase `e` and `-`) and read back exactly; the plain
                // one unless it is long (`1e300`).
                let plain = n.to_string();
                if plain.len() <= 24 {
                    write!(f, "{plain}")
                } else {
                    write!(f, "{n:e}")
                }
            }
            Expr::Literal(l) => write!(f, "{l}"),
            Expr::Operand(o) => write_name(f, &o.name),
            Expr::SourceCount(o) => {
                write!(f, "source_count(")?;
                write_name(f, &o.name)?;
                write!(f, ")")
            }
            Expr::HasEvent(o) => {
                write!(f, "has_event(")?;
                write_name(f, &o.name)?;
                write!(f, ")")
            }
            Expr::CpuidIs(o) => {
                write!(f, "strcmp_cpuid_str(")?;
                write_name(f, &o.name)?;
                write!(f, ")")
            }
            Expr::Neg(a) => write!(f, "(-{a})"),
            Expr::Binary(op, a, b) => write!(f, "({a} {} {b})", op.symbol()),
            Expr::Call(func, a, b) => write!(f, "{}({a}, {b})", func.name()),
            Expr::If {
                then,
                cond,
                otherwise,
            } => write!(f, "({then} if {cond} else {otherwise})"),
        }
    }
}
