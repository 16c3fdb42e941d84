//! The cgroups part of `check` (and of the landing page): the root, the
//! cgroups matched, counted and left out, and why.

use crate::cgroup::{CgroupError, LeftOutReason, Root, Selection};
use crate::engine::cgroup::{BackendChoice, BpfUnavailable};
use crate::problem::Problem;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One matched cgroup: a row of `check` and of the landing page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupRow {
    /// The path relative to the root (the `cgroup` label).
    pub cgroup: String,
    /// `counted` or `left_out`.
    pub status: &'static str,
    /// `pod`, `container`, `service` or `path`; `null` when left out.
    pub kind: Option<&'static str>,
    /// The labels its series carry (counted cgroups).
    pub labels: BTreeMap<&'static str, String>,
    /// The problem's code when left out (`cgroup_over_limit`,
    /// `cgroup_gone`).
    pub problem: Option<&'static str>,
    /// Why it is left out.
    pub reason: Option<String>,
    /// What to do about it.
    pub what_to_do: Option<String>,
    /// Why it is left out (`None`: counted).
    #[serde(skip)]
    pub left_out: Option<LeftOutReason>,
}

/// The rows of a selection: counted ones, then left-out ones, each by
/// path.
pub fn cgroup_rows(sel: &Selection) -> Vec<CgroupRow> {
    let counted = sel.counted.iter().map(|c| CgroupRow {
        cgroup: c.rel.clone(),
        status: "counted",
        kind: Some(c.kind.as_str()),
        labels: c.labels.iter().cloned().collect(),
        problem: None,
        reason: None,
        what_to_do: None,
        left_out: None,
    });
    let left = sel.left_out.iter().map(|l| {
        let p = l.problem();
        CgroupRow {
            cgroup: l.rel.clone(),
            status: "left_out",
            kind: None,
            labels: BTreeMap::new(),
            problem: Some(p.code()),
            reason: Some(p.to_string()),
            what_to_do: Some(p.what_to_do()),
            left_out: Some(l.reason.clone()),
        }
    });
    counted.chain(left).collect()
}

/// The `cgroups` object of `check --json`.
#[derive(Debug, Clone, Serialize)]
pub struct CheckCgroups {
    /// The cgroup root, `null` when none was found.
    pub root: Option<String>,
    /// `cgroup2` or `cgroup v1 perf_event`.
    pub hierarchy: Option<&'static str>,
    /// The bound in force.
    pub max_cgroups: usize,
    /// How many cgroups the section matched.
    pub matched: usize,
    /// How many are counted.
    pub counted: usize,
    /// How many are left out.
    pub left_out: usize,
    /// Every matched cgroup.
    pub cgroups: Vec<CgroupRow>,
    /// Why nothing could be selected (`no_cgroup_hierarchy`), else `null`.
    pub problem: Option<&'static str>,
    /// The message of that problem.
    pub reason: Option<String>,
    /// What to do about it.
    pub what_to_do: Option<String>,
    /// The per-cgroup backend that would count, and why (`null` where
    /// `check` was not asked to say, e.g. no hierarchy).
    pub backend: Option<CheckBackend>,
}

/// The `cgroups.backend` object of `check --json`: the backend and why,
/// as the text's `Per-cgroup backend:` line says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckBackend {
    /// `perf` or `bpf`; `null` when a configured `bpf` cannot count.
    pub name: Option<&'static str>,
    /// Why, a fixed code: `configured`, `bpf_available`,
    /// `bpf_no_capability`, `bpf_no_btf`, `simulated`, `bpf_load_failed`.
    pub why: &'static str,
    /// The reason in words.
    pub reason: String,
    /// What to do, `null` when nothing is wrong.
    pub what_to_do: Option<String>,
}

impl CheckBackend {
    /// From the backend choice (see [`crate::engine::cgroup::choice::choose`]).
    pub fn new(c: &Result<BackendChoice, BpfUnavailable>) -> Self {
        match c {
            Ok(c) => {
                let todo = c.why.what_to_do();
                CheckBackend {
                    name: Some(c.kind.name()),
                    why: c.why.code(),
                    reason: c.why.to_string(),
                    what_to_do: (!todo.is_empty()).then_some(todo),
                }
            }
            Err(e) => CheckBackend {
                name: None,
                why: e.why.code(),
                reason: format!("backend bpf cannot count: {}", e.reason()),
                what_to_do: Some(e.what_to_do()),
            },
        }
    }
}

impl CheckCgroups {
    /// From a discovery's outcome (see [`crate::cgroup::discover`]).
    pub fn new(found: &Result<(Root, Selection), CgroupError>, max_cgroups: usize) -> Self {
        match found {
            Ok((root, sel)) => CheckCgroups {
                root: Some(root.path.display().to_string()),
                hierarchy: Some(root.hierarchy.as_str()),
                max_cgroups,
                matched: sel.counted.len() + sel.left_out.len(),
                counted: sel.counted.len(),
                left_out: sel.left_out.len(),
                cgroups: cgroup_rows(sel),
                problem: None,
                reason: None,
                what_to_do: None,
                backend: None,
            },
            Err(e) => {
                let p: Problem = e.problem();
                CheckCgroups {
                    root: None,
                    hierarchy: None,
                    max_cgroups,
                    matched: 0,
                    counted: 0,
                    left_out: 0,
                    cgroups: Vec::new(),
                    problem: Some(p.code()),
                    reason: Some(p.to_string()),
                    what_to_do: Some(p.what_to_do()),
                    backend: None,
                }
            }
        }
    }

    /// Human-readable text: the root, one line per cgroup, what to do
    /// once per kind of problem, and a summary line.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let Some(root) = &self.root else {
            let _ = writeln!(
                s,
                "cgroups: {}; what to do: {}",
                self.reason.as_deref().unwrap_or(""),
                self.what_to_do.as_deref().unwrap_or("")
            );
            return s;
        };
        let _ = writeln!(
            s,
            "cgroup root: {} ({})",
            shown(root),
            self.hierarchy.unwrap_or("")
        );
        let w = self
            .cgroups
            .iter()
            .map(|r| shown(&r.cgroup).len())
            .max()
            .unwrap_or(6)
            // Bounded (a name from outside sets no width beyond this), but
            // wide enough for a Kubernetes container's path (~200).
            .clamp(6, 256);
        let _ = writeln!(s, "{:w$}  {:9}  {:9}  LABELS", "CGROUP", "STATUS", "KIND");
        for r in &self.cgroups {
            let detail = match r.left_out {
                Some(LeftOutReason::OverLimit { .. }) => format!(
                    "not counted: over max_cgroups ({}), busier ones won",
                    self.max_cgroups
                ),
                Some(LeftOutReason::BeyondReach { .. }) => format!(
                    "not counted: {}",
                    r.reason
                        .as_deref()
                        .and_then(|t| t.split_once(" is not counted: "))
                        .map_or("beyond the backend's reach", |(_, why)| why)
                ),
                Some(LeftOutReason::TooDeep { .. }) => {
                    "not walked below: a `**` stops at this depth".to_string()
                }
                Some(LeftOutReason::Gone) => {
                    "not counted: gone between discovery and use".to_string()
                }
                None => r
                    .labels
                    .iter()
                    .filter(|(k, _)| **k != "cgroup")
                    .map(|(k, v)| format!("{k}={}", shown(v)))
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            let _ = writeln!(
                s,
                "{:w$}  {:9}  {:9}  {detail}",
                shown(&r.cgroup),
                r.status,
                r.kind.unwrap_or("-")
            );
        }
        let mut told = Vec::new();
        for r in &self.cgroups {
            if let (Some(code), Some(todo)) = (r.problem, &r.what_to_do) {
                if !told.contains(&code) {
                    told.push(code);
                    let _ = writeln!(s, "{code}: what to do: {todo}");
                }
            }
        }
        let over = |r: &&CgroupRow| matches!(r.left_out, Some(LeftOutReason::OverLimit { .. }));
        let gone = |r: &&CgroupRow| matches!(r.left_out, Some(LeftOutReason::Gone));
        let by = |f: fn(&LeftOutReason) -> bool| {
            self.cgroups
                .iter()
                .filter(|r| r.left_out.as_ref().is_some_and(f))
                .count()
        };
        let mut beyond = match by(|l| matches!(l, LeftOutReason::BeyondReach { .. })) {
            0 => String::new(),
            n => format!(", {n} beyond the backend's reach"),
        };
        if let n @ 1.. = by(|l| matches!(l, LeftOutReason::TooDeep { .. })) {
            beyond.push_str(&format!(", {n} not walked below"));
        }
        let _ = writeln!(
            s,
            "{} cgroups matched: {} counted, {} left out ({} over max_cgroups {}, {} gone{beyond})",
            self.matched,
            self.counted,
            self.left_out,
            self.cgroups.iter().filter(over).count(),
            self.max_cgroups,
            self.cgroups.iter().filter(gone).count(),
        );
        s
    }
}

/// A path or label for a terminal: control characters and bidi overrides
/// escaped ([`crate::terminal::escape`]; a newline in a cgroup name must
/// not forge a line).
fn shown(s: &str) -> String {
    crate::terminal::escape(s).into_owned()
}

/// `check`'s line on the per-cgroup backend: which counts and why, with
/// what to do when `auto` fell back to `perf`, or why a configured `bpf`
/// cannot count.
pub fn backend_line(c: &Result<BackendChoice, BpfUnavailable>) -> String {
    match c {
        Ok(c) => {
            let todo = c.why.what_to_do();
            if todo.is_empty() {
                format!("Per-cgroup backend: {c}\n")
            } else {
                format!("Per-cgroup backend: {c}\n  what to do: {todo}\n")
            }
        }
        Err(e) => format!("Per-cgroup backend: none ({e})\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_json_names_the_backend_and_why() {
        use crate::engine::cgroup::{BackendKind, Why};
        let ok = CheckBackend::new(&Ok(BackendChoice {
            kind: BackendKind::Perf,
            why: Why::Configured(BackendKind::Perf),
        }));
        assert_eq!(
            serde_json::to_value(&ok).expect("json"),
            serde_json::json!({"name": "perf", "why": "configured", "reason": "backend perf, as configured", "what_to_do": null})
        );
        let no_btf = CheckBackend::new(&Err(BpfUnavailable::new(Why::NoBtf {
            path: "/sys/kernel/btf/vmlinux".into(),
        })));
        assert_eq!(
            serde_json::to_value(&no_btf).expect("json"),
            serde_json::json!({
                "name": null,
                "why": "bpf_no_btf",
                "reason": "backend bpf cannot count: the kernel has no BTF (/sys/kernel/btf/vmlinux is missing)",
                "what_to_do": "use a kernel built with CONFIG_DEBUG_INFO_BTF (most distributions' kernels since 2020); or set `cgroups.backend: perf`",
            })
        );
    }
    use crate::cgroup::{Cgroup, Hierarchy, Kind, LeftOut, LeftOutReason};

    #[test]
    fn rows_and_text_say_what_is_left_out_and_why() {
        let sel = Selection {
            counted: vec![Cgroup {
                rel: "app/a\nb".into(),
                dir: "/r/app/a\nb".into(),
                id: 7,
                kind: Kind::Path,
                labels: vec![("cgroup", "app/a\nb".into())],
            }],
            left_out: vec![
                LeftOut {
                    rel: "app/c".into(),
                    reason: LeftOutReason::OverLimit { max_cgroups: 1 },
                },
                LeftOut {
                    rel: "app/d".into(),
                    reason: LeftOutReason::Gone,
                },
            ],
        };
        let root = Root {
            path: "/r".into(),
            hierarchy: Hierarchy::V2,
        };
        let c = CheckCgroups::new(&Ok((root, sel)), 1);
        assert_eq!((c.matched, c.counted, c.left_out), (3, 1, 2));
        assert_eq!(c.cgroups[1].problem, Some("cgroup_over_limit"));
        let t = c.text();
        assert!(t.contains("app/a\\x0ab  counted"), "{t}");
        assert_eq!(t.lines().count(), 8, "{t}");
        assert!(
            t.ends_with(
                "3 cgroups matched: 1 counted, 2 left out (1 over max_cgroups 1, 1 gone)\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn no_hierarchy_is_one_line_with_what_to_do() {
        let e = CgroupError::NoHierarchy {
            mountinfo: "/p/self/mountinfo".into(),
            why: "no cgroup filesystem is mounted".into(),
        };
        let c = CheckCgroups::new(&Err(e), 5);
        assert_eq!(c.problem, Some("no_cgroup_hierarchy"));
        let t = c.text();
        assert_eq!(t.lines().count(), 1, "{t}");
        assert!(t.contains("--path.cgroupfs"), "{t}");
    }
}
