//! Every reason code with what it means and what to do: the listing a
//! reference page of problem codes is generated from ([`catalogue`],
//! [`Problem::catalogue`]). Stable: entries come in the order of
//! [`Problem::CODES`], then the per-cgroup issues, then the backend
//! reasons, then why a counter is implausible; a code whose advice depends on the case (a given
//! `--path.tracefs` or none, a seccomp filter or an LSM, ...) has one
//! entry per case.

use super::backend::Why;
use super::budget::Held;
use super::cgroup::CgroupIssue;
use super::plausible::Implausible;
use super::{Class, OpenFailure, Problem, Reason};

/// Which vocabulary a code belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vocabulary {
    /// [`Problem`]: why a metric (or a PMU, CPU or cgroup of it) is not
    /// counted; `perf_event_available`'s `reason` label.
    Problem,
    /// [`CgroupIssue`]: why something is not counted per cgroup (the
    /// landing page's "Not counted per cgroup" table).
    Cgroup,
    /// [`Why`]: which per-cgroup backend counts, and why (`check`'s
    /// `cgroups.backend.why`).
    Backend,
    /// [`Held`]: who holds a core PMU's counters, and whether it is a
    /// virtual PMU (`check`'s `counters`, the landing page).
    Budget,
    /// [`Implausible`]: why a counter is `implausible`
    /// (`perf_counter_implausible_info`'s `reason`).
    Counter,
}

impl Vocabulary {
    /// `problem`, `cgroup` or `backend`.
    pub fn as_str(self) -> &'static str {
        match self {
            Vocabulary::Problem => "problem",
            Vocabulary::Cgroup => "cgroup",
            Vocabulary::Backend => "backend",
            Vocabulary::Budget => "budget",
            Vocabulary::Counter => "counter",
        }
    }
}

/// One code of the reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its vocabulary.
    pub vocabulary: Vocabulary,
    /// The fixed code.
    pub code: &'static str,
    /// What it means, in a few words.
    pub summary: &'static str,
    /// What to do (with placeholders such as `<set>` where the advice
    /// names the case); empty when nothing is wrong.
    pub what_to_do: String,
    /// Expected absence or failure.
    pub class: Class,
}

impl Entry {
    fn of(vocabulary: Vocabulary, r: &dyn Reason) -> Entry {
        Entry {
            vocabulary,
            code: r.code(),
            summary: r.summary(),
            what_to_do: r.what_to_do(),
            class: r.class(),
        }
    }
}

/// Every code of every vocabulary: [`Problem::catalogue`], then the
/// per-cgroup issues, then the backend reasons, then the counter budget's,
/// then why a counter is implausible.
pub fn catalogue() -> impl Iterator<Item = Entry> {
    let cgroup = CgroupIssue::examples()
        .into_iter()
        .map(|i| Entry::of(Vocabulary::Cgroup, &i));
    let backend = Why::examples()
        .into_iter()
        .map(|w| Entry::of(Vocabulary::Backend, &w));
    let budget = Held::examples()
        .into_iter()
        .map(|h| Entry::of(Vocabulary::Budget, &h));
    let counter = Implausible::examples()
        .into_iter()
        .map(|x| Entry::of(Vocabulary::Counter, &x));
    Problem::catalogue()
        .chain(cgroup)
        .chain(backend)
        .chain(budget)
        .chain(counter)
}

impl Problem {
    /// Every [`code`](Self::code) with its summary and what to do, in
    /// the order of [`CODES`](Self::CODES), one entry per case where the
    /// advice depends on it. The stable listing for the reference.
    pub fn catalogue() -> impl Iterator<Item = Entry> {
        Problem::examples()
            .into_iter()
            .map(|p| Entry::of(Vocabulary::Problem, &p))
    }

    /// One problem of each case, with placeholders (`<event>`, `<set>`)
    /// or typical values, in the order of [`CODES`](Self::CODES).
    pub fn examples() -> Vec<Problem> {
        let event = || "<event>".to_string();
        let pmu = || "<pmu>".to_string();
        let set = || "<set>".to_string();
        let open = |event: &str, errno| OpenFailure {
            op: "open",
            event: event.into(),
            pmu: "<pmu>".into(),
            cpu: 0,
            errno,
        };
        let held = "CAP_PERFMON";
        vec![
            Problem::NotOnPlatform {
                event: event(),
                detail: "<what the host lacks>".into(),
            },
            Problem::NeedsHardwarePmu { event: event() },
            Problem::Config {
                event: event(),
                detail: "<what is wrong>".into(),
            },
            Problem::TracefsMissing {
                event: event(),
                given: None,
            },
            Problem::TracefsMissing {
                event: event(),
                given: Some("<--path.tracefs>".into()),
            },
            Problem::TracefsUnreadable {
                event: event(),
                path: "/sys/kernel/tracing".into(),
            },
            Problem::NoOnlineCpu {
                event: event(),
                pmu: pmu(),
            },
            Problem::Privilege(open("<event>", 13)),
            Problem::Seccomp {
                open: open("<event>", 1),
                mode: Some(2),
                allowed_by: held,
            },
            Problem::Seccomp {
                open: open("<event>", 1),
                mode: Some(0),
                allowed_by: held,
            },
            Problem::Refused {
                open: open("<event>", 1),
                allowed_by: held,
            },
            Problem::FdLimit(open("<event>", 24)),
            Problem::FdExhausted {
                soft: 1024,
                hard: 1024,
                used: 1024,
                raise_to: 4096,
            },
            Problem::PmuRefused(open("cycles:u", 22)),
            Problem::PmuRefused(open("<event>", 22)),
            Problem::CpuOffline(open("<event>", 19)),
            Problem::Busy(open("<event>", 16)),
            Problem::Unschedulable {
                event: event(),
                pmu: pmu(),
                cpu: 0,
            },
            Problem::Failed(open("<event>", 5)),
            Problem::GroupTooLarge {
                set: set(),
                pmu: pmu(),
                events: 7,
                counters: 6,
            },
        ]
        .into_iter()
        .chain(Self::cgroup_examples())
        .collect()
    }

    /// [`examples`](Self::examples) of the per-cgroup codes and those
    /// after them in [`CODES`](Self::CODES).
    fn cgroup_examples() -> Vec<Problem> {
        let event = || "<event>".to_string();
        let pmu = || "<pmu>".to_string();
        let set = || "<set>".to_string();
        vec![
            Problem::NoCgroupHierarchy {
                mountinfo: "/proc/self/mountinfo".into(),
                detail: "<what was found>".into(),
            },
            Problem::CgroupOverLimit {
                cgroup: "<cgroup>".into(),
                max_cgroups: 256,
            },
            Problem::CgroupGone {
                cgroup: "<cgroup>".into(),
            },
            Problem::UncoreInCgroupSet {
                set: set(),
                event: event(),
                pmu: pmu(),
            },
            Problem::NoCpuEncoding {
                event: event(),
                pmu: pmu(),
                identity: "GenuineIntel-6-55-4".into(),
                known: true,
            },
            Problem::NoCpuEncoding {
                event: event(),
                pmu: pmu(),
                identity: "<why unknown>".into(),
                known: false,
            },
            Problem::CgroupBeyondReach {
                cgroup: "<cgroup>".into(),
                level: 16,
                above: 0,
                max_level: 16,
                max_above: 8,
            },
            Problem::CgroupWalkTooDeep {
                cgroup: "<cgroup>".into(),
                max_depth: 32,
            },
            Problem::SelfTestFailed {
                pmu: pmu(),
                cpu: 0,
                detail: "<which bound the counts broke>".into(),
            },
            Problem::LiteralUnavailable {
                literal: "<#literal>".into(),
                detail: "<why the host gives no value>".into(),
            },
        ]
    }

    /// What the code means, in a few words, whatever the details.
    pub fn summary(&self) -> &'static str {
        match self {
            Problem::NotOnPlatform { .. } => "no such PMU, event, format term or tracepoint on this host",
            Problem::LiteralUnavailable { .. } => "a `#` literal of a derived metric has no value on this host",
            Problem::NeedsHardwarePmu { .. } => "hardware or cache events without a core PMU (a VM without a virtual PMU)",
            Problem::Config { .. } => "the event spec is wrong for this PMU",
            Problem::TracefsMissing { .. } => "tracefs is not mounted where the exporter looks",
            Problem::TracefsUnreadable { .. } => "tracefs exists but this process may not read it",
            Problem::NoOnlineCpu { .. } => "none of the PMU's CPUs is online",
            Problem::NoCpuEncoding { .. } => "no alternative's `requires_cpu` matches the CPU, or its identity is unknown",
            Problem::Privilege(_) => "permission denied: the process lacks the privilege to count system-wide",
            Problem::Seccomp { .. } => "permission denied on every open although the privilege is held: a seccomp profile or an LSM",
            Problem::Refused { .. } => "permission denied on this event only although the privilege is held: the kernel restricts it",
            Problem::FdLimit(_) | Problem::FdExhausted { .. } => "out of file descriptors (RLIMIT_NOFILE)",
            Problem::PmuRefused(_) => "the PMU refuses the encoding or the group (EINVAL)",
            Problem::CpuOffline(_) => "the CPU is offline",
            Problem::Busy(_) => "no free hardware counter",
            Problem::Unschedulable { .. } => "the group never ran on the PMU (time_running stays 0)",
            Problem::Failed(_) => "the perf syscall failed with another errno",
            Problem::GroupTooLarge { .. } => "a set needs more counters of a PMU than it has free: counted in smaller groups (multiplexed)",
            Problem::NoCgroupHierarchy { .. } => "no cgroup hierarchy perf can count on is mounted",
            Problem::CgroupOverLimit { .. } => "more than `max_cgroups` cgroups matched and busier ones won",
            Problem::CgroupGone { .. } => "the cgroup vanished between discovery and use",
            Problem::CgroupBeyondReach { .. } => "the cgroup is nested deeper than the counting backend reaches",
            Problem::CgroupWalkTooDeep { .. } => "a `**` glob stops at its depth bound; deeper cgroups are not matched",
            Problem::UncoreInCgroupSet { .. } => "a set of `cgroups.sets` has uncore events, which cannot be attributed to a cgroup",
            Problem::SelfTestFailed { .. } => "the start-up self-test's calibrated loop was not counted as it ran: the PMU's counts are not measurements",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_lists_every_code_in_order_with_what_to_do() {
        let codes: Vec<&str> = Problem::catalogue().map(|e| e.code).collect();
        let mut seen: Vec<&str> = codes.clone();
        seen.dedup();
        assert_eq!(seen, Problem::CODES, "every code, in order, cases together");
        let all: Vec<Entry> = catalogue().collect();
        for e in &all {
            assert!(!e.summary.is_empty(), "{e:?}");
            let nothing_wrong = matches!(e.code, "configured" | "bpf_available");
            assert_eq!(e.what_to_do.is_empty(), nothing_wrong, "{e:?}");
        }
        // A case is listed once: no two entries say the same.
        for (i, e) in all.iter().enumerate() {
            assert!(
                !all[..i]
                    .iter()
                    .any(|o| o.code == e.code && o.what_to_do == e.what_to_do),
                "{e:?}"
            );
        }
        let of = |v: Vocabulary| -> Vec<&str> {
            let mut c: Vec<&str> = all
                .iter()
                .filter(|e| e.vocabulary == v)
                .map(|e| e.code)
                .collect();
            c.dedup();
            c
        };
        assert_eq!(
            of(Vocabulary::Cgroup),
            [
                "uncore_per_cgroup",
                "cgroup_gone",
                "cgroup_no_perf_event",
                "fd_limit",
                "bpf_slots_full",
                "discovery",
                "cgroup_set_unavailable"
            ]
        );
        assert_eq!(
            of(Vocabulary::Backend),
            [
                "configured",
                "bpf_available",
                "bpf_no_capability",
                "bpf_no_btf",
                "simulated",
                "bpf_load_failed",
                "bpf_no_cgroup2"
            ]
        );
        assert_eq!(
            of(Vocabulary::Budget),
            [
                "nmi_watchdog",
                "counters_held",
                "virtual_pmu",
                "budget_unknown"
            ]
        );
        assert_eq!(of(Vocabulary::Counter), Implausible::CODES);
    }
}
