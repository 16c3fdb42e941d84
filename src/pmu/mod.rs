//! PMU discovery: everything the kernel tells us about its performance
//! monitoring units through sysfs, read from any root (a live `/sys` or a
//! fixture tree).
//!
//! The kernel registers every PMU under `bus/event_source/devices/<name>/`:
//!
//! * `type`: the numeric `perf_event_attr.type` to open its events with.
//!   Fixed ids are `software`=1, `tracepoint`=2, `breakpoint`=5 and the
//!   x86 core PMU `cpu`=4 (`PERF_TYPE_RAW`); every other PMU gets a dynamic id
//!   (allocated from 6 up), so ids must always be read, never assumed.
//! * `cpumask` (uncore-style PMUs: memory controllers, RAPL, cstate, DF):
//!   the CPUs on which an event must be opened, one fd per listed CPU. The
//!   driver moves an event opened elsewhere onto the cpumask CPU of the same
//!   die/socket, so opening on every CPU counts the same hardware many times.
//! * `cpus` (core PMUs of hybrid x86 and Arm big.LITTLE): the only CPUs the
//!   PMU can count on.
//! * neither: a core-scope or software-like PMU valid on every online CPU.
//! * `events/<name>`: `term=value,...` aliases, with optional `.scale`,
//!   `.unit`, `.snapshot` and `.per-pkg` companions.
//! * `format/<term>`: which bits of `config`, `config1`, `config2` or
//!   `config3` a term fills (`config:0-7,32-35`).
//!
//! Discovery is tolerant of what real kernels write (newline or not, empty
//! `caps/`, unreadable files); a malformed entry is skipped with a warning
//! instead of failing the whole table.

pub mod cpuclock;
pub mod cpuid;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod host;
pub mod virt;

use crate::bounded::read_attribute;
pub use crate::spec::format::{format_cpu_list, parse_cpu_list, ConfigWord, Format};
pub use crate::spec::{parse_number, parse_terms, SyntaxError, Term, TermValue};
pub use host::is_sysfs_mount;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Errors of PMU discovery and of the sysfs file parsers.
#[derive(Debug, thiserror::Error)]
pub enum PmuError {
    /// A file or directory that must exist could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The OS error (carries the errno).
        source: std::io::Error,
    },
    /// A sysfs file did not have the form the kernel writes.
    #[error("{path}: {msg}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        msg: String,
    },
}

/// Where a PMU may count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `cpumask`: uncore-style; open exactly one fd on each listed CPU.
    Cpumask(Vec<u32>),
    /// `cpus`: a core PMU that counts only on these CPUs.
    Cpus(Vec<u32>),
    /// Neither file: valid on every online CPU.
    AllCpus,
}

/// A named event alias from `events/<name>`.
#[derive(Debug, Clone, PartialEq)]
pub struct PmuEvent {
    /// The file name.
    pub name: String,
    /// The terms it expands to.
    pub terms: Vec<Term>,
    /// `.scale`, when present.
    pub scale: Option<f64>,
    /// `.unit`, when present.
    pub unit: Option<String>,
    /// `.snapshot` = 1: an absolute reading, not a running count.
    pub snapshot: bool,
    /// `.per-pkg` = 1: count once per package.
    pub per_pkg: bool,
}

/// One PMU of the event_source bus.
#[derive(Debug, Clone, PartialEq)]
pub struct Pmu {
    /// Directory name (`cpu`, `uncore_imc_0`, `arm_dmc620_10008c000`).
    pub name: String,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// Where it counts.
    pub scope: Scope,
    /// Named events.
    pub events: BTreeMap<String, PmuEvent>,
    /// Format terms.
    pub formats: BTreeMap<String, Format>,
    /// `caps/*`, possibly empty.
    pub caps: BTreeMap<String, String>,
}

impl Pmu {
    /// A core PMU: x86 `cpu` (or s390 `cpum_cf`), or any PMU with a `cpus`
    /// file (hybrid `cpu_core`/`cpu_atom`, Arm `armv8_pmuv3_*`). This is
    /// the rule the perf tool itself applies.
    pub fn is_core(&self) -> bool {
        self.name == "cpu" || self.name == "cpum_cf" || matches!(self.scope, Scope::Cpus(_))
    }
}

/// Online CPUs and their packages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// `devices/system/cpu/online`.
    pub online: Vec<u32>,
    /// `cpuN/topology/physical_package_id` for each online CPU (0 when
    /// the file is missing, as in some containers).
    pub package: BTreeMap<u32, u32>,
    /// The core of each online CPU: the lowest CPU of its
    /// `cpuN/topology/core_cpus_list` (older kernels:
    /// `thread_siblings_list`), the CPU itself when neither is readable.
    /// Unique on the node, unlike `core_id` (per package).
    pub core: BTreeMap<u32, u32>,
}

impl Topology {
    /// Reads the topology under `sysfs`.
    pub fn discover(sysfs: &Path) -> Result<Self, PmuError> {
        let online = read_online_cpus(sysfs)?;
        let mut package = BTreeMap::new();
        for &cpu in &online {
            let p = sysfs.join(format!(
                "devices/system/cpu/cpu{cpu}/topology/physical_package_id"
            ));
            let id = read_attribute(&p)
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .map(|v| u32::try_from(v).unwrap_or(0))
                .unwrap_or(0);
            package.insert(cpu, id);
        }
        let mut core = BTreeMap::new();
        for &cpu in &online {
            let dir = sysfs.join(format!("devices/system/cpu/cpu{cpu}/topology"));
            let first = ["core_cpus_list", "thread_siblings_list"]
                .iter()
                .find_map(|f| {
                    let s = read_attribute(&dir.join(f)).ok()?;
                    parse_cpu_list(&s).ok()?.into_iter().min()
                })
                .unwrap_or(cpu);
            core.insert(cpu, first);
        }
        Ok(Topology {
            online,
            package,
            core,
        })
    }

    /// The core of a CPU: the lowest CPU sharing it (the CPU itself when
    /// unknown).
    pub fn core_of(&self, cpu: u32) -> u32 {
        self.core.get(&cpu).copied().unwrap_or(cpu)
    }

    /// The package (socket) of a CPU.
    pub fn socket_of(&self, cpu: u32) -> u32 {
        self.package.get(&cpu).copied().unwrap_or(0)
    }
}

/// Reads `devices/system/cpu/online` under `sysfs`.
pub fn read_online_cpus(sysfs: &Path) -> Result<Vec<u32>, PmuError> {
    let p = sysfs.join("devices/system/cpu/online");
    let s = read_attribute(&p).map_err(|source| PmuError::Io {
        path: p.clone(),
        source,
    })?;
    parse_cpu_list(&s).map_err(|e| PmuError::Parse { path: p, msg: e.0 })
}

/// Everything discovered under one sysfs root.
#[derive(Debug, Clone, PartialEq)]
pub struct PmuTable {
    /// The sysfs root it was read from.
    pub sysfs: PathBuf,
    /// PMUs, sorted by name.
    pub pmus: Vec<Pmu>,
    /// CPUs and packages.
    pub topology: Topology,
    /// Entries that were skipped, with why.
    pub warnings: Vec<String>,
    /// The CPU identity of each core PMU, by PMU name; empty until
    /// [`PmuTable::read_identities`].
    pub identities: BTreeMap<String, cpuid::CpuIdentity>,
    /// The host's CPU identity where it has no core PMU (a VM without a
    /// virtual PMU), read from CPU 0 by [`PmuTable::read_identities`]:
    /// what the `requires_cpu` guards are judged against there, so an
    /// encoding written for another CPU is not on this platform rather
    /// than waiting for a hardware PMU. `None` with a core PMU. (The
    /// first online CPU's, as perf reads the first `processor` block.)
    pub host_identity: Option<cpuid::CpuIdentity>,
}

impl PmuTable {
    /// Where an event goes in its group: 0 for the perf-metrics `slots`
    /// event (the leader the kernel requires), 1 for a metric event
    /// (`topdown-*` on a perf-metrics PMU), 2 for anything else. Only a raw
    /// encoding on a core PMU whose sysfs lists `slots` can rank below 2.
    /// Groups sort their members by it (stably: the YAML order within a
    /// rank), the node's and the per-cgroup ones alike.
    pub fn topdown_rank(&self, pmu: &str, type_: u32, config: u64) -> u8 {
        let perf_metrics = self
            .get(pmu)
            .is_some_and(|p| p.type_ == type_ && p.events.contains_key("slots"));
        if !perf_metrics {
            return 2;
        }
        match crate::sys::abi::intel_topdown(config) {
            Some(true) => 0,
            Some(false) => 1,
            None => 2,
        }
    }

    /// Reads every PMU and the CPU topology under `sysfs`.
    pub fn discover(sysfs: &Path) -> Result<Self, PmuError> {
        let dir = sysfs.join("bus/event_source/devices");
        let rd = fs::read_dir(&dir).map_err(|source| PmuError::Io {
            path: dir.clone(),
            source,
        })?;
        let mut pmus = Vec::new();
        let mut warnings = Vec::new();
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort_by(|a, b| natural_key(a).cmp(&natural_key(b)));
        for name in names {
            match read_pmu(&dir.join(&name), &name, &mut warnings) {
                Ok(p) => pmus.push(p),
                Err(e) => warnings.push(format!("PMU {name} skipped: {e}")),
            }
        }
        let topology = Topology::discover(sysfs)?;
        Ok(PmuTable {
            sysfs: sysfs.to_path_buf(),
            pmus,
            topology,
            warnings,
            identities: BTreeMap::new(),
            host_identity: None,
        })
    }

    /// Reads the CPU identity of every core PMU ([`cpuid::identify_pmu`]).
    pub fn read_identities(&mut self, procfs: &Path) {
        self.identities = self
            .core_pmus()
            .into_iter()
            .map(|p| (p.name.clone(), cpuid::identify_pmu(&self.sysfs, procfs, p)))
            .collect();
        let first = self.topology.online.first().copied().unwrap_or(0);
        self.host_identity = self
            .identities
            .is_empty()
            .then(|| cpuid::identify(&self.sysfs, procfs, first));
    }

    /// The CPU identity a PMU's events count on: the PMU's own for a core
    /// PMU, else the first core PMU's (uncore PMUs belong to the package).
    pub fn identity_of(&self, pmu: &str) -> cpuid::CpuIdentity {
        self.identities
            .get(pmu)
            .or_else(|| self.identities.values().next())
            .cloned()
            .unwrap_or_else(|| {
                cpuid::CpuIdentity::Unknown("not read: no core PMU or no procfs root".into())
            })
    }

    /// The PMU with exactly this name.
    pub fn get(&self, name: &str) -> Option<&Pmu> {
        self.pmus.iter().find(|p| p.name == name)
    }

    /// Every core PMU (see [`Pmu::is_core`]), by type (so `cpu_core`, type
    /// 4, comes before `cpu_atom`).
    pub fn core_pmus(&self) -> Vec<&Pmu> {
        let mut v: Vec<&Pmu> = self.pmus.iter().filter(|p| p.is_core()).collect();
        v.sort_by_key(|p| p.type_);
        v
    }

    /// PMUs whose name matches `pattern` (see [`pmu_name_matches`]).
    ///
    /// When the pattern ends with `*` and the instance rule matches
    /// nothing, the star is retried as a plain glob, so `uncore_*` still
    /// means every uncore PMU.
    pub fn matching(&self, pattern: &str) -> Vec<&Pmu> {
        let strict: Vec<&Pmu> = self
            .pmus
            .iter()
            .filter(|p| pmu_name_matches(pattern, &p.name))
            .collect();
        if !strict.is_empty() || !pattern.contains('*') {
            return strict;
        }
        self.pmus
            .iter()
            .filter(|p| glob(pattern.as_bytes(), p.name.as_bytes()))
            .collect()
    }

    /// The CPUs a PMU's events are opened on: its cpumask or cpus,
    /// restricted to online CPUs, or every online CPU.
    pub fn cpus_of(&self, pmu: &Pmu) -> Vec<u32> {
        let online = &self.topology.online;
        match &pmu.scope {
            Scope::Cpumask(c) | Scope::Cpus(c) => {
                c.iter().copied().filter(|x| online.contains(x)).collect()
            }
            Scope::AllCpus => online.clone(),
        }
    }
}

/// Whether a PMU name matches a pattern from an event spec.
///
/// * A name without `*` matches itself and its numbered instances:
///   `uncore_imc` matches `uncore_imc` and `uncore_imc_3`, and
///   `arm_dmc620` matches `arm_dmc620_10008c000` (a hex address).
/// * A trailing `*` stands for an instance suffix of hex digits:
///   `uncore_imc_*` matches `uncore_imc_0` but not
///   `uncore_imc_free_running_0`.
/// * A `*` elsewhere matches any run of characters.
pub fn pmu_name_matches(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        if name == pattern {
            return true;
        }
        return name
            .strip_prefix(pattern)
            .and_then(|r| r.strip_prefix('_'))
            .is_some_and(is_instance_suffix);
    }
    if let Some(base) = pattern.strip_suffix('*') {
        // The instance rule: everything before the star (allowing a
        // glob in it), then hex digits.
        let bytes = name.as_bytes();
        // Try every split point where the remainder is an instance suffix.
        for i in (0..bytes.len()).rev() {
            let (head, tail) = name.split_at(i);
            if !is_instance_suffix(tail) {
                break;
            }
            if glob(base.as_bytes(), head.as_bytes()) {
                return true;
            }
        }
        return false;
    }
    glob(pattern.as_bytes(), name.as_bytes())
}

/// Sort key that orders `amd_umc_2` before `amd_umc_10`.
fn natural_key(name: &str) -> (&str, u64, &str) {
    match name.rsplit_once('_') {
        Some((head, tail)) if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) => {
            (head, tail.parse().unwrap_or(u64::MAX), name)
        }
        _ => (name, 0, name),
    }
}

fn is_instance_suffix(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A plain glob where `*` matches any run of bytes.
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && p[pi] != b'*' && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// A sysfs attribute, bounded ([`crate::bounded`]: a FIFO, a device or a
/// huge file is refused with the reason), without its trailing newline.
fn read_trimmed(p: &Path) -> std::io::Result<String> {
    read_attribute(p).map(|s| s.trim_end_matches(['\n', '\0', ' ']).to_string())
}

fn read_pmu(dir: &Path, name: &str, warnings: &mut Vec<String>) -> Result<Pmu, PmuError> {
    let type_ = read_type(dir)?;
    let scope = read_scope(dir)?;
    // Warnings in this order: formats, then events.
    let formats = read_formats(dir, warnings);
    let events = read_events(&dir.join("events"), warnings);
    Ok(Pmu {
        name: name.to_string(),
        type_,
        scope,
        events,
        formats,
        caps: read_caps(dir),
    })
}

/// `type`: the PMU's `perf_event_attr.type`.
fn read_type(dir: &Path) -> Result<u32, PmuError> {
    let tp = dir.join("type");
    let t = read_trimmed(&tp).map_err(|source| PmuError::Io {
        path: tp.clone(),
        source,
    })?;
    t.trim().parse().map_err(|_| PmuError::Parse {
        path: tp.clone(),
        msg: format!("`{t}` is not a PMU type"),
    })
}

/// Where the PMU counts: `cpumask`, else `cpus`, else every CPU.
fn read_scope(dir: &Path) -> Result<Scope, PmuError> {
    let list = |file: &str| -> Result<Option<Vec<u32>>, PmuError> {
        let p = dir.join(file);
        match read_trimmed(&p) {
            Ok(s) => parse_cpu_list(&s)
                .map(Some)
                .map_err(|e| PmuError::Parse { path: p, msg: e.0 }),
            Err(_) => Ok(None),
        }
    };
    Ok(if let Some(c) = list("cpumask")? {
        Scope::Cpumask(c)
    } else if let Some(c) = list("cpus")? {
        Scope::Cpus(c)
    } else {
        Scope::AllCpus
    })
}

/// `format/`: the terms and their bits; one that cannot be read or parsed
/// is left out with a warning.
fn read_formats(dir: &Path, warnings: &mut Vec<String>) -> BTreeMap<String, Format> {
    let mut formats = BTreeMap::new();
    if let Ok(rd) = fs::read_dir(dir.join("format")) {
        for e in rd.filter_map(|e| e.ok()) {
            let fname = e.file_name().to_string_lossy().into_owned();
            let p = e.path();
            match read_trimmed(&p)
                .map_err(|e| e.to_string())
                .and_then(|s| Format::parse(&s).map_err(|e| e.0))
            {
                Ok(f) => {
                    formats.insert(fname, f);
                }
                Err(m) => warnings.push(format!("{}: {m}", p.display())),
            }
        }
    }
    formats
}

/// `events/` (`edir`): the named events with their companions, in name
/// order; one that cannot be read is left out with a warning.
fn read_events(edir: &Path, warnings: &mut Vec<String>) -> BTreeMap<String, PmuEvent> {
    let mut events = BTreeMap::new();
    if let Ok(rd) = fs::read_dir(edir) {
        let mut files: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        for f in &files {
            if f.contains('.') {
                continue; // companions: .scale .unit .snapshot .per-pkg
            }
            match read_event(edir, f) {
                Ok(ev) => {
                    events.insert(f.clone(), ev);
                }
                Err(w) => warnings.push(w),
            }
        }
    }
    events
}

/// The event `f` of `edir`, or the warning saying why it is skipped.
fn read_event(edir: &Path, f: &str) -> Result<PmuEvent, String> {
    let p = edir.join(f);
    let terms = match read_trimmed(&p) {
        Ok(s) => parse_terms(&s).map_err(|e| format!("{}: {}", p.display(), e.0))?,
        Err(e) => return Err(format!("{}: {e}", p.display())),
    };
    // A companion that exists but cannot be read (a FIFO, a device,
    // a huge file) skips the event with the reason: counting it
    // without its scale or unit would export wrong numbers.
    let companions = ["scale", "unit", "snapshot", "per-pkg"].map(|ext| {
        let cp = edir.join(format!("{f}.{ext}"));
        match read_trimmed(&cp) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}; event `{f}` skipped", cp.display())),
        }
    });
    if let Some(Err(w)) = companions.iter().find(|c| c.is_err()) {
        return Err(w.clone());
    }
    let [scale_s, unit_s, snapshot_s, per_pkg_s] = companions.map(|c| c.ok().flatten());
    let scale =
        match scale_s {
            Some(s) => Some(parse_scale(&s).map_err(|why| {
                format!("{}.scale: `{s}` {why}; event `{f}` skipped", p.display())
            })?),
            None => None,
        };
    let flag = |c: Option<String>| c.is_some_and(|s| s.trim() == "1");
    Ok(PmuEvent {
        name: f.to_string(),
        terms,
        scale,
        unit: unit_s
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
        snapshot: flag(snapshot_s),
        per_pkg: flag(per_pkg_s),
    })
}

/// An event's `.scale`. A bad one would make every count wrong (negative:
/// decreasing counters; 0: zeros; 1e308: +Inf), so the event is skipped,
/// with the reason, rather than counted unscaled.
fn parse_scale(s: &str) -> Result<f64, String> {
    let v = s
        .trim()
        .parse::<f64>()
        .map_err(|_| "is not a number".to_string())?;
    crate::spec::check_scale(v).map_err(|why| format!("refused: {why}"))?;
    Ok(v)
}

/// `caps/`: the PMU's capabilities, as written.
fn read_caps(dir: &Path) -> BTreeMap<String, String> {
    let mut caps = BTreeMap::new();
    if let Ok(rd) = fs::read_dir(dir.join("caps")) {
        for e in rd.filter_map(|e| e.ok()) {
            if let Ok(v) = read_trimmed(&e.path()) {
                caps.insert(e.file_name().to_string_lossy().into_owned(), v);
            }
        }
    }
    caps
}

/// Normalises a sysfs `.scale`/`.unit` pair to base units.
///
/// `MiB` becomes bytes (so the IMC's 6.103515625e-5 MiB is exactly 64
/// bytes), `ns`/`us`/`ms` become seconds, `Joules` becomes `joules`, `C`
/// becomes `celsius`. Unknown units are kept as written.
pub fn normalize_unit(scale: f64, unit: &str) -> (f64, String) {
    let (mult, base): (f64, &str) = match unit.trim() {
        "" => (1.0, ""),
        "B" | "bytes" | "Bytes" | "byte" => (1.0, "bytes"),
        "KiB" => (1024.0, "bytes"),
        "MiB" => (1_048_576.0, "bytes"),
        "GiB" => (1_073_741_824.0, "bytes"),
        "kB" | "KB" => (1e3, "bytes"),
        "MB" => (1e6, "bytes"),
        "GB" => (1e9, "bytes"),
        "ns" | "nsec" => (1e-9, "seconds"),
        "us" | "usec" => (1e-6, "seconds"),
        "ms" | "msec" => (1e-3, "seconds"),
        "s" | "sec" | "seconds" => (1.0, "seconds"),
        "Joules" | "joules" | "J" => (1.0, "joules"),
        "C" | "celsius" => (1.0, "celsius"),
        other => (1.0, other),
    };
    (scale * mult, base.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `text` to `root/path`, creating its directories.
    fn write_file(root: &Path, path: &str, text: &str) {
        let f = root.join(path);
        std::fs::create_dir_all(f.parent().expect("a parent")).expect("mkdir");
        std::fs::write(f, text).expect("write");
    }

    /// Issue 11: a sysfs `.scale` that is not finite, not positive or
    /// absurd skips its event with the reason, instead of exporting
    /// decreasing counters, zeros or +Inf.
    #[test]
    fn odd_scales_skip_the_event_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        let w = |p: &str, s: &str| write_file(r, p, s);
        w("devices/system/cpu/online", "0-1\n");
        let d = "bus/event_source/devices/odd";
        w(&format!("{d}/type"), "42\n");
        w(&format!("{d}/format/event"), "config:0-7\n");
        let scales = [
            ("good", "6.103515625e-5"),
            ("neg", "-1"),
            ("zero", "0"),
            ("huge", "1e308"),
            ("nan", "nan"),
            ("word", "lots"),
        ];
        for (i, (name, scale)) in scales.iter().enumerate() {
            w(&format!("{d}/events/{name}"), &format!("event={i}"));
            w(&format!("{d}/events/{name}.scale"), scale);
        }
        let t = PmuTable::discover(r).unwrap();
        let p = t.get("odd").unwrap();
        assert_eq!(p.events.keys().collect::<Vec<_>>(), ["good"]);
        assert_eq!(t.warnings.len(), 5, "{:?}", t.warnings);
        for (name, _) in &scales[1..] {
            assert!(
                t.warnings
                    .iter()
                    .any(|w| w.contains(&format!("event `{name}` skipped"))),
                "{name}: {:?}",
                t.warnings
            );
        }
        assert!(t.warnings.iter().any(|w| w.contains("must be positive")));
    }

    /// Issue 11: a FIFO as an event file, an event file (and a `.scale`)
    /// linked to `/dev/zero`, and a 200 MB sparse event file: each is
    /// refused at once with the reason naming the file (before: a hang,
    /// memory until the OOM killer, a 200 MB read). `type` as a FIFO
    /// skips the whole PMU, with the reason.
    #[test]
    fn hostile_sysfs_files_are_refused_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        let w = |p: &str, s: &str| write_file(r, p, s);
        let mkfifo = |p: &Path| {
            let st = std::process::Command::new("mkfifo").arg(p).status();
            assert!(st.expect("mkfifo runs").success(), "mkfifo {}", p.display());
        };
        w("devices/system/cpu/online", "0-1\n");
        let d = "bus/event_source/devices/odd";
        w(&format!("{d}/type"), "42\n");
        w(&format!("{d}/format/event"), "config:0-7\n");
        w(&format!("{d}/events/good"), "event=1");
        w(&format!("{d}/events/scaled"), "event=2");
        let ev = r.join(d).join("events");
        mkfifo(&ev.join("fifo"));
        std::os::unix::fs::symlink("/dev/zero", ev.join("zero")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", ev.join("scaled.scale")).unwrap();
        let sparse = fs::File::create(ev.join("sparse")).unwrap();
        sparse.set_len(200 << 20).unwrap();
        w(
            "bus/event_source/devices/blocked/format/event",
            "config:0-7\n",
        );
        mkfifo(&r.join("bus/event_source/devices/blocked/type"));

        let t = PmuTable::discover(r).unwrap();
        let p = t.get("odd").unwrap();
        assert_eq!(p.events.keys().collect::<Vec<_>>(), ["good"]);
        assert!(t.get("blocked").is_none());
        let has = |needle: String| {
            assert!(
                t.warnings.iter().any(|w| w.contains(&needle)),
                "{needle}: {:?}",
                t.warnings
            )
        };
        let e = ev.display();
        has(format!("{e}/fifo: not a regular file (a FIFO): refused"));
        has(format!(
            "{e}/zero: not a regular file (a character device): refused"
        ));
        has(format!("{e}/sparse: larger than 64 KiB: refused"));
        has(format!(
            "{e}/scaled.scale: not a regular file (a character device): refused; event `scaled` skipped"
        ));
        has("PMU blocked skipped: cannot read ".to_string());
        has("blocked/type: not a regular file (a FIFO): refused".to_string());
        assert_eq!(t.warnings.len(), 5, "{:?}", t.warnings);
    }

    #[test]
    fn format_split_ranges_fill_lsb_first() {
        let f = Format::parse("config:0-7,32-35\n").unwrap();
        assert_eq!(f.width(), 12);
        assert_eq!(f.encode(0x120).unwrap(), 0x1_0000_0020);
        let df = Format::parse("config:8-15,24-27").unwrap();
        assert_eq!(df.encode(0x7fe).unwrap(), (0xfe << 8) | (0x7 << 24));
        assert!(Format::parse("config:8-15").unwrap().encode(0x100).is_err());
        let single = Format::parse("config:21").unwrap();
        assert_eq!(single.encode(1).unwrap(), 1 << 21);
        assert!(single.encode(2).is_err());
        let full = Format::parse("config1:0-63").unwrap();
        assert_eq!(full.word, ConfigWord::Config1);
        assert_eq!(full.encode(u64::MAX).unwrap(), u64::MAX);
        assert!(Format::parse("config9:0").is_err());
        assert!(Format::parse("config:7-3").is_err());
        assert!(Format::parse("config:64").is_err());
        assert_eq!(
            Format::parse("config:0-7,32-35").unwrap().to_string(),
            "config:0-7,32-35"
        );
    }

    #[test]
    fn terms_bare_required_and_hex() {
        let t = parse_terms("event=0xd,umask=0x1,cmask=1,any").unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t[3].value, TermValue::Num(1));
        assert_eq!(t[0].value, TermValue::Num(0xd));
        let q = parse_terms("type=0x5,nodeid=?\n").unwrap();
        assert_eq!(q[1].value, TermValue::Required);
        assert!(parse_terms("event=zz").is_err());
        assert!(parse_terms("a,,b").is_err());
        assert!(parse_terms("").unwrap().is_empty());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2\n").unwrap(), vec![0, 2]);
        assert_eq!(parse_cpu_list("0-3,8").unwrap(), vec![0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<u32>::new());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert_eq!(format_cpu_list(&[0, 1, 2, 4, 6, 7]), "0-2,4,6-7");
    }

    /// A list names at most `MAX_CPU_LIST` CPUs as written, so that its
    /// compact form parses again: two overlapping ranges each within the
    /// bound once printed as one wider range that was refused (found by
    /// the `sysfs` fuzz target).
    #[test]
    fn a_cpu_list_is_bounded_as_a_whole_and_its_compact_form_parses() {
        let last = u32::try_from(crate::spec::format::MAX_CPU_LIST - 1).unwrap();
        let widest = format!("0-{last}");
        let cpus = parse_cpu_list(&widest).unwrap();
        assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)).unwrap(), cpus);
        assert!(parse_cpu_list(&format!("0-{}", last + 1)).is_err());
        let e = parse_cpu_list("0-60000,30000-90000").unwrap_err();
        assert!(e.0.contains("at most 65537 CPUs"), "{e:?}");
        assert!(parse_cpu_list(&format!("{widest},5")).is_err());
        let fuzzed = "0297208,2221,222222,008,2202,6,222222,008,222,0-2228,2202,608,22222-82022,008,222,0-22222,0-6423,2-6423,22222,0-6222,0-62222,3,0-6";
        if let Ok(cpus) = parse_cpu_list(fuzzed) {
            assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)).unwrap(), cpus);
        }
    }

    #[test]
    fn pmu_name_rules() {
        assert!(pmu_name_matches("uncore_imc", "uncore_imc"));
        assert!(pmu_name_matches("uncore_imc", "uncore_imc_3"));
        assert!(!pmu_name_matches("uncore_imc", "uncore_imc_free_running_0"));
        assert!(pmu_name_matches("uncore_imc_*", "uncore_imc_12"));
        assert!(!pmu_name_matches(
            "uncore_imc_*",
            "uncore_imc_free_running_0"
        ));
        assert!(!pmu_name_matches("uncore_imc_*", "uncore_imc"));
        assert!(pmu_name_matches("arm_dmc620", "arm_dmc620_10008c000"));
        assert!(pmu_name_matches("arm_dmc620_*", "arm_dmc620_10008c000"));
        assert!(pmu_name_matches("armv8_pmuv3_*", "armv8_pmuv3_0"));
        assert!(pmu_name_matches(
            "uncore_*_free_running_*",
            "uncore_imc_free_running_1"
        ));
        assert!(!pmu_name_matches("cpu", "cpu_core"));
    }

    #[test]
    fn sysfs_mounts_from_mountinfo() {
        let mi = "22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n\
                  99 80 0:21 / /host/sys ro,nosuid master:7 - sysfs sysfs ro\n\
                  100 80 0:50 / /host\\040dir rw - sysfs sysfs rw\n\
                  101 80 8:1 /work /data rw - ext4 /dev/vda rw\n";
        assert!(is_sysfs_mount(Path::new("/sys"), mi));
        assert!(is_sysfs_mount(Path::new("/host/sys"), mi));
        assert!(is_sysfs_mount(Path::new("/host dir"), mi));
        assert!(!is_sysfs_mount(Path::new("/data"), mi));
        assert!(!is_sysfs_mount(
            Path::new("/work/tests/fixtures/sysfs/intel-skx"),
            mi
        ));
    }

    #[test]
    fn units_normalise() {
        let (s, u) = normalize_unit(6.103515625e-5, "MiB");
        assert_eq!(s, 64.0);
        assert_eq!(u, "bytes");
        assert_eq!(normalize_unit(2f64.powi(-32), "Joules").1, "joules");
        assert_eq!(normalize_unit(1.0, "ns"), (1e-9, "seconds".to_string()));
    }
}
