//! The landing page: version, config and the resolution table with each
//! metric's status and reason.

use super::{lock, State};
use crate::problem::{Class, Problem};
use crate::resolve::chain::{ResolvedMetric, Status};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The reason cell of a metric on the landing page: every alternative's
/// problem for an unavailable metric (then what to do about the one that
/// matters), or the open failures of a counted one.
fn landing_reason<'a>(m: &ResolvedMetric, runtime: impl Iterator<Item = &'a Problem>) -> String {
    if m.status == Status::Unavailable {
        let what = m
            .problem()
            .map(|p| format!(". What to do: {}", p.what_to_do()))
            .unwrap_or_default();
        return format!("{}{what}", m.reason());
    }
    runtime.map(Problem::explain).collect::<Vec<_>>().join("; ")
}

/// Why each metric the page would show as unavailable is unavailable:
/// the live view's reasons.
pub(super) fn reasons(state: &State) -> crate::export::live::Reasons {
    let e = lock(&state.engine);
    let problems = e.problems();
    e.runtime()
        .iter()
        .zip(&e.resolution().metrics)
        .filter(|(rt, m)| m.status == Status::Unavailable || rt.open_fds == 0)
        .map(|(rt, m)| {
            let runtime = problems
                .iter()
                .filter(|(n, _)| n == &rt.metric)
                .map(|(_, p)| p);
            let why = landing_reason(m, runtime);
            let why = if why.is_empty() {
                "no counter could be opened".to_string()
            } else {
                why
            };
            (rt.metric.clone(), why)
        })
        .collect()
}

pub(super) fn landing(state: &State) -> String {
    let e = lock(&state.engine);
    let mut rows = String::new();
    let problems = e.problems();
    for (rt, m) in e.runtime().iter().zip(&e.resolution().metrics) {
        let reason = landing_reason(
            m,
            problems
                .iter()
                .filter(|(n, _)| n == &rt.metric)
                .map(|(_, p)| p),
        );
        let status = match m.class() {
            Some(Class::NotOnPlatform) => "unavailable: not on this platform",
            Some(Class::Failed) => "unavailable: failed",
            None if rt.open_fds == 0 => "unavailable: open failed",
            None => m.status.as_str(),
        };
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&rt.metric),
            esc(status),
            esc(rt.event.as_deref().unwrap_or("-")),
            esc(&rt.pmus.join(", ")),
            rt.open_fds,
            esc(&reason)
        ));
    }
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>perf-exporter</title>\
<style>body{{font-family:sans-serif}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}}</style></head>\n\
<body><h1>perf-exporter</h1><p>Version {}{}. Config: {}.</p>\n\
<ul><li><a href=\"{}\">Metrics</a></li><li><a href=\"/-/healthy\">Health</a></li><li><a href=\"/-/ready\">Readiness</a></li></ul>\n\
<h2>Resolution</h2><table><tr><th>metric</th><th>status</th><th>event</th><th>PMU</th><th>fds</th><th>reason</th></tr>\n{}</table></body></html>\n",
        env!("CARGO_PKG_VERSION"),
        if state.simulated { " (simulated PMU)" } else { "" },
        esc(&state.config_name),
        esc(&state.telemetry_path),
        rows
    )
}
