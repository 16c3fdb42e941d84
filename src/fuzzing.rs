//! Fuzz targets: every parser that reads input the exporter does not
//! control, as functions of arbitrary bytes.
//!
//! Each target must never panic, whatever the input, and returns
//! `Err(what)` when an invariant of a successful parse fails (a
//! round-trip that does not come back, a count that exceeds the buffer).
//! They are run three ways:
//!
//! * by cargo-fuzz (`fuzz/fuzz_targets/*.rs`, nightly, libFuzzer), which
//!   panics on `Err`;
//! * by `tests/sim/fuzz_corpus.rs` over the checked-in corpora
//!   (`fuzz/corpus/<target>/`), on stable, in every `cargo test`;
//! * by the same test's bounded, deterministic mutation run over those
//!   corpora, so stable CI also searches for crashes.
//!
//! Every crash found becomes a corpus file (a regression test).

use crate::config::{valid_metric_name, Config, FormatRequirement};
use crate::derive::{self, Env, Literal};
use crate::perf::{parse_group_read, GroupReading};
use crate::pmu::{format_cpu_list, parse_cpu_list, parse_number, parse_terms, Format};
use crate::spec::{self, check_scale, EventSpec};
use crate::web::config::WebConfigSpec;
use crate::web::x509::subject_alt_names;
use std::path::Path;

/// A fuzz target: bytes in, `Err` on a broken invariant.
pub type Target = fn(&[u8]) -> Result<(), String>;

/// Every target by name (the cargo-fuzz target and corpus directory
/// names).
pub const TARGETS: &[(&str, Target)] = &[
    ("config", config),
    ("event_spec", event_spec),
    ("sysfs", sysfs),
    ("group_read", group_read),
    ("web_config", web_config),
    ("x509_sans", x509_sans),
    ("perf_record", perf_record),
    ("metric_expr", metric_expr),
];

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// The YAML config parser and validator ([`Config::parse`]): an accepted
/// config has sets, valid metric names (counters ending in `_total`),
/// sane scales, and every spec in it parsed (printing it parses back).
pub fn config(data: &[u8]) -> Result<(), String> {
    let Some(s) = text(data) else {
        return Ok(());
    };
    let Ok(c) = Config::parse(s, "fuzz.yaml") else {
        return Ok(());
    };
    if c.sets.is_empty() {
        return Err("a config without sets accepted".into());
    }
    for set in &c.sets {
        if set.events.is_empty() {
            return Err(format!("set {} accepted without events", set.name.value));
        }
        for m in &set.events {
            let name = &m.metric.value;
            if !valid_metric_name(name) || name.contains(':') || name.starts_with("__") {
                return Err(format!("invalid metric name {name:?} accepted"));
            }
            if m.gauge == name.ends_with("_total") {
                return Err(format!("{name:?} accepted with gauge: {}", m.gauge));
            }
            if m.event.value.is_empty() {
                return Err(format!("{name}: empty chain accepted"));
            }
            for a in &m.event.value {
                if let Some(sc) = a.scale {
                    if check_scale(sc).is_err() {
                        return Err(format!("{name}: scale {sc} accepted"));
                    }
                }
                for spec in a.specs() {
                    match spec::parse(&spec.text) {
                        Ok(p) if p == spec.parsed => {}
                        other => {
                            return Err(format!(
                                "{name}: spec {:?} stored as {:?} but parses as {other:?}",
                                spec.text, spec.parsed
                            ))
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// The event-spec parser ([`spec::parse`]): what it prints parses back to
/// the same event.
pub fn event_spec(data: &[u8]) -> Result<(), String> {
    let Some(s) = text(data) else {
        return Ok(());
    };
    let Ok(spec) = spec::parse(s) else {
        return Ok(());
    };
    if let EventSpec::Pmu { terms, .. } = &spec.spec {
        if let Some(t) = terms
            .iter()
            .enumerate()
            .find(|(i, t)| terms[..*i].iter().any(|u| u.name == t.name))
        {
            return Err(format!("{s:?}: duplicate term `{}` accepted", t.1.name));
        }
    }
    let printed = spec.to_string();
    let back = spec::parse(&printed)
        .map_err(|e| format!("{s:?} printed as {printed:?}, which does not parse: {e}"))?;
    let same = spec.modifiers == back.modifiers
        && match (&spec.spec, &back.spec) {
            (
                EventSpec::Pmu {
                    pmu: p1, terms: t1, ..
                },
                EventSpec::Pmu {
                    pmu: p2, terms: t2, ..
                },
            ) => p1 == p2 && t1 == t2,
            (a, b) => a == b,
        };
    if !same {
        return Err(format!(
            "{s:?} -> {spec:?} printed as {printed:?} -> {back:?}"
        ));
    }
    Ok(())
}

/// The sysfs file parsers, each on the same input: `format/<term>` bit
/// ranges ([`Format::parse`]), event term strings ([`parse_terms`]), CPU
/// lists ([`parse_cpu_list`]), numbers ([`parse_number`]), `.scale`
/// values ([`check_scale`]) and the config's `requires_format` guards
/// ([`FormatRequirement::parse`]), which hold a format term.
pub fn sysfs(data: &[u8]) -> Result<(), String> {
    let Some(s) = text(data) else {
        return Ok(());
    };
    if let Ok(f) = Format::parse(s) {
        let printed = f.to_string();
        match Format::parse(&printed) {
            Ok(g) if g == f => {}
            other => return Err(format!("format {s:?} printed as {printed:?} -> {other:?}")),
        }
        let w = f.width();
        if w == 0 || f.ranges.iter().any(|&(lo, hi)| lo > hi || hi > 63) {
            return Err(format!("format {s:?} accepted with ranges {:?}", f.ranges));
        }
        // The widest value fits; one bit more does not.
        let max = if w >= 64 { u64::MAX } else { (1u64 << w) - 1 };
        f.encode(max)
            .map_err(|e| format!("format {s:?}: max value {max:#x} refused: {e}"))?;
        if w < 64 && f.encode(max + 1).is_ok() {
            return Err(format!("format {s:?}: {:#x} accepted", max + 1));
        }
    }
    if let Ok(terms) = parse_terms(s) {
        for t in &terms {
            if t.name.is_empty() {
                return Err(format!("terms {s:?}: empty name accepted"));
            }
        }
    }
    if let Ok(cpus) = parse_cpu_list(s) {
        if cpus.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("cpu list {s:?} not sorted and unique: {cpus:?}"));
        }
        let printed = format_cpu_list(&cpus);
        match parse_cpu_list(&printed) {
            Ok(back) if back == cpus => {}
            other => {
                return Err(format!(
                    "cpu list {s:?} printed as {printed:?} -> {other:?}"
                ))
            }
        }
    }
    let _ = parse_number(s);
    // A config's `requires_format` guard: what is accepted prints back as
    // itself.
    if let Ok(r) = FormatRequirement::parse(s) {
        let printed = r.to_string();
        match FormatRequirement::parse(&printed) {
            Ok(back) if back == r => {}
            other => {
                return Err(format!(
                    "requires_format {s:?} printed as {printed:?} -> {other:?}"
                ))
            }
        }
    }
    // A `.scale` file: an accepted scale is finite, positive and bounded.
    if let Ok(v) = s.trim().parse::<f64>() {
        if check_scale(v).is_ok() && !(v.is_finite() && v > 0.0 && v <= 1e15) {
            return Err(format!("scale {s:?} = {v} accepted"));
        }
    }
    Ok(())
}

/// The group `read()` buffer parser ([`parse_group_read`]): an accepted
/// buffer holds every member it reports.
pub fn group_read(data: &[u8]) -> Result<(), String> {
    let mut r = GroupReading::default();
    if parse_group_read(data, &mut r).is_ok() {
        let need = 24 + 16 * r.values.len();
        if need > data.len() {
            return Err(format!(
                "{} members accepted from {} bytes",
                r.values.len(),
                data.len()
            ));
        }
    }
    Ok(())
}

/// The web config parser ([`WebConfigSpec::parse`], no file I/O): an
/// accepted TLS section names a certificate and a key.
pub fn web_config(data: &[u8]) -> Result<(), String> {
    let Some(s) = text(data) else {
        return Ok(());
    };
    if let Ok(spec) = WebConfigSpec::parse(s, Path::new("/fuzz/web.yml")) {
        if let Some(t) = &spec.tls {
            if !t.tls12 && !t.tls13 {
                return Err("TLS accepted with no protocol version".into());
            }
        }
    }
    Ok(())
}

/// The Subject Alternative Name reader of client certificates
/// ([`subject_alt_names`]).
pub fn x509_sans(data: &[u8]) -> Result<(), String> {
    let _ = subject_alt_names(data);
    Ok(())
}

/// The ring's record splitter and the record decoder
/// ([`crate::perf::ring::split_records`], [`crate::perf::record::decode`])
/// on arbitrary ring bytes: byte 0 picks the `sample_type` fields (bit 0
/// `IDENTIFIER`, then `TID`, `TIME`, `ID`, `CPU`, `PERIOD`, `READ`,
/// `CGROUP`), byte 1 the `read_format` extras (`TOTAL_TIME_ENABLED`,
/// `TOTAL_TIME_RUNNING`, `LOST`), byte 2 where the ring wraps; the rest is
/// the ring's readable bytes. Splitting hands over whole records (each as
/// long as its header says) and accounts for every byte it accepts; a
/// decoded group read lies inside its record.
pub fn perf_record(data: &[u8]) -> Result<(), String> {
    use crate::perf::record::{decode, Format, Record};
    use crate::sys::abi;
    let [sel, rf, cut, rest @ ..] = data else {
        return Ok(());
    };
    let bits = [
        abi::SAMPLE_IDENTIFIER,
        abi::SAMPLE_TID,
        abi::SAMPLE_TIME,
        abi::SAMPLE_ID,
        abi::SAMPLE_CPU,
        abi::SAMPLE_PERIOD,
        abi::SAMPLE_READ,
        abi::SAMPLE_CGROUP,
    ];
    let pick = |byte: u8, from: &[u64]| -> u64 {
        from.iter()
            .enumerate()
            .filter(|(i, _)| byte & (1 << i) != 0)
            .fold(0, |a, (_, b)| a | b)
    };
    // The fourth bit of `rf` adds PERF_SAMPLE_CALLCHAIN.
    let chain = if rf & 8 != 0 {
        abi::SAMPLE_CALLCHAIN
    } else {
        0
    };
    let fmt = Format {
        sample_type: pick(*sel, &bits) | chain,
        read_format: abi::FORMAT_GROUP
            | abi::FORMAT_ID
            | pick(
                *rf,
                &[
                    abi::FORMAT_TOTAL_TIME_ENABLED,
                    abi::FORMAT_TOTAL_TIME_RUNNING,
                    abi::FORMAT_LOST,
                ],
            ),
    };
    let (a, b) = rest.split_at(usize::from(*cut).min(rest.len()));
    let mut scratch = Vec::new();
    let mut seen = 0usize;
    let mut broken = None;
    let r = crate::perf::ring::split_records(a, b, &mut scratch, &mut |rec| {
        seen += rec.len();
        let size = rec
            .get(6..8)
            .map(|s| usize::from(u16::from_ne_bytes([s[0], s[1]])));
        if size != Some(rec.len()) {
            broken = Some(format!(
                "record of {} bytes, header says {size:?}",
                rec.len()
            ));
        }
        if let Ok(Record::Sample(s)) = decode(rec, &fmt) {
            if let Some(g) = s.read {
                if g.len() * 16 > rec.len() {
                    broken = Some(format!("{} group members in {} bytes", g.len(), rec.len()));
                }
                let _ = g.iter().count();
            }
            if let Some(c) = s.callchain {
                if c.len() > crate::perf::record::MAX_CALLCHAIN || c.len() * 8 > rec.len() {
                    broken = Some(format!("{} chain entries in {} bytes", c.len(), rec.len()));
                }
                if c.frames().count() > c.len() {
                    broken = Some("more frames than chain entries".into());
                }
            }
        }
    });
    if let Some(b) = broken {
        return Err(b);
    }
    match r {
        Ok(n) if n != rest.len() || seen != n => Err(format!(
            "consumed {n} of {} bytes, handed over {seen}",
            rest.len()
        )),
        _ => Ok(()),
    }
}

/// Every operand has a value (its name's length), every literal is 2
/// and every CPU identity matches: the evaluator's paths all run.
struct FuzzEnv;

impl Env for FuzzEnv {
    fn operand(&self, name: &str) -> Option<f64> {
        // Lengths are small; as f64 exactly.
        #[allow(clippy::cast_precision_loss)]
        Some((name.len() % 7) as f64)
    }

    fn literal(&self, _: Literal) -> Result<f64, String> {
        Ok(2.0)
    }

    fn cpuid_matches(&self, _: &str) -> Option<bool> {
        Some(true)
    }
}

/// perf's metric-expression parser and evaluator ([`derive::parse`],
/// [`derive::eval`]): an accepted expression prints in a form that parses
/// back to the same print, evaluates without panicking to the same value
/// as its print, and respects the length bound.
pub fn metric_expr(data: &[u8]) -> Result<(), String> {
    let Some(s) = text(data) else {
        return Ok(());
    };
    let Ok(e) = derive::parse(s) else {
        return Ok(());
    };
    if s.len() > derive::MAX_LEN {
        return Err(format!("{} bytes accepted", s.len()));
    }
    let printed = e.to_string();
    let back = match derive::parse(&printed) {
        Ok(back) => back,
        // Printing makes every grouping explicit (`--a` prints as
        // `-(-a)`), and parentheses count toward the depth bound: an
        // expression near the bound may print deeper than it. The bound
        // holds; the round trip is judged below it only.
        Err(derive::DeriveError::TooDeep { .. }) => return Ok(()),
        Err(err) => {
            return Err(format!(
                "{s:?} printed as {printed:?}, which does not parse: {err}"
            ))
        }
    };
    if back.to_string() != printed {
        return Err(format!("{s:?} printed as {printed:?} -> {back}"));
    }
    let (a, b) = (derive::eval(&e, &FuzzEnv), derive::eval(&back, &FuzzEnv));
    let same = match (&a, &b) {
        (Ok(x), Ok(y)) => x == y || (x.is_nan() && y.is_nan()),
        (Err(x), Err(y)) => x == y,
        _ => false,
    };
    if !same {
        return Err(format!("{s:?} = {a:?} but its print {printed:?} = {b:?}"));
    }
    // Renaming (what `metrics import` does to perf's names) keeps the
    // text when nothing is mapped, and a renamed expression parses to
    // the same tree with the new names.
    match derive::rename(s, &mut |_| None) {
        Ok(same) if same == s => {}
        other => return Err(format!("{s:?} renamed with nothing mapped: {other:?}")),
    }
    let renamed = derive::rename(s, &mut |n| Some(format!("{n}-x")))
        .map_err(|err| format!("{s:?} parses but does not rename: {err}"))?;
    match derive::parse(&renamed) {
        Ok(r) if r.operands().len() == e.operands().len() => Ok(()),
        Err(derive::DeriveError::TooLong { .. }) => Ok(()),
        other => Err(format!("{s:?} renamed to {renamed:?}: {other:?}")),
    }
}
