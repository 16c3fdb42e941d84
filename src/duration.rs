//! The one duration grammar of every flag: Prometheus's (`500ms`, `10s`,
//! `1m30s`, `2h`, `1d`). A leaf: it depends on nothing in the crate.
//!
//! A bare number is refused rather than guessed at (seconds? milliseconds?):
//! `--web.request-timeout 5` once meant 5 ms. The OpenTelemetry environment
//! variables, whose specification says "milliseconds", are parsed apart
//! (`export::otlp`).

use std::time::Duration;

/// The longest duration a flag may give: a year. Anything longer is a typo,
/// and it keeps `Instant + duration` from overflowing.
pub const MAX: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses `500ms`, `10s`, `1m30s`, `2h`, `1d`, `1w`: whole numbers, each with
/// a unit, largest first as Prometheus writes them (but any order is
/// accepted). Zero, a bare number and anything over [`MAX`] are refused.
pub fn parse(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "`{t}` has no unit: write `{t}s` or `{t}ms` (units: ms, s, m, h, d, w)"
        ));
    }
    let bad = || format!("`{t}` is not a duration (e.g. `500ms`, `10s`, `1m30s`)");
    if t.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| too_long(t))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let secs = |mult: u64| n.checked_mul(mult).map(Duration::from_secs);
        let d = match unit {
            "ms" => Some(Duration::from_millis(n)),
            "s" => secs(1),
            "m" => secs(60),
            "h" => secs(3600),
            "d" => secs(86_400),
            "w" => secs(7 * 86_400),
            _ => return Err(bad()),
        };
        total = d
            .and_then(|d| total.checked_add(d))
            .ok_or_else(|| too_long(t))?;
    }
    if total.is_zero() {
        return Err("must be greater than 0".into());
    }
    if total > MAX {
        return Err(too_long(t));
    }
    Ok(total)
}

fn too_long(t: &str) -> String {
    format!("`{t}` is longer than the longest allowed duration (1 year)")
}

/// Renders a duration the way [`parse`] reads it: `100ms`, `10s`, `1m30s`.
pub fn render(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let mut s = (ms / 1000) as u64;
    let mut out = String::new();
    for (unit, len) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if s >= len {
            out.push_str(&format!("{}{unit}", s / len));
            s %= len;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse(" 1w "), Ok(Duration::from_secs(7 * 86_400)));
    }

    #[test]
    fn bare_numbers_are_refused_with_a_hint() {
        let e = parse("5").unwrap_err();
        assert!(e.contains("`5s` or `5ms`"), "{e}");
    }

    #[test]
    fn refusals() {
        for bad in ["", "s", "5x", "1.5s", "-1s", "0s", "0ms", "ms5"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let e = parse("3000000000000000h").unwrap_err();
        assert!(e.contains("longest"), "{e}");
        assert!(parse("99999999999999999999s").is_err());
        assert!(parse("366d").is_err());
        assert!(parse("365d").is_ok());
    }

    #[test]
    fn render_round_trips() {
        for s in ["100ms", "10s", "1m30s", "2h", "1d", "1h1s", "1500ms"] {
            assert_eq!(render(parse(s).unwrap()), s);
        }
    }
}
