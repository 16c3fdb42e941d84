//! What a name in a metric's expression is: an event of the files, a
//! sysfs event of the target, a generic event, another metric, or
//! `duration_time`; and whether the target takes an event (`Compat`,
//! `PerPkg`).

use super::json::instances;
use super::{mods_suffix, snake, Counted, Importer, JsonEvent, Resolved, TargetPmu, FIXED};

impl Importer<'_> {
    /// Why the target cannot count `e` once per package as perf does
    /// (`PerPkg` on a PMU without a `cpumask`), or `None`.
    fn per_pkg_refused(&self, name: &str, e: &JsonEvent) -> Option<String> {
        let t = self.opts.target.as_ref()?;
        if !e.per_pkg {
            return None;
        }
        let pmus = instances(t, &e.pmu);
        (!pmus.is_empty() && pmus.iter().all(|p| !p.cpumask)).then(|| {
            format!(
                "`{name}` is counted once per package (PerPkg) but the target's {} has no cpumask: opened on every CPU, its count would be summed once per CPU",
                e.pmu
            )
        })
    }

    /// A bare name the files do not define, as the target's sysfs names
    /// it: `(pmu, event)`, the PMU a pattern when the event is on every
    /// instance of one (`uncore_imc_*`).
    fn on_target(&self, ev: &str) -> Result<Option<(String, String)>, String> {
        let Some(t) = &self.opts.target else {
            return Ok(None);
        };
        let key = ev.to_ascii_lowercase();
        let have: Vec<&TargetPmu> = t.pmus.iter().filter(|p| p.events.contains(&key)).collect();
        let Some(first) = have.first() else {
            return Ok(None);
        };
        if let Some(core) = have.iter().find(|p| p.core) {
            let pmu = if have.iter().filter(|p| p.core).count() > 1 {
                "core".to_string()
            } else {
                core.name.clone()
            };
            return Ok(Some((pmu, key)));
        }
        let stem = |n: &str| -> String {
            n.rsplit_once('_')
                .filter(|(_, i)| !i.is_empty() && i.chars().all(|c| c.is_ascii_digit()))
                .map_or_else(|| n.to_string(), |(s, _)| s.to_string())
        };
        let s = stem(&first.name);
        if have.len() == 1 {
            return Ok(Some((first.name.clone(), key)));
        }
        if have.iter().all(|p| stem(&p.name) == s) {
            return Ok(Some((format!("{s}_*"), key)));
        }
        let names: Vec<&str> = have.iter().map(|p| p.name.as_str()).collect();
        Err(format!(
            "`{ev}` is an event of several PMUs of the target ({}): write `pmu@{key}@` in the expression",
            names.join(", ")
        ))
    }

    /// An event of the files, or why the target does not take it.
    fn file_event(&self, name: &str) -> Result<Option<&JsonEvent>, String> {
        let key = name.to_ascii_lowercase();
        match self.events.get(&key) {
            Some(e) => match self.per_pkg_refused(name, e) {
                Some(why) => Err(why),
                None => Ok(Some(e)),
            },
            None => match self.incompatible.get(&key) {
                Some(why) => Err(why.clone()),
                None => Ok(None),
            },
        }
    }

    /// What an operand names: an event of the files (`NAME`,
    /// `NAME:mods`, `pmu@NAME,terms@`), a sysfs event (`pmu@name@`) or
    /// raw terms (`pmu@event=..@`), a metric, a sysfs event of the target
    /// (`TSC`), a generic event, or a name the evaluator knows
    /// (`duration_time`).
    pub(super) fn resolve(&self, name: &str) -> Result<Resolved, String> {
        if name == "duration_time" {
            return Ok(Resolved::Keep);
        }
        if let Some(m) = self.by_name.get(&name.to_ascii_lowercase()) {
            return Ok(Resolved::Metric(m.name.clone()));
        }
        let core = |pmu: &str| pmu == self.opts.core_pmu || pmu == "cpu_core" || pmu == "cpu_atom";
        let (pmu, terms, (help, counted_as), label) =
            if let Some((pmu, rest)) = name.split_once('@') {
                let (inside, mods) = rest.rsplit_once('@').unwrap_or((rest, ""));
                let (first, extra) = inside.split_once(',').unwrap_or((inside, ""));
                let known = if first.contains('=') {
                    None
                } else {
                    self.file_event(first)?
                };
                let mut terms = known.map_or_else(|| first.to_string(), |e| e.terms.clone());
                if !extra.is_empty() {
                    terms = format!("{terms},{extra}");
                }
                (
                    pmu.to_string(),
                    format!("{terms}{}", mods_suffix(mods)),
                    (
                        known.and_then(|e| e.help.clone()),
                        known.and_then(|e| e.counted_as.clone()),
                    ),
                    format!("{pmu}_{inside}"),
                )
            } else {
                let (ev, mods) = name.split_once(':').unwrap_or((name, ""));
                match self.file_event(ev)? {
                    Some(e) => (
                        e.pmu.clone(),
                        format!("{}{}", e.terms, mods_suffix(mods)),
                        (e.help.clone(), e.counted_as.clone()),
                        name.to_string(),
                    ),
                    // perf's generic names (`cycles`, `L1-dcache-loads`) are
                    // the kernel's, whatever the model.
                    None if crate::spec::generic_names().iter().any(|g| g == ev) => (
                        self.opts.core_pmu.clone(),
                        String::new(),
                        (None, None),
                        name.to_string(),
                    ),
                    None => match self.on_target(ev)? {
                        Some((pmu, event)) => (
                            pmu,
                            format!("{event}{}", mods_suffix(mods)),
                            (None, None),
                            name.to_string(),
                        ),
                        None => {
                            let target = if self.opts.target.is_some() {
                                ", nor a sysfs event of the target"
                            } else {
                                ""
                            };
                            return Err(format!(
                            "`{name}` is neither an event of the files given nor a metric{target}"
                        ));
                        }
                    },
                }
            };
        let specs = if terms.is_empty() {
            vec![name.to_string()]
        } else if pmu.starts_with("uncore_") && !pmu.contains('*') {
            vec![format!("{pmu}_*/{terms}/"), format!("{pmu}/{terms}/")]
        } else {
            vec![format!("{pmu}/{terms}/")]
        };
        let general = terms.is_empty()
            || !(core(&pmu)
                && (terms.starts_with("event=0x0,")
                    || terms == "event=0x0"
                    || FIXED.iter().any(|(_, t)| *t == terms)));
        Ok(Resolved::Event(Counted {
            metric: format!("perf_{}_total", snake(&label)),
            pmu,
            specs,
            general,
            help,
            counted_as,
        }))
    }
}
