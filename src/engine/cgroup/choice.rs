//! Which backend counts per cgroup, and why: `backend: auto` picks `bpf`
//! when the process may load BPF programs and the kernel has BTF, else
//! `perf`; `backend: bpf` that cannot load is an error naming what is
//! missing.
//!
//! Loading the program needs `CAP_BPF` and `CAP_PERFMON` (Linux >= 5.8:
//! `bpf_capable()` for the maps and a tracing program, `perfmon_capable()`
//! for `bpf_perf_event_read_value` and the raw tracepoint), or
//! `CAP_SYS_ADMIN`, which implies both. The loader needs the kernel's BTF
//! (`<sysfs>/kernel/btf/vmlinux`) for the `.maps` definitions.

use crate::config::cgroups::Backend;
use crate::privilege::Privilege;
pub use crate::problem::backend::{BackendKind, Why};
use std::fmt;
use std::path::Path;

/// `CAP_BPF`'s bit (Linux >= 5.8).
pub const CAP_BPF: u32 = 39;

/// The backend that counts, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendChoice {
    /// The backend.
    pub kind: BackendKind,
    /// Why.
    pub why: Why,
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.kind.name(), self.why)
    }
}

/// A `backend: bpf` that cannot count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cgroups: backend bpf cannot count: {}; {}", .why.refusal(), .why.what_to_do_when_configured())]
pub struct BpfUnavailable {
    /// Why.
    pub why: Why,
}

impl BpfUnavailable {
    /// The error for `why`.
    pub fn new(why: Why) -> Self {
        BpfUnavailable { why }
    }

    /// Why it cannot count, in words.
    pub fn reason(&self) -> String {
        self.why.refusal()
    }

    /// What to do about it.
    pub fn what_to_do(&self) -> String {
        self.why.what_to_do_when_configured()
    }
}

/// Whether BPF can count here: `Ok(grant)` or why not. `privilege` is
/// `None` for the simulated PMU.
pub fn bpf_ready(privilege: Option<&Privilege>, sysfs: &Path) -> Result<&'static str, Why> {
    let Some(p) = privilege else {
        return Err(Why::Simulated);
    };
    let grant = if p.has_cap(crate::privilege::CAP_SYS_ADMIN) {
        "CAP_SYS_ADMIN"
    } else if p.has_cap(CAP_BPF) && p.has_cap(crate::privilege::CAP_PERFMON) {
        "CAP_BPF + CAP_PERFMON"
    } else {
        let missing = match (p.has_cap(CAP_BPF), p.has_cap(crate::privilege::CAP_PERFMON)) {
            (false, false) => "CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)",
            (false, true) => "CAP_BPF (or CAP_SYS_ADMIN)",
            _ => "CAP_PERFMON (or CAP_SYS_ADMIN)",
        };
        return Err(Why::NoCapability { missing });
    };
    let btf = sysfs.join("kernel/btf/vmlinux");
    if !btf.exists() {
        return Err(Why::NoBtf { path: btf });
    }
    Ok(grant)
}

/// The backend for a `backend:` setting, before trying to load: `Err`
/// when `bpf` is configured and cannot count.
pub fn choose(
    configured: Backend,
    privilege: Option<&Privilege>,
    sysfs: &Path,
) -> Result<BackendChoice, BpfUnavailable> {
    let ready = || bpf_ready(privilege, sysfs);
    Ok(match configured {
        Backend::Perf => BackendChoice {
            kind: BackendKind::Perf,
            why: Why::Configured(BackendKind::Perf),
        },
        Backend::Bpf => match ready() {
            Ok(_) => BackendChoice {
                kind: BackendKind::Bpf,
                why: Why::Configured(BackendKind::Bpf),
            },
            Err(why) => return Err(BpfUnavailable::new(why)),
        },
        Backend::Auto => match ready() {
            Ok(grant) => BackendChoice {
                kind: BackendKind::Bpf,
                why: Why::BpfAvailable { grant },
            },
            Err(why) => BackendChoice {
                kind: BackendKind::Perf,
                why,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn privilege(caps: &[u32]) -> Privilege {
        Privilege {
            euid: Some(1000),
            cap_eff: caps.iter().fold(0, |m, c| m | 1u64 << c),
            paranoid: Some(2),
            kernel: Some((6, 18)),
            seccomp: Some(0),
        }
    }

    fn sysfs(btf: bool) -> tempdir::Dir {
        tempdir::Dir::new(btf)
    }

    mod tempdir {
        pub(super) struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub(super) fn new(btf: bool) -> Dir {
                let p = std::env::temp_dir().join(format!(
                    "pe-choice-{}-{btf}-{:?}",
                    std::process::id(),
                    std::thread::current().id()
                ));
                std::fs::create_dir_all(p.join("kernel/btf")).unwrap();
                if btf {
                    std::fs::write(p.join("kernel/btf/vmlinux"), b"").unwrap();
                }
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    use crate::privilege::{CAP_PERFMON, CAP_SYS_ADMIN};

    #[test]
    fn auto_picks_bpf_with_the_capabilities_and_btf() {
        let s = sysfs(true);
        let c = choose(
            Backend::Auto,
            Some(&privilege(&[CAP_BPF, CAP_PERFMON])),
            &s.0,
        )
        .unwrap();
        assert_eq!(c.kind, BackendKind::Bpf);
        assert_eq!(
            c.why,
            Why::BpfAvailable {
                grant: "CAP_BPF + CAP_PERFMON"
            }
        );
        let c = choose(Backend::Auto, Some(&privilege(&[CAP_SYS_ADMIN])), &s.0).unwrap();
        assert_eq!(c.kind, BackendKind::Bpf);
    }

    #[test]
    fn auto_falls_back_to_perf_with_a_typed_reason() {
        let s = sysfs(true);
        let c = choose(Backend::Auto, Some(&privilege(&[CAP_PERFMON])), &s.0).unwrap();
        assert_eq!(c.kind, BackendKind::Perf);
        assert_eq!(c.why.code(), "bpf_no_capability");
        assert!(
            c.to_string().contains("lacks CAP_BPF (or CAP_SYS_ADMIN)"),
            "{c}"
        );
        let nobtf = sysfs(false);
        let c = choose(Backend::Auto, Some(&privilege(&[CAP_SYS_ADMIN])), &nobtf.0).unwrap();
        assert_eq!(c.why.code(), "bpf_no_btf");
        assert!(c
            .to_string()
            .starts_with("perf (backend auto: perf, as the kernel has no BTF"));
        let c = choose(Backend::Auto, None, &s.0).unwrap();
        assert_eq!((c.kind, c.why), (BackendKind::Perf, Why::Simulated));
    }

    #[test]
    fn a_forced_bpf_that_cannot_count_names_what_is_missing() {
        let s = sysfs(true);
        let e = choose(Backend::Bpf, Some(&privilege(&[])), &s.0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cgroups: backend bpf cannot count: this process lacks CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); grant CAP_BPF and CAP_PERFMON (the Helm chart does with `cgroups.backend: bpf`); or set `cgroups.backend: perf`"
        );
        let c = choose(Backend::Perf, Some(&privilege(&[CAP_SYS_ADMIN])), &s.0).unwrap();
        assert_eq!(c.to_string(), "perf (backend perf, as configured)");
    }

    #[test]
    fn without_cgroup2_bpf_says_it_reads_cgroup2_ids_and_what_to_do() {
        let why = Why::NoUnifiedHierarchy("no cgroup2 mount".into());
        assert_eq!(why.code(), "bpf_no_cgroup2");
        assert!(why
            .to_string()
            .starts_with("backend auto: perf, as the BPF program reads cgroup2's cgroup ids"));
        assert!(
            why.what_to_do().contains("cgroups.backend: perf"),
            "{}",
            why.what_to_do()
        );
        let e = BpfUnavailable::new(why).to_string();
        assert!(
            e.starts_with("cgroups: backend bpf cannot count: it reads cgroup2's cgroup ids and there is no cgroup2 hierarchy: no cgroup2 mount; mount cgroup2"),
            "{e}"
        );
    }
}
