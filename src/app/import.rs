//! `perf-exporter metrics import FILE...`: reads perf's JSON files and
//! writes the config [`crate::config::import`] makes of them.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::{AppError, Output};
use crate::config::import::{import, Options, Target, TargetPmu};
use crate::pmu::{PmuTable, Scope};
use crate::terminal::escape;

/// The largest JSON file read (perf's largest, Sapphire Rapids' uncore
/// events, is under 2 MiB).
const MAX_FILE: u64 = 64 << 20;

fn read(path: &Path) -> Result<String, AppError> {
    let err = |e: std::io::Error| {
        AppError::Import(format!("{}: {e}", escape(&path.display().to_string())))
    };
    let f = std::fs::File::open(path).map_err(err)?;
    let mut text = String::new();
    f.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(err)?;
    if text.len() as u64 > MAX_FILE {
        return Err(AppError::Import(format!(
            "{}: larger than {} MiB",
            escape(&path.display().to_string()),
            MAX_FILE >> 20
        )));
    }
    Ok(text)
}

/// The PMUs of the sysfs tree `sysfs` as the importer needs them (their
/// events, `identifier`, whether they have a cpumask).
fn target(sysfs: &Path) -> Result<Target, AppError> {
    let table = PmuTable::discover(sysfs).map_err(|e| {
        AppError::Import(format!(
            "--target {}: {}",
            escape(&sysfs.display().to_string()),
            escape(&e.to_string())
        ))
    })?;
    let dir = sysfs.join("bus/event_source/devices");
    let pmus = table
        .pmus
        .iter()
        .map(|p| TargetPmu {
            name: p.name.clone(),
            events: p.events.keys().map(|e| e.to_ascii_lowercase()).collect(),
            identifier: crate::bounded::read_attribute(&dir.join(&p.name).join("identifier"))
                .ok()
                .map(|s| s.trim().to_string()),
            cpumask: matches!(p.scope, Scope::Cpumask(_)),
            core: p.is_core(),
        })
        .collect();
    Ok(Target { pmus })
}

/// Runs the import: the config on standard output, or written to
/// `output` with a summary on standard output. With `target_sysfs`, names
/// are resolved against that host's PMUs too.
pub(super) fn run(
    files: &[PathBuf],
    output: Option<&Path>,
    mut options: Options,
    target_sysfs: Option<&Path>,
) -> Result<Output, AppError> {
    if let Some(t) = target_sysfs {
        options.target = Some(target(t)?);
    }
    let options = &options;
    let mut texts = Vec::with_capacity(files.len());
    for f in files {
        texts.push((f.display().to_string(), read(f)?));
    }
    let out = import(&texts, options)
        .map_err(|e| AppError::Import(escape(&e.to_string()).into_owned()))?;
    let mut summary = format!(
        "{} metrics taken, {} left out",
        out.taken,
        out.skipped.len()
    );
    for s in &out.skipped {
        summary += &format!("\n  {}: {}", escape(&s.metric), escape(&s.why));
    }
    let failure = (out.taken == 0).then(|| format!("no metric could be taken: {summary}"));
    match output {
        None => Ok(Output {
            text: out.yaml,
            failure,
        }),
        Some(p) => {
            std::fs::write(p, &out.yaml).map_err(|e| {
                AppError::Import(format!("{}: {e}", escape(&p.display().to_string())))
            })?;
            Ok(Output {
                text: format!("wrote {}: {summary}\n", escape(&p.display().to_string())),
                failure,
            })
        }
    }
}
