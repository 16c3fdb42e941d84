//! Taking the metrics: each metric's operands resolved ([`Importer::resolve`]),
//! the metrics it reads taken first, its expression renamed to the
//! config's names; what cannot be taken is said with why.

use std::collections::{BTreeMap, BTreeSet};

use super::json::Read;
use super::{snake, Imported, Importer, JsonMetric, Options, Resolved, Skipped, Taken};
use crate::derive;

/// The derived name of a perf metric.
fn derived_name(metric: &str) -> String {
    let s = snake(metric);
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("m_{s}")
    } else {
        s
    }
}

impl<'a> Importer<'a> {
    /// The importer of what `read` holds.
    pub(super) fn new(read: Read, opts: &'a Options) -> Self {
        Importer {
            by_name: read
                .metrics
                .iter()
                .map(|m| (m.name.to_ascii_lowercase(), m.clone()))
                .collect(),
            events: read.events,
            incompatible: read.incompatible,
            metrics: read.metrics,
            opts,
        }
    }
    /// Takes `m` (after the metrics it reads), or says why not.
    fn take(
        &self,
        m: &JsonMetric,
        taken: &mut BTreeMap<String, Result<Taken, String>>,
        depth: usize,
    ) -> Result<(), String> {
        let key = m.name.to_ascii_lowercase();
        if taken.contains_key(&key) {
            return Ok(());
        }
        if depth > derive::MAX_DEPTH {
            return Err("its metric references nest too deep (or form a cycle)".into());
        }
        let result = self.take_one(m, taken, depth);
        taken.insert(key, result);
        Ok(())
    }

    fn take_one(
        &self,
        m: &JsonMetric,
        taken: &mut BTreeMap<String, Result<Taken, String>>,
        depth: usize,
    ) -> Result<Taken, String> {
        let expr = derive::parse(&m.expr).map_err(|e| format!("its expression: {e}"))?;
        let mut events = BTreeSet::new();
        let mut renames: BTreeMap<String, String> = BTreeMap::new();
        for o in expr.operands() {
            match self.resolve(&o.name)? {
                Resolved::Keep => {}
                Resolved::Event(c) => {
                    renames.insert(o.name.clone(), c.metric.clone());
                    events.insert(c);
                }
                Resolved::Metric(name) => {
                    if name.eq_ignore_ascii_case(&m.name) {
                        return Err("its expression reads itself".into());
                    }
                    let other = &self.by_name[&name.to_ascii_lowercase()];
                    self.take(other, taken, depth + 1)?;
                    match &taken[&name.to_ascii_lowercase()] {
                        Ok(t) => {
                            events.extend(t.events.iter().cloned());
                            renames.insert(o.name.clone(), t.name.clone());
                        }
                        Err(_) => return Err(format!("it reads `{name}`, which is not taken")),
                    }
                }
            }
        }
        // `has_event(..)` probes name events that may be missing: counted
        // where the files know them, kept as written otherwise.
        for o in expr.probes() {
            if let Ok(Resolved::Event(c)) = self.resolve(&o.name) {
                renames.insert(o.name.clone(), c.metric.clone());
                events.insert(c);
            }
        }
        let mut text =
            rename(&m.expr, None, &renames).map_err(|e| format!("its expression: {e}"))?;
        let (scale, unit) = m.scale_unit.as_deref().map_or((1.0, None), scale_unit);
        if scale != 1.0 {
            text = format!("{scale} * ({text})");
        }
        let text = super::folded(&text);
        let threshold = m.threshold.as_deref().and_then(|t| {
            // A threshold reads its metric (and others, by name): the
            // names it reads must be taken too.
            let parsed = derive::parse(t).ok()?;
            for o in parsed.operands() {
                if o.name.eq_ignore_ascii_case(&m.name) || renames.contains_key(&o.name) {
                    continue;
                }
                match self.resolve(&o.name).ok()? {
                    Resolved::Metric(n) => {
                        let other = &self.by_name[&n.to_ascii_lowercase()];
                        self.take(other, taken, depth + 1).ok()?;
                        let t = taken[&n.to_ascii_lowercase()].as_ref().ok()?;
                        renames.insert(o.name.clone(), t.name.clone());
                    }
                    Resolved::Keep => {}
                    Resolved::Event(_) => return None,
                }
            }
            rename(t, Some(&m.name), &renames).ok()
        });
        Ok(Taken {
            name: derived_name(&m.name),
            expr: text,
            help: m.help.clone(),
            unit,
            group: m.group.clone(),
            threshold,
            record: m.record.clone(),
            requires_cpu: m.requires_cpu.clone(),
            events,
        })
    }

    /// Every metric taken (file order, each derived name once), the
    /// metrics left out and the thresholds dropped.
    pub(super) fn taken(&self) -> (Vec<Taken>, Vec<Skipped>, Vec<Skipped>) {
        let mut taken: BTreeMap<String, Result<Taken, String>> = BTreeMap::new();
        let mut skipped = Vec::new();
        let mut dropped = Vec::new();
        let mut names_seen: BTreeSet<String> = BTreeSet::new();
        for m in &self.metrics {
            if let Err(why) = self.take(m, &mut taken, 0) {
                taken.insert(m.name.to_ascii_lowercase(), Err(why));
            }
        }
        // File order, each metric once; two perf names that give one
        // derived name keep the first.
        let mut order: Vec<Taken> = Vec::new();
        for m in &self.metrics {
            let key = m.name.to_ascii_lowercase();
            if !names_seen.insert(key.clone()) {
                continue;
            }
            match taken.get(&key) {
                Some(Ok(t)) => {
                    if order.iter().any(|o| o.name == t.name) {
                        skipped.push(Skipped {
                            metric: m.name.clone(),
                            why: format!(
                                "its name gives `{}`, as an earlier metric's does",
                                t.name
                            ),
                        });
                        continue;
                    }
                    if m.threshold.is_some() && t.threshold.is_none() {
                        dropped.push(Skipped {
                            metric: m.name.clone(),
                            why: "its threshold does not parse in perf's grammar, or reads what is not taken".into(),
                        });
                    }
                    order.push(t.clone());
                }
                Some(Err(why)) => skipped.push(Skipped {
                    metric: m.name.clone(),
                    why: why.clone(),
                }),
                None => {}
            }
        }
        (order, skipped, dropped)
    }

    pub(super) fn run(&self, files: &[(String, String)]) -> Imported {
        let (order, skipped, dropped) = self.taken();
        let order: Vec<&Taken> = order.iter().collect();
        // A metric read by another must come first: the config resolves
        // references in any order, so file order is kept.
        let sets = super::pack::pack(&order, self.opts);
        let yaml = super::yaml::write_yaml(files, &sets, &order, &skipped, &dropped);
        Imported {
            yaml,
            taken: order.len(),
            skipped,
            dropped_thresholds: dropped,
        }
    }
}

/// `text` with the operands in `renames` renamed, and `own` (the
/// metric's own name, which its threshold reads) as its derived name.
fn rename(
    text: &str,
    own: Option<&str>,
    renames: &BTreeMap<String, String>,
) -> Result<String, derive::DeriveError> {
    derive::rename(text, &mut |n| {
        if own.is_some_and(|o| n.eq_ignore_ascii_case(o)) {
            return Some(derived_name(n));
        }
        renames.get(n).cloned()
    })
}

/// `ScaleUnit` (`100%`, `1per_instr`, `1e3MB/s`): the factor and the unit.
/// Prometheus's base units: a percentage stays a fraction (factor 1, unit
/// `ratio`), a byte rate in decimal multiples (`B/s`, `kB/s`, `MB/s`,
/// `GB/s`) becomes bytes per second (`1MB/s` is the factor 1e6).
fn scale_unit(s: &str) -> (f64, Option<String>) {
    let s = s.trim();
    let split = s
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || ((c == 'e' || c == 'E') && i > 0)
                || (c == '-' && i > 0))
        })
        .map_or(s.len(), |(i, _)| i);
    let (num, unit) = s.split_at(split);
    let factor = num.parse::<f64>().unwrap_or(1.0);
    let bytes = |m: f64| (factor * m, Some("bytes per second".to_string()));
    match unit {
        "%" => (1.0, Some("ratio".into())),
        "B/s" => bytes(1.0),
        "kB/s" | "KB/s" => bytes(1e3),
        "MB/s" => bytes(1e6),
        "GB/s" => bytes(1e9),
        "" => (factor, None),
        u => (factor, Some(u.to_string())),
    }
}
