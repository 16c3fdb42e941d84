//! Which privilege this process holds for perf_events, and what the lack
//! of it costs.
//!
//! The exporter counts system-wide: `perf_event_open(pid = -1, cpu = N)`.
//! The kernel allows that (`perf_allow_cpu()`) when
//! `kernel.perf_event_paranoid <= 0`, or when the caller is
//! `perfmon_capable()`: it holds `CAP_PERFMON` (Linux >= 5.8) or
//! `CAP_SYS_ADMIN`. Nothing the exporter does needs `CAP_SYS_ADMIN` on a
//! kernel that knows `CAP_PERFMON`.
//!
//! Tracepoint events also need their ids, read from tracefs, whose mount
//! point is usually readable by root only (mode 0700): `CAP_PERFMON` does
//! not open it.
//!
//! A permission error (EACCES/EPERM) is not always missing privilege:
//! a seccomp filter (container runtimes' default profiles allow
//! `perf_event_open` only with `CAP_SYS_ADMIN`) or an LSM refuses the
//! syscall before the kernel looks at capabilities, and some events are
//! restricted beyond `CAP_PERFMON` (kernel lockdown, `ftrace:function`).
//! [`Privilege::diagnose`] tells these apart, so a process that holds
//! `CAP_PERFMON` is never told to grant it.

use crate::bounded::read_attribute;
use crate::problem::{Problem, HOW_TO_GRANT};
use std::path::Path;

/// `CAP_SYS_ADMIN`'s bit in the capability sets.
pub const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_PERFMON`'s bit (Linux >= 5.8).
pub const CAP_PERFMON: u32 = 38;

/// What this process holds, as `/proc` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Privilege {
    /// Effective uid.
    pub euid: Option<u32>,
    /// The effective capability set (`CapEff`).
    pub cap_eff: u64,
    /// `kernel.perf_event_paranoid`.
    pub paranoid: Option<i32>,
    /// Kernel `(major, minor)`.
    pub kernel: Option<(u32, u32)>,
    /// `Seccomp:` of `/proc/self/status`: 0 none, 1 strict, 2 filter.
    pub seccomp: Option<u8>,
}

/// What allows system-wide counting, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// `CAP_PERFMON` on Linux >= 5.8.
    CapPerfmon,
    /// `CAP_SYS_ADMIN` (needed before 5.8; more than needed after).
    CapSysAdmin,
    /// `kernel.perf_event_paranoid <= 0` (host-wide setting).
    Paranoid(i32),
}

impl Grant {
    /// What allows it, as a user would name it.
    pub fn name(self) -> &'static str {
        match self {
            Grant::CapPerfmon => "CAP_PERFMON",
            Grant::CapSysAdmin => "CAP_SYS_ADMIN",
            Grant::Paranoid(_) => "kernel.perf_event_paranoid <= 0",
        }
    }
}

impl Privilege {
    /// Reads the process's privilege under a procfs root.
    pub fn detect(procfs: &Path) -> Self {
        let status = read_attribute(&procfs.join("self/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .map(str::to_string)
        };
        let euid = field("Uid:").and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
        let cap_eff = field("CapEff:")
            .and_then(|h| u64::from_str_radix(&h, 16).ok())
            .unwrap_or(0);
        let paranoid = read_attribute(&procfs.join("sys/kernel/perf_event_paranoid"))
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let kernel = read_attribute(&procfs.join("sys/kernel/osrelease"))
            .ok()
            .and_then(|s| parse_kernel_version(&s));
        let seccomp = field("Seccomp:").and_then(|m| m.parse().ok());
        Privilege {
            euid,
            cap_eff,
            paranoid,
            kernel,
            seccomp,
        }
    }

    /// Whether the effective set holds capability `bit`.
    pub fn has_cap(&self, bit: u32) -> bool {
        bit < 64 && self.cap_eff & (1u64 << bit) != 0
    }

    /// Whether the kernel knows `CAP_PERFMON` (Linux >= 5.8; assumed
    /// when the version is unknown).
    pub fn kernel_knows_perfmon(&self) -> bool {
        self.kernel.is_none_or(|v| v >= (5, 8))
    }

    /// What allows system-wide counting, the least powerful first; `None`
    /// when nothing does (every open fails with EACCES).
    pub fn grant(&self) -> Option<Grant> {
        if self.has_cap(CAP_PERFMON) && self.kernel_knows_perfmon() {
            Some(Grant::CapPerfmon)
        } else if self.paranoid.is_some_and(|p| p <= 0) {
            self.paranoid.map(Grant::Paranoid)
        } else if self.has_cap(CAP_SYS_ADMIN) {
            Some(Grant::CapSysAdmin)
        } else {
            None
        }
    }

    /// One line for the start-up log: what was found and what it allows.
    pub fn summary(&self) -> String {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let facts = format!(
            "euid={} CAP_PERFMON={} CAP_SYS_ADMIN={} perf_event_paranoid={} kernel={}",
            self.euid.map_or("unknown".into(), |u| u.to_string()),
            yes(self.has_cap(CAP_PERFMON)),
            yes(self.has_cap(CAP_SYS_ADMIN)),
            self.paranoid.map_or("unknown".into(), |p| p.to_string()),
            self.kernel
                .map_or("unknown".into(), |(a, b)| format!("{a}.{b}")),
        );
        let facts = match self.seccomp {
            Some(m) if m > 0 => format!("{facts} seccomp={m}"),
            _ => facts,
        };
        let verdict = match self.grant() {
            Some(Grant::CapPerfmon) => "system-wide counting allowed by CAP_PERFMON".to_string(),
            Some(Grant::Paranoid(p)) => {
                format!("system-wide counting allowed by kernel.perf_event_paranoid={p} (no capability needed)")
            }
            Some(Grant::CapSysAdmin) if self.kernel_knows_perfmon() => {
                "system-wide counting allowed by CAP_SYS_ADMIN (more than needed: on Linux >= 5.8 CAP_PERFMON alone suffices)".to_string()
            }
            Some(Grant::CapSysAdmin) => {
                "system-wide counting allowed by CAP_SYS_ADMIN (this kernel predates CAP_PERFMON)"
                    .to_string()
            }
            None if self.kernel_knows_perfmon() => format!(
                "system-wide counting is NOT allowed: perf_event_paranoid > 0 and no CAP_PERFMON; every counter will fail with EACCES: {HOW_TO_GRANT}"
            ),
            None => "system-wide counting is NOT allowed: perf_event_paranoid > 0 and no CAP_SYS_ADMIN (this kernel predates CAP_PERFMON, so CAP_PERFMON gives nothing here); every counter will fail with EACCES: grant CAP_SYS_ADMIN, or set kernel.perf_event_paranoid=0 for the whole host".to_string(),
        };
        format!("{facts}: {verdict}")
    }
}

/// Parses `6.8.0-45-generic` into `(6, 8)`.
pub fn parse_kernel_version(s: &str) -> Option<(u32, u32)> {
    let mut it = s.trim().split(['.', '-', '+']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

impl Privilege {
    /// Refines permission errors once it is known what this process
    /// holds. Without privilege they stay [`Problem::Privilege`] ("grant
    /// CAP_PERFMON"). With it, they are not a missing capability: when
    /// no open succeeded at all ([`any_open_succeeded`](Self::diagnose)
    /// false) a seccomp profile or an LSM refuses `perf_event_open`
    /// ([`Problem::Seccomp`]); otherwise the kernel restricts these
    /// events ([`Problem::Refused`]).
    pub fn diagnose<'a>(
        &self,
        problems: impl IntoIterator<Item = &'a mut Problem>,
        any_open_succeeded: bool,
    ) {
        let Some(grant) = self.grant() else {
            return;
        };
        for p in problems {
            if let Problem::Privilege(o) = p {
                let open = o.clone();
                *p = if any_open_succeeded {
                    Problem::Refused {
                        open,
                        allowed_by: grant.name(),
                    }
                } else {
                    Problem::Seccomp {
                        open,
                        mode: self.seccomp,
                        allowed_by: grant.name(),
                    }
                };
            }
        }
    }

    /// The privilege report for the start-up log, after
    /// [`summary`](Self::summary): what is more than needed, and which
    /// metrics privilege-like problems cost (with what to do), from
    /// `(metric, problem)` pairs.
    pub fn report<'a>(
        &self,
        problems: impl IntoIterator<Item = (&'a str, &'a Problem)>,
    ) -> Vec<Finding> {
        let mut out = Vec::new();
        if self.has_cap(CAP_SYS_ADMIN) && self.kernel_knows_perfmon() {
            out.push(Finding {
                warn: true,
                message: "CAP_SYS_ADMIN is held, which is more than needed: on Linux >= 5.8 CAP_PERFMON alone allows everything this exporter does; run it as a non-root user with only CAP_PERFMON (README, Security)".into(),
            });
        }
        // (cause, metrics, the first problem of that cause)
        let mut lost: Vec<(Lost, Vec<&str>, &Problem)> = Vec::new();
        for (metric, p) in problems {
            let Some(cause) = Lost::of(p) else {
                continue;
            };
            match lost.iter_mut().find(|(c, _, _)| *c == cause) {
                Some((_, ms, _)) if !ms.contains(&metric) => ms.push(metric),
                Some(_) => {}
                None => lost.push((cause, vec![metric], p)),
            }
        }
        if lost.is_empty() {
            out.push(Finding {
                warn: false,
                message: "no metric is lost to missing privilege".into(),
            });
        }
        for (cause, metrics, p) in lost {
            out.push(Finding {
                warn: true,
                message: format!(
                    "these metrics are lost to {}: {}: {}",
                    cause.said(),
                    metrics.join(", "),
                    p.explain()
                ),
            });
        }
        out
    }
}

/// What privilege-like problems cost metrics to, in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lost {
    /// [`Problem::Privilege`].
    Privilege,
    /// [`Problem::Seccomp`].
    Seccomp,
    /// [`Problem::Refused`].
    Refused,
    /// [`Problem::TracefsUnreadable`].
    Tracefs,
}

impl Lost {
    /// The cause of `p`, when it is privilege-like.
    fn of(p: &Problem) -> Option<Lost> {
        match p {
            Problem::Privilege(_) => Some(Lost::Privilege),
            Problem::Seccomp { .. } => Some(Lost::Seccomp),
            Problem::Refused { .. } => Some(Lost::Refused),
            Problem::TracefsUnreadable { .. } => Some(Lost::Tracefs),
            _ => None,
        }
    }

    /// `these metrics are lost to ...`.
    fn said(self) -> &'static str {
        match self {
            Lost::Privilege => "missing privilege",
            Lost::Seccomp => "a seccomp profile or LSM that refuses perf_event_open",
            Lost::Refused => "the kernel restricting these events despite privilege",
            Lost::Tracefs => "a tracefs this user may not read",
        }
    }
}

/// One line of the privilege report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Logged as a warning (else as information).
    pub warn: bool,
    /// The line.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(cap_eff: u64, paranoid: i32, kernel: (u32, u32)) -> Privilege {
        Privilege {
            euid: Some(65534),
            cap_eff,
            paranoid: Some(paranoid),
            kernel: Some(kernel),
            seccomp: Some(0),
        }
    }

    #[test]
    fn grants() {
        let perfmon = 1u64 << CAP_PERFMON;
        let admin = 1u64 << CAP_SYS_ADMIN;
        assert_eq!(p(perfmon, 2, (6, 1)).grant(), Some(Grant::CapPerfmon));
        // A kernel older than 5.8 ignores CAP_PERFMON.
        assert_eq!(p(perfmon, 2, (5, 4)).grant(), None);
        assert_eq!(p(admin, 2, (5, 4)).grant(), Some(Grant::CapSysAdmin));
        assert_eq!(p(0, 0, (6, 1)).grant(), Some(Grant::Paranoid(0)));
        assert_eq!(p(0, -1, (6, 1)).grant(), Some(Grant::Paranoid(-1)));
        assert_eq!(p(0, 2, (6, 1)).grant(), None);
        assert_eq!(p(0, 1, (6, 1)).grant(), None);
        let s = p(0, 2, (6, 1)).summary();
        assert!(
            s.contains("NOT allowed") && s.contains("CAP_PERFMON") && s.contains("setcap"),
            "{s}"
        );
        let s = p(perfmon | admin, 2, (6, 1)).summary();
        assert!(s.contains("allowed by CAP_PERFMON"), "{s}");
        let s = p(admin, 2, (6, 1)).summary();
        assert!(s.contains("more than needed"), "{s}");
        // Before 5.8, CAP_PERFMON gives nothing and is not the advice.
        let s = p(perfmon, 2, (5, 4)).summary();
        assert!(
            s.contains("grant CAP_SYS_ADMIN") && !s.contains("grant CAP_PERFMON"),
            "{s}"
        );
    }

    fn eperm(event: &str) -> Problem {
        Problem::Privilege(crate::problem::OpenFailure {
            op: "open",
            event: event.into(),
            pmu: "tracepoint".into(),
            cpu: 0,
            errno: 1,
        })
    }

    #[test]
    fn permission_errors_are_diagnosed_with_what_is_held() {
        let perfmon = 1u64 << CAP_PERFMON;
        // Nothing held: missing privilege, as the kernel said.
        let mut v = [eperm("cycles")];
        p(0, 2, (6, 1)).diagnose(v.iter_mut(), false);
        assert_eq!(v[0].code(), "privilege");
        // Held, and nothing opens at all: seccomp or an LSM.
        let mut held = p(perfmon, 2, (6, 1));
        held.seccomp = Some(2);
        let mut v = [eperm("cycles")];
        held.diagnose(v.iter_mut(), false);
        assert_eq!(v[0].code(), "seccomp");
        assert!(v[0].to_string().contains("Seccomp: 2"), "{}", v[0]);
        // Held, and other events open: this event is restricted.
        let mut v = [eperm("ftrace:function")];
        held.diagnose(v.iter_mut(), true);
        assert_eq!(v[0].code(), "refused");
        assert!(!v[0].explain().contains("grant CAP_PERFMON"));
        // paranoid <= 0 allows it as well.
        let mut v = [eperm("cycles")];
        p(0, -1, (6, 1)).diagnose(v.iter_mut(), true);
        assert!(
            v[0].to_string().contains("perf_event_paranoid <= 0"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn report_names_the_cause_and_never_asks_a_holder_to_grant() {
        let perfmon = 1u64 << CAP_PERFMON;
        let admin = 1u64 << CAP_SYS_ADMIN;
        let tracefs = Problem::TracefsUnreadable {
            event: "syscalls:sys_enter_getppid".into(),
            path: "/sys/kernel/tracing".into(),
        };
        // CAP_PERFMON alone, tracefs 0700 (issue 11): the tracefs is named.
        let r = p(perfmon, 2, (6, 8)).report([("perf_getppid_calls_total", &tracefs)]);
        let all: Vec<&str> = r.iter().map(|f| f.message.as_str()).collect();
        assert!(
            all.iter().any(|m| m
                .contains("lost to a tracefs this user may not read: perf_getppid_calls_total")
                && m.contains("mode=0755")),
            "{all:?}"
        );
        assert!(
            all.iter().all(|m| !m.contains("grant CAP_PERFMON")),
            "{all:?}"
        );
        assert!(
            all.iter().all(|m| !m.contains("CAP_SYS_ADMIN is held")),
            "{all:?}"
        );
        // Nothing held: grant it.
        let e = eperm("cycles");
        let r = p(0, 2, (6, 8)).report([("perf_cpu_cycles_total", &e), ("x_total", &e)]);
        let lost = r
            .iter()
            .find(|f| f.message.contains("missing privilege"))
            .unwrap();
        assert!(
            lost.message.contains("perf_cpu_cycles_total, x_total"),
            "{lost:?}"
        );
        assert!(lost.message.contains("setcap cap_perfmon=ep"), "{lost:?}");
        // Root holds CAP_SYS_ADMIN: more than needed, said as a warning.
        let r = p(perfmon | admin, 2, (6, 8)).report([]);
        assert!(
            r.iter().any(|f| f.warn
                && f.message
                    .contains("CAP_SYS_ADMIN is held, which is more than needed")),
            "{r:?}"
        );
        assert!(r
            .iter()
            .any(|f| f.message == "no metric is lost to missing privilege"));
        // Before 5.8 CAP_SYS_ADMIN is what it takes: no warning.
        let r = p(admin, 2, (5, 4)).report([]);
        assert!(
            r.iter().all(|f| !f.message.contains("more than needed")),
            "{r:?}"
        );
    }

    #[test]
    fn seccomp_mode_is_read_from_status() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("self")).unwrap();
        std::fs::write(
            dir.path().join("self/status"),
            "Uid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\nSeccomp:\t2\nSeccomp_filters:\t1\n",
        )
        .unwrap();
        let d = Privilege::detect(dir.path());
        assert_eq!((d.euid, d.seccomp), (Some(0), Some(2)));
        assert!(d.summary().contains("seccomp=2"), "{}", d.summary());
    }

    #[test]
    fn kernel_versions() {
        assert_eq!(parse_kernel_version("6.18.44-fc-v657\n"), Some((6, 18)));
        assert_eq!(parse_kernel_version("5.8.0"), Some((5, 8)));
        assert_eq!(parse_kernel_version("4.19+"), Some((4, 19)));
        assert_eq!(parse_kernel_version("x"), None);
    }
}
