//! The problems page (`problems.md`): every problem code with its class,
//! message and what to do, then the other vocabularies of reasons.

use super::{cell, GENERATED};
use crate::problem::Problem;
use crate::problem::{catalogue, Vocabulary};
use std::fmt::Write as _;

/// Every problem code, its class, message and what to do.
pub(super) fn problems_page() -> String {
    let mut out = String::from(GENERATED);
    out.push_str("# Problems\n\n");
    out.push_str(
        "Why a metric (or an alternative, a PMU or a CPU of it) is not counted. The code is \
         the `reason` label of `perf_event_available`, the `problem` of `check --json`; \
         the class is its `class` label: `not_on_platform` is an expected absence on this \
         hardware, `failed` means it should be countable here. The log, `check`, the landing \
         page and the live view render the same message and what to do. Upper-case words \
         stand for the event, PMU, set or cgroup concerned.\n\n",
    );
    let all = Problem::examples();
    for code in Problem::CODES {
        let _ = write!(out, "## `{code}`\n\n");
        let mut first = true;
        for p in all.iter().filter(|p| p.code() == *code) {
            if first {
                let _ = write!(out, "Class: `{}`.\n\n", p.class().as_str());
                first = false;
            }
            let _ = write!(
                out,
                "- **{}**  \n  What to do: {}\n",
                cell(&p.to_string()),
                cell(&p.what_to_do())
            );
        }
        out.push('\n');
    }
    for (vocabulary, title, intro) in [
        (
            Vocabulary::Cgroup,
            "Not counted per cgroup",
            "Why something is not counted per cgroup (the landing page's \"Not counted per cgroup\" table, `check`).",
        ),
        (
            Vocabulary::Backend,
            "Per-cgroup backend",
            "Which per-cgroup backend counts, and why (`check`'s `cgroups.backend.why`).",
        ),
        (
            Vocabulary::Budget,
            "Counter budget",
            "Who holds a core PMU's general-purpose counters, and whether it is a virtual PMU (`check`'s `counters`, the landing page's counter budget, `perf_pmu_counters`).",
        ),
        (
            Vocabulary::Counter,
            "Implausible counters",
            "Why a counter's state is `implausible` (the `reason` of `perf_counter_implausible_info`, the live view, `stat`): its count is one the CPU cannot physically produce. The bounds and where they come from: the guide's counter states page.",
        ),
    ] {
        let _ = write!(out, "# {title}\n\n{intro}\n\n");
        let mut seen: Vec<&str> = Vec::new();
        for e in catalogue().filter(|e| e.vocabulary == vocabulary) {
            if !seen.contains(&e.code) {
                seen.push(e.code);
                let _ = write!(
                    out,
                    "## `{}`\n\nClass: `{}`. {}\n\n",
                    e.code,
                    e.class.as_str(),
                    cell(e.summary)
                );
            }
            if !e.what_to_do.is_empty() {
                let _ = writeln!(out, "- What to do: {}", cell(&e.what_to_do));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_code_has_an_example() {
        let ex = Problem::examples();
        for code in Problem::CODES {
            assert!(
                ex.iter().any(|p| p.code() == *code),
                "no example of {code} in Problem::examples(): add one"
            );
        }
        for p in &ex {
            assert!(
                Problem::CODES.contains(&p.code()),
                "{} is not in Problem::CODES",
                p.code()
            );
        }
    }
}
