//! Parsing one event spec, with its modifiers.

use super::modifiers::{Modifiers, SUPPORTED_MODIFIERS};
use super::names::{
    generic_names, generic_or_raw, lookup, parse_cache, quote_list, suggest, HARDWARE, SOFTWARE,
};
use super::terms::{parse_number, parse_terms, SyntaxError};
use super::{Event, EventSpec};

/// Parses one event spec, with its modifiers.
pub fn parse(spec: &str) -> Result<Event, SyntaxError> {
    let lead = spec.len() - spec.trim_start().len();
    let s = spec.trim();
    if s.is_empty() {
        return Err(SyntaxError("empty event spec".into()));
    }
    // 1-based column, in `spec` as written (and quoted in messages), of
    // byte `at` of `s`.
    let column = |at: usize| lead + s[..at].chars().count() + 1;
    let shown = spec.trim_end();
    let (body, mods_at) = if let (Some(first), Some(last)) = (s.find('/'), s.rfind('/')) {
        if first == last {
            return Err(SyntaxError(format!(
                "`{s}`: a PMU event is written `pmu/terms/`, with a closing `/` (and modifiers after it: `pmu/terms/u`)"
            )));
        }
        (&s[..=last], (last + 1 < s.len()).then_some(last + 1))
    } else {
        let colons: Vec<usize> = s.match_indices(':').map(|(i, _)| i).collect();
        match colons.as_slice() {
            [] => (s, None),
            [c] if generic_or_raw(&s[..*c]) => {
                if *c + 1 == s.len() {
                    return Err(SyntaxError(format!(
                        "`{shown}`, column {}: no modifier after `:`; the supported modifiers are {SUPPORTED_MODIFIERS}",
                        column(*c)
                    )));
                }
                (&s[..*c], Some(*c + 1))
            }
            [_] => (s, None),
            [a, c] if !generic_or_raw(&s[..*a]) => {
                if *c + 1 == s.len() {
                    return Err(SyntaxError(format!(
                        "`{shown}`, column {}: no modifier after `:`; the supported modifiers are {SUPPORTED_MODIFIERS}",
                        column(*c)
                    )));
                }
                (&s[..*c], Some(*c + 1))
            }
            [.., c] => {
                return Err(SyntaxError(format!(
                    "`{shown}`, column {}: one `:` too many (an event is written `event:mods` or, a tracepoint, `subsys:name:mods`)",
                    column(*c)
                )))
            }
        }
    };
    let modifiers = match mods_at {
        Some(at) => Modifiers::parse(shown, &s[at..], column(at))?,
        None => Modifiers::default(),
    };
    Ok(Event {
        spec: parse_event(body)?,
        modifiers,
    })
}

/// Parses an event spec without modifiers.
fn parse_event(s: &str) -> Result<EventSpec, SyntaxError> {
    if let Some(slash) = s.find('/') {
        let pmu = &s[..slash];
        let rest = &s[slash + 1..];
        let Some(inner) = rest.strip_suffix('/') else {
            return Err(SyntaxError(format!(
                "`{s}`: a PMU event is written `pmu/terms/`, with a closing `/`"
            )));
        };
        if pmu.is_empty()
            || !pmu
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*' || c == '-')
        {
            return Err(SyntaxError(format!("`{pmu}` is not a PMU name")));
        }
        if inner.contains('/') {
            return Err(SyntaxError(format!("`{s}` has more than two `/`")));
        }
        let terms = parse_terms(inner).map_err(|e| SyntaxError(format!("`{s}`: {}", e.0)))?;
        if terms.is_empty() {
            return Err(SyntaxError(format!("`{s}` names no event or term")));
        }
        for (i, t) in terms.iter().enumerate() {
            if terms[..i].iter().any(|u| u.name == t.name) {
                return Err(SyntaxError(format!(
                    "`{s}`: term `{}` is given twice (perf refuses a duplicate term rather than letting one win): keep one",
                    t.name
                )));
            }
        }
        let bare = inner
            .split(',')
            .map(str::trim)
            .filter(|t| !t.contains('='))
            .map(str::to_string)
            .collect();
        return Ok(EventSpec::Pmu {
            pmu: pmu.to_string(),
            terms,
            bare,
        });
    }
    if let Some((subsys, name)) = s.split_once(':') {
        let ok = |x: &str| {
            !x.is_empty()
                && x.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !ok(subsys) || !ok(name) {
            return Err(SyntaxError(format!(
                "`{s}`: a tracepoint is written `subsys:name` (with modifiers: `subsys:name:u`)"
            )));
        }
        return Ok(EventSpec::Tracepoint {
            subsys: subsys.to_string(),
            name: name.to_string(),
        });
    }
    if let Some(hex) = s.strip_prefix('r') {
        if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return parse_number(&format!("0x{hex}")).map(EventSpec::Raw);
        }
    }
    if let Some(id) = lookup(HARDWARE, s) {
        return Ok(EventSpec::Hardware {
            name: s.to_string(),
            id,
        });
    }
    if let Some(id) = lookup(SOFTWARE, s) {
        return Ok(EventSpec::Software {
            name: s.to_string(),
            id,
        });
    }
    if let Some(config) = parse_cache(s) {
        return Ok(EventSpec::HwCache {
            name: s.to_string(),
            config,
        });
    }
    let names = generic_names();
    let close = suggest(s, names.iter().map(String::as_str));
    let mut msg = format!("unknown event `{s}`");
    if !close.is_empty() {
        msg.push_str(&format!("; did you mean {}?", quote_list(&close)));
    }
    msg.push_str(" (events of a PMU are written `pmu/event/`; run `perf-exporter list` to see what this host offers)");
    Err(SyntaxError(msg))
}
