//! The simulated kernel's own tests: acceptance, groups, counting.

use super::*;
use crate::perf::{Counter, ErrorKind, EventAttr, GroupReading, Kernel};
use crate::pmu::fixtures::table as fixture;
use crate::sys::abi::{TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_SOFTWARE, TYPE_TRACEPOINT};
use std::path::Path;

const SEC: u64 = 1_000_000_000;

fn sim(name: &str) -> SimKernel {
    SimKernel::with_manual_clock(fixture(name))
}

fn attr(type_: u32, config: u64) -> EventAttr {
    EventAttr {
        type_,
        config: [config, 0, 0, 0],
        event: format!("{type_}:{config:#x}"),
        pmu: "test".into(),
        exclude: Default::default(),
    }
}

fn open(
    k: &SimKernel,
    type_: u32,
    config: u64,
    cpu: u32,
    group: Option<&Counter>,
) -> Result<Counter, i32> {
    k.open(&attr(type_, config), cpu, group)
        .map_err(|e| e.errno)
}

fn read(k: &SimKernel, c: &Counter) -> GroupReading {
    let mut r = GroupReading::default();
    k.read_group(c, &attr(0, 0), 0, &mut r).unwrap();
    r
}

fn type_of(k: &SimKernel, pmu: &str) -> u32 {
    k.table().get(pmu).unwrap().type_
}

#[test]
fn skx_imc_accepts_formats_and_records_placement() {
    let k = sim("intel-skx");
    let imc0 = type_of(&k, "uncore_imc_0");
    assert_eq!(imc0, 18);
    open(&k, imc0, 0x304, 0, None).unwrap();
    // A cpumask PMU accepts any online CPU (the driver redirects), but
    // the open is recorded where it was made.
    open(&k, imc0, 0x304, 5, None).unwrap();
    assert_eq!(
        k.opens(),
        vec![
            ("uncore_imc_0".to_string(), 18, [0x304, 0, 0, 0], 0),
            ("uncore_imc_0".to_string(), 18, [0x304, 0, 0, 0], 5),
        ]
    );
    // Bit 16 and bit 63 are in no format of the IMC.
    assert_eq!(open(&k, imc0, 0x1_0304, 0, None).unwrap_err(), libc::EINVAL);
    assert_eq!(open(&k, imc0, 1 << 63, 0, None).unwrap_err(), libc::EINVAL);
    let mut a = attr(imc0, 0x304);
    a.config[1] = 1;
    let e = k.open(&a, 0, None).unwrap_err();
    assert_eq!((e.errno, e.kind), (libc::EINVAL, ErrorKind::Invalid));
    // cpu's config1 is covered by ldlat/offcore_rsp.
    let mut ld = attr(4, 0x1cd);
    ld.config[1] = 3;
    k.open(&ld, 0, None).unwrap();
    // Unknown types.
    assert_eq!(open(&k, 99, 0, 0, None).unwrap_err(), libc::ENOENT);
    assert_eq!(k.opens().len(), 3);
}

#[test]
fn vm_without_pmu() {
    let k = sim("vm-no-pmu");
    assert_eq!(
        open(&k, TYPE_HARDWARE, 0, 0, None).unwrap_err(),
        libc::ENOENT
    );
    assert_eq!(
        open(&k, TYPE_HW_CACHE, 0x10000, 0, None).unwrap_err(),
        libc::ENOENT
    );
    let msr = type_of(&k, "msr");
    assert_eq!(msr, 9);
    open(&k, msr, 0, 1, None).unwrap();
    open(&k, TYPE_SOFTWARE, 0, 1, None).unwrap();
    open(&k, TYPE_SOFTWARE, 11, 1, None).unwrap();
    assert_eq!(
        open(&k, TYPE_SOFTWARE, 12, 1, None).unwrap_err(),
        libc::ENOENT
    );
    open(&k, TYPE_TRACEPOINT, 1234, 0, None).unwrap();
    // Two CPUs only.
    assert_eq!(
        open(&k, TYPE_SOFTWARE, 0, 2, None).unwrap_err(),
        libc::ENODEV
    );
    assert_eq!(k.online_cpus(), vec![0, 1]);
}

#[test]
fn hybrid_extended_types() {
    let k = sim("intel-hybrid");
    let cycles_core = 4u64 << 32;
    let cycles_atom = 10u64 << 32;
    open(&k, TYPE_HARDWARE, cycles_core, 0, None).unwrap();
    assert_eq!(
        open(&k, TYPE_HARDWARE, cycles_core, 16, None).unwrap_err(),
        libc::ENOENT
    );
    open(&k, TYPE_HARDWARE, cycles_atom, 16, None).unwrap();
    assert_eq!(
        open(&k, TYPE_HARDWARE, cycles_atom, 0, None).unwrap_err(),
        libc::ENOENT
    );
    // Without an extended type, or with a non-core one.
    assert_eq!(
        open(&k, TYPE_HARDWARE, 0, 0, None).unwrap_err(),
        libc::ENOENT
    );
    assert_eq!(
        open(&k, TYPE_HARDWARE, 12 << 32, 0, None).unwrap_err(),
        libc::ENOENT
    );
    // cpu_core/cpu-cycles/ via sysfs: type 4 only on 0-15.
    open(&k, 4, 0x3c, 15, None).unwrap();
    assert_eq!(open(&k, 4, 0x3c, 16, None).unwrap_err(), libc::ENOENT);
    assert_eq!(k.opens()[0].0, "cpu_core");
    assert_eq!(k.opens()[1].0, "cpu_atom");
    // Cache events take the extended type too; Gracemont counts L1D
    // loads but not their misses (glp_hw_cache_event_ids).
    open(&k, TYPE_HW_CACHE, cycles_atom, 20, None).unwrap();
    open(&k, TYPE_HW_CACHE, cycles_core | 0x10000, 0, None).unwrap();
    assert_eq!(
        open(&k, TYPE_HW_CACHE, cycles_atom | 0x10000, 20, None).unwrap_err(),
        libc::ENOENT
    );
    assert_eq!(
        k.rate_of(TYPE_HARDWARE, [cycles_core | 1, 0, 0, 0]),
        Some(3.0e9)
    );
    assert_eq!(k.rate_of(4, [0x3c, 0, 0, 0]), Some(2.0e9));
}

#[test]
fn generic_events_the_core_pmu_hides() {
    let k = sim("intel-skx");
    open(&k, TYPE_HARDWARE, 9, 0, None).unwrap();
    // SKX publishes generic names but no stalled-cycles-*.
    assert_eq!(
        open(&k, TYPE_HARDWARE, 7, 0, None).unwrap_err(),
        libc::ENOENT
    );
    // Past the event map: EINVAL (`x86_setup_perfctr`: `attr->config >=
    // x86_pmu.max_events`).
    assert_eq!(
        open(&k, TYPE_HARDWARE, 10, 0, None).unwrap_err(),
        libc::EINVAL
    );
    // Single core PMU: extended type 0 or its own.
    open(&k, TYPE_HARDWARE, 4 << 32, 0, None).unwrap();
    assert_eq!(
        open(&k, TYPE_HARDWARE, 5 << 32, 0, None).unwrap_err(),
        libc::ENOENT
    );
    // Cache: L1-icache-stores is meaningless (-1: EINVAL), op 3 is
    // out of range; L1-icache-loads is not counted (0: ENOENT).
    assert_eq!(
        open(&k, TYPE_HW_CACHE, 0x101, 0, None).unwrap_err(),
        libc::EINVAL
    );
    assert_eq!(
        open(&k, TYPE_HW_CACHE, 0x1, 0, None).unwrap_err(),
        libc::ENOENT
    );
    assert_eq!(
        open(&k, TYPE_HW_CACHE, 0x300, 0, None).unwrap_err(),
        libc::EINVAL
    );
    let z = sim("amd-zen3");
    open(&z, TYPE_HARDWARE, 7, 0, None).unwrap();
    assert_eq!(
        open(&z, TYPE_HARDWARE, 8, 0, None).unwrap_err(),
        libc::ENOENT
    );
}

#[test]
fn manual_clock_counts_exactly() {
    let k = sim("intel-skx");
    let cyc = open(&k, TYPE_HARDWARE, 0, 0, None).unwrap();
    let ins = open(&k, TYPE_HARDWARE, 1, 0, Some(&cyc)).unwrap();
    k.advance(SEC);
    // Nothing counts before the group is enabled.
    assert_eq!(
        read(&k, &cyc),
        GroupReading {
            time_enabled: 0,
            time_running: 0,
            values: vec![(cyc.id, 0), (ins.id, 0)]
        }
    );
    k.enable_group(&cyc, &attr(0, 0), 0).unwrap();
    k.advance(SEC);
    let r = read(&k, &cyc);
    assert_eq!((r.time_enabled, r.time_running), (SEC, SEC));
    assert_eq!(
        r.values,
        vec![(cyc.id, 2_000_000_000), (ins.id, 3_000_000_000)]
    );
    assert_ne!(cyc.id, ins.id);
    // Reading a member reads its group.
    assert_eq!(read(&k, &ins), r);
}

#[test]
fn mux_ratio_applies_to_subsequent_time() {
    let k = sim("intel-skx");
    let cyc = open(&k, TYPE_HARDWARE, 0, 0, None).unwrap();
    let sw = open(&k, TYPE_SOFTWARE, 0, 1, None).unwrap();
    k.enable_group(&cyc, &attr(0, 0), 0).unwrap();
    k.enable_group(&sw, &attr(1, 0), 1).unwrap();
    k.advance(SEC);
    k.set_mux_ratio("cpu", 0.5);
    k.advance(SEC);
    let r = read(&k, &cyc);
    assert_eq!((r.time_enabled, r.time_running), (2 * SEC, SEC + SEC / 2));
    assert_eq!(r.values[0].1, 3_000_000_000);
    // Software is its own PMU.
    let s = read(&k, &sw);
    assert_eq!(
        (s.time_enabled, s.time_running, s.values[0].1),
        (2 * SEC, 2 * SEC, 2_000_000_000)
    );
    k.set_mux_ratio("software", 0.25);
    k.advance(SEC);
    let s = read(&k, &sw);
    assert_eq!(s.time_running, 2 * SEC + SEC / 4);
}

#[test]
fn software_member_joins_hardware_group_and_follows_its_ratio() {
    let k = sim("intel-skx");
    let cyc = open(&k, TYPE_HARDWARE, 0, 0, None).unwrap();
    let cs = open(&k, TYPE_SOFTWARE, 3, 0, Some(&cyc)).unwrap();
    k.set_mux_ratio("cpu", 0.5);
    k.enable_group(&cyc, &attr(0, 0), 0).unwrap();
    k.advance(SEC);
    assert_eq!(
        read(&k, &cyc).values,
        vec![(cyc.id, 1_000_000_000), (cs.id, 1000)]
    );
}

#[test]
fn offline_cpu() {
    let k = sim("intel-skx");
    let c = open(&k, TYPE_HARDWARE, 0, 3, None).unwrap();
    k.enable_group(&c, &attr(0, 0), 3).unwrap();
    k.advance(SEC);
    k.set_online(3, false);
    assert_eq!(k.online_cpus(), vec![0, 1, 2, 4, 5, 6, 7]);
    let e = k.open(&attr(TYPE_HARDWARE, 0), 3, None).unwrap_err();
    assert_eq!((e.errno, e.kind), (libc::ENODEV, ErrorKind::CpuOffline));
    k.advance(SEC);
    let r = read(&k, &c);
    assert_eq!((r.time_enabled, r.values[0].1), (SEC, 2_000_000_000));
    // Back online: new opens work, the old counter stays dead.
    k.set_online(3, true);
    assert_eq!(k.online_cpus(), (0..8).collect::<Vec<_>>());
    open(&k, TYPE_HARDWARE, 0, 3, None).unwrap();
    k.advance(SEC);
    assert_eq!(read(&k, &c).time_enabled, SEC);
}

#[test]
fn group_rules() {
    let k = sim("intel-skx");
    let (imc0, imc1) = (type_of(&k, "uncore_imc_0"), type_of(&k, "uncore_imc_1"));
    let l = open(&k, imc0, 0x304, 0, None).unwrap();
    let m = open(&k, imc0, 0xc04, 0, Some(&l)).unwrap();
    // Another box, another CPU, a member as leader.
    assert_eq!(
        open(&k, imc1, 0x304, 0, Some(&l)).unwrap_err(),
        libc::EINVAL
    );
    assert_eq!(
        open(&k, imc0, 0x304, 2, Some(&l)).unwrap_err(),
        libc::EINVAL
    );
    assert_eq!(
        open(&k, imc0, 0x304, 0, Some(&m)).unwrap_err(),
        libc::EINVAL
    );
    // Software joins anything.
    open(&k, TYPE_SOFTWARE, 0, 0, Some(&l)).unwrap();
    // A software leader takes one hardware PMU.
    let sw = open(&k, TYPE_SOFTWARE, 0, 1, None).unwrap();
    let _hw = open(&k, TYPE_HARDWARE, 0, 1, Some(&sw)).unwrap();
    assert_eq!(
        open(&k, imc0, 0x304, 1, Some(&sw)).unwrap_err(),
        libc::EINVAL
    );
    // A counter of another kernel is not a leader here.
    let other = sim("intel-skx");
    assert_eq!(
        open(&other, imc0, 0x304, 0, Some(&l)).unwrap_err(),
        libc::EBADF
    );
}

#[test]
fn max_group_size() {
    let k = sim("intel-skx");
    let imc0 = type_of(&k, "uncore_imc_0");
    k.set_max_group("uncore_imc_0", 1);
    let l = open(&k, imc0, 0x304, 0, None).unwrap();
    assert_eq!(
        open(&k, imc0, 0xc04, 0, Some(&l)).unwrap_err(),
        libc::EINVAL
    );
    let _sw = open(&k, TYPE_SOFTWARE, 0, 0, Some(&l)).unwrap();
    k.set_max_group("uncore_imc_0", 2);
    let _m = open(&k, imc0, 0xc04, 0, Some(&l)).unwrap();
    assert_eq!(open(&k, imc0, 0, 0, Some(&l)).unwrap_err(), libc::EINVAL);
}

#[test]
fn unschedulable_groups() {
    let k = sim("intel-skx");
    k.set_group_never_runs("cpu", true);
    let l = open(&k, TYPE_HARDWARE, 0, 0, None).unwrap();
    let single = open(&k, TYPE_HARDWARE, 0, 1, None).unwrap();
    let _m = open(&k, TYPE_HARDWARE, 1, 0, Some(&l)).unwrap();
    k.enable_group(&l, &attr(0, 0), 0).unwrap();
    k.enable_group(&single, &attr(0, 0), 1).unwrap();
    k.advance(SEC);
    let r = read(&k, &l);
    assert_eq!((r.time_enabled, r.time_running), (SEC, 0));
    assert!(r.values.iter().all(|&(_, v)| v == 0));
    let s = read(&k, &single);
    assert_eq!((s.time_enabled, s.time_running), (SEC, SEC));
    k.set_group_never_runs("cpu", false);
    k.advance(SEC);
    assert_eq!(read(&k, &l).time_running, SEC);
}

#[test]
fn refusals() {
    let k = sim("intel-skx");
    k.refuse("cpu", libc::EACCES);
    let e = k.open(&attr(TYPE_HARDWARE, 0), 0, None).unwrap_err();
    assert_eq!((e.errno, e.kind), (libc::EACCES, ErrorKind::Privilege));
    assert_eq!(open(&k, 4, 0x3c, 0, None).unwrap_err(), libc::EACCES);
    open(&k, TYPE_SOFTWARE, 0, 0, None).unwrap();
    k.unrefuse("cpu");
    open(&k, TYPE_HARDWARE, 0, 0, None).unwrap();
    assert_eq!(k.opens().len(), 2);
}

#[test]
fn drops_close_and_ids_are_never_reused() {
    let k = sim("intel-skx");
    let l = open(&k, TYPE_HARDWARE, 0, 0, None).unwrap();
    let m = open(&k, TYPE_HARDWARE, 1, 0, Some(&l)).unwrap();
    let x = open(&k, TYPE_SOFTWARE, 0, 0, None).unwrap();
    assert_eq!(k.live_counters(), 3);
    let old = [l.id, m.id, x.id];
    k.enable_group(&l, &attr(0, 0), 0).unwrap();
    drop(x);
    assert_eq!(k.live_counters(), 2);
    // The dropped slot is reused, its id is not.
    let y = open(&k, TYPE_SOFTWARE, 0, 0, None).unwrap();
    assert!(y.id > *old.iter().max().unwrap());
    // Dropping the leader makes the member a singleton group that
    // keeps counting.
    k.advance(SEC);
    drop(l);
    k.advance(SEC);
    let r = read(&k, &m);
    assert_eq!(r.values, vec![(m.id, 6_000_000_000)]);
    assert_eq!(r.time_enabled, 2 * SEC);
    drop((m, y));
    assert_eq!(k.live_counters(), 0);
    // Dropping after the kernel is gone is harmless.
    let z = open(&k, TYPE_SOFTWARE, 0, 0, None).unwrap();
    drop(k);
    drop(z);
}

#[test]
fn sysfs_event_rates() {
    let k = sim("intel-client");
    let power = type_of(&k, "power");
    let msr = type_of(&k, "msr");
    let imc = type_of(&k, "uncore_imc");
    let pkg = open(&k, power, 2, 0, None).unwrap();
    let margin = open(&k, msr, 7, 0, None).unwrap();
    let reads = open(&k, imc, 1, 0, None).unwrap();
    for c in [&pkg, &margin, &reads] {
        k.enable_group(c, &attr(0, 0), 0).unwrap();
    }
    k.advance(SEC);
    let joules = read(&k, &pkg).values[0].1 as f64 / 4_294_967_296.0;
    assert!((joules - 20.0).abs() < 1e-6, "{joules}");
    assert_eq!(read(&k, &margin).values[0].1, 40);
    k.advance(SEC);
    assert_eq!(read(&k, &margin).values[0].1, 40);
    assert_eq!(read(&k, &reads).values[0].1, 30_000_000);
    assert_eq!(k.rate_of(msr, [0, 0, 0, 0]), Some(2.5e9));
    assert_eq!(k.rate_of(msr, [7, 0, 0, 0]), None);
    assert_eq!(k.rate_of(4, [0x412e, 0, 0, 0]), Some(1e7));
    assert_eq!(k.rate_of(TYPE_HW_CACHE, [0x10000, 0, 0, 0]), Some(2e7));
    assert_eq!(k.rate_of(TYPE_HW_CACHE, [0x10002, 0, 0, 0]), Some(4e6));
    assert_eq!(k.rate_of(TYPE_SOFTWARE, [3, 0, 0, 0]), Some(2000.0));
    assert_eq!(k.rate_of(TYPE_TRACEPOINT, [77, 0, 0, 0]), Some(500.0));
    // Only cbox 0 has the fixed clockticks counter.
    let (cbox0, cbox1) = (type_of(&k, "uncore_cbox_0"), type_of(&k, "uncore_cbox_1"));
    open(&k, cbox0, 0xff, 0, None).unwrap();
    assert_eq!(open(&k, cbox1, 0xff, 0, None).unwrap_err(), libc::EINVAL);
    let hy = sim("intel-hybrid");
    assert_eq!(
        hy.rate_of(type_of(&hy, "uncore_imc_free_running_0"), [0x20ff, 0, 0, 0]),
        Some(1.5e7)
    );
    assert_eq!(
        hy.rate_of(type_of(&hy, "uncore_imc_free_running_0"), [0x10ff, 0, 0, 0]),
        Some(2.0e7)
    );
    assert_eq!(
        hy.rate_of(type_of(&hy, "uncore_imc_0"), [0x301, 0, 0, 0]),
        Some(1.0e7)
    );
    let z4 = sim("amd-zen4");
    assert_eq!(
        z4.rate_of(type_of(&z4, "amd_umc_0"), [0x10a, 0, 0, 0]),
        Some(1.0e7)
    );
    assert_eq!(
        z4.rate_of(type_of(&z4, "amd_df"), [0x700fe1f, 0, 0, 0]),
        Some(1.0e7)
    );
    assert_eq!(z4.rate_of(4, [0x1_0000_0120, 0, 0, 0]), Some(2.0e9));
}

#[test]
fn real_clock_moves() {
    let k = SimKernel::new(fixture("vm-no-pmu"));
    assert!(k.simulated());
    let c = open(&k, TYPE_SOFTWARE, 0, 0, None).unwrap();
    k.enable_group(&c, &attr(1, 0), 0).unwrap();
    k.advance(SEC);
    let r = read(&k, &c);
    assert!(
        r.time_enabled >= SEC && r.values[0].1 >= 250_000_000,
        "{r:?}"
    );
}

#[test]
fn a_counter_costs_a_64_byte_slot_and_a_24_byte_handle() {
    // 512 CPUs x 200 cgroups x the default per-cgroup sets is 1.2 million
    // counters: these sizes are the simulator's and the exporter's share.
    assert_eq!(std::mem::size_of::<table::Slot>(), 64);
    assert_eq!(std::mem::size_of::<Counter>(), 24);
    let k = sim("intel-skx");
    let leader = open(&k, 1, 0, 0, None).unwrap();
    let members: Vec<Counter> = (0..3)
        .map(|_| open(&k, 1, 3, 0, Some(&leader)).unwrap())
        .collect();
    assert_eq!(k.live_counters(), 4);
    let m = k.memory();
    assert!(m.used >= 4 * 64 && m.allocated >= m.used, "{m:?}");
    drop(members);
    drop(leader);
    assert_eq!(k.live_counters(), 0);
}

/// Intel SKX's tree with another `caps/pmu_name`, as that model's kernel
/// shows it.
fn intel_as(pmu_name: &str) -> SimKernel {
    let mut t = fixture("intel-skx");
    let cpu = t.pmus.iter_mut().find(|p| p.name == "cpu").unwrap();
    cpu.caps.insert("pmu_name".into(), pmu_name.into());
    SimKernel::with_manual_clock(t)
}

/// Generic hardware id or cache triple (`cache | op << 8 | result << 16`).
fn generic(k: &SimKernel, type_: u32, config: u64) -> Result<(), i32> {
    open(k, type_, config, 0, None).map(|_| ())
}

/// A simulated Sapphire Rapids (or Granite Rapids) counts what the
/// kernel's Golden Cove tables count. Before, every `pmu_name` but
/// `skylake` refused every generic event with ENOENT.
#[test]
fn sapphire_rapids_counts_generic_and_cache_events() {
    for name in ["sapphire_rapids", "granite_rapids"] {
        let k = intel_as(name);
        for id in [0, 1, 2, 3, 4, 5, 6, 9] {
            assert_eq!(generic(&k, TYPE_HARDWARE, id), Ok(()), "{name} {id}");
        }
        // L1-dcache-loads/-load-misses, LLC-loads/-load-misses,
        // L1-icache-load-misses count; L1-icache-loads has no entry
        // (ENOENT), iTLB-loads is -1 (EINVAL).
        for c in [0x0, 0x1_0000, 0x2, 0x1_0002, 0x1_0001] {
            assert_eq!(generic(&k, TYPE_HW_CACHE, c), Ok(()), "{name} {c:#x}");
        }
        assert_eq!(generic(&k, TYPE_HW_CACHE, 0x1), Err(libc::ENOENT));
        assert_eq!(generic(&k, TYPE_HW_CACHE, 0x4), Err(libc::EINVAL));
        let cyc = open(&k, TYPE_HARDWARE, 0, 0, None).unwrap();
        k.enable_group(&cyc, &attr(0, 0), 0).unwrap();
        k.advance(SEC);
        assert_eq!(read(&k, &cyc).values[0].1, 2_000_000_000);
    }
}

/// Ice Lake's case (Tiger Lake and Rocket Lake show `icelake` too):
/// Skylake's table without the ITLB access event.
#[test]
fn icelake_counts_skylakes_cache_events_but_itlb_loads() {
    let k = intel_as("icelake");
    for c in [0x0, 0x1_0000, 0x2, 0x1_0002, 0x1_0001, 0x1_0004] {
        assert_eq!(generic(&k, TYPE_HW_CACHE, c), Ok(()), "{c:#x}");
    }
    assert_eq!(generic(&k, TYPE_HW_CACHE, 0x4), Err(libc::EINVAL));
    assert_eq!(generic(&sim("intel-skx"), TYPE_HW_CACHE, 0x4), Ok(()));
}

/// A model the kernel's switch does not name (`generic_arch_v5+`, or a
/// newer kernel's name): the architectural events count, no cache event.
#[test]
fn an_unlisted_intel_model_counts_architectural_events_only() {
    for name in ["generic_arch_v5+", "a_future_lake"] {
        let k = intel_as(name);
        for id in [0, 1, 2, 3, 4, 5, 6, 9] {
            assert_eq!(generic(&k, TYPE_HARDWARE, id), Ok(()), "{name} {id}");
        }
        for c in [0x0, 0x1_0000, 0x2, 0x1_0002, 0x1_0001] {
            assert_eq!(
                generic(&k, TYPE_HW_CACHE, c),
                Err(libc::ENOENT),
                "{name} {c:#x}"
            );
        }
    }
}

/// AMD by family: the fixtures' identities (Milan: Zen 3, Genoa: Zen 4)
/// and an older family on the same tree.
#[test]
fn amd_families_count_their_maps() {
    let procfs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/procfs");
    let amd = |fixture_name: &str, identity: Option<&str>| {
        let mut t = fixture(fixture_name);
        t.read_identities(&procfs.join(fixture_name));
        if let Some(i) = identity {
            t.identities.insert(
                "cpu".into(),
                crate::pmu::cpuid::CpuIdentity::Known(i.into()),
            );
        }
        SimKernel::with_manual_clock(t)
    };
    let milan = amd("amd-zen3", None);
    let genoa = amd("amd-zen4", None);
    let zen1 = amd("amd-zen3", Some("AuthenticAMD-23-1-2"));
    let fam15h = amd("amd-zen3", Some("AuthenticAMD-21-2-0"));
    // ref-cycles from Zen 4 on; stalled-cycles-backend on Zen 1 and before.
    assert_eq!(generic(&genoa, TYPE_HARDWARE, 9), Ok(()));
    assert_eq!(generic(&milan, TYPE_HARDWARE, 9), Err(libc::ENOENT));
    assert_eq!(generic(&milan, TYPE_HARDWARE, 8), Err(libc::ENOENT));
    assert_eq!(generic(&zen1, TYPE_HARDWARE, 8), Ok(()));
    assert_eq!(generic(&fam15h, TYPE_HARDWARE, 8), Ok(()));
    // LLC-load-misses: family 15h's table has it, Zen's not.
    assert_eq!(generic(&fam15h, TYPE_HW_CACHE, 0x1_0002), Ok(()));
    assert_eq!(generic(&zen1, TYPE_HW_CACHE, 0x1_0002), Err(libc::ENOENT));
    assert_eq!(generic(&genoa, TYPE_HW_CACHE, 0x1_0002), Err(libc::ENOENT));
}

/// The kernel takes exclude bits on the core PMU, software events and
/// tracepoints, and refuses them with EINVAL on a PMU registered with
/// `PERF_PMU_CAP_NO_EXCLUDE` (uncore IMC, RAPL, C-states, msr), as
/// `perf_try_init_event` does; the open records the bits.
#[test]
fn exclude_bits_accepted_or_refused_as_the_kernel_does() {
    let k = sim("intel-skx");
    let user = crate::sys::abi::Exclude {
        kernel: true,
        hv: true,
        guest: true,
        ..Default::default()
    };
    let with = |type_: u32, config: u64| EventAttr {
        exclude: user,
        ..attr(type_, config)
    };
    for (type_, config) in [
        (TYPE_HARDWARE, 1),
        (TYPE_SOFTWARE, 2),
        (TYPE_TRACEPOINT, 316),
        (type_of(&k, "cpu"), 0xc0),
    ] {
        k.open(&with(type_, config), 0, None)
            .unwrap_or_else(|e| panic!("{type_}:{config:#x}: {e}"));
    }
    for (pmu, config) in [
        ("uncore_imc_0", 0x304),
        ("power", 0x2),
        ("cstate_core", 0x1),
        ("msr", 0x0),
    ] {
        let e = k
            .open(&with(type_of(&k, pmu), config), 0, None)
            .unwrap_err();
        assert_eq!(e.errno, libc::EINVAL, "{pmu}");
        // Without the bits, the same encoding opens.
        k.open(&attr(type_of(&k, pmu), config), 0, None)
            .unwrap_or_else(|e| panic!("{pmu}: {e}"));
    }
    let ex = k.open_excludes();
    assert_eq!(&ex[..4], &[user; 4]);
    assert!(ex[4..].iter().all(|x| !x.any()));
    // User-only instructions count 3/4 of all of them.
    let c = k.open(&with(TYPE_HARDWARE, 1), 1, None).unwrap();
    k.enable_group(&c, &with(TYPE_HARDWARE, 1), 1).unwrap();
    k.advance(SEC);
    assert_eq!(read(&k, &c).values[0].1, 2_250_000_000);
}

/// A counter budget: groups that fit share the free counters (each runs
/// `free / Σ sizes` of the time), a group larger than the free counters
/// opens and never runs, the watchdog takes one counter, software events
/// take none, and a closed group gives its counters back from then on.
#[test]
fn counter_budget_and_watchdog() {
    let k = sim("intel-skx");
    k.set_counters("cpu", 4);
    let group = |cpu: u32, n: u64| {
        let l = open(&k, TYPE_HARDWARE, 0, cpu, None).unwrap();
        let ms: Vec<Counter> = (1..n)
            .map(|i| open(&k, TYPE_HARDWARE, i, cpu, Some(&l)).unwrap())
            .collect();
        let _sw = open(&k, TYPE_SOFTWARE, 0, cpu, Some(&l)).unwrap();
        k.enable_group(&l, &attr(0, 0), cpu).unwrap();
        (l, ms, _sw)
    };
    let a = group(0, 3);
    let b = group(0, 3);
    let big = group(0, 5);
    let alone = group(1, 3);
    k.advance(SEC);
    let times = |c: &Counter| {
        let r = read(&k, c);
        (r.time_enabled, r.time_running)
    };
    // 3 + 3 on 4 counters: 2/3 of the time each; 5 never fits.
    assert_eq!(times(&a.0), (SEC, 2 * SEC / 3));
    assert_eq!(times(&b.0), (SEC, 2 * SEC / 3));
    assert_eq!(times(&big.0), (SEC, 0));
    assert!(read(&k, &big.0).values.iter().all(|&(_, v)| v == 0));
    assert_eq!(times(&alone.0), (SEC, SEC));
    // The watchdog takes one: 3 free, 3 + 3 run half the time each.
    k.set_watchdog("cpu", true);
    k.advance(SEC);
    assert_eq!(times(&a.0), (2 * SEC, 2 * SEC / 3 + SEC / 2));
    assert_eq!(times(&alone.0), (2 * SEC, 2 * SEC));
    // b closes (members first): a has the PMU to itself from then on.
    let (bl, bm, bs) = b;
    drop((bm, bs));
    drop(bl);
    k.advance(SEC);
    assert_eq!(times(&a.0), (3 * SEC, 2 * SEC / 3 + SEC / 2 + SEC));
}

/// Stalled counters stay scheduled but do not count.
#[test]
fn stalled_counters_run_without_counting() {
    let k = sim("intel-skx");
    let l = open(&k, TYPE_HARDWARE, 0, 0, None).unwrap();
    k.enable_group(&l, &attr(0, 0), 0).unwrap();
    k.advance(SEC);
    let before = read(&k, &l).values[0].1;
    assert!(before > 0);
    k.set_stalled("cpu", true);
    k.advance(SEC);
    let r = read(&k, &l);
    assert_eq!((r.time_enabled, r.time_running), (2 * SEC, 2 * SEC));
    assert_eq!(r.values[0].1, before);
}
