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
use std::fmt;
use std::path::{Path, PathBuf};

/// `CAP_BPF`'s bit (Linux >= 5.8).
pub const CAP_BPF: u32 = 39;

/// The backend chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// One `PERF_FLAG_PID_CGROUP` group per cgroup, set and CPU.
    Perf,
    /// Counters once per CPU, charged to cgroups by a BPF program.
    Bpf,
}

impl BackendKind {
    /// `perf` or `bpf`.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Perf => "perf",
            BackendKind::Bpf => "bpf",
        }
    }
}

/// Why a backend was chosen (or why `bpf` cannot count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// `backend: perf` or `backend: bpf`, as configured.
    Configured(BackendKind),
    /// `auto`: the process may load BPF and the kernel has BTF.
    BpfAvailable {
        /// What allows it (`CAP_BPF + CAP_PERFMON`, `CAP_SYS_ADMIN`).
        grant: &'static str,
    },
    /// The process may not load BPF programs.
    NoCapability {
        /// The capabilities it lacks.
        missing: &'static str,
    },
    /// The kernel has no BTF.
    NoBtf {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The simulated PMU (`--simulate`) has no BPF.
    Simulated,
    /// Loading or attaching the program failed.
    LoadFailed(String),
    /// No cgroup2 hierarchy to take the cgroups from: the program reads
    /// the unified hierarchy's cgroup ids (what is found instead).
    NoUnifiedHierarchy(String),
}

impl Why {
    /// A short fixed code.
    pub fn code(&self) -> &'static str {
        match self {
            Why::Configured(_) => "configured",
            Why::BpfAvailable { .. } => "bpf_available",
            Why::NoCapability { .. } => "bpf_no_capability",
            Why::NoBtf { .. } => "bpf_no_btf",
            Why::Simulated => "simulated",
            Why::LoadFailed(_) => "bpf_load_failed",
            Why::NoUnifiedHierarchy(_) => "bpf_no_cgroup2",
        }
    }

    /// What to do to get the `bpf` backend (empty when nothing is wrong).
    pub fn what_to_do(&self) -> String {
        match self {
            Why::Configured(_) | Why::BpfAvailable { .. } => String::new(),
            Why::NoCapability { .. } => "grant CAP_BPF and CAP_PERFMON (the Helm chart does with `cgroups.backend: bpf`), or set `cgroups.backend: perf`".into(),
            Why::NoBtf { .. } => "use a kernel built with CONFIG_DEBUG_INFO_BTF (most distributions' kernels since 2020), or set `cgroups.backend: perf`".into(),
            Why::Simulated => "nothing: the simulated PMU counts per cgroup with perf".into(),
            Why::LoadFailed(_) => "see the error (the verifier's or the kernel's); set `cgroups.backend: perf` to count without BPF".into(),
            Why::NoUnifiedHierarchy(_) => "mount cgroup2 (a hybrid host's `/sys/fs/cgroup/unified`) and give it, or the directory the hierarchies are mounted in, with --path.cgroupfs; or set `cgroups.backend: perf`".into(),
        }
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Configured(k) => write!(f, "backend {}, as configured", k.name()),
            Why::BpfAvailable { grant } => write!(f, "backend auto: BPF can be loaded ({grant}) and the kernel has BTF, so bpf (counters once per CPU, charged to cgroups in the kernel)"),
            Why::NoCapability { missing } => write!(f, "backend auto: perf, as this process may not load BPF programs (it lacks {missing})"),
            Why::NoBtf { path } => write!(f, "backend auto: perf, as the kernel has no BTF ({} is missing)", path.display()),
            Why::Simulated => write!(f, "backend auto: perf, as the simulated PMU has no BPF"),
            Why::LoadFailed(e) => write!(f, "backend auto: perf, as the BPF program did not load: {e}"),
            Why::NoUnifiedHierarchy(e) => write!(f, "backend auto: perf, as the BPF program reads cgroup2's cgroup ids and there is no cgroup2 hierarchy: {e}"),
        }
    }
}

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
#[error("cgroups: backend bpf cannot count: {why_text}; {what_to_do}")]
pub struct BpfUnavailable {
    /// Why.
    pub why: Why,
    why_text: String,
    what_to_do: String,
}

impl BpfUnavailable {
    /// The error for `why`.
    pub fn new(why: Why) -> Self {
        let why_text = match &why {
            Why::NoCapability { missing } => format!("this process lacks {missing}"),
            Why::NoBtf { path } => format!("the kernel has no BTF ({} is missing)", path.display()),
            Why::Simulated => "the simulated PMU has no BPF".into(),
            Why::LoadFailed(e) => e.clone(),
            Why::NoUnifiedHierarchy(e) => {
                format!("it reads cgroup2's cgroup ids and there is no cgroup2 hierarchy: {e}")
            }
            w => w.to_string(),
        };
        let what_to_do = why.what_to_do().replace(", or set", "; or set");
        BpfUnavailable {
            why,
            why_text,
            what_to_do,
        }
    }

    /// Why it cannot count, in words.
    pub fn reason(&self) -> &str {
        &self.why_text
    }

    /// What to do about it.
    pub fn what_to_do(&self) -> &str {
        &self.what_to_do
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
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new(btf: bool) -> Dir {
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
