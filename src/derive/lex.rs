//! The tokens of perf's metric expressions, by longest match as flex
//! takes them (`expr.l`): keywords, then literals, numbers and names;
//! at equal length the earlier rule wins (`1e3` is a number, `1e3x` a
//! name, `min` the function, `minx` a name).

use super::{DeriveError, Literal};

/// A token.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Number(f64),
    Literal(Literal),
    /// A name, escapes removed.
    Name(String),
    Min,
    Max,
    DRatio,
    If,
    Else,
    SourceCount,
    HasEvent,
    StrcmpCpuid,
    Punct(char),
}

/// A token and its 1-based column (in characters).
pub(super) type Spanned = (Tok, usize);

const KEYWORDS: [(&str, Tok); 8] = [
    ("d_ratio", Tok::DRatio),
    ("max", Tok::Max),
    ("min", Tok::Min),
    ("if", Tok::If),
    ("else", Tok::Else),
    ("source_count", Tok::SourceCount),
    ("has_event", Tok::HasEvent),
    ("strcmp_cpuid_str", Tok::StrcmpCpuid),
];

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '@' | '?')
}

fn escapable(c: char) -> bool {
    matches!(c, '-' | ',' | '=')
}

fn literal_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

fn syntax(column: usize, msg: impl Into<String>) -> DeriveError {
    DeriveError::Syntax {
        column,
        msg: msg.into(),
    }
}

/// Length (in chars) of the longest number at the start of `c`: digits,
/// an optional `.`, digits (at least one digit in all), then optionally
/// `e`, an optional `-` and digits.
fn number_len(c: &[char]) -> usize {
    let digits = |from: usize| c[from..].iter().take_while(|d| d.is_ascii_digit()).count();
    let d1 = digits(0);
    let mut i = d1;
    let mut d2 = 0;
    if c.get(i) == Some(&'.') {
        d2 = digits(i + 1);
        if d1 + d2 > 0 {
            i += 1 + d2;
        }
    }
    if d1 + d2 == 0 {
        return 0;
    }
    if c.get(i) == Some(&'e') {
        let sign = usize::from(c.get(i + 1) == Some(&'-'));
        let d3 = digits(i + 1 + sign);
        if d3 > 0 {
            i += 1 + sign + d3;
        }
    }
    i
}

/// Length (in chars) of the longest name at the start of `c`.
fn name_len(c: &[char]) -> usize {
    let mut i = 0;
    while i < c.len() {
        if name_char(c[i]) {
            i += 1;
        } else if c[i] == '\\' && c.get(i + 1).is_some_and(|&n| escapable(n)) {
            i += 2;
        } else {
            break;
        }
    }
    i
}

/// The tokens of `src` (already checked against the length bound).
pub(super) fn tokens(src: &str) -> Result<Vec<Spanned>, DeriveError> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let col = i + 1;
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
            continue;
        }
        if ch == '#' {
            let n = c[i + 1..].iter().take_while(|&&x| literal_char(x)).count();
            let text: String = c[i + 1..i + 1 + n].iter().collect();
            out.push((Tok::Literal(literal(&text, col)?), col));
            i += 1 + n;
            continue;
        }
        let num = number_len(&c[i..]);
        let name = name_len(&c[i..]);
        if name > 0 || num > 0 {
            let len = name.max(num);
            let text: String = c[i..i + len].iter().collect();
            let tok = if let Some((_, k)) = KEYWORDS.iter().find(|(k, _)| *k == text) {
                k.clone()
            } else if num >= name {
                Tok::Number(number(&text, col)?)
            } else {
                Tok::Name(text.replace('\\', ""))
            };
            out.push((tok, col));
            i += len;
            continue;
        }
        match ch {
            '|' | '^' | '&' | '<' | '>' | '-' | '+' | '*' | '/' | '%' | '(' | ')' | ',' => {
                out.push((Tok::Punct(ch), col));
                i += 1;
            }
            '=' if c.get(i + 1) == Some(&'=') => {
                return Err(syntax(
                    col,
                    "perf's grammar has no `==` (only `<` and `>`): for `a == b` write `0 if (a < b) | (a > b) else 1`",
                ))
            }
            '\\' => {
                return Err(syntax(
                    col,
                    "a backslash escapes only `-`, `,` and `=` in a name",
                ))
            }
            _ => {
                return Err(syntax(
                    col,
                    format!("`{}` is not in perf's expression grammar (operators: + - * / % < > & | ^, `if ... else ...`, min, max, d_ratio, source_count, has_event, strcmp_cpuid_str)", ch.escape_debug()),
                ))
            }
        }
    }
    Ok(out)
}

/// A number's value; perf's `strtod` refuses one out of range.
fn number(text: &str, col: usize) -> Result<f64, DeriveError> {
    let v: f64 = text
        .parse()
        .map_err(|_| syntax(col, format!("`{text}` is not a number")))?;
    let nonzero_digits = text
        .split('e')
        .next()
        .is_some_and(|m| m.chars().any(|d| ('1'..='9').contains(&d)));
    if !v.is_finite() || (v == 0.0 && nonzero_digits) {
        return Err(syntax(
            col,
            format!("`{text}` is out of the range of a 64-bit float"),
        ));
    }
    Ok(v)
}

/// A `#` literal: perf refuses one it cannot give when it lexes it.
fn literal(text: &str, col: usize) -> Result<Literal, DeriveError> {
    if let Some(l) = Literal::from_name(text) {
        return Ok(l);
    }
    let known = Literal::ALL
        .iter()
        .map(|l| format!("`{l}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let lower = text.to_ascii_lowercase();
    let msg = if text.is_empty() {
        format!("`#` starts a literal, and none follows (literals: {known})")
    } else if matches!(
        lower.as_str(),
        "duration_time" | "user_time" | "system_time"
    ) {
        format!("`#{text}` has no value as a literal (perf gives none either): write `{lower}` without the `#`, an operand counted in the window")
    } else if let Some(stem) = Literal::ALL
        .iter()
        .find(|l| lower.starts_with(l.name()) && lower[l.name().len()..].starts_with('-'))
    {
        format!("`#{text}` is one literal to perf, whose literals may hold `-`: write `{stem} - ...` with spaces")
    } else {
        format!("unknown literal `#{text}` (literals: {known})")
    };
    Err(syntax(col, msg))
}

/// `src` with every name `f` maps replaced by what it returns, written
/// as a name (the characters perf lets a name hold only escaped get a
/// backslash); everything else (spacing, numbers, literals, operators)
/// is kept as written. `f` sees a name with its escapes removed.
pub(super) fn rename(
    src: &str,
    f: &mut dyn FnMut(&str) -> Option<String>,
) -> Result<String, DeriveError> {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut copied = 0;
    for (tok, col) in tokens(src)? {
        let Tok::Name(name) = tok else { continue };
        let start = col - 1;
        let len = name_len(&c[start..]);
        if let Some(new) = f(&name) {
            out.extend(&c[copied..start]);
            for ch in new.chars() {
                if escapable(ch) {
                    out.push('\\');
                }
                out.push(ch);
            }
            copied = start + len;
        }
    }
    out.extend(&c[copied..]);
    Ok(out)
}
