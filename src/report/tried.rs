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

#[cfg(test)]
mod tests {
    use super::*;

    /// The head says what is taken, or why nothing is (in the table's
    /// own words); a line follows for each rejected alternative only.
    #[test]
    fn a_row_says_what_is_taken_or_why_not_and_what_was_rejected() {
        let absent = Problem::NotOnPlatform {
            event: "cpu/slots/".into(),
            detail: "no PMU matches `cpu/slots/` on this host".into(),
        };
        let tried = [
            CheckTried::of(&Tried {
                event: "cpu/slots/".into(),
                problem: Some(absent),
            }),
            CheckTried::of(&Tried {
                event: "cycles".into(),
                problem: None,
            }),
        ];
        assert_eq!(tried[1].reason, SELECTED);
        let row = |class, taken| Row {
            name: "m",
            status: "fallback",
            class,
            taken,
            should_be: "computable",
            tried: &tried,
        };
        let mut s = String::new();
        row(None, Some("cycles")).head(&mut s, 6);
        row(Some("not_on_platform"), None).head(&mut s, 6);
        row(Some("failed"), None).head(&mut s, 6);
        row(None, None).head(&mut s, 6);
        row(None, Some("cycles")).rejected(&mut s, 6);
        assert_eq!(
            s,
            "m       fallback     cycles\n\
             m       fallback     - (not on this platform)\n\
             m       fallback     - (failed: should be computable here)\n\
             m       fallback     -\n\
             \x20         tried cpu/slots/: no PMU matches `cpu/slots/` on this host\n"
        );
    }
}
