//! The small grammars of sysfs and of event terms: `name=value` terms,
//! numbers, scale factors, and the error they share.

/// A parse error of one of the small grammars (event specs, sysfs terms
/// and formats), without a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(pub String);

/// A term's value in an event alias or a user spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermValue {
    /// A number (hex `0x..` or decimal). A bare term means 1.
    Num(u64),
    /// `?`: the user must supply this term (e.g. arm_cmn `nodeid=?`).
    Required,
}

/// One `name=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The term's name: a format name or `config`/`config1`/`config2`.
    pub name: String,
    /// Its value.
    pub value: TermValue,
}

/// Parses a number the way the kernel and perf write them: `0x` hex or
/// decimal.
pub fn parse_number(s: &str) -> Result<u64, SyntaxError> {
    let s = s.trim();
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        s.parse::<u64>()
    };
    r.map_err(|_| SyntaxError(format!("`{s}` is not a number")))
}

/// Parses an event term string such as `event=0x04,umask=0x03` or
/// `event=0xd,umask=0x1,cmask=1,any=1`. A bare term means `=1`; `?` means
/// the user must supply the value.
pub fn parse_terms(s: &str) -> Result<Vec<Term>, SyntaxError> {
    let s = s.trim();
    let mut terms = Vec::new();
    if s.is_empty() {
        return Ok(terms);
    }
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(SyntaxError(format!("empty term in `{s}`")));
        }
        let (name, value) = match part.split_once('=') {
            Some((n, v)) => {
                let v = v.trim();
                let value = if v == "?" {
                    TermValue::Required
                } else {
                    TermValue::Num(parse_number(v)?)
                };
                (n.trim(), value)
            }
            None => (part, TermValue::Num(1)),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(SyntaxError(format!("`{name}` is not a term name")));
        }
        terms.push(Term {
            name: name.to_string(),
            value,
        });
    }
    Ok(terms)
}

/// Checks a scale factor, from sysfs `.scale` or a config `scale:`: a
/// count is multiplied by it, so it must be a finite positive number of a
/// sane size (the kernel's own range from 2^-32 J for RAPL to 64 bytes
/// for a CAS). Returns the reason when it is not.
pub fn check_scale(scale: f64) -> Result<(), &'static str> {
    if !scale.is_finite() {
        Err("a scale must be a finite number")
    } else if scale <= 0.0 {
        Err("a scale must be positive (zero or a negative scale would export zeros or decreasing counters)")
    } else if !(1e-15..=1e15).contains(&scale) {
        Err("a scale must lie between 1e-15 and 1e15 (a larger one overflows to +Inf)")
    } else {
        Ok(())
    }
}
