//! The clocks a counter's plausibility is judged against (issue 27): each
//! CPU's busy time (`<procfs>/stat`) and its maximum frequency (cpufreq's
//! `cpuinfo_max_freq` under `<sysfs>`, else the TSC rate x86 prints as
//! `cpu MHz` in `<procfs>/cpuinfo`). The roots are parameters; parsing is
//! safe code over text, reading goes through [`crate::bounded`].

use crate::bounded::{read_attribute, read_string, CPUINFO_BYTES};
use crate::problem::plausible::FreqSource;
use std::path::Path;

/// `<procfs>/stat` is read up to this size: its `cpuN` lines come first
/// (about 100 bytes per CPU), then one `intr` line with a number per
/// interrupt, which on large hosts runs to hundreds of KiB.
pub const PROC_STAT_BYTES: u64 = 8 << 20;

/// The jiffies of `/proc/stat`: the kernel reports them in `USER_HZ`,
/// which is 100 on every architecture Linux runs on (whatever `HZ` is).
const NS_PER_TICK: u64 = 10_000_000;

/// One CPU's busy time since boot, nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTime {
    /// The CPU.
    pub cpu: u32,
    /// In user space: `user` + `nice` (which include guest time).
    pub user_ns: u64,
    /// In the kernel: `system` + `irq` + `softirq`.
    pub system_ns: u64,
}

impl CpuTime {
    /// User and kernel time together (idle, iowait and steal are not
    /// busy: no counter of the CPU counts then).
    pub fn busy_ns(&self) -> u64 {
        self.user_ns.saturating_add(self.system_ns)
    }
}

/// Parses the `cpuN` lines of `/proc/stat` into `out` (cleared first);
/// malformed lines are skipped.
pub fn parse_proc_stat(text: &str, out: &mut Vec<CpuTime>) {
    out.clear();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            if !out.is_empty() {
                break; // the cpuN lines are together, first
            }
            continue;
        };
        // `cpuN` with N right after `cpu`; the total line is `cpu  ...`.
        let Some((n, fields)) = rest.split_once(' ') else {
            continue;
        };
        let Ok(cpu) = n.parse::<u32>() else {
            continue;
        };
        let f = fields.split_ascii_whitespace();
        let v: Vec<u64> = f.take(7).map_while(|x| x.parse().ok()).collect();
        let [user, nice, system, _idle, _iowait, irq, softirq] = v[..] else {
            continue;
        };
        let ns = |t: u64| t.saturating_mul(NS_PER_TICK);
        out.push(CpuTime {
            cpu,
            user_ns: ns(user.saturating_add(nice)),
            system_ns: ns(system.saturating_add(irq).saturating_add(softirq)),
        });
    }
}

/// Reads `<procfs>/stat` into `out`.
pub fn read_cpu_times(procfs: &Path, out: &mut Vec<CpuTime>) -> Result<(), String> {
    let path = procfs.join("stat");
    let text =
        read_string(&path, PROC_STAT_BYTES).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_proc_stat(&text, out);
    if out.is_empty() {
        return Err(format!("{}: no cpuN line", path.display()));
    }
    Ok(())
}

/// A CPU's maximum frequency, or why it is unknown.
#[derive(Debug, Clone, PartialEq)]
pub enum MaxFreq {
    /// Hz, and where it came from.
    Known(f64, FreqSource),
    /// Why it is unknown (the cycles bound is not checked).
    Unknown(String),
}

/// The maximum frequency of every CPU of `cpus`: cpufreq's
/// `cpuinfo_max_freq` (kHz), else the `cpu MHz` of its `/proc/cpuinfo`
/// block where its flags have `constant_tsc` (without cpufreq the kernel
/// prints the TSC rate there), else unknown with why.
pub fn max_freqs(sysfs: &Path, procfs: &Path, cpus: &[u32]) -> Vec<(u32, MaxFreq)> {
    let mut tsc: Option<Vec<(u32, f64)>> = None;
    cpus.iter()
        .map(|&cpu| {
            let p = sysfs.join(format!("devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq"));
            if let Some(khz) = read_attribute(&p)
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|k| *k > 0.0)
            {
                return (cpu, MaxFreq::Known(khz * 1e3, FreqSource::Cpufreq));
            }
            let rates = tsc.get_or_insert_with(|| {
                read_string(&procfs.join("cpuinfo"), CPUINFO_BYTES)
                    .map(|t| tsc_rates(&t))
                    .unwrap_or_default()
            });
            match rates.iter().find(|(c, _)| *c == cpu) {
                Some(&(_, hz)) => (cpu, MaxFreq::Known(hz, FreqSource::Tsc)),
                None => (
                    cpu,
                    MaxFreq::Unknown(format!(
                        "no cpufreq cpuinfo_max_freq for CPU {cpu} and no TSC rate (constant_tsc and cpu MHz in cpuinfo)"
                    )),
                ),
            }
        })
        .collect()
}

/// The `cpu MHz` of each `processor` block of `/proc/cpuinfo` whose
/// flags have `constant_tsc`, in Hz.
pub fn tsc_rates(cpuinfo: &str) -> Vec<(u32, f64)> {
    let mut out = Vec::new();
    for block in cpuinfo.split("\n\n") {
        let field = |name: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then_some(v.trim())
            })
        };
        let (Some(Ok(cpu)), Some(Ok(mhz)), Some(flags)) = (
            field("processor").map(str::parse::<u32>),
            field("cpu MHz").map(str::parse::<f64>),
            field("flags"),
        ) else {
            continue;
        };
        if mhz > 0.0 && flags.split_ascii_whitespace().any(|f| f == "constant_tsc") {
            out.push((cpu, mhz * 1e6));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_gives_each_cpus_busy_time() {
        let text = "cpu  3653736 247939 411522 923256 22223 0 6748 11372 0 0\n\
                    cpu0 100 20 30 500 9 4 6 7 0 0\n\
                    cpu1 1 2 3\n\
                    cpu3 5 0 5 0 0 0 0\n\
                    intr 1 2 3\nctxt 9\n";
        let mut out = vec![CpuTime::default()];
        parse_proc_stat(text, &mut out);
        assert_eq!(
            out,
            [
                CpuTime {
                    cpu: 0,
                    user_ns: 1_200_000_000,
                    system_ns: 400_000_000
                },
                CpuTime {
                    cpu: 3,
                    user_ns: 50_000_000,
                    system_ns: 50_000_000
                },
            ]
        );
        assert_eq!(out[0].busy_ns(), 1_600_000_000);
    }

    #[test]
    fn the_maximum_frequency_is_cpufreqs_else_the_tsc_rate() {
        let dir = tempfile::tempdir().unwrap();
        let (sys, proc_) = (dir.path().join("sys"), dir.path().join("proc"));
        let f = sys.join("devices/system/cpu/cpu0/cpufreq");
        std::fs::create_dir_all(&f).unwrap();
        std::fs::create_dir_all(&proc_).unwrap();
        std::fs::write(f.join("cpuinfo_max_freq"), "3500000\n").unwrap();
        std::fs::write(
            proc_.join("cpuinfo"),
            "processor\t: 0\ncpu MHz\t\t: 2100.000\nflags\t\t: fpu constant_tsc\n\n\
             processor\t: 1\ncpu MHz\t\t: 2100.000\nflags\t\t: fpu constant_tsc\n\n\
             processor\t: 2\ncpu MHz\t\t: 2100.000\nflags\t\t: fpu\n",
        )
        .unwrap();
        let m = max_freqs(&sys, &proc_, &[0, 1, 2]);
        assert_eq!(m[0], (0, MaxFreq::Known(3.5e9, FreqSource::Cpufreq)));
        assert_eq!(m[1], (1, MaxFreq::Known(2.1e9, FreqSource::Tsc)));
        assert!(matches!(&m[2], (2, MaxFreq::Unknown(why)) if why.contains("no cpufreq")));
    }
}
