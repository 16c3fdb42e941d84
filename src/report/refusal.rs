//! Why nothing would be counted (the one rule `serve`, a reload, `stat`
//! and `check` refuse by) and the explanations of problems it gives.

use crate::privilege::Privilege;
use crate::problem::{Class, Problem};
use crate::resolve::chain::{Resolution, Status};

/// Refines the permission problems of a resolution with what this
/// process holds ([`Privilege::diagnose`]): `probed` says whether opens
/// were tried at all (a live or simulated kernel).
pub fn diagnose(res: &mut Resolution, privilege: &Privilege, probed: bool) {
    let any_open = probed && res.metrics.iter().any(|m| m.status != Status::Unavailable);
    privilege.diagnose(res.problems_mut(), any_open);
}

/// Orders problems for an explanation: failures (things to fix) first,
/// permission errors first among them, expected absences last.
fn rank(p: &Problem) -> u8 {
    match (p.class(), p.is_permission()) {
        (Class::Failed, true) => 0,
        (Class::Failed, false) => 1,
        (Class::NotOnPlatform, _) => 2,
    }
}

/// The most useful explanations among `(metric, problem)` pairs: one
/// per kind of problem (at most `n`), each naming its metrics (at most
/// five) and saying what to do: `m1, m2: problem; what to do: ...`.
pub fn explain_first<'a>(
    problems: impl IntoIterator<Item = (&'a str, &'a Problem)>,
    n: usize,
) -> String {
    let mut v: Vec<(&str, &Problem)> = problems.into_iter().collect();
    v.sort_by_key(|(_, p)| rank(p));
    let mut groups: Vec<(Vec<&str>, &Problem)> = Vec::new();
    for (m, p) in v {
        // One group per kind of problem (not per code: running out of
        // descriptors altogether is told apart from one failed open).
        let kind = std::mem::discriminant(p);
        match groups
            .iter_mut()
            .find(|(_, g)| std::mem::discriminant(*g) == kind)
        {
            Some((ms, _)) if !ms.contains(&m) => ms.push(m),
            Some(_) => {}
            None => groups.push((vec![m], p)),
        }
    }
    groups
        .into_iter()
        .take(n)
        .map(|(ms, p)| {
            let more = match ms.len() {
                0..=5 => String::new(),
                k => format!(" and {} more", k - 5),
            };
            format!(
                "{}{more}: {}",
                ms[..ms.len().min(5)].join(", "),
                p.explain()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the "nothing to count" rule judges: a resolution before its
/// counters open (a reload, `check`) or an engine that opened them
/// (`serve`, `stat`).
#[derive(Debug, Clone, Copy)]
pub enum Counting<'a> {
    /// Resolved, not opened: counts nothing when no metric resolves.
    Resolved(&'a Resolution),
    /// Opened: counts nothing when not one counter opened.
    Opened(&'a crate::engine::Engine),
}

/// Why nothing would be counted: `serve` refuses to start, a reload
/// refuses the new config, `stat` refuses to run and `check` fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NothingToCount {
    /// The config has no metrics.
    NoMetrics,
    /// Not one metric can be counted on this host.
    Unavailable {
        /// Why, per metric.
        problems: Vec<(String, Problem)>,
        /// What this process holds ([`Privilege::summary`]), when nothing
        /// allows system-wide counting.
        privilege: Option<String>,
    },
}

impl std::fmt::Display for NothingToCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NothingToCount::NoMetrics => f.write_str("the config has no metrics: nothing to count"),
            NothingToCount::Unavailable {
                problems,
                privilege,
            } => {
                // What a user can fix first (permission errors), expected
                // absences last.
                let first = explain_first(problems.iter().map(|(m, p)| (m.as_str(), p)), 5);
                match privilege {
                    Some(held) => write!(
                        f,
                        "nothing can be counted on this host: {held}; the first problems: {first}"
                    ),
                    None => write!(f, "nothing can be counted on this host: {first}"),
                }
            }
        }
    }
}

impl std::error::Error for NothingToCount {}

/// The one "nothing to count" rule: `Some` when no metric is configured
/// or not one can be counted (see [`Counting`]), with why. `privilege`,
/// when known, is said when it allows no system-wide counting.
pub fn nothing_to_count(
    what: Counting<'_>,
    privilege: Option<&Privilege>,
) -> Option<NothingToCount> {
    let (res, counting) = match what {
        Counting::Resolved(r) => (r, !r.counts_nothing()),
        Counting::Opened(e) => (e.resolution(), e.counting()),
    };
    if res.metrics.is_empty() {
        return Some(NothingToCount::NoMetrics);
    }
    if counting {
        return None;
    }
    let problems = match what {
        Counting::Resolved(r) => r
            .metrics
            .iter()
            .filter_map(|m| m.problem().map(|p| (m.metric.clone(), p.clone())))
            .collect(),
        Counting::Opened(e) => e.problems(),
    };
    Some(NothingToCount::Unavailable {
        problems,
        privilege: privilege
            .filter(|p| p.grant().is_none())
            .map(Privilege::summary),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::OpenFailure;

    fn absent(e: &str) -> Problem {
        Problem::NotOnPlatform {
            event: e.into(),
            detail: format!("no PMU matches `{e}` on this host"),
        }
    }

    fn fd(e: &str) -> Problem {
        Problem::FdLimit(OpenFailure {
            op: "open",
            event: e.into(),
            pmu: "software".into(),
            cpu: 0,
            errno: libc::EMFILE,
        })
    }

    #[test]
    fn explanations_put_what_to_fix_first_and_group_by_kind() {
        let (a, b, c) = (absent("amd_df"), fd("cpu-clock"), fd("task-clock"));
        let s = explain_first([("m_dram", &a), ("m_clock", &b), ("m_task", &c)], 5);
        let fds = s.find("m_clock, m_task: out of file descriptors").unwrap();
        let dram = s.find("m_dram: no PMU matches").unwrap();
        assert!(fds < dram, "{s}");
        assert_eq!(s.matches("raise RLIMIT_NOFILE").count(), 1, "{s}");
        let many: Vec<String> = (0..8).map(|i| format!("m{i}")).collect();
        let s = explain_first(many.iter().map(|m| (m.as_str(), &b)), 5);
        assert!(s.starts_with("m0, m1, m2, m3, m4 and 3 more: "), "{s}");
    }

    /// One rule, said one way, for `serve`, a reload, `stat` and `check`.
    #[test]
    fn nothing_to_count_is_one_rule_said_one_way() {
        let empty = Resolution {
            sets: Vec::new(),
            metrics: Vec::new(),
        };
        let n = nothing_to_count(Counting::Resolved(&empty), None);
        assert_eq!(n, Some(NothingToCount::NoMetrics));
        assert_eq!(
            NothingToCount::NoMetrics.to_string(),
            "the config has no metrics: nothing to count"
        );
        let hw = Problem::NeedsHardwarePmu {
            event: "cycles".into(),
        };
        let problems = vec![("c_total".to_string(), hw.clone())];
        let n = NothingToCount::Unavailable {
            problems: problems.clone(),
            privilege: None,
        };
        assert_eq!(
            n.to_string(),
            format!(
                "nothing can be counted on this host: c_total: {}",
                hw.explain()
            )
        );
        // What the process holds is said first when it allows nothing.
        let none = Privilege {
            euid: Some(65534),
            cap_eff: 0,
            paranoid: Some(2),
            kernel: Some((6, 8)),
            seccomp: Some(0),
        };
        let n = NothingToCount::Unavailable {
            problems,
            privilege: Some(none.summary()),
        };
        let s = n.to_string();
        assert!(
            s.starts_with(&format!(
                "nothing can be counted on this host: {}; the first problems: c_total: ",
                none.summary()
            )),
            "{s}"
        );
    }
}
