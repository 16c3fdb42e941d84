//! What the simulated kernel accepts: an encoding is validated against
//! the PMU table (formats, named events, `cpus`) and the simulator's own
//! transcription of the drivers' tables ([`drivers`]), and resolves to the
//! PMU that counts it and its rate. See the [module docs](super) for the
//! rules.

use super::drivers;
use super::rates::{cache_rate, hardware_rate, named_rate, software_rate, unnamed_rate, Rate};
use super::SimKernel;
use crate::perf::abi::{
    PMU_TYPE_SHIFT, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_SOFTWARE, TYPE_TRACEPOINT,
};
use crate::perf::EventAttr;
use crate::pmu::{Pmu, PmuEvent, Scope, TermValue};

#[derive(Debug, Clone, Default)]
pub(super) struct PmuInfo {
    /// Bits that formats or event encodings may set, per config word.
    masks: [u64; 4],
    /// `(name, encoding, scale)` of every named event.
    aliases: Vec<(String, [u64; 4], Option<f64>)>,
}

/// Encodes a named event through its PMU's formats (`None` if it needs a
/// `?` value or does not fit).
fn encode_alias(p: &Pmu, ev: &PmuEvent) -> Option<[u64; 4]> {
    let mut w = [0u64; 4];
    for t in &ev.terms {
        let TermValue::Num(v) = t.value else {
            return None;
        };
        match t.name.as_str() {
            "config" | "config0" => w[0] |= v,
            "config1" => w[1] |= v,
            "config2" => w[2] |= v,
            "config3" => w[3] |= v,
            name => {
                let f = p.formats.get(name)?;
                w[f.word.index()] |= f.encode(v).ok()?;
            }
        }
    }
    Some(w)
}

pub(super) fn pmu_info(p: &Pmu) -> PmuInfo {
    let mut info = PmuInfo::default();
    for f in p.formats.values() {
        for &(lo, hi) in &f.ranges {
            let n = u32::from(hi - lo) + 1;
            let m = if n >= 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << lo
            };
            info.masks[f.word.index()] |= m;
        }
    }
    for ev in p.events.values() {
        if let Some(w) = encode_alias(p, ev) {
            for (m, x) in info.masks.iter_mut().zip(w) {
                *m |= x;
            }
            info.aliases.push((ev.name.clone(), w, ev.scale));
        }
    }
    info
}

/// Software-context PMUs: their events may join any group.
fn is_software_pmu(type_: u32, name: &str) -> bool {
    type_ == TYPE_SOFTWARE
        || type_ == TYPE_TRACEPOINT
        || matches!(
            name,
            "software" | "tracepoint" | "breakpoint" | "kprobe" | "uprobe" | "msr"
        )
}

/// What an accepted open resolves to.
pub(super) struct Accepted<'a> {
    pub(super) pmu: &'a str,
    pub(super) sw: bool,
    pub(super) rate: Rate,
}

impl SimKernel {
    /// The rate (events per second of enabled time) an encoding counts at,
    /// or `None` for a snapshot event (a constant) or an encoding this
    /// kernel would refuse on every CPU.
    pub fn rate_of(&self, type_: u32, config: [u64; 4]) -> Option<f64> {
        let attr = EventAttr {
            type_,
            config,
            event: String::new(),
            pmu: String::new(),
        };
        let cpus = self.state().online.clone();
        cpus.iter().find_map(|&c| match self.accept(&attr, c) {
            Ok(Accepted {
                rate: Rate::PerSec(r),
                ..
            }) => Some(r),
            _ => None,
        })
    }

    /// Validates an encoding on a CPU (not the CPU's online state, the
    /// refusals or the group) and finds its PMU and rate.
    pub(super) fn accept(&self, attr: &EventAttr, cpu: u32) -> Result<Accepted<'_>, i32> {
        let c = attr.config;
        match attr.type_ {
            TYPE_HARDWARE | TYPE_HW_CACHE => {
                let cores = self.table.core_pmus();
                let ext = c[0] >> PMU_TYPE_SHIFT;
                let core = match cores.as_slice() {
                    [] => return Err(libc::ENOENT),
                    [one] if ext == 0 || ext == u64::from(one.type_) => *one,
                    [_] => return Err(libc::ENOENT),
                    many => *many
                        .iter()
                        .find(|p| u64::from(p.type_) == ext)
                        .ok_or(libc::ENOENT)?,
                };
                if let Scope::Cpus(cpus) = &core.scope {
                    if !cpus.contains(&cpu) {
                        return Err(libc::ENOENT);
                    }
                }
                if c[1..].iter().any(|&w| w != 0) {
                    return Err(libc::EINVAL);
                }
                let low = c[0] & 0xffff_ffff;
                let driver = drivers::driver_of(&self.table, core);
                let rate = if attr.type_ == TYPE_HARDWARE {
                    drivers::hardware(driver, low)?;
                    hardware_rate(low)
                } else {
                    let (cache, op, result) = (low & 0xff, (low >> 8) & 0xff, (low >> 16) & 0xff);
                    if low >> 24 != 0 {
                        return Err(libc::EINVAL);
                    }
                    drivers::cache(driver, cache, op, result)?;
                    cache_rate(low)
                };
                Ok(Accepted {
                    pmu: &core.name,
                    sw: false,
                    rate: Rate::PerSec(rate),
                })
            }
            TYPE_SOFTWARE => {
                if c[0] > 11 {
                    return Err(libc::ENOENT);
                }
                if c[1..].iter().any(|&w| w != 0) {
                    return Err(libc::EINVAL);
                }
                let name = self
                    .table
                    .pmus
                    .iter()
                    .find(|p| p.type_ == TYPE_SOFTWARE)
                    .map_or("software", |p| p.name.as_str());
                Ok(Accepted {
                    pmu: name,
                    sw: true,
                    rate: Rate::PerSec(software_rate(c[0])),
                })
            }
            TYPE_TRACEPOINT => {
                let p = self
                    .table
                    .pmus
                    .iter()
                    .find(|p| p.type_ == TYPE_TRACEPOINT)
                    .ok_or(libc::ENOENT)?;
                Ok(Accepted {
                    pmu: &p.name,
                    sw: true,
                    rate: Rate::PerSec(500.0),
                })
            }
            t => {
                let (i, p) = self
                    .table
                    .pmus
                    .iter()
                    .enumerate()
                    .find(|(_, p)| p.type_ == t)
                    .ok_or(libc::ENOENT)?;
                let info = &self.info[i];
                if c.iter().zip(info.masks).any(|(&w, m)| w & !m != 0) {
                    return Err(libc::EINVAL);
                }
                if let Scope::Cpus(cpus) = &p.scope {
                    if !cpus.contains(&cpu) {
                        return Err(libc::ENOENT);
                    }
                }
                // intel-client: only cbox 0 has the fixed clockticks counter.
                if let Some(n) = p.name.strip_prefix("uncore_cbox_") {
                    let fixed_on_0 = self
                        .table
                        .get("uncore_cbox_0")
                        .is_some_and(|b| b.events.contains_key("clockticks"));
                    if n != "0" && fixed_on_0 && c[0] & 0xff == 0xff {
                        return Err(libc::EINVAL);
                    }
                }
                let rate = match info.aliases.iter().find(|(_, w, _)| *w == c) {
                    Some((name, _, scale)) => named_rate(p, name, *scale),
                    None => unnamed_rate(p),
                };
                Ok(Accepted {
                    pmu: &p.name,
                    sw: is_software_pmu(t, &p.name),
                    rate,
                })
            }
        }
    }
}
