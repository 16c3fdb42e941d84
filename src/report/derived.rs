//! The derived metrics in the `check` report: which alternative of each
//! `expr:` this host takes, and why the others (or all) were rejected.

use super::tried::{CheckTried, Row};
use crate::config::derived::LeftOut;
use crate::problem::Class;
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
                tried: d.tried.iter().map(CheckTried::of).collect(),
            })
            .collect()
    }
}

/// A default derived metric left out of a config without a `derived:`
/// section, and the inputs it misses.
#[derive(Debug, Serialize)]
pub struct CheckLeftOut {
    /// Its name.
    pub name: String,
    /// The inputs of its first alternative the config does not count.
    pub missing: Vec<String>,
}

/// The default table as a config without a `derived:` section takes it.
#[derive(Debug, Serialize)]
pub struct CheckDefaultTable {
    /// The entries of the default table.
    pub entries: usize,
    /// Those that apply (the `derived` rows).
    pub applied: usize,
    /// Those left out because the config does not count their inputs.
    pub left_out: Vec<CheckLeftOut>,
}

impl CheckDefaultTable {
    /// From the entries kept (`applied`) and those left out.
    pub fn of(applied: usize, left_out: &[LeftOut]) -> Self {
        CheckDefaultTable {
            entries: applied + left_out.len(),
            applied,
            left_out: left_out
                .iter()
                .map(|l| CheckLeftOut {
                    name: l.name.clone(),
                    missing: l.missing.clone(),
                })
                .collect(),
        }
    }

    /// Its line of the text (after the `DERIVED` table), when something
    /// was left out.
    pub(super) fn text(&self) -> String {
        if self.left_out.is_empty() {
            return String::new();
        }
        let names: Vec<&str> = self.left_out.iter().map(|l| l.name.as_str()).collect();
        format!(
            "{} derived (default table, the config has no `derived:`): {} apply to this config's metrics, {} left out because their inputs are not counted: {}\n",
            self.entries,
            self.applied,
            self.left_out.len(),
            escape(&names.join(", "))
        )
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
        let row = Row {
            name: &d.name,
            status: d.status,
            class: d.class,
            taken: d.expr.as_deref(),
            should_be: "computable",
            tried: &d.tried,
        };
        row.head(&mut s, w);
        row.rejected(&mut s, w);
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
