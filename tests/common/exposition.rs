//! A strict Prometheus text-format (0.0.4) validator, and lookups in the
//! series it returns.

use std::collections::BTreeMap;

fn name_ok(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(x) if x.is_ascii_alphabetic() || x == '_' || x == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

/// Checks a Prometheus text-format (0.0.4) scrape strictly: HELP and TYPE
/// lines well formed and before their samples, sample names and labels
/// valid, values numbers, no series twice, a final newline. Returns every
/// series (`name{labels}`) with its value.
pub(crate) fn parse_exposition(body: &str) -> Result<BTreeMap<String, f64>, String> {
    if !body.ends_with('\n') {
        return Err("no final newline".into());
    }
    let mut typed: BTreeMap<String, String> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (i, line) in body.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = line.strip_prefix("# ") {
            let mut it = rest.splitn(3, ' ');
            let kind = it.next().unwrap_or("");
            let name = it.next().unwrap_or("");
            let arg = it.next().unwrap_or("");
            if !name_ok(name) {
                return Err(format!("line {n}: bad metric name in {line:?}"));
            }
            match kind {
                "HELP" => {}
                "TYPE" => {
                    if !["counter", "gauge", "untyped", "summary", "histogram"].contains(&arg) {
                        return Err(format!("line {n}: bad type in {line:?}"));
                    }
                    if typed.insert(name.to_string(), arg.to_string()).is_some() {
                        return Err(format!("line {n}: second TYPE for {name}"));
                    }
                }
                _ => return Err(format!("line {n}: unknown comment {line:?}")),
            }
            continue;
        }
        if line.is_empty() {
            return Err(format!("line {n}: empty line"));
        }
        let (series, value) = match line.rfind(' ') {
            Some(sp) => (&line[..sp], &line[sp + 1..]),
            None => return Err(format!("line {n}: no value in {line:?}")),
        };
        let v: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            x => x
                .parse()
                .map_err(|_| format!("line {n}: value {x:?} is not a number"))?,
        };
        let name = series.split('{').next().unwrap_or("");
        if !name_ok(name) {
            return Err(format!("line {n}: bad sample name in {line:?}"));
        }
        if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
            check_labels(labels, n, line)?;
        }
        let family = ["_total", "_created", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains_key(*f)))
            .unwrap_or(name);
        if !typed.contains_key(family) && !typed.contains_key(name) {
            return Err(format!("line {n}: sample {name} before its TYPE"));
        }
        if out.insert(series.to_string(), v).is_some() {
            return Err(format!("line {n}: series {series} twice"));
        }
    }
    Ok(out)
}

/// Checks a sample's `{name="value",...}`: values with `\\ \" \n`
/// escapes only.
fn check_labels(labels: &str, n: usize, line: &str) -> Result<(), String> {
    let inner = labels
        .strip_prefix('{')
        .and_then(|l| l.strip_suffix('}'))
        .ok_or_else(|| format!("line {n}: bad labels in {line:?}"))?;
    // name="value" pairs, values with \\ \" \n escapes only.
    let b = inner.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let eq = inner[i..]
            .find('=')
            .ok_or_else(|| format!("line {n}: label without = in {line:?}"))?;
        if !name_ok(&inner[i..i + eq]) {
            return Err(format!("line {n}: bad label name in {line:?}"));
        }
        i += eq + 1;
        if b.get(i) != Some(&b'"') {
            return Err(format!("line {n}: unquoted label value in {line:?}"));
        }
        i += 1;
        loop {
            match b.get(i) {
                None => return Err(format!("line {n}: unterminated label value")),
                Some(b'\\') => {
                    if !matches!(b.get(i + 1), Some(b'\\' | b'"' | b'n')) {
                        return Err(format!("line {n}: bad escape in {line:?}"));
                    }
                    i += 2;
                }
                Some(b'"') => {
                    i += 1;
                    break;
                }
                Some(_) => i += 1,
            }
        }
        match b.get(i) {
            None => {}
            Some(b',') => i += 1,
            Some(_) => return Err(format!("line {n}: junk after a label in {line:?}")),
        }
    }
    Ok(())
}

/// The value of the only sample of `name` in a scrape (no labels).
pub(crate) fn scalar(series: &BTreeMap<String, f64>, name: &str) -> Option<f64> {
    series.get(name).copied()
}

/// Samples of family `name`, by their `cpu` label.
pub(crate) fn by_cpu(series: &BTreeMap<String, f64>, name: &str) -> BTreeMap<u32, f64> {
    series
        .iter()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix(name)?.strip_prefix('{')?;
            let cpu = rest
                .split("cpu=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse()
                .ok()?;
            Some((cpu, *v))
        })
        .collect()
}
