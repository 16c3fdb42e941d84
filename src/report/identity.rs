//! The CPU identity of each core PMU in the `check` report: what the
//! `requires_cpu` guards of a config are matched against (see
//! [`crate::pmu::cpuid`]). On hybrid machines each core PMU has its own,
//! read from the first CPU of its `cpus` file.

use crate::pmu::cpuid::{identity_cpu, CpuIdentity};
use crate::pmu::PmuTable;
use serde::Serialize;
use std::fmt::Write as _;

/// One core PMU's identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckIdentity {
    /// The core PMU (`cpu`, `cpu_core`, `armv8_pmuv3_0`).
    pub pmu: String,
    /// The CPU whose identity it is (the first of the PMU's CPUs).
    pub cpu: u32,
    /// The identity string (`GenuineIntel-6-55-4`, `0x00000000413fd0c1`),
    /// `null` when unknown.
    pub identity: Option<String>,
    /// Why it is unknown, `null` when known.
    pub unknown: Option<String>,
}

impl CheckIdentity {
    /// The identities the table read, core PMUs in type order.
    pub fn of(table: &PmuTable) -> Vec<CheckIdentity> {
        table
            .core_pmus()
            .into_iter()
            .map(|p| {
                let (identity, unknown) = match table.identity_of(&p.name) {
                    CpuIdentity::Known(s) => (Some(s), None),
                    CpuIdentity::Unknown(why) => (None, Some(why)),
                };
                CheckIdentity {
                    pmu: p.name.clone(),
                    cpu: identity_cpu(p),
                    identity,
                    unknown,
                }
            })
            .collect()
    }
}

/// The text lines (before the metric table): one per core PMU, none
/// without one.
pub(super) fn identity_text(ids: &[CheckIdentity]) -> String {
    let mut s = String::new();
    if ids.is_empty() {
        return s;
    }
    let _ = writeln!(s, "CPU identity (what `requires_cpu` matches):");
    for i in ids {
        let what = match (&i.identity, &i.unknown) {
            (Some(id), _) => id.clone(),
            (None, why) => format!("unknown ({})", why.as_deref().unwrap_or("")),
        };
        let _ = writeln!(s, "  {} (CPU {}): {what}", i.pmu, i.cpu);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_names_pmu_cpu_and_identity_or_why_not() {
        let ids = [
            CheckIdentity {
                pmu: "cpu_core".into(),
                cpu: 0,
                identity: Some("GenuineIntel-6-97-2".into()),
                unknown: None,
            },
            CheckIdentity {
                pmu: "cpu_atom".into(),
                cpu: 16,
                identity: None,
                unknown: Some("no cpuinfo".into()),
            },
        ];
        assert_eq!(
            identity_text(&ids),
            "CPU identity (what `requires_cpu` matches):\n  cpu_core (CPU 0): GenuineIntel-6-97-2\n  cpu_atom (CPU 16): unknown (no cpuinfo)\n"
        );
        assert_eq!(identity_text(&[]), "");
    }
}
