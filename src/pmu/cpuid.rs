//! CPU identity of a core PMU, as the perf tool renders it for its
//! `pmu-events/arch/*/mapfile.csv` lookup.
//!
//! * x86: `vendor-family-model-stepping`, family in decimal, model and
//!   stepping in upper-case hex (perf's `get_cpuid_str`, format
//!   `%s-%u-%X-%X`), e.g. `GenuineIntel-6-55-4`. The fields come from the
//!   `processor` block of `<procfs>/cpuinfo` for the PMU's first CPU; the
//!   kernel prints `cpu family`, `model` and `stepping` there in decimal.
//! * Arm: the CPU's `midr_el1` register from
//!   `<sysfs>/devices/system/cpu/cpuN/regs/identification/midr_el1`,
//!   rendered `0x%016lx` (16 lower-case hex digits), e.g.
//!   `0x00000000410fd0c0`.
//!
//! Parsing is safe code over byte slices; the reading goes through
//! [`crate::bounded`] with the roots as parameters.

use std::path::Path;

use super::{Pmu, Scope};
use crate::bounded::{read_attribute, read_string, CPUINFO_BYTES};

/// The identity of one core PMU's CPUs, or why none was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuIdentity {
    /// The identity string (`GenuineIntel-6-55-4`, `0x00000000410fd0c0`).
    Known(String),
    /// No identity: why (kept for `check`).
    Unknown(String),
}

impl CpuIdentity {
    /// The identity string, if known.
    pub fn known(&self) -> Option<&str> {
        match self {
            CpuIdentity::Known(s) => Some(s),
            CpuIdentity::Unknown(_) => None,
        }
    }
}

/// The identity of a core PMU: that of the first CPU of its `cpus` or
/// `cpumask` file, else of CPU 0 (as the perf tool picks it).
pub fn identify_pmu(sysfs: &Path, procfs: &Path, pmu: &Pmu) -> CpuIdentity {
    identify(sysfs, procfs, identity_cpu(pmu))
}

/// The CPU whose identity stands for a PMU's: the first of its `cpus` or
/// `cpumask`, else CPU 0.
pub fn identity_cpu(pmu: &Pmu) -> u32 {
    match &pmu.scope {
        Scope::Cpumask(c) | Scope::Cpus(c) => c.first().copied().unwrap_or(0),
        Scope::AllCpus => 0,
    }
}

/// The identity of `cpu`: the Arm MIDR if sysfs has it, else the x86
/// fields of `<procfs>/cpuinfo`.
pub fn identify(sysfs: &Path, procfs: &Path, cpu: u32) -> CpuIdentity {
    let midr = sysfs.join(format!(
        "devices/system/cpu/cpu{cpu}/regs/identification/midr_el1"
    ));
    if let Ok(text) = read_attribute(&midr) {
        return match render_midr(text.as_bytes()) {
            Ok(id) => CpuIdentity::Known(id),
            Err(why) => CpuIdentity::Unknown(format!("{}: {why}", midr.display())),
        };
    }
    let cpuinfo = procfs.join("cpuinfo");
    match read_string(&cpuinfo, CPUINFO_BYTES) {
        Ok(text) => match render_x86(text.as_bytes(), cpu) {
            Ok(id) => CpuIdentity::Known(id),
            Err(why) => CpuIdentity::Unknown(format!("{}: {why}", cpuinfo.display())),
        },
        Err(e) => CpuIdentity::Unknown(format!(
            "no {} and cannot read {}: {e}",
            midr.display(),
            cpuinfo.display()
        )),
    }
}

/// Renders a `midr_el1` file's content (`0x...` hex) as `0x%016lx`.
pub fn render_midr(bytes: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let t = text.trim();
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let v = u64::from_str_radix(hex, 16).map_err(|_| format!("`{t}` is not a hex MIDR"))?;
    Ok(format!("0x{v:016x}"))
}

/// Renders the x86 identity of `cpu` from `/proc/cpuinfo` content.
pub fn render_x86(bytes: &[u8], cpu: u32) -> Result<String, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let block = text
        .split("\n\n")
        .find(|b| field(b, "processor").and_then(|v| v.parse::<u32>().ok()) == Some(cpu))
        .ok_or_else(|| format!("no `processor : {cpu}` block"))?;
    let vendor = field(block, "vendor_id").ok_or("no `vendor_id` line")?;
    let num = |key: &str| -> Result<u32, String> {
        let v = field(block, key).ok_or_else(|| format!("no `{key}` line"))?;
        v.parse()
            .map_err(|_| format!("`{key}: {v}` is not a decimal number"))
    };
    let (family, model, stepping) = (num("cpu family")?, num("model")?, num("stepping")?);
    Ok(format!("{vendor}-{family}-{model:X}-{stepping:X}"))
}

/// The value of `key : value` in one cpuinfo block (the key ends at
/// tabs/spaces before the colon).
fn field<'a>(block: &'a str, key: &str) -> Option<&'a str> {
    block.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim_end() == key).then(|| v.trim())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &[u8] = b"processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R)\nstepping\t: 4\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nstepping\t: 1\n\n";

    #[test]
    fn x86_identity_is_perfs_vendor_family_model_stepping() {
        assert_eq!(render_x86(CPUINFO, 0).unwrap(), "GenuineIntel-6-55-4");
        // The block of the CPU asked for, model in upper-case hex.
        assert_eq!(render_x86(CPUINFO, 1).unwrap(), "AuthenticAMD-25-11-1");
        let sapphire =
            b"processor : 0\nvendor_id : GenuineIntel\ncpu family : 6\nmodel : 143\nstepping : 8\n";
        assert_eq!(render_x86(sapphire, 0).unwrap(), "GenuineIntel-6-8F-8");
    }

    #[test]
    fn x86_identity_says_what_is_missing() {
        assert_eq!(
            render_x86(CPUINFO, 7).unwrap_err(),
            "no `processor : 7` block"
        );
        let no_model = b"processor : 0\nvendor_id : GenuineIntel\ncpu family : 6\nstepping : 4\n";
        assert_eq!(render_x86(no_model, 0).unwrap_err(), "no `model` line");
        let bad = b"processor : 0\nvendor_id : X\ncpu family : 6\nmodel : x\nstepping : 4\n";
        assert_eq!(
            render_x86(bad, 0).unwrap_err(),
            "`model: x` is not a decimal number"
        );
        // "model name" is not "model".
        let only_name =
            b"processor : 0\nvendor_id : X\ncpu family : 6\nmodel name : Y\nstepping : 4\n";
        assert_eq!(render_x86(only_name, 0).unwrap_err(), "no `model` line");
    }

    #[test]
    fn arm_identity_is_the_midr_as_16_hex_digits() {
        assert_eq!(
            render_midr(b"0x00000000410fd0c0\n").unwrap(),
            "0x00000000410fd0c0"
        );
        assert_eq!(render_midr(b"0x413FD0C1").unwrap(), "0x00000000413fd0c1");
        assert_eq!(render_midr(b"zz").unwrap_err(), "`zz` is not a hex MIDR");
    }

    #[test]
    fn identify_reads_midr_else_cpuinfo_else_says_why() {
        let dir = std::env::temp_dir().join(format!("pe-cpuid-{}", std::process::id()));
        let (sys, proc_) = (dir.join("sys"), dir.join("proc"));
        std::fs::create_dir_all(&proc_).unwrap();
        let missing = identify(&sys, &proc_, 0);
        assert!(matches!(&missing, CpuIdentity::Unknown(w) if w.contains("cpuinfo")));
        std::fs::write(proc_.join("cpuinfo"), CPUINFO).unwrap();
        assert_eq!(
            identify(&sys, &proc_, 1).known(),
            Some("AuthenticAMD-25-11-1")
        );
        let id = sys.join("devices/system/cpu/cpu0/regs/identification");
        std::fs::create_dir_all(&id).unwrap();
        std::fs::write(id.join("midr_el1"), "0x00000000410fd0c0\n").unwrap();
        assert_eq!(
            identify(&sys, &proc_, 0).known(),
            Some("0x00000000410fd0c0")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
