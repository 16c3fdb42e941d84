//! The small grammars of sysfs PMU files: `format/<term>` bit ranges
//! (`config:0-7,32-35`) and the kernel's CPU lists (`0-3,8`).
//!
//! Part of the spec leaf (stage 0): pure parsing over text, used by discovery and by the
//! config (a `requires_format` guard is stored parsed).

use super::SyntaxError;
use std::fmt;

/// Which 64-bit word of `perf_event_attr` a format term writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigWord {
    /// `config`
    Config,
    /// `config1` (also `bp_addr`/`kprobe_func`)
    Config1,
    /// `config2`
    Config2,
    /// `config3`
    Config3,
}

impl ConfigWord {
    /// Index 0..=3.
    pub fn index(self) -> usize {
        match self {
            ConfigWord::Config => 0,
            ConfigWord::Config1 => 1,
            ConfigWord::Config2 => 2,
            ConfigWord::Config3 => 3,
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "config" | "config0" => Some(ConfigWord::Config),
            "config1" => Some(ConfigWord::Config1),
            "config2" => Some(ConfigWord::Config2),
            "config3" => Some(ConfigWord::Config3),
            _ => None,
        }
    }
}

impl fmt::Display for ConfigWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigWord::Config => "config",
            ConfigWord::Config1 => "config1",
            ConfigWord::Config2 => "config2",
            ConfigWord::Config3 => "config3",
        })
    }
}

/// The bit ranges one format term occupies, e.g. `config:0-7,32-35`.
///
/// A value's bits fill the ranges least-significant first, in the order
/// written: for AMD's `event` (`config:0-7,32-35`), 0x120 puts 0x20 in bits
/// 0-7 and 0x1 in bits 32-35.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    /// The word the bits live in.
    pub word: ConfigWord,
    /// Inclusive `(lo, hi)` bit ranges, in order.
    pub ranges: Vec<(u8, u8)>,
}

impl Format {
    /// Parses the contents of a `format/<term>` file.
    pub fn parse(s: &str) -> Result<Self, SyntaxError> {
        let s = s.trim();
        let (word, bits) = s
            .split_once(':')
            .ok_or_else(|| SyntaxError(format!("expected `configN:lo-hi`, found `{s}`")))?;
        let word = ConfigWord::parse(word.trim())
            .ok_or_else(|| SyntaxError(format!("unknown config word `{word}`")))?;
        let mut ranges = Vec::new();
        for part in bits.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (parse_bit(lo)?, parse_bit(hi)?),
                None => {
                    let b = parse_bit(part)?;
                    (b, b)
                }
            };
            if lo > hi {
                return Err(SyntaxError(format!("bit range `{part}` is reversed")));
            }
            ranges.push((lo, hi));
        }
        Ok(Format { word, ranges })
    }

    /// How many bits the term holds.
    pub fn width(&self) -> u32 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| u32::from(hi - lo) + 1)
            .sum()
    }

    /// Places `value` into the term's bits, returning the bits to OR into
    /// the word. A value wider than the ranges is an error.
    pub fn encode(&self, value: u64) -> Result<u64, SyntaxError> {
        let width = self.width();
        if width < 64 && value >> width != 0 {
            return Err(SyntaxError(format!(
                "value {value:#x} is too wide for {} ({width} bits)",
                self
            )));
        }
        let mut out = 0u64;
        let mut rest = value;
        for &(lo, hi) in &self.ranges {
            let n = u32::from(hi - lo) + 1;
            let mask = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
            out |= (rest & mask) << lo;
            rest = if n >= 64 { 0 } else { rest >> n };
        }
        Ok(out)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.word)?;
        for (i, &(lo, hi)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

fn parse_bit(s: &str) -> Result<u8, SyntaxError> {
    let b: u8 = s
        .trim()
        .parse()
        .map_err(|_| SyntaxError(format!("`{s}` is not a bit number")))?;
    if b > 63 {
        return Err(SyntaxError(format!("bit {b} is beyond 63")));
    }
    Ok(b)
}

/// The most CPUs a CPU list may name, counted as written (before
/// duplicates are merged), far above any kernel's `NR_CPUS` (8,192 at
/// most): what a list parsed once is bounded by, so that its compact form
/// (whose ranges may join overlapping ones) parses again.
pub const MAX_CPU_LIST: usize = 65_537;

/// Parses a kernel CPU list (`0-3,8,10-11`), as in `cpumask`, `cpus` and
/// `devices/system/cpu/online`. An empty string is the empty list.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, SyntaxError> {
    let s = s.trim();
    let mut cpus = Vec::new();
    if s.is_empty() {
        return Ok(cpus);
    }
    for part in s.split(',') {
        let part = part.trim();
        let num = |x: &str| -> Result<u32, SyntaxError> {
            x.trim()
                .parse()
                .map_err(|_| SyntaxError(format!("`{x}` is not a CPU number in `{s}`")))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                let width = usize::try_from(b.wrapping_sub(a)).unwrap_or(usize::MAX);
                if a > b || width >= MAX_CPU_LIST - cpus.len() {
                    return Err(SyntaxError(format!(
                        "bad CPU range `{part}` (a list names at most {MAX_CPU_LIST} CPUs)"
                    )));
                }
                cpus.extend(a..=b);
            }
            None => {
                if cpus.len() >= MAX_CPU_LIST {
                    return Err(SyntaxError(format!(
                        "CPU list `{s}` names more than {MAX_CPU_LIST} CPUs"
                    )));
                }
                cpus.push(num(part)?);
            }
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Formats a CPU list compactly, the kernel's way (`0-3,8`).
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}
