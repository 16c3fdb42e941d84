//! Which per-cgroup backend counts and why, or why `bpf` cannot count:
//! [`Why`], part of the one vocabulary of reasons ([`super::Reason`]).
//! The advice is built per variant, so `check`'s line under `auto` and
//! the error of a configured `bpf` say the same thing, each with its own
//! punctuation before the alternative (`, or set ...` / `; or set ...`).

use super::{Class, Reason};
use std::fmt;
use std::path::PathBuf;

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

/// The alternative every advice to get `bpf` ends with.
const OR_PERF: &str = "or set `cgroups.backend: perf`";

impl Why {
    /// A short fixed code: [`Reason::code`].
    pub fn code(&self) -> &'static str {
        Reason::code(self)
    }

    /// What to do to get the `bpf` backend (empty when nothing is
    /// wrong): [`Reason::what_to_do`].
    pub fn what_to_do(&self) -> String {
        Reason::what_to_do(self)
    }

    /// What to do to get the `bpf` backend, its alternative after `or`
    /// (`", "` or `"; "`); empty when nothing is wrong.
    fn advice(&self, or: &str) -> String {
        match self {
            Why::Configured(_) | Why::BpfAvailable { .. } => String::new(),
            Why::NoCapability { .. } => format!("grant CAP_BPF and CAP_PERFMON (the Helm chart does with `cgroups.backend: bpf`){or}{OR_PERF}"),
            Why::NoBtf { .. } => format!("use a kernel built with CONFIG_DEBUG_INFO_BTF (most distributions' kernels since 2020){or}{OR_PERF}"),
            Why::Simulated => "nothing: the simulated PMU counts per cgroup with perf".into(),
            Why::LoadFailed(_) => "see the error (the verifier's or the kernel's); set `cgroups.backend: perf` to count without BPF".into(),
            Why::NoUnifiedHierarchy(_) => format!("mount cgroup2 (a hybrid host's `/sys/fs/cgroup/unified`) and give it, or the directory the hierarchies are mounted in, with --path.cgroupfs; {OR_PERF}"),
        }
    }

    /// Why a configured `bpf` cannot count, in words (without the
    /// `backend auto: perf, as` of [`Display`](fmt::Display)).
    pub fn refusal(&self) -> String {
        match self {
            Why::NoCapability { missing } => format!("this process lacks {missing}"),
            Why::NoBtf { path } => format!("the kernel has no BTF ({} is missing)", path.display()),
            Why::Simulated => "the simulated PMU has no BPF".into(),
            Why::LoadFailed(e) => e.clone(),
            Why::NoUnifiedHierarchy(e) => {
                format!("it reads cgroup2's cgroup ids and there is no cgroup2 hierarchy: {e}")
            }
            w => w.to_string(),
        }
    }

    /// What to do when `bpf` is configured and cannot count.
    pub fn what_to_do_when_configured(&self) -> String {
        self.advice("; ")
    }

    /// One reason of each kind (with placeholders), for the reference.
    pub fn examples() -> Vec<Why> {
        vec![
            Why::Configured(BackendKind::Perf),
            Why::BpfAvailable {
                grant: "CAP_BPF + CAP_PERFMON",
            },
            Why::NoCapability {
                missing: "CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)",
            },
            Why::NoBtf {
                path: "/sys/kernel/btf/vmlinux".into(),
            },
            Why::Simulated,
            Why::LoadFailed("<error>".into()),
            Why::NoUnifiedHierarchy("<what was found>".into()),
        ]
    }
}

impl Reason for Why {
    fn code(&self) -> &'static str {
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
    fn what_to_do(&self) -> String {
        self.advice(", ")
    }

    /// Nothing to fix when the backend is as configured, `bpf` was
    /// available or the PMU is simulated.
    fn class(&self) -> Class {
        match self {
            Why::Configured(_) | Why::BpfAvailable { .. } | Why::Simulated => Class::NotOnPlatform,
            _ => Class::Failed,
        }
    }

    fn summary(&self) -> &'static str {
        match self {
            Why::Configured(_) => "the per-cgroup backend is the one configured",
            Why::BpfAvailable { .. } => {
                "`auto` chose bpf: BPF can be loaded and the kernel has BTF"
            }
            Why::NoCapability { .. } => "bpf cannot count: the process may not load BPF programs",
            Why::NoBtf { .. } => "bpf cannot count: the kernel has no BTF",
            Why::Simulated => "bpf cannot count: the simulated PMU has no BPF",
            Why::LoadFailed(_) => "bpf cannot count: loading or attaching the program failed",
            Why::NoUnifiedHierarchy(_) => "bpf cannot count: there is no cgroup2 hierarchy",
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
