//! What the host tells about who holds a core PMU's counters and whether
//! the PMU is a hypervisor's (issue 27 item 3), read from the procfs and
//! sysfs roots given (never `/proc` or `/sys` themselves):
//!
//! * `<procfs>/sys/kernel/nmi_watchdog`: `1` when the hard-lockup
//!   detector runs; on x86 it holds one counter of every CPU (a pinned
//!   cycles event), which `perf` users free with `kernel.nmi_watchdog=0`;
//! * the `hypervisor` flag in `<procfs>/cpuinfo` (x86 guests: CPUID leaf
//!   1 ECX bit 31, set by every hypervisor);
//! * `<sysfs>/class/dmi/id/sys_vendor` and `product_name` (SMBIOS type
//!   1), which name the machine: a virtual one (QEMU, KVM, Amazon EC2,
//!   Google Compute Engine, Microsoft Hyper-V, VMware, Xen) where the
//!   flag is absent (Arm guests have no such flag).
//!
//! Each read is bounded; what cannot be read is unknown, never guessed.

use crate::bounded::{read_string, ATTRIBUTE_BYTES, CPUINFO_BYTES};
use std::path::Path;

/// The longest DMI string kept (outside input, shown on pages).
const DMI_CHARS: usize = 64;

/// DMI vendors and products of virtual machines (case-insensitive
/// substrings of `sys_vendor` or `product_name`).
const VIRTUAL: &[&str] = &[
    "qemu",
    "kvm",
    "amazon ec2",
    "google compute engine",
    "virtual machine",
    "vmware",
    "xen",
    "bochs",
    "openstack",
    "virtualbox",
    "alibaba cloud ecs",
];

/// What the host tells about its core PMUs' counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// `kernel.nmi_watchdog` (`None`: not readable).
    pub nmi_watchdog: Option<bool>,
    /// Whether `cpuinfo` has the x86 `hypervisor` flag.
    pub hypervisor_flag: bool,
    /// DMI `sys_vendor`.
    pub dmi_vendor: Option<String>,
    /// DMI `product_name`.
    pub dmi_product: Option<String>,
    /// Whether the CPUs are x86 (the watchdog holds a counter there).
    pub x86: bool,
}

impl HostFacts {
    /// Reads them under `sysfs` and `procfs`.
    pub fn read(sysfs: &Path, procfs: &Path) -> HostFacts {
        let nmi_watchdog = read_string(&procfs.join("sys/kernel/nmi_watchdog"), ATTRIBUTE_BYTES)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .map(|v| v != 0);
        let cpuinfo = read_string(&procfs.join("cpuinfo"), CPUINFO_BYTES).unwrap_or_default();
        let (hypervisor_flag, x86) = cpuinfo_facts(&cpuinfo);
        let dmi = |f: &str| {
            read_string(&sysfs.join("class/dmi/id").join(f), ATTRIBUTE_BYTES)
                .ok()
                .map(|s| s.trim().chars().take(DMI_CHARS).collect::<String>())
                .filter(|s| !s.is_empty())
        };
        HostFacts {
            nmi_watchdog,
            hypervisor_flag,
            dmi_vendor: dmi("sys_vendor"),
            dmi_product: dmi("product_name"),
            x86,
        }
    }

    /// What says the PMU is a hypervisor's (`None`: nothing does).
    pub fn virtual_by(&self) -> Option<String> {
        let dmi: Vec<&str> = [&self.dmi_vendor, &self.dmi_product]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        let named = dmi.iter().any(|s| {
            let l = s.to_ascii_lowercase();
            VIRTUAL.iter().any(|v| l.contains(v))
        });
        match (self.hypervisor_flag, named) {
            (true, true) => Some(format!("hypervisor flag, DMI {}", dmi.join(" "))),
            (true, false) => Some("hypervisor flag".into()),
            (false, true) => Some(format!("DMI {}", dmi.join(" "))),
            (false, false) => None,
        }
    }

    /// Whether the NMI watchdog holds a core counter (on, on x86).
    pub fn watchdog_holds_counter(&self) -> bool {
        self.nmi_watchdog == Some(true) && self.x86
    }
}

/// `(hypervisor flag, x86)` from the first `flags` line of a cpuinfo.
fn cpuinfo_facts(cpuinfo: &str) -> (bool, bool) {
    let x86 = cpuinfo.lines().any(|l| {
        l.starts_with("vendor_id") && (l.contains("GenuineIntel") || l.contains("AuthenticAMD"))
    });
    let flag = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .is_some_and(|(_, f)| f.split_whitespace().any(|w| w == "hypervisor"));
    (flag, x86)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_come_from_the_roots_given() {
        let d = tempfile::tempdir().unwrap();
        let (sys, proc_) = (d.path().join("sys"), d.path().join("proc"));
        std::fs::create_dir_all(sys.join("class/dmi/id")).unwrap();
        std::fs::create_dir_all(proc_.join("sys/kernel")).unwrap();
        assert_eq!(HostFacts::read(&sys, &proc_), HostFacts::default());
        std::fs::write(proc_.join("sys/kernel/nmi_watchdog"), "1\n").unwrap();
        std::fs::write(
            proc_.join("cpuinfo"),
            "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu vme hypervisor lahf_lm\n",
        )
        .unwrap();
        std::fs::write(sys.join("class/dmi/id/sys_vendor"), "Amazon EC2\n").unwrap();
        std::fs::write(sys.join("class/dmi/id/product_name"), "m5.large\n").unwrap();
        let f = HostFacts::read(&sys, &proc_);
        assert!(f.watchdog_holds_counter());
        assert_eq!(
            f.virtual_by().as_deref(),
            Some("hypervisor flag, DMI Amazon EC2 m5.large")
        );
        // An Arm guest: no flag, the DMI vendor tells; no x86 watchdog.
        std::fs::write(
            proc_.join("cpuinfo"),
            "processor\t: 0\nFeatures\t: fp asimd\n",
        )
        .unwrap();
        std::fs::write(sys.join("class/dmi/id/sys_vendor"), "QEMU\n").unwrap();
        std::fs::write(sys.join("class/dmi/id/product_name"), "x".repeat(500)).unwrap();
        let f = HostFacts::read(&sys, &proc_);
        assert!(!f.watchdog_holds_counter());
        assert_eq!(f.dmi_product.as_ref().map(String::len), Some(DMI_CHARS));
        assert!(f.virtual_by().is_some_and(|s| s.starts_with("DMI QEMU")));
        // Bare metal.
        std::fs::write(sys.join("class/dmi/id/sys_vendor"), "Dell Inc.\n").unwrap();
        std::fs::write(sys.join("class/dmi/id/product_name"), "PowerEdge R650\n").unwrap();
        assert_eq!(HostFacts::read(&sys, &proc_).virtual_by(), None);
    }
}
