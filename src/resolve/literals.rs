//! The `#` literals of perf's metric expressions (`#smt_on`,
//! `#num_cores`, ...): facts of the host, read once from sysfs (the root
//! of the PMU table) when a config is resolved, as perf's tool PMU reads
//! them:
//!
//! * `#smt_on`: `devices/system/cpu/smt/active` is 1; without that file,
//!   some core has more than one online CPU;
//! * `#num_cpus`: CPUs present (`devices/system/cpu/present`);
//! * `#num_cpus_online`: CPUs online;
//! * `#num_cores`: distinct cores of the online CPUs (`core_cpus_list`);
//! * `#num_dies`: distinct (package, `die_id`) pairs of the online CPUs;
//! * `#num_packages`: distinct `physical_package_id`s of the online CPUs;
//! * `#slots`: the first core PMU's `caps/slots` (Arm publishes it; a
//!   missing file or 0 leaves the literal without a value);
//! * `#core_wide`: 1: the exporter counts system-wide on every online CPU,
//!   so every thread of each core is counted (perf's condition);
//! * `#has_pmem`: 1 when the firmware's ACPI tables list an NFIT;
//! * `#system_tsc_freq`: not read (perf takes it from `/proc/cpuinfo`'s
//!   model name or CPUID leaf 0x15); an expression using it has no value.
//!
//! A literal without a value carries why, so a derived metric that reads
//! it is unavailable with that reason.

use crate::bounded::read_attribute;
use crate::derive::Literal;
use crate::pmu::{parse_cpu_list, PmuTable};
use std::collections::{BTreeMap, BTreeSet};

/// Every literal's value on one host, or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct HostLiterals {
    values: BTreeMap<Literal, Result<f64, String>>,
    /// The CPU identity a derived alternative's `requires_cpu` is matched
    /// against: the first core PMU's (in type order, the P-cores' on a
    /// hybrid part), else the host's (no core PMU); why there is none.
    cpu: crate::pmu::cpuid::CpuIdentity,
}

/// A count as an expression value (counts of CPUs are far below 2^52).
#[allow(clippy::cast_precision_loss)]
fn count(n: usize) -> f64 {
    n as f64
}

impl HostLiterals {
    /// Reads the literals of the host `table` was discovered on (its
    /// `sysfs` root and topology).
    pub fn discover(table: &PmuTable) -> Self {
        let sysfs = &table.sysfs;
        let topo = &table.topology;
        let read = |rel: &str| read_attribute(&sysfs.join(rel)).ok();
        let mut values = BTreeMap::new();

        let active =
            read("devices/system/cpu/smt/active").and_then(|s| s.trim().parse::<u8>().ok());
        let cores: BTreeSet<u32> = topo.core.values().copied().collect();
        let smt = match active {
            Some(a) => a == 1,
            None => cores.len() < topo.core.len(),
        };
        values.insert(Literal::SmtOn, Ok(if smt { 1.0 } else { 0.0 }));

        let present = read("devices/system/cpu/present")
            .and_then(|s| parse_cpu_list(s.trim()).ok())
            .map(|v| count(v.len()))
            .ok_or_else(|| "devices/system/cpu/present is missing or unreadable".to_string());
        values.insert(Literal::NumCpus, present);
        values.insert(Literal::NumCpusOnline, Ok(count(topo.online.len())));
        values.insert(Literal::NumCores, Ok(count(cores.len())));
        let packages: BTreeSet<u32> = topo.package.values().copied().collect();
        values.insert(Literal::NumPackages, Ok(count(packages.len())));
        let dies: BTreeSet<(u32, u32)> = topo
            .online
            .iter()
            .map(|cpu| {
                let die = read(&format!("devices/system/cpu/cpu{cpu}/topology/die_id"))
                    .and_then(|s| s.trim().parse::<u32>().ok())
                    .unwrap_or(0);
                (topo.package.get(cpu).copied().unwrap_or(0), die)
            })
            .collect();
        values.insert(Literal::NumDies, Ok(count(dies.len())));

        let slots = match table.core_pmus().first() {
            None => Err("no core PMU in sysfs to read `caps/slots` from".to_string()),
            Some(p) => match p.caps.get("slots").map(|s| s.trim()) {
                None => Err(format!(
                    "the core PMU `{}` has no `caps/slots` (only Arm's PMUv3 driver publishes it; perf has no value for it here either)",
                    p.name
                )),
                Some(s) => match crate::pmu::parse_number(s) {
                    Ok(0) => Err(format!(
                        "the core PMU `{}` says `caps/slots` = 0: this CPU does not report its pipeline width",
                        p.name
                    )),
                    #[allow(clippy::cast_precision_loss)]
                    Ok(n) => Ok(n as f64),
                    Err(_) => Err(format!(
                        "the core PMU `{}` has an unreadable `caps/slots` ({s:?})",
                        p.name
                    )),
                },
            },
        };
        values.insert(Literal::Slots, slots);
        values.insert(Literal::CoreWide, Ok(1.0));
        let pmem = sysfs.join("firmware/acpi/tables/NFIT").exists();
        values.insert(Literal::HasPmem, Ok(if pmem { 1.0 } else { 0.0 }));
        values.insert(
            Literal::SystemTscFreq,
            Err("the exporter does not read the TSC frequency (perf takes it from /proc/cpuinfo or CPUID)".to_string()),
        );
        let cpu = match (table.core_pmus().first(), &table.host_identity) {
            (Some(p), _) => table.identity_of(&p.name),
            (None, Some(id)) => id.clone(),
            (None, None) => table.identity_of(""),
        };
        HostLiterals { values, cpu }
    }

    /// The CPU identity derived alternatives' guards are matched against.
    pub fn cpu(&self) -> &crate::pmu::cpuid::CpuIdentity {
        &self.cpu
    }

    /// The literal's value, or why it has none.
    pub fn get(&self, lit: Literal) -> Result<f64, String> {
        self.values
            .get(&lit)
            .cloned()
            .unwrap_or_else(|| Err("not read".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(fixture: &str) -> HostLiterals {
        HostLiterals::discover(&crate::pmu::fixtures::table(fixture))
    }

    fn all(h: &HostLiterals) -> Vec<(&'static str, Result<f64, String>)> {
        Literal::ALL
            .into_iter()
            .map(|l| (l.name(), h.get(l)))
            .collect()
    }

    /// Hand-checked from the fixture's files: CPUs 0-7 online and present,
    /// `core_cpus_list` 0,4 / 1,5 / 2,6 / 3,7 (4 cores of 2 threads, no
    /// `smt/active` file), `physical_package_id` 0 for CPUs 0,1,4,5 and 1
    /// for 2,3,6,7, `die_id` 0 everywhere (2 dies: one per package), no
    /// `caps/slots` on `cpu`.
    #[test]
    fn intel_skx_two_sockets_with_smt() {
        let h = on("intel-skx");
        assert_eq!(h.get(Literal::SmtOn), Ok(1.0));
        assert_eq!(h.get(Literal::NumCpus), Ok(8.0));
        assert_eq!(h.get(Literal::NumCpusOnline), Ok(8.0));
        assert_eq!(h.get(Literal::NumCores), Ok(4.0));
        assert_eq!(h.get(Literal::NumDies), Ok(2.0));
        assert_eq!(h.get(Literal::NumPackages), Ok(2.0));
        assert_eq!(h.get(Literal::CoreWide), Ok(1.0));
        assert_eq!(h.get(Literal::HasPmem), Ok(0.0));
        let slots = h.get(Literal::Slots).unwrap_err();
        assert!(slots.contains("`cpu` has no `caps/slots`"), "{slots}");
        assert!(h.get(Literal::SystemTscFreq).is_err());
        assert_eq!(all(&h).len(), Literal::ALL.len());
    }

    /// Hand-checked: CPUs 0-27, 0-15 in pairs (`core_cpus_list` 0-1 ...
    /// 14-15: 8 P-cores with SMT), 16-27 alone (12 E-cores): 20 cores, one
    /// package; `cpu_core` (the first core PMU by type) has no
    /// `caps/slots`.
    #[test]
    fn intel_hybrid_p_and_e_cores() {
        let h = on("intel-hybrid");
        assert_eq!(h.get(Literal::SmtOn), Ok(1.0));
        assert_eq!(h.get(Literal::NumCpusOnline), Ok(28.0));
        assert_eq!(h.get(Literal::NumCores), Ok(20.0));
        assert_eq!(h.get(Literal::NumPackages), Ok(1.0));
        assert_eq!(h.get(Literal::NumDies), Ok(1.0));
        assert!(h.get(Literal::Slots).unwrap_err().contains("`cpu_core`"));
    }

    /// Hand-checked: CPUs 0-3, one per core, one package, no `die_id`;
    /// `armv8_pmuv3_0/caps/slots` is `0x00000000`.
    #[test]
    fn neoverse_n1_without_smt_says_why_slots_is_missing() {
        let h = on("arm-neoverse-n1");
        assert_eq!(h.get(Literal::SmtOn), Ok(0.0));
        assert_eq!(h.get(Literal::NumCores), Ok(4.0));
        assert_eq!(h.get(Literal::NumCpusOnline), Ok(4.0));
        assert_eq!(h.get(Literal::NumPackages), Ok(1.0));
        let slots = h.get(Literal::Slots).unwrap_err();
        assert!(slots.contains("`caps/slots` = 0"), "{slots}");
    }
}
