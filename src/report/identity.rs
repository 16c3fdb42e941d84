//! The CPU identity of each core PMU in the `check` report: what the
//! `requires_cpu` guards of a config are matched against (see
//! [`crate::pmu::cpuid`]). On hybrid machines each core PMU has its own,
//! read from the first CPU of its `cpus` file.

use crate::pmu::cpuid::{identity_cpu, CpuIdentity};
use crate::pmu::PmuTable;
use serde::Serialize;
use std::fmt::Write as _;

/// The `pmu` of the host's identity where it has no core PMU.
pub(crate) const NO_CORE_PMU: &str = "(no core PMU)";

/// One core PMU's identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckIdentity {
    /// The core PMU (`cpu`, `cpu_core`, `armv8_pmuv3_0`), or
    /// [`NO_CORE_PMU`].
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
    /// The identities the table read, core PMUs in type order; on a host
    /// without a core PMU, the host's own when its cpuinfo gave one
    /// ([`PmuTable::host_identity`], the guards are judged against it
    /// there), under the PMU name [`NO_CORE_PMU`].
    pub fn of(table: &PmuTable) -> Vec<CheckIdentity> {
        if let Some(CpuIdentity::Known(id)) = &table.host_identity {
            return vec![CheckIdentity {
                pmu: NO_CORE_PMU.into(),
                cpu: table.topology.online.first().copied().unwrap_or(0),
                identity: Some(id.clone()),
                unknown: None,
            }];
        }
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

    /// vm-no-pmu has no core PMU: the host's identity from a cpuinfo,
    /// none without one.
    #[test]
    fn a_host_without_a_core_pmu_shows_the_cpuinfo_identity() {
        let mut t = crate::pmu::fixtures::table("vm-no-pmu");
        let dir = tempfile::tempdir().unwrap();
        t.read_identities(dir.path());
        assert_eq!(CheckIdentity::of(&t), vec![]);
        std::fs::write(
            dir.path().join("cpuinfo"),
            "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\nstepping\t: 2\n\n",
        )
        .unwrap();
        t.read_identities(dir.path());
        let ids = CheckIdentity::of(&t);
        assert_eq!(
            identity_text(&ids),
            "CPU identity (what `requires_cpu` matches):\n  (no core PMU) (CPU 0): GenuineIntel-6-CF-2\n"
        );
    }
}
