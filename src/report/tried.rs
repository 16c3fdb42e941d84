//! What the metric and derived tables of `check` share: the alternatives
//! tried, and the rendering of a row.

use crate::problem::Problem;
use crate::resolve::chain::{Tried, SELECTED};
use crate::terminal::escape;
use serde::Serialize;
use std::fmt::Write as _;

/// One alternative tried.
#[derive(Debug, Serialize)]
pub struct CheckTried {
    /// The alternative.
    pub event: String,
    /// Why not (or `selected`).
    pub reason: String,
    /// The problem's code (the `reason` label of a `perf_event_available`
    /// series that is 0), `null` when selected.
    pub problem: Option<&'static str>,
    /// What to do about it, `null` when selected.
    pub what_to_do: Option<String>,
}

impl CheckTried {
    /// The report's view of an alternative the resolution tried.
    pub(super) fn of(t: &Tried) -> Self {
        CheckTried {
            event: t.event.clone(),
            reason: t
                .problem
                .as_ref()
                .map_or(SELECTED.into(), ToString::to_string),
            problem: t.problem.as_ref().map(Problem::code),
            what_to_do: t.problem.as_ref().map(Problem::what_to_do),
        }
    }
}

/// One row of the metric or derived table, in a name column `w` wide.
pub(super) struct Row<'a> {
    /// The metric's name.
    pub name: &'a str,
    /// `resolved`, `fallback` or `unavailable`.
    pub status: &'a str,
    /// For an unavailable one: `not_on_platform` or `failed`.
    pub class: Option<&'a str>,
    /// What this host takes: the event spec or the expression.
    pub taken: Option<&'a str>,
    /// What a failed one should be here (`countable`, `computable`).
    pub should_be: &'static str,
    /// Every alternative tried.
    pub tried: &'a [CheckTried],
}

impl Row<'_> {
    /// The row's first line: the name, the status and what is taken (or
    /// why nothing is).
    pub(super) fn head(&self, s: &mut String, w: usize) {
        let failed;
        let taken = match self.class {
            Some("not_on_platform") => "- (not on this platform)",
            Some(_) => {
                failed = format!("- (failed: should be {} here)", self.should_be);
                &failed
            }
            None => self.taken.unwrap_or("-"),
        };
        let _ = writeln!(
            s,
            "{:w$}  {:11}  {}",
            escape(self.name),
            self.status,
            escape(taken)
        );
    }

    /// A line under the row for each alternative rejected, with why.
    pub(super) fn rejected(&self, s: &mut String, w: usize) {
        for t in self.tried.iter().filter(|t| t.problem.is_some()) {
            let _ = writeln!(
                s,
                "{:w$}    tried {}: {}",
                "",
                escape(&t.event),
                escape(&t.reason)
            );
        }
    }
}
