//! perf's grammar (`expr.y`), by recursive descent with precedence
//! climbing:
//!
//! ```text
//! top     := binary [ "if" binary "else" top ]
//! binary  := unary { op unary }              (perf's %left levels)
//! unary   := "-" unary | primary
//! primary := NUMBER | LITERAL | NAME | "(" top ")"
//!          | ("min" | "max" | "d_ratio") "(" binary "," binary ")"
//!          | ("source_count" | "has_event" | "strcmp_cpuid_str") "(" NAME ")"
//! ```
//!
//! A function's arguments and an `if`'s condition are `binary`, as in
//! perf: an `if ... else ...` inside them needs parentheses.

use super::lex::{tokens, Spanned, Tok};
use super::{BinOp, DeriveError, Expr, Func, Operand, MAX_DEPTH, MAX_LEN};

/// Parses one expression in perf's grammar.
pub fn parse(src: &str) -> Result<Expr, DeriveError> {
    if src.len() > MAX_LEN {
        return Err(DeriveError::TooLong { len: src.len() });
    }
    let toks = tokens(src)?;
    let end = src.chars().count() + 1;
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
        end,
    };
    if p.toks.is_empty() {
        return Err(syntax(1, "the expression is empty"));
    }
    let (e, _) = p.top()?;
    if let Some((t, col)) = p.toks.get(p.pos) {
        let what = describe(t);
        let msg = match t {
            Tok::Punct(')') => "`)` without its `(`".to_string(),
            Tok::If => "an `if` here needs parentheses (perf takes `if ... else ...` only at the top, inside `( )`, and after `else`)".to_string(),
            Tok::Else => "`else` without its `if`".to_string(),
            _ => format!("{what} follows a complete expression: an operator is missing"),
        };
        return Err(syntax(*col, msg));
    }
    Ok(e)
}

fn syntax(column: usize, msg: impl Into<String>) -> DeriveError {
    DeriveError::Syntax {
        column,
        msg: msg.into(),
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Number(n) => format!("the number `{n}`"),
        Tok::Literal(l) => format!("the literal `{l}`"),
        Tok::Name(n) => format!("the name `{n}`"),
        Tok::Min => "`min`".into(),
        Tok::Max => "`max`".into(),
        Tok::DRatio => "`d_ratio`".into(),
        Tok::If => "`if`".into(),
        Tok::Else => "`else`".into(),
        Tok::SourceCount => "`source_count`".into(),
        Tok::HasEvent => "`has_event`".into(),
        Tok::StrcmpCpuid => "`strcmp_cpuid_str`".into(),
        Tok::Punct(c) => format!("`{c}`"),
    }
}

/// An expression and the height of its tree.
type Node = (Expr, usize);

struct Parser {
    toks: Vec<Spanned>,
    pos: usize,
    /// Current recursion depth.
    depth: usize,
    /// The column just past the end (for "ends too early").
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn column(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |(_, c)| *c)
    }

    fn enter(&mut self) -> Result<(), DeriveError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(DeriveError::TooDeep {
                column: self.column(),
            });
        }
        Ok(())
    }

    fn node(&self, e: Expr, height: usize) -> Result<Node, DeriveError> {
        if height > MAX_DEPTH {
            return Err(DeriveError::TooDeep {
                column: self.column(),
            });
        }
        Ok((e, height))
    }

    fn expect(&mut self, want: char, context: &str) -> Result<(), DeriveError> {
        match self.toks.get(self.pos) {
            Some((Tok::Punct(c), _)) if *c == want => {
                self.pos += 1;
                Ok(())
            }
            Some((Tok::If, col)) if want == ',' || want == ')' => Err(syntax(
                *col,
                format!("perf takes no `if ... else ...` {context} without parentheses: write `(a if c else b)`"),
            )),
            Some((t, col)) => Err(syntax(
                *col,
                format!("expected `{want}` {context}, found {}", describe(t)),
            )),
            None => Err(syntax(
                self.end,
                format!("the expression ends where `{want}` was expected {context}"),
            )),
        }
    }

    fn top(&mut self) -> Result<Node, DeriveError> {
        self.enter()?;
        let (then, h1) = self.binary(1)?;
        let out = if self.peek() == Some(&Tok::If) {
            self.pos += 1;
            let (cond, h2) = self.binary(1)?;
            match self.toks.get(self.pos) {
                Some((Tok::Else, _)) => self.pos += 1,
                Some((t, col)) => {
                    return Err(syntax(
                        *col,
                        format!(
                            "expected `else` after the condition of `if`, found {}",
                            describe(t)
                        ),
                    ))
                }
                None => {
                    return Err(syntax(
                        self.end,
                        "`if` without `else`: perf's conditional is `a if cond else b`",
                    ))
                }
            }
            let (otherwise, h3) = self.top()?;
            let e = Expr::If {
                then: Box::new(then),
                cond: Box::new(cond),
                otherwise: Box::new(otherwise),
            };
            self.node(e, 1 + h1.max(h2).max(h3))?
        } else {
            (then, h1)
        };
        self.depth -= 1;
        Ok(out)
    }

    fn binop(&self) -> Option<BinOp> {
        Some(match self.peek()? {
            Tok::Punct('|') => BinOp::Or,
            Tok::Punct('^') => BinOp::Xor,
            Tok::Punct('&') => BinOp::And,
            Tok::Punct('<') => BinOp::Lt,
            Tok::Punct('>') => BinOp::Gt,
            Tok::Punct('+') => BinOp::Add,
            Tok::Punct('-') => BinOp::Sub,
            Tok::Punct('*') => BinOp::Mul,
            Tok::Punct('/') => BinOp::Div,
            Tok::Punct('%') => BinOp::Rem,
            _ => return None,
        })
    }

    /// Operators of precedence `min` and above, left-associative.
    fn binary(&mut self, min: u8) -> Result<Node, DeriveError> {
        let (mut lhs, mut h) = self.unary()?;
        while let Some(op) = self.binop().filter(|op| op.precedence() >= min) {
            self.pos += 1;
            let (rhs, hr) = self.binary(op.precedence() + 1)?;
            (lhs, h) = self.node(
                Expr::Binary(op, Box::new(lhs), Box::new(rhs)),
                1 + h.max(hr),
            )?;
        }
        Ok((lhs, h))
    }

    fn unary(&mut self) -> Result<Node, DeriveError> {
        self.enter()?;
        let out = if self.peek() == Some(&Tok::Punct('-')) {
            self.pos += 1;
            let (e, h) = self.unary()?;
            self.node(Expr::Neg(Box::new(e)), h + 1)?
        } else {
            self.primary()?
        };
        self.depth -= 1;
        Ok(out)
    }

    fn name_arg(&mut self, func: &str) -> Result<Operand, DeriveError> {
        self.expect('(', &format!("after `{func}`"))?;
        let op = match self.toks.get(self.pos) {
            Some((Tok::Name(n), col)) => Operand {
                name: n.clone(),
                column: *col,
            },
            Some((t, col)) => {
                return Err(syntax(
                    *col,
                    format!("`{func}` takes one event name, not {}", describe(t)),
                ))
            }
            None => {
                return Err(syntax(
                    self.end,
                    format!("the expression ends inside `{func}(`"),
                ))
            }
        };
        self.pos += 1;
        self.expect(')', &format!("after the name in `{func}(`"))?;
        Ok(op)
    }

    fn primary(&mut self) -> Result<Node, DeriveError> {
        let Some((tok, col)) = self.toks.get(self.pos).cloned() else {
            return Err(syntax(
                self.end,
                "the expression ends where an operand was expected",
            ));
        };
        self.pos += 1;
        let leaf = |e| Ok((e, 1));
        match tok {
            Tok::Number(n) => leaf(Expr::Number(n)),
            Tok::Literal(l) => leaf(Expr::Literal(l)),
            Tok::Name(name) => leaf(Expr::Operand(Operand { name, column: col })),
            Tok::SourceCount => leaf(Expr::SourceCount(self.name_arg("source_count")?)),
            Tok::HasEvent => leaf(Expr::HasEvent(self.name_arg("has_event")?)),
            Tok::StrcmpCpuid => leaf(Expr::CpuidIs(self.name_arg("strcmp_cpuid_str")?)),
            Tok::Punct('(') => {
                let (e, h) = self.top()?;
                self.expect(')', "to close the `(`")?;
                Ok((e, h))
            }
            Tok::Min | Tok::Max | Tok::DRatio => {
                let func = match tok {
                    Tok::Min => Func::Min,
                    Tok::Max => Func::Max,
                    _ => Func::DRatio,
                };
                let name = func.name();
                self.expect('(', &format!("after `{name}`"))?;
                let (a, ha) = self.binary(1)?;
                self.expect(',', &format!("between the arguments of `{name}`"))?;
                let (b, hb) = self.binary(1)?;
                self.expect(')', &format!("after the second argument of `{name}`"))?;
                self.node(Expr::Call(func, Box::new(a), Box::new(b)), 1 + ha.max(hb))
            }
            other => Err(syntax(
                col,
                format!("{} where an operand was expected", describe(&other)),
            )),
        }
    }
}
