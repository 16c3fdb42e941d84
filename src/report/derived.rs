//! The derived metrics in the `check` report: which alternative of each
//! `expr:` this host takes, and why the others (or all) were rejected.

use super::CheckTried;
use crate::problem::{Class, Problem};
use crate::resolve::chain::SELECTED;
use crate::resolve::derived::DerivedResolution;
use crate::terminal::escape;
use serde::Serialize;
use std::fmt::Write as _;

/// One derived metric in the `check` report.
#[derive(Debug, Serialize)]
pub struct CheckDerived {
    /// Its name.
    pub name: String,
    /// `resolved` (its first alternative), `fallback` or `unavailable`.
    pub status: &'static str,
    /// For an unavailable one: `not_on_platform` or `failed`.
    pub class: Option<&'static str>,
    /// The expression taken, as written.
    pub expr: Option<String>,
    /// Every alternative tried, in order (`event` holds the expression).
    pub tried: Vec<CheckTried>,
}

impl CheckDerived {
    /// The report's rows, in evaluation order.
    pub fn of(r: &DerivedResolution) -> Vec<CheckDerived> {
        r.metrics
            .iter()
            .map(|d| CheckDerived {
                name: d.name.clone(),
                status: d.status.as_str(),
                class: d.class().map(Class::as_str),
                expr: d.expr.clone(),
                tried: d
                    .tried
                    .iter()
                    .map(|t| CheckTried {
                        event: t.event.clone(),
                        reason: t
                            .problem
                            .as_ref()
                            .map_or(SELECTED.into(), ToString::to_string),
                        problem: t.problem.as_ref().map(Problem::code),
                        what_to_do: t.problem.as_ref().map(Problem::what_to_do),
                    })
                    .collect(),
            })
            .collect()
    }
}

/// The text: a `DERIVED` table after the metrics, each rejected
/// alternative under its metric; nothing without derived metrics.
pub(super) fn text(rows: &[CheckDerived], w: usize) -> String {
    let mut s = String::new();
    if rows.is_empty() {
        return s;
    }
    let _ = writeln!(s, "{:w$}  {:11}  EXPR", "DERIVED", "STATUS");
    for d in rows {
        let _ = writeln!(
            s,
            "{:w$}  {:11}  {}",
            escape(&d.name),
            d.status,
            escape(match d.class {
                Some("not_on_platform") => "- (not on this platform)",
                Some(_) => "- (failed: should be computable here)",
                None => d.expr.as_deref().unwrap_or("-"),
            })
        );
        for t in d.tried.iter().filter(|t| t.problem.is_some()) {
            let _ = writeln!(
                s,
                "{:w$}    tried {}: {}",
                "",
                escape(&t.event),
                escape(&t.reason)
            );
        }
    }
    let n = |st: &str| rows.iter().filter(|d| d.status == st).count();
    let _ = writeln!(
        s,
        "{} derived: {} resolved, {} fallback, {} unavailable",
        rows.len(),
        n("resolved"),
        n("fallback"),
        n("unavailable"),
    );
    s
}
