//! Reading perf's JSON: the event objects decoded into spec terms as
//! `jevents.py` encodes them, the metric objects kept as written.

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{ImportError, JsonEvent, JsonMetric, Options, Target, TargetPmu, MAX_ENTRIES};

/// `jevents.py`'s `Unit` to PMU table; any other unit is `uncore_<unit>`.
const UNITS: [(&str, &str); 22] = [
    ("CBO", "uncore_cbox"),
    ("QPI LL", "uncore_qpi"),
    ("SBO", "uncore_sbox"),
    ("iMPH-U", "uncore_arb"),
    ("CPU-M-CF", "cpum_cf"),
    ("CPU-M-SF", "cpum_sf"),
    ("PAI-CRYPTO", "pai_crypto"),
    ("PAI-EXT", "pai_ext"),
    ("UPI LL", "uncore_upi"),
    ("hisi_sicl,cpa", "hisi_sicl,cpa"),
    ("hisi_sccl,ddrc", "hisi_sccl,ddrc"),
    ("hisi_sccl,hha", "hisi_sccl,hha"),
    ("hisi_sccl,l3c", "hisi_sccl,l3c"),
    ("imx8_ddr", "imx8_ddr"),
    ("imx9_ddr", "imx9_ddr"),
    ("L3PMC", "amd_l3"),
    ("DFPMC", "amd_df"),
    ("UMCPMC", "amd_umc"),
    ("cpu_core", "cpu_core"),
    ("cpu_atom", "cpu_atom"),
    ("ali_drw", "ali_drw"),
    ("arm_cmn", "arm_cmn"),
];

/// The JSON fields `jevents.py` turns into terms, in its order.
const FIELDS: [(&str, &str); 13] = [
    ("AnyThread", "any"),
    ("PortMask", "ch_mask"),
    ("CounterMask", "cmask"),
    ("EdgeDetect", "edge"),
    ("FCMask", "fc_mask"),
    ("Invert", "inv"),
    ("UMask", "umask"),
    ("NodeType", "type"),
    ("RdWrMask", "rdwrmask"),
    ("EnAllCores", "enallcores"),
    ("EnAllSlices", "enallslices"),
    ("SliceId", "sliceid"),
    ("ThreadMask", "threadmask"),
];

/// What the files hold.
pub(super) struct Read {
    /// Events by lower-case name (the first of a name that the target
    /// takes).
    pub(super) events: BTreeMap<String, JsonEvent>,
    /// Events skipped for their `Compat`, by lower-case name, with why.
    pub(super) incompatible: BTreeMap<String, String>,
    /// Metrics in file order.
    pub(super) metrics: Vec<JsonMetric>,
}

/// Reads `files` (name and text).
pub(super) fn read(files: &[(String, String)], opts: &Options) -> Result<Read, ImportError> {
    let mut out = Read {
        events: BTreeMap::new(),
        incompatible: BTreeMap::new(),
        metrics: Vec::new(),
    };
    let mut count = 0usize;
    for (file, text) in files {
        let v: Value = serde_json::from_str(text).map_err(|e| ImportError::Json {
            file: file.clone(),
            line: e.line(),
            column: e.column(),
            msg: e.to_string(),
        })?;
        let Value::Array(items) = v else {
            return Err(ImportError::NotAnArray { file: file.clone() });
        };
        for item in &items {
            count += 1;
            if count > MAX_ENTRIES {
                return Err(ImportError::TooMany);
            }
            let Value::Object(o) = item else {
                return Err(ImportError::NotAnArray { file: file.clone() });
            };
            let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
            if let (Some(name), Some(expr)) = (s("MetricName"), s("MetricExpr")) {
                out.metrics.push(JsonMetric {
                    name,
                    expr,
                    help: s("BriefDescription"),
                    group: s("MetricGroup"),
                    scale_unit: s("ScaleUnit"),
                    threshold: s("MetricThreshold"),
                    record: s("PrometheusRecord"),
                    requires_cpu: s("RequiresCpu"),
                });
            } else if let Some(name) = s("EventName") {
                let key = name.to_ascii_lowercase();
                let Some(e) = json_event(&|k| s(k), opts) else {
                    continue;
                };
                if let Some(why) = s("Compat").and_then(|c| incompatible(&name, &e.pmu, &c, opts)) {
                    out.incompatible.entry(key).or_insert(why);
                    continue;
                }
                out.events.entry(key).or_insert(e);
            }
        }
    }
    Ok(out)
}

/// The spec terms of one event object, as `jevents.py` builds them
/// (`None` for an object that names no encoding, e.g. perf's tool
/// events).
pub(super) fn json_event(s: &dyn Fn(&str) -> Option<String>, opts: &Options) -> Option<JsonEvent> {
    let name = s("EventName")?.to_ascii_lowercase();
    let num = |v: &str| -> Option<u64> {
        let first = v.split(',').next()?.trim();
        match first
            .strip_prefix("0x")
            .or_else(|| first.strip_prefix("0X"))
        {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => first.parse().ok(),
        }
    };
    let pmu = match s("Unit") {
        None => opts.core_pmu.clone(),
        Some(u) => UNITS.iter().find(|(k, _)| *k == u).map_or_else(
            || format!("uncore_{}", u.to_ascii_lowercase()),
            |(_, p)| (*p).to_string(),
        ),
    };
    if pmu == "tool" {
        return None;
    }
    let terms = if let Some((_, t)) = super::FIXED.iter().find(|(n, _)| *n == name) {
        (*t).to_string()
    } else {
        let mut code = s("EventCode").and_then(|v| num(&v)).unwrap_or(0);
        if let Some(ext) = s("ExtSel").and_then(|v| num(&v)) {
            code |= ext << 8;
        }
        let mut t = match s("ConfigCode").and_then(|v| num(&v)) {
            Some(c) => format!("config={c:#x}"),
            None => format!("event={code:#x}"),
        };
        for (field, term) in FIELDS {
            if let Some(v) = s(field).and_then(|v| num(&v)).filter(|&v| v != 0) {
                let _ = write!(t, ",{term}={v:#x}");
            }
        }
        if let Some(f) = s("Filter") {
            let _ = write!(t, ",{f}");
        }
        if let (Some(idx), Some(val)) = (s("MSRIndex").and_then(|v| num(&v)), s("MSRValue")) {
            let term = match idx {
                0x3f6 => Some("ldlat"),
                0x1a6 | 0x1a7 => Some("offcore_rsp"),
                0x3f7 => Some("frontend"),
                _ => None,
            };
            if let Some(term) = term {
                let _ = write!(t, ",{term}={val}");
            }
        }
        t
    };
    Some(JsonEvent {
        pmu,
        terms,
        help: s("BriefDescription"),
        per_pkg: s("PerPkg").is_some_and(|v| v.trim() == "1"),
        counted_as: s("CountedAs"),
    })
}

/// The target's PMUs a JSON `Unit`'s PMU names: itself, or its numbered
/// instances (`uncore_imc` is `uncore_imc_0`, `uncore_imc_1`, ...).
pub(super) fn instances<'t>(t: &'t Target, pmu: &str) -> Vec<&'t TargetPmu> {
    t.pmus
        .iter()
        .filter(|p| {
            p.name == pmu
                || p.name.strip_prefix(pmu).is_some_and(|rest| {
                    rest.strip_prefix('_').is_some_and(|n| {
                        !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric())
                    })
                })
        })
        .collect()
}

/// Why the target does not take an event of `pmu` whose `Compat` is
/// `compat`: perf matches it, as a regular expression, against the whole
/// of the PMU's sysfs `identifier`; a PMU without one takes every entry.
/// `None` when taken (or without a target).
pub(super) fn incompatible(name: &str, pmu: &str, compat: &str, opts: &Options) -> Option<String> {
    let t = opts.target.as_ref()?;
    let ids: Vec<&str> = instances(t, pmu)
        .into_iter()
        .filter_map(|p| p.identifier.as_deref())
        .collect();
    if ids.is_empty() {
        return None;
    }
    let re = match regex::Regex::new(&format!("^(?:{compat})$")) {
        Ok(re) => re,
        Err(_) => {
            return Some(format!(
                "`{name}`: its Compat `{compat}` is not a regular expression"
            ))
        }
    };
    if ids.iter().any(|id| re.is_match(id.trim())) {
        return None;
    }
    Some(format!(
        "`{name}` is for other versions of {pmu}: its Compat `{compat}` matches no identifier of the target's ({})",
        ids.join(", ")
    ))
}
