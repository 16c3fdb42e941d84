//! The in-kernel per-cgroup counter of the `bpf` backend: loading the BPF
//! object (`bpf/cgroup_counter.bpf.c`, compiled by `scripts/build-bpf.sh`,
//! embedded), attaching it, and its maps. The design is the perf tool's
//! "bperf cgroup" (`perf stat --bpf-counters --for-each-cgroup`):
//!
//! * The counters of `cgroups.sets` are opened **once per CPU**
//!   (system-wide, `pid = -1`) and the k-th counter of a CPU is put in the
//!   `BPF_MAP_TYPE_PERF_EVENT_ARRAY` `events<k>` at the CPU's index (one
//!   map per k: aya sizes such a map to the possible CPUs).
//! * `on_switch` is attached to the `sched_switch` raw tracepoint, which
//!   `__schedule()` hits before the switch: `current` is still the task
//!   leaving, so its cgroup is charged. At a switch between two tasks of
//!   the css_set the pending interval began with (`task->cgroups`, at
//!   the offset the loader relocates from the kernel's BTF; read by a
//!   plain load, as the program attached is the BTF-typed tracepoint
//!   program `on_switch_btf`, whose task pointers the verifier knows, as
//!   is the leaving task's cgroup id, `cgroups->dfl_cgrp->kn->id`, the
//!   key of the owner cache below) it returns at once, leaving the interval to the first switch to or
//!   from another css_set, a read, or a move. It also returns at once at
//!   a switch between two cgroups nobody selected (no selected owner for
//!   the task leaving, whose css_set began the interval, nor for the task
//!   coming in, as cached on this CPU at this version of the selection:
//!   its cgroup id is a plain load too; the ancestors can be walked only
//!   for the running task, so a cgroup not cached yet is charged): the
//!   interval, which has no owners, goes on. The interval keeps the
//!   owners of the css_set it began with (found at its first skipped
//!   switch), so a task that leaves that css_set while it runs cannot take
//!   the earlier tasks' time with it, and `on_attach`, on the
//!   `cgroup_attach_task` tracepoint (hit after a move, in the task that
//!   wrote `cgroup.procs`), charges the interval when a task moves itself.
//!   Without the kernel's BTF the skip is off: every switch is charged
//!   (the offsets would be the compiled ones). (bperf attaches to the
//!   `cgroup-switches` software event instead, raised only when the perf
//!   cgroup changes; measured here with it: 1-3 % too much CPU time. A
//!   program on a sampling event runs from its overflow handler, which the
//!   kernel skips while another BPF program is active on the CPU and
//!   throttles above `perf_event_max_sample_rate / HZ` per tick; each
//!   skipped charge lands an interval on the wrong cgroup. See the C
//!   source.) Exactly one of `on_switch_btf` and `on_switch` is attached
//!   (`on_switch` where `on_switch_btf` does not attach), once:
//!   [`BpfCounter::switch_attachments`] counts the kernel's links to them.
//! * The program reads each counter of its CPU: a group leader with
//!   `bpf_perf_event_read_value()` (the kernel's `perf_event_read_local()`:
//!   the event must be on this CPU, not inherited; it returns the count and
//!   the enabled and running times), a member with `bpf_perf_event_read()`
//!   (its count only: a group is on the PMU as a whole, so its times are
//!   the leader's; a group of software counters with a clock has no
//!   leader read with times: the kernel always schedules such a group, so
//!   user space takes its times from the clock's count), except a
//!   `context-switches` member, which the program counts itself at every
//!   switch ([`Reads::switches`]), a `cpu-migrations` member, which it
//!   counts from the task coming in ([`Reads::migrations`]), and
//!   `minor-faults` and `major-faults` members after runs in which no task
//!   faulted ([`Reads::faults`]), and charges the delta since the last
//!   charge on this CPU to every selected cgroup among the running task's
//!   cgroup and its ancestors (`bpf_get_current_ancestor_cgroup_id()`,
//!   level 0 upwards), in a per-CPU array at `slot` (the k-th counter's
//!   at `[k]` of it: one lookup per owner, whatever the counters). User
//!   space assigns the slots (a hash map: cgroup id → slot), which bounds
//!   the maps and makes reclaiming a removed cgroup's entry one delete.
//!   The owner slots found for a cgroup are cached per CPU (64 entries,
//!   direct-mapped by cgroup id) with the version of `slots` they were
//!   found at; user space bumps `slots_version` after every change, so the
//!   walk of the ancestors runs only for a cgroup new to the CPU's cache.
//! * At every read user space runs `on_switch` on each online CPU with
//!   `BPF_PROG_TEST_RUN` (`BPF_F_TEST_RUN_ON_CPU`: an IPI runs it there),
//!   so the time of the cgroup running since its last switch is charged.
//!
//! Loading needs `CAP_BPF` and `CAP_PERFMON` (or `CAP_SYS_ADMIN`); aya
//! reads the kernel's BTF (`/sys/kernel/btf/vmlinux`) to fix up the object.

use super::{Counter, CounterInner};
use aya::maps::{Array, HashMap, MapData, PerCpuArray, PerCpuValues};
use aya::programs::raw_trace_point::RawTracePointLinkId;
use aya::programs::{BtfTracePoint, RawTracePoint, RawTracePointRunOptions, TestRun};
use aya::{Ebpf, EbpfLoader};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

/// The programs of the object, attached to [`TRACEPOINTS`] in order
/// (`on_switch` only without the kernel's BTF: else [`SWITCH_BTF`] is
/// attached in its place, and `on_switch` is only run at reads).
const PROGRAMS: [&str; 2] = ["on_switch", "on_attach"];

/// `on_switch` as a BTF-typed tracepoint program (`tp_btf`): its task
/// pointers are typed, so it reads their css_sets without a helper call.
const SWITCH_BTF: &str = "on_switch_btf";

/// The raw tracepoints the [`PROGRAMS`] are attached to.
const TRACEPOINTS: [&str; 2] = ["sched_switch", "cgroup_attach_task"];

/// Counters per CPU the program reads (the `MAX_EVENTS` of the C source).
pub const MAX_EVENTS: u32 = 16;

/// Cgroup levels the program walks from the root (levels 0 to 15; the
/// `MAX_LEVELS` of the C source): a cgroup at level 16 or deeper is never
/// charged.
pub const MAX_LEVELS: usize = 16;

/// Selected cgroups one task is charged to, the shallowest first (the
/// `MAX_OWNERS` of the C source): a selected cgroup below 8 selected
/// ancestors is never charged.
pub const MAX_OWNERS: usize = 8;

/// The compiled program (`scripts/build-bpf.sh`), 8-byte aligned for the
/// ELF parser.
static OBJECT: &[u8] = aya::include_bytes_aligned!("../../bpf/cgroup_counter.bpf.o");

/// One counter's reading as the kernel's `struct bpf_perf_event_value`:
/// the count and the enabled and running nanoseconds, here the sums of
/// the deltas charged to one cgroup on one CPU.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Charged {
    /// The count.
    pub counter: u64,
    /// Nanoseconds enabled.
    pub enabled: u64,
    /// Nanoseconds running (on the PMU).
    pub running: u64,
}

// SAFETY: `Charged` is `repr(C)`, three u64s with no padding: every bit
// pattern of its size is a valid value, as aya's `Pod` requires.
unsafe impl aya::Pod for Charged {}

/// What the counters of one CPU charged to one cgroup (`struct charged`
/// of the C source): the k-th counter's at `[k]`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SlotCharged([Charged; MAX_EVENTS as usize]);

// SAFETY: `SlotCharged` is `repr(C)`, an array of `Charged` (u64s, no
// padding): every bit pattern of its size is a valid value.
unsafe impl aya::Pod for SlotCharged {}

/// Per CPU, what the program needs about its counters (`struct
/// cpu_counters` of the C source).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct CpuCounters {
    /// Bumped when the CPU's counters are reopened.
    generation: u64,
    /// Bit k: the k-th counter leads a group (its times are read).
    leaders: u32,
    /// Non-zero while the CPU's counters are being replaced.
    paused: u32,
    /// Bit k: the k-th counter is `context-switches`, which the program
    /// counts itself ([`Reads::switches`]).
    switches: u32,
    /// Bit k: the k-th counter is `cpu-migrations`, which the program
    /// counts itself ([`Reads::migrations`]).
    migrations: u32,
    /// Bit k: the k-th counter is read only when a task may have faulted
    /// ([`Reads::faults`]).
    faults: u32,
    /// Padding (the C struct's `pad`).
    pad: u32,
}

/// Which of a CPU's counters the program reads how (bit k: the k-th
/// counter).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    /// Group leaders whose enabled and running times are read
    /// (`bpf_perf_event_read_value`); the other counters' counts alone
    /// (`bpf_perf_event_read`).
    pub times: u32,
    /// `context-switches` members the program counts itself, at every
    /// `sched_switch` hit, before it charges (the kernel raises that
    /// counter once per hit, in the same branch of `__schedule()`): one
    /// read less per charge, and each switch is the task leaving's, as the
    /// kernel's counter is in a perf cgroup event. No counter need be put
    /// at such a k ([`BpfCounter::clear_counter`]).
    pub switches: u32,
    /// `cpu-migrations` members the program counts itself: at a
    /// `sched_switch` hit, when the task coming in has the `sched_migrated`
    /// bit the kernel counts right after the switch (in
    /// `perf_event_task_sched_in()`), after it charges. Needs the kernel's
    /// BTF (the bit's place); without it [`BpfCounter::renew`] leaves the
    /// counter to be read.
    pub migrations: u32,
    /// `minor-faults` and `major-faults` members, which the kernel raises
    /// only after it counts the fault in the task's own `min_flt` or
    /// `maj_flt` (`mm_account_fault()`, 5.9): the program reads them only
    /// when a task that ran since their last read has more faults than
    /// when it came in (else their delta is 0). Needs the kernel's BTF and
    /// 5.9; else [`BpfCounter::renew`] leaves them to be read always.
    pub faults: u32,
}

impl Reads {
    /// Without the migrations counted by the program unless it can
    /// (`own_migrations`), nor the fault reads left out unless it may
    /// (`fault_skip`): those counters are then read.
    pub fn possible(self, own_migrations: bool, fault_skip: bool) -> Reads {
        Reads {
            migrations: if own_migrations { self.migrations } else { 0 },
            faults: if fault_skip { self.faults } else { 0 },
            ..self
        }
    }
}

// SAFETY: `CpuCounters` is `repr(C)`, a u64 and six u32s, no padding:
// every bit pattern of its size is a valid value.
unsafe impl aya::Pod for CpuCounters {}

/// What went wrong loading or driving the BPF program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BpfError {
    /// The object or a program did not load (verifier, BTF, privilege).
    #[error("load the BPF program ({what}): {msg}")]
    Load {
        /// The program or map.
        what: &'static str,
        /// The loader's message (with the verifier's first lines).
        msg: String,
    },
    /// A program could not be attached to its tracepoint.
    #[error("attach the BPF program to the {tracepoint} tracepoint: {msg}")]
    Attach {
        /// The tracepoint.
        tracepoint: &'static str,
        /// Why.
        msg: String,
    },
    /// A map update or lookup failed.
    #[error("BPF map {map}, key {key}: {msg}")]
    Map {
        /// The map.
        map: &'static str,
        /// The key.
        key: u64,
        /// Why.
        msg: String,
    },
    /// A counter fd was refused by the events map.
    #[error("put counter {k} of CPU {cpu} into the BPF events map: {} (errno {errno})", std::io::Error::from_raw_os_error(*errno))]
    Counter {
        /// The CPU.
        cpu: u32,
        /// Its index on the CPU.
        k: u32,
        /// The errno.
        errno: i32,
    },
    /// The kernel's BPF links could not be listed.
    #[error("list the kernel's BPF links: {msg}")]
    Links {
        /// Why.
        msg: String,
    },
    /// Running the charge on a CPU failed.
    #[error("charge on CPU {cpu}: {msg}")]
    Charge {
        /// The CPU.
        cpu: u32,
        /// Why.
        msg: String,
    },
}

fn map_err(map: &'static str, key: u64) -> impl Fn(aya::maps::MapError) -> BpfError {
    move |e| BpfError::Map {
        map,
        key,
        msg: e.to_string(),
    }
}

/// The loaded program and its maps. Dropping it detaches and unloads.
pub struct BpfCounter {
    ebpf: Ebpf,
    /// `events<k>`: the k-th counter of each CPU, at the CPU's index.
    events: Vec<MapData>,
    generation: Array<MapData, CpuCounters>,
    slots: HashMap<MapData, u64, u32>,
    /// Bumped after every change of `slots` (the program caches the owners
    /// it found per cgroup and version).
    slots_version: Array<MapData, u64>,
    version: u64,
    counts: PerCpuArray<MapData, SlotCharged>,
    /// Possible CPUs (the per-CPU maps' width).
    possible: u32,
    max_slots: u32,
    /// Whether [`SWITCH_BTF`] is loaded (then attached instead of
    /// `on_switch`).
    switch_btf: bool,
    /// Whether the program can count `cpu-migrations` itself (the
    /// kernel's BTF: the place of the task's `sched_migrated` bit).
    own_migrations: bool,
    /// Whether the program may leave out a read of the fault counters
    /// (the kernel's BTF, and 5.9's `mm_account_fault()`).
    fault_skip: bool,
    /// The one program attached to `sched_switch`, once attached.
    switch_link: Option<SwitchLink>,
    /// `on_attach`'s link to `cgroup_attach_task`, once attached.
    attach_link: Option<RawTracePointLinkId>,
}

/// Which program runs at `sched_switch`: exactly one of the two, so a
/// switch is never charged twice over (a second run would charge the
/// nanoseconds since the first, but cost a whole second run).
/// (The program keeps its link: dropping the object detaches it.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SwitchLink {
    /// [`SWITCH_BTF`], where the kernel has BTF.
    Btf,
    /// `on_switch`, without BTF, or where [`SWITCH_BTF`] did not attach.
    Raw,
}

impl std::fmt::Debug for BpfCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BpfCounter")
            .field("possible", &self.possible)
            .field("max_slots", &self.max_slots)
            .field("switch", &self.switch_link)
            .field("attach", &self.attach_link.is_some())
            .finish_non_exhaustive()
    }
}

impl BpfCounter {
    /// Loads the program for `max_slots` cgroups and `nr_events` counters
    /// per CPU (at most [`MAX_EVENTS`]).
    pub fn load(max_slots: u32, nr_events: u32) -> Result<Self, BpfError> {
        let load = |what, msg: String| BpfError::Load { what, msg };
        if nr_events > MAX_EVENTS {
            return Err(load(
                "events",
                format!("{nr_events} counters per CPU, at most {MAX_EVENTS}"),
            ));
        }
        let possible = aya::util::nr_cpus()
            .map_err(|(p, e)| load("possible CPUs", format!("{p}: {e}")))?
            as u32;
        let max_slots = max_slots.max(1);
        // The program skips a switch within one css_set only with the
        // kernel's BTF: it reads `task->cgroups` (and `tgid`) at the
        // offsets the loader relocates from it; without it aya leaves them
        // as compiled, and every switch is charged.
        let btf = aya::Btf::from_sys_fs().ok();
        let same_css_skip = u32::from(btf.is_some());
        let mut ebpf = EbpfLoader::new()
            .btf(btf.as_ref())
            .override_global("nr_events", &nr_events, true)
            .override_global("same_css_skip", &same_css_skip, true)
            .map_max_entries("generation", possible)
            .map_max_entries("slots", max_slots)
            .map_max_entries("counts", max_slots)
            .load(OBJECT)
            .map_err(|e| load("object", chain(&e)))?;
        for name in PROGRAMS {
            let p = ebpf
                .program_mut(name)
                .ok_or_else(|| load(name, "missing from the object".into()))?;
            <&mut RawTracePoint>::try_from(p)
                .and_then(|p| p.load())
                .map_err(|e| load(name, chain(&e)))?;
        }
        let switch_btf = match &btf {
            Some(btf) => {
                let p = ebpf
                    .program_mut(SWITCH_BTF)
                    .ok_or_else(|| load(SWITCH_BTF, "missing from the object".into()))?;
                <&mut BtfTracePoint>::try_from(p)
                    .and_then(|p| p.load("sched_switch", btf))
                    .map_err(|e| load(SWITCH_BTF, chain(&e)))?;
                true
            }
            None => false,
        };
        let mut events = Vec::new();
        for k in 0..MAX_EVENTS {
            let name = format!("events{k}");
            let Some(aya::maps::Map::PerfEventArray(m)) = ebpf.take_map(&name) else {
                return Err(load("events", format!("{name} is not a PERF_EVENT_ARRAY")));
            };
            events.push(m);
        }
        let mut take = |name: &'static str| {
            ebpf.take_map(name)
                .ok_or_else(|| load(name, "map missing from the object".into()))
        };
        let generation = Array::try_from(take("generation")?).map_err(map_err("generation", 0))?;
        let slots = HashMap::try_from(take("slots")?).map_err(map_err("slots", 0))?;
        let slots_version =
            Array::try_from(take("slots_version")?).map_err(map_err("slots_version", 0))?;
        let counts = PerCpuArray::try_from(take("counts")?).map_err(map_err("counts", 0))?;
        Ok(BpfCounter {
            ebpf,
            events,
            generation,
            slots,
            slots_version,
            version: 0,
            counts,
            possible,
            max_slots,
            switch_btf,
            own_migrations: btf.is_some(),
            fault_skip: btf.is_some()
                && aya::util::KernelVersion::current()
                    .is_ok_and(|v| v >= aya::util::KernelVersion::new(5, 9, 0)),
            switch_link: None,
            attach_link: None,
        })
    }

    /// Cgroup slots.
    pub fn max_slots(&self) -> u32 {
        self.max_slots
    }

    /// Attaches the programs to their tracepoints ([`TRACEPOINTS`]; once:
    /// a tracepoint is every CPU's, online or back online): at
    /// `sched_switch` [`SWITCH_BTF`] where it is loaded, else (or where it
    /// does not attach) `on_switch`; never both. Each program is attached
    /// once: after a failure, calling it again attaches only what is not
    /// attached yet.
    pub fn attach(&mut self) -> Result<(), BpfError> {
        let [switch, attach] = TRACEPOINTS;
        if self.switch_link.is_none() {
            let err = |msg| BpfError::Attach {
                tracepoint: switch,
                msg,
            };
            let mut btf_failed = None;
            if self.switch_btf {
                let p: Option<&mut BtfTracePoint> = self
                    .ebpf
                    .program_mut(SWITCH_BTF)
                    .and_then(|p| p.try_into().ok());
                match p.map(|p| p.attach()) {
                    Some(Ok(_)) => self.switch_link = Some(SwitchLink::Btf),
                    Some(Err(e)) => btf_failed = Some(format!("{SWITCH_BTF}: {}", chain(&e))),
                    None => btf_failed = Some(format!("{SWITCH_BTF} is not loaded")),
                }
            }
            if self.switch_link.is_none() {
                // `on_switch` reads the css_sets with helper calls: with
                // the kernel's BTF its offsets are right all the same.
                self.raw("on_switch")
                    .map_err(&err)?
                    .attach(switch)
                    .map_err(|e| {
                        let why = chain(&e);
                        err(match &btf_failed {
                            Some(b) => format!("{b}; on_switch: {why}"),
                            None => why,
                        })
                    })?;
                if let Some(b) = btf_failed {
                    tracing::warn!(error = %b, "the BTF-typed switch program did not attach: on_switch (helper calls per switch) is attached instead");
                }
                self.switch_link = Some(SwitchLink::Raw);
            }
        }
        if self.attach_link.is_none() {
            let err = |msg| BpfError::Attach {
                tracepoint: attach,
                msg,
            };
            let id = self
                .raw("on_attach")
                .map_err(&err)?
                .attach(attach)
                .map_err(|e| err(chain(&e)))?;
            self.attach_link = Some(id);
        }
        Ok(())
    }

    /// The loaded raw tracepoint program `name`.
    fn raw(&mut self, name: &str) -> Result<&mut RawTracePoint, String> {
        self.ebpf
            .program_mut(name)
            .and_then(|p| p.try_into().ok())
            .ok_or_else(|| format!("{name} is not loaded"))
    }

    /// How many times the kernel runs a switch program (`on_switch` or
    /// [`SWITCH_BTF`]) of this object per switch: their BPF links, whoever
    /// holds them. 1 once attached.
    pub fn switch_attachments(&self) -> Result<usize, BpfError> {
        let err = |e: i32| BpfError::Links { msg: errno_text(e) };
        let mut ids = Vec::new();
        for name in ["on_switch", SWITCH_BTF] {
            if let Some(Ok(fd)) = self.ebpf.program(name).map(|p| p.fd()) {
                ids.push(sys_prog_id(fd.as_fd()).map_err(err)?);
            }
        }
        sys_links_of(&ids).map_err(err)
    }

    /// Descriptors of the programs, their links and the maps.
    pub fn fds(&self) -> usize {
        // events<k>, last, generation, slots, slots_version, owners, counts,
        // the programs, their links.
        MAX_EVENTS as usize
            + 6
            + PROGRAMS.len()
            + usize::from(self.switch_btf)
            + usize::from(self.switch_link.is_some())
            + usize::from(self.attach_link.is_some())
    }

    /// Puts `counter` as the `k`-th counter of `cpu`. It must be a live
    /// counter opened system-wide on `cpu`, not inherited.
    pub fn set_counter(&mut self, cpu: u32, k: u32, counter: &Counter) -> Result<(), BpfError> {
        let err = |errno| BpfError::Counter { cpu, k, errno };
        let CounterInner::Live(fd) = &counter.inner else {
            return Err(err(libc::EOPNOTSUPP));
        };
        let Some(map) = self.events.get(k as usize) else {
            return Err(err(libc::E2BIG));
        };
        sys_map_elem(map.fd().as_fd(), cpu, Some(fd.as_raw_fd() as u32)).map_err(err)
    }

    /// Empties `cpu`'s k-th place in the program's counters (a counter the
    /// program counts itself, [`Reads::switches`]): a counter put there
    /// before is released (the map holds a reference to it).
    pub fn clear_counter(&mut self, cpu: u32, k: u32) -> Result<(), BpfError> {
        let err = |errno| BpfError::Counter { cpu, k, errno };
        let Some(map) = self.events.get(k as usize) else {
            return Err(err(libc::E2BIG));
        };
        match sys_map_elem(map.fd().as_fd(), cpu, None) {
            Ok(()) | Err(libc::ENOENT) => Ok(()),
            Err(e) => Err(err(e)),
        }
    }

    /// Stops the program on `cpu` until [`renew`](Self::renew): call it
    /// before replacing the CPU's counters.
    pub fn pause(&mut self, cpu: u32) -> Result<(), BpfError> {
        let mut g = self
            .generation
            .get(&cpu, 0)
            .map_err(map_err("generation", cpu.into()))?;
        g.paused = 1;
        self.generation
            .set(cpu, g, 0)
            .map_err(map_err("generation", cpu.into()))
    }

    /// Starts a new generation of `cpu`'s counters (and resumes the program
    /// there): the program forgets its
    /// last readings there (new counters count from 0; its own switch
    /// count goes on). `reads.times` says which counters' enabled and
    /// running times are read ([`Charged`] of any other has times 0: its
    /// group's are its leader's, or, for a software group with a clock,
    /// the clock's count). `reads.migrations` and `reads.faults` are kept
    /// only where the program can do without those reads
    /// ([`Reads::possible`]: with the kernel's BTF, and from 5.9 for the
    /// faults).
    pub fn renew(&mut self, cpu: u32, reads: Reads) -> Result<(), BpfError> {
        let reads = reads.possible(self.own_migrations, self.fault_skip);
        let g = self
            .generation
            .get(&cpu, 0)
            .map_err(map_err("generation", cpu.into()))?;
        let next = CpuCounters {
            generation: g.generation.wrapping_add(1),
            leaders: reads.times,
            paused: 0,
            switches: reads.switches,
            migrations: reads.migrations,
            faults: reads.faults,
            pad: 0,
        };
        self.generation
            .set(cpu, next, 0)
            .map_err(map_err("generation", cpu.into()))
    }

    /// How the program reads `cpu`'s counters now: what [`Self::renew`]
    /// gave it, after [`Reads::possible`].
    pub fn reads(&self, cpu: u32) -> Result<Reads, BpfError> {
        let g = self
            .generation
            .get(&cpu, 0)
            .map_err(map_err("generation", cpu.into()))?;
        Ok(Reads {
            times: g.leaders,
            switches: g.switches,
            migrations: g.migrations,
            faults: g.faults,
        })
    }

    /// Assigns `slot` to the cgroup `id`: its counts start from zero.
    pub fn assign(&mut self, slot: u32, id: u64) -> Result<(), BpfError> {
        let zeros = PerCpuValues::try_from(vec![SlotCharged::default(); self.possible as usize])
            .map_err(|e| BpfError::Map {
                map: "counts",
                key: slot.into(),
                msg: e.to_string(),
            })?;
        self.counts
            .set(slot, zeros, 0)
            .map_err(map_err("counts", slot.into()))?;
        self.slots
            .insert(id, slot, 0)
            .map_err(map_err("slots", id))?;
        self.bump_version()
    }

    /// Stops charging the cgroup `id` (its slot may be reassigned later,
    /// by [`Self::assign`], which bumps the version again).
    pub fn release(&mut self, id: u64) {
        let _ = self.slots.remove(&id);
        let _ = self.bump_version();
    }

    /// Makes the program forget the owners it cached: `slots` changed.
    fn bump_version(&mut self) -> Result<(), BpfError> {
        self.version = self.version.wrapping_add(1);
        self.slots_version
            .set(0, self.version, 0)
            .map_err(map_err("slots_version", 0))
    }

    /// Charges the time since the last switch on `cpu` to the cgroup
    /// running there (runs `on_switch` on that CPU).
    pub fn charge(&self, cpu: u32) -> Result<(), BpfError> {
        let p: &RawTracePoint = self
            .ebpf
            .program("on_switch")
            .and_then(|p| p.try_into().ok())
            .ok_or_else(|| BpfError::Charge {
                cpu,
                msg: "on_switch is not loaded".into(),
            })?;
        let opts = RawTracePointRunOptions {
            cpu: Some(cpu),
            ..RawTracePointRunOptions::new()
        };
        p.test_run(opts).map(|_| ()).map_err(|e| BpfError::Charge {
            cpu,
            msg: chain(&e),
        })
    }

    /// What the counters charged to `slot`, per possible CPU: the k-th
    /// counters' into `out[k]` (one map lookup for every counter and CPU).
    pub fn read(&self, slot: u32, out: &mut [Vec<Charged>]) -> Result<(), BpfError> {
        let v = self
            .counts
            .get(&slot, 0)
            .map_err(map_err("counts", slot.into()))?;
        for (k, o) in out.iter_mut().enumerate() {
            o.clear();
            o.extend(v.iter().filter_map(|c| c.0.get(k).copied()));
        }
        Ok(())
    }
}

/// An error with its sources, one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        s.push_str(": ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    // The verifier's log can be long: its last lines say why.
    if s.len() > 2000 {
        let cut = s.len() - 2000;
        let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(0);
        s = format!("...{}", &s[cut..]);
    }
    s
}

/// An errno as text.
fn errno_text(errno: i32) -> String {
    format!(
        "{} (errno {errno})",
        std::io::Error::from_raw_os_error(errno)
    )
}

/// `bpf(cmd, attr)` with `attr` a prefix of `union bpf_attr` (the kernel
/// takes the rest as zero): its result, or the errno.
///
/// # Safety
/// Every pointer inside `attr` must be valid for what `cmd` does with it
/// (reads or writes of the sizes `attr` gives) for the whole call.
unsafe fn sys_bpf<T>(cmd: libc::c_long, attr: &mut T) -> Result<i64, i32> {
    // SAFETY: the kernel reads and writes at most `size_of::<T>()` bytes of
    // `attr`, a live exclusive borrow; the pointers inside are the
    // caller's to keep valid (this function's contract).
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if r < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(r)
    }
}

/// `bpf(BPF_OBJ_GET_INFO_BY_FD)`: the first `N` u32s of the object's
/// info (`struct bpf_prog_info`, `struct bpf_link_info`).
fn sys_info<const N: usize>(fd: BorrowedFd<'_>) -> Result<[u32; N], i32> {
    /// The `BPF_OBJ_GET_INFO_BY_FD` member of `union bpf_attr`.
    #[repr(C)]
    struct InfoAttr {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    let mut info = [0u32; N];
    let mut attr = InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: (N * 4) as u32,
        info: info.as_mut_ptr() as u64,
    };
    // SAFETY: the kernel writes at most `info_len` bytes (the size of
    // `info`, alive on this frame) at `attr.info`.
    unsafe { sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }?;
    Ok(info)
}

/// A loaded program's id (`struct bpf_prog_info`: type, id, ...).
fn sys_prog_id(fd: BorrowedFd<'_>) -> Result<u32, i32> {
    sys_info::<2>(fd).map(|[_, id]| id)
}

/// How many BPF links in the kernel (anyone's) run one of the programs
/// `prog_ids`: `BPF_LINK_GET_NEXT_ID` over every link, the program of
/// each from its info (`struct bpf_link_info`: type, id, prog_id, ...).
fn sys_links_of(prog_ids: &[u32]) -> Result<usize, i32> {
    /// The `BPF_*_GET_NEXT_ID` and `BPF_*_GET_FD_BY_ID` member of
    /// `union bpf_attr`.
    #[repr(C)]
    struct IdAttr {
        id: u32,
        next_id: u32,
        open_flags: u32,
    }
    const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
    const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;
    let (mut id, mut n) = (0u32, 0usize);
    // Bounded: link ids only grow, and the kernel's run out.
    loop {
        let mut next = IdAttr {
            id,
            next_id: 0,
            open_flags: 0,
        };
        // SAFETY: the attribute holds no pointers.
        match unsafe { sys_bpf(BPF_LINK_GET_NEXT_ID, &mut next) } {
            Ok(_) => id = next.next_id,
            Err(libc::ENOENT) => return Ok(n),
            Err(e) => return Err(e),
        }
        let mut by_id = IdAttr {
            id,
            next_id: 0,
            open_flags: 0,
        };
        // SAFETY: the attribute holds no pointers.
        let fd = match unsafe { sys_bpf(BPF_LINK_GET_FD_BY_ID, &mut by_id) } {
            Ok(fd) => i32::try_from(fd).map_err(|_| libc::EBADF)?,
            // Gone since: not counted.
            Err(libc::ENOENT) => continue,
            Err(e) => return Err(e),
        };
        // SAFETY: the kernel just returned `fd`, a new descriptor nothing
        // else owns: the OwnedFd closes it.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let [_, _, prog_id] = sys_info::<3>(fd.as_fd())?;
        if prog_ids.contains(&prog_id) {
            n += 1;
        }
    }
}

/// `bpf(BPF_MAP_UPDATE_ELEM)` of a `u32` key and value (`Some`), or
/// `bpf(BPF_MAP_DELETE_ELEM)` of the key (`None`): aya has no typed map
/// for a `PERF_EVENT_ARRAY` filled with counters of our own.
fn sys_map_elem(map: BorrowedFd<'_>, key: u32, value: Option<u32>) -> Result<(), i32> {
    /// The `BPF_MAP_*_ELEM` member of `union bpf_attr`.
    #[repr(C)]
    struct ElemAttr {
        map_fd: u32,
        _pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
    const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
    let v = value.unwrap_or(0);
    let attr = ElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: if value.is_some() {
            &v as *const u32 as u64
        } else {
            0
        },
        flags: 0, // BPF_ANY
    };
    // SAFETY: the kernel reads `size_of::<ElemAttr>()` bytes of `attr`
    // (a prefix of `union bpf_attr` in its layout, the rest treated as
    // zero), and reads 4 bytes at `key` and (for an update) at `value`,
    // which live on this stack frame for the whole call; it writes
    // nothing of ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            if value.is_some() {
                BPF_MAP_UPDATE_ELEM
            } else {
                BPF_MAP_DELETE_ELEM
            },
            &attr as *const ElemAttr,
            std::mem::size_of::<ElemAttr>(),
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Reads;

    #[test]
    fn what_the_kernel_cannot_spare_is_read() {
        let r = Reads {
            times: 1,
            switches: 2,
            migrations: 4,
            faults: 8 | 16,
        };
        assert_eq!(r.possible(true, true), r);
        // Without the kernel's BTF: neither the migration bit's place nor
        // the task's fault counts are known.
        let none = Reads {
            migrations: 0,
            faults: 0,
            ..r
        };
        assert_eq!(r.possible(false, false), none);
        // BTF before 5.9: migrations counted, the fault counters read.
        assert_eq!(r.possible(true, false), Reads { faults: 0, ..r });
        assert_eq!(r.possible(false, true), Reads { migrations: 0, ..r });
    }
}
