//! The encodings of tests/fixtures/EXPECTED.md, fixture by fixture.
//! Dynamic PMU type ids are read from the tree, never hard-coded.

use perf_exporter::config::Config;
use perf_exporter::pmu::PmuTable;
use perf_exporter::resolve::chain::{resolve_config, Status};
use perf_exporter::resolve::{resolve_str, Context, Instance, ResolveError};
use std::path::{Path, PathBuf};

fn root(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}

fn table(name: &str) -> PmuTable {
    PmuTable::discover(&root(name)).expect("fixture discovers")
}

fn ok(t: &PmuTable, spec: &str) -> Vec<Instance> {
    resolve_str(spec, t, &Context::default()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn err(t: &PmuTable, spec: &str) -> ResolveError {
    match resolve_str(spec, t, &Context::default()) {
        Ok(v) => panic!("{spec} resolved to {v:?}"),
        Err(e) => e,
    }
}

fn type_of(t: &PmuTable, pmu: &str) -> u32 {
    t.get(pmu).unwrap_or_else(|| panic!("no {pmu}")).type_
}

/// One instance: (type, config, config1, cpus).
fn one(t: &PmuTable, spec: &str) -> (u32, u64, u64, Vec<u32>) {
    let v = ok(t, spec);
    assert_eq!(v.len(), 1, "{spec}: {v:?}");
    (
        v[0].type_,
        v[0].config[0],
        v[0].config[1],
        v[0].cpus.clone(),
    )
}

fn cfg(t: &PmuTable, spec: &str) -> u64 {
    one(t, spec).1
}

/// Every fixture tree.
const FIXTURES: [&str; 7] = [
    "intel-skx",
    "intel-client",
    "intel-hybrid",
    "amd-zen3",
    "amd-zen4",
    "vm-no-pmu",
    "arm-neoverse-n1",
];

/// Writes `text` to `root/path`, creating its directories.
fn write_file(root: &Path, path: &str, text: &str) {
    let f = root.join(path);
    std::fs::create_dir_all(f.parent().expect("a parent")).expect("mkdir");
    std::fs::write(f, text).expect("write");
}

#[test]
fn generic_rules_every_fixture() {
    for f in FIXTURES {
        let t = table(f);
        assert!(t.warnings.is_empty(), "{f}: {:?}", t.warnings);
        assert_eq!(type_of(&t, "software"), 1);
        assert_eq!(type_of(&t, "tracepoint"), 2);
        assert_eq!(type_of(&t, "breakpoint"), 5);
        // Software events are built in (no events/ dir).
        let (ty, c, _, cpus) = one(&t, "context-switches");
        assert_eq!((ty, c), (1, 3));
        assert_eq!(cpus, t.topology.online);
        let i = &ok(&t, "cpu-clock")[0];
        assert_eq!(
            (i.type_, i.config[0], i.scale, i.unit.as_str()),
            (1, 0, 1e-9, "seconds")
        );
        assert_eq!(cfg(&t, "task-clock"), 1);
        assert_eq!(cfg(&t, "page-faults"), 2);
        assert_eq!(cfg(&t, "cpu-migrations"), 4);
        assert_eq!(cfg(&t, "minor-faults"), 5);
        assert_eq!(cfg(&t, "major-faults"), 6);
    }
}

#[test]
fn intel_skx() {
    let t = table("intel-skx");
    assert_eq!(t.topology.online, (0..8).collect::<Vec<_>>());
    assert_eq!(one(&t, "cycles"), (0, 0, 0, (0..8).collect()));
    assert_eq!(one(&t, "instructions").1, 1);
    assert_eq!(one(&t, "cpu/cpu-cycles/"), (4, 0x3c, 0, (0..8).collect()));
    assert_eq!(
        one(&t, "cpu/cycles/"),
        (4, 0x3c, 0, (0..8).collect()),
        "a generic name on the core PMU uses its sysfs alias"
    );
    assert_eq!(cfg(&t, "cpu/cache-misses/"), 0x412e);
    assert_eq!(cfg(&t, "cpu/cache-references/"), 0x4f2e);
    assert_eq!(cfg(&t, "cpu/branch-instructions/"), 0xc4);
    assert_eq!(cfg(&t, "cpu/branch-misses/"), 0xc5);
    assert_eq!(cfg(&t, "cpu/bus-cycles/"), 0x13c);
    assert_eq!(cfg(&t, "cpu/ref-cycles/"), 0x300);
    assert!(matches!(
        err(&t, "stalled-cycles-frontend"),
        ResolveError::HiddenGeneric { .. }
    ));
    assert!(matches!(
        err(&t, "stalled-cycles-backend"),
        ResolveError::HiddenGeneric { .. }
    ));
    assert!(matches!(
        err(&t, "cpu/stalled-cycles-backend/"),
        ResolveError::UnknownEvent { .. }
    ));

    let ts = &ok(&t, "cpu/topdown-total-slots/")[0];
    assert_eq!((ts.config[0], ts.scale), (0x20003c, 2.0));
    let rb = &ok(&t, "cpu/topdown-recovery-bubbles/")[0];
    assert_eq!((rb.config[0], rb.scale), (0x120010d, 2.0));
    assert_eq!(cfg(&t, "cpu/topdown-slots-issued/"), 0x10e);
    let ml = one(&t, "cpu/mem-loads/");
    assert_eq!((ml.1, ml.2), (0x1cd, 0x3));
    assert_eq!(
        one(&t, "cpu/mem-loads,ldlat=5/").2,
        5,
        "user terms override the alias"
    );
    assert_eq!(cfg(&t, "cpu/mem-stores/"), 0x82d0);
    assert_eq!(
        cfg(&t, "cpu/event=0xd1,umask=0x20,cmask=2,inv,edge/"),
        0x28420d1
    );
    assert_eq!(cfg(&t, "r412e"), 0x412e);
    assert_eq!(one(&t, "r412e").0, 4);

    // DRAM: 6 IMC PMUs x cpumask {0,2} = 12 fds per event, never every CPU.
    for (ev, want) in [
        ("cas_count_read", 0x304),
        ("cas_count_write", 0xc04),
        ("clockticks", 0),
    ] {
        let v = ok(&t, &format!("uncore_imc_*/{ev}/"));
        assert_eq!(v.len(), 6);
        for (k, i) in v.iter().enumerate() {
            assert_eq!(i.pmu, format!("uncore_imc_{k}"));
            assert_eq!(i.type_, type_of(&t, &i.pmu));
            assert_eq!(i.config[0], want);
            assert_eq!(i.cpus, vec![0, 2]);
            assert!(i.uncore);
        }
        assert_eq!(v.iter().map(|i| i.cpus.len()).sum::<usize>(), 12);
    }
    let r = &ok(&t, "uncore_imc_*/cas_count_read/")[0];
    assert_eq!((r.scale, r.unit.as_str()), (64.0, "bytes"));
    assert_eq!(t.topology.socket_of(0), 0);
    assert_eq!(t.topology.socket_of(2), 1);
    // A bare family name matches every numbered instance too.
    assert_eq!(ok(&t, "uncore_imc/cas_count_read/").len(), 6);

    let e = &ok(&t, "power/energy-pkg/")[0];
    assert_eq!((e.type_, e.config[0]), (type_of(&t, "power"), 2));
    assert_eq!(e.cpus, vec![0, 2]);
    assert_eq!(e.scale, 2f64.powi(-32));
    assert_eq!(e.unit, "joules");
    assert_eq!(cfg(&t, "power/energy-ram/"), 3);
    assert!(matches!(
        err(&t, "power/energy-cores/"),
        ResolveError::UnknownEvent { .. }
    ));

    assert_eq!(
        one(&t, "cstate_core/c6-residency/"),
        (type_of(&t, "cstate_core"), 2, 0, vec![0, 1, 2, 3])
    );
    assert_eq!(
        one(&t, "cstate_pkg/c6-residency/"),
        (type_of(&t, "cstate_pkg"), 2, 0, vec![0, 2])
    );

    let m = &ok(&t, "msr/cpu_thermal_margin/")[0];
    assert_eq!(
        (m.type_, m.config[0], m.snapshot, m.unit.as_str()),
        (type_of(&t, "msr"), 7, true, "celsius")
    );
    assert_eq!(m.cpus, (0..8).collect::<Vec<_>>());
    assert_eq!(cfg(&t, "msr/smi/"), 4);
    assert_eq!(cfg(&t, "msr/pperf/"), 3);
    assert!(!ok(&t, "msr/tsc/")[0].snapshot);
}

#[test]
fn intel_client() {
    let t = table("intel-client");
    assert_eq!(cfg(&t, "cpu/cpu-cycles/"), 0x3c);
    assert_eq!(cfg(&t, "cpu/cache-misses/"), 0x412e);
    let imc = type_of(&t, "uncore_imc");
    for (ev, want) in [
        ("data_reads", 1),
        ("data_writes", 2),
        ("gt_requests", 3),
        ("ia_requests", 4),
        ("io_requests", 5),
    ] {
        let v = ok(&t, &format!("uncore_imc/{ev}/"));
        assert_eq!(v.len(), 1);
        assert_eq!(
            (v[0].type_, v[0].config[0], v[0].cpus.clone()),
            (imc, want, vec![0])
        );
        assert_eq!((v[0].scale, v[0].unit.as_str()), (64.0, "bytes"));
    }
    assert_eq!(
        one(&t, "uncore_cbox_0/clockticks/"),
        (type_of(&t, "uncore_cbox_0"), 0xff, 0, vec![0])
    );
    let boxes = ok(&t, "uncore_cbox/clockticks/");
    assert_eq!(boxes.len(), 4);
    assert_eq!(boxes[1].type_, type_of(&t, "uncore_cbox_1"));
    assert!(matches!(
        err(&t, "uncore_arb/clockticks/"),
        ResolveError::UnknownEvent { .. }
    ));
    assert_eq!(cfg(&t, "uncore_arb/event=0x81,umask=0x1/"), 0x181);
    for (ev, want) in [
        ("energy-cores", 1),
        ("energy-pkg", 2),
        ("energy-ram", 3),
        ("energy-gpu", 4),
        ("energy-psys", 5),
    ] {
        assert_eq!(
            one(&t, &format!("power/{ev}/")),
            (type_of(&t, "power"), want, 0, vec![0])
        );
    }
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario; to be split into steps (issue 26)
fn intel_hybrid() {
    let t = table("intel-hybrid");
    assert!(t.get("cpu").is_none());
    assert_eq!(type_of(&t, "cpu_core"), 4);
    assert_eq!(type_of(&t, "cpu_atom"), 10);
    let p: Vec<u32> = (0..16).collect();
    let e: Vec<u32> = (16..28).collect();
    // Generic events: once per core PMU, extended type, each on its cpus.
    let c = ok(&t, "cycles");
    assert_eq!(c.len(), 2);
    assert_eq!(
        (
            c[0].pmu.as_str(),
            c[0].type_,
            c[0].config[0],
            c[0].cpus.clone()
        ),
        ("cpu_core", 0, 0x4_0000_0000, p.clone())
    );
    assert_eq!(
        (
            c[1].pmu.as_str(),
            c[1].type_,
            c[1].config[0],
            c[1].cpus.clone()
        ),
        ("cpu_atom", 0, 0xa_0000_0000, e.clone())
    );
    let l = ok(&t, "LLC-load-misses");
    assert_eq!((l[0].type_, l[0].config[0]), (3, 0x4_0001_0002));
    assert_eq!(l[1].config[0], 0xa_0001_0002);
    assert_eq!(one(&t, "cpu_core/cpu-cycles/"), (4, 0x3c, 0, p.clone()));
    assert_eq!(one(&t, "cpu_atom/cpu-cycles/"), (10, 0x3c, 0, e.clone()));
    for (ev, core, atom) in [
        ("topdown-retiring", 0x8000, 0xc2),
        ("topdown-bad-spec", 0x8100, 0x73),
        ("mem-loads", 0x1cd, 0x5d0),
        ("mem-stores", 0x2cd, 0x6d0),
        ("ref-cycles", 0x13c, 0x13c),
    ] {
        assert_eq!(cfg(&t, &format!("cpu_core/{ev}/")), core, "{ev}");
        assert_eq!(cfg(&t, &format!("cpu_atom/{ev}/")), atom, "{ev}");
        let both = ok(&t, &format!("core/{ev}/"));
        assert_eq!(both.len(), 2);
        assert_eq!(
            (both[0].cpus.clone(), both[1].cpus.clone()),
            (p.clone(), e.clone())
        );
    }
    assert_eq!(one(&t, "cpu_atom/mem-loads/").2, 3);
    for ev in [
        "slots",
        "topdown-heavy-ops",
        "topdown-br-mispredict",
        "topdown-fetch-lat",
        "topdown-mem-bound",
        "mem-loads-aux",
    ] {
        assert!(
            matches!(
                err(&t, &format!("cpu_atom/{ev}/")),
                ResolveError::UnknownEvent { .. }
            ),
            "{ev}"
        );
        let v = ok(&t, &format!("core/{ev}/"));
        assert_eq!(v.len(), 1, "{ev} only on cpu_core");
        assert_eq!(v[0].pmu, "cpu_core");
    }
    assert!(matches!(
        err(&t, "cpu_atom/event=0x3c,frontend=1/"),
        ResolveError::UnknownTerm { .. }
    ));
    // Raw events on every core PMU.
    let raw = ok(&t, "r3c");
    assert_eq!(raw.iter().map(|i| i.type_).collect::<Vec<_>>(), vec![4, 10]);

    for (ev, want) in [
        ("data_read", 0x20ff),
        ("data_write", 0x30ff),
        ("data_total", 0x10ff),
    ] {
        let v = ok(&t, &format!("uncore_imc_free_running_*/{ev}/"));
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].type_, v[1].type_), (32, 33));
        for i in &v {
            assert_eq!(
                (i.config[0], i.cpus.clone(), i.scale),
                (want, vec![0], 64.0)
            );
        }
    }
    assert_eq!(cfg(&t, "uncore_imc_0/event=0x1,chmask=0x3/"), 0x301);
    assert!(matches!(
        err(&t, "uncore_imc_*/data_read/"),
        ResolveError::UnknownEvent { .. }
    ));
    assert!(matches!(
        err(&t, "uncore_imc/data_read/"),
        ResolveError::UnknownEvent { .. }
    ));
    assert_eq!(one(&t, "uncore_clock/clockticks/"), (29, 0xff, 0, vec![0]));
    assert!(matches!(
        err(&t, "uncore_cbox_0/clockticks/"),
        ResolveError::UnknownEvent { .. }
    ));
    assert_eq!(
        cfg(&t, "uncore_cbox_3/event=0x1,threshold=0x3f/"),
        0x3f00_0001
    );
    assert!(matches!(
        err(&t, "uncore_cbox_3/threshold=0x40/"),
        ResolveError::TooWide { .. }
    ));
    assert!(matches!(
        err(&t, "cstate_pkg/c7-residency/"),
        ResolveError::UnknownEvent { .. }
    ));
    assert_eq!(ok(&t, "cstate_pkg/c10-residency/")[0].cpus, vec![0]);
}

#[test]
fn amd_zen3_and_zen4() {
    for f in ["amd-zen3", "amd-zen4"] {
        let t = table(f);
        assert_eq!(cfg(&t, "cpu/cpu-cycles/"), 0x76, "{f}");
        assert_eq!(cfg(&t, "cpu/instructions/"), 0xc0);
        assert_eq!(cfg(&t, "cpu/cache-references/"), 0xff60);
        assert_eq!(cfg(&t, "cpu/cache-misses/"), 0x964);
        assert_eq!(cfg(&t, "cpu/branch-misses/"), 0xc3);
        assert_eq!(cfg(&t, "cpu/stalled-cycles-frontend/"), 0xa9);
        assert!(matches!(
            err(&t, "stalled-cycles-backend"),
            ResolveError::HiddenGeneric { .. }
        ));
        assert!(matches!(
            err(&t, "bus-cycles"),
            ResolveError::HiddenGeneric { .. }
        ));
        assert_eq!(cfg(&t, "cpu/event=0x120,umask=0x1/"), 0x1_0000_0120);
        assert_eq!(cfg(&t, "ibs_op/cnt_ctl=1/"), 1 << 19);
        assert_eq!(ok(&t, "ibs_op/cnt_ctl=1/")[0].type_, type_of(&t, "ibs_op"));
        let pk = &ok(&t, "power/energy-pkg/")[0];
        assert_eq!((pk.config[0], pk.unit.as_str()), (2, "joules"));
        assert_eq!(
            one(&t, "power_core/energy-core/"),
            (type_of(&t, "power_core"), 1, 0, vec![0, 1, 2, 3])
        );
        assert_eq!(cfg(&t, "msr/irperf/"), 6);
        let l3 = ok(
            &t,
            "amd_l3/event=0x04,umask=0xff,enallcores=1,enallslices=1,threadmask=3/",
        );
        assert_eq!(
            (l3[0].config[0], l3[0].cpus.clone()),
            (0x300c0000000ff04, vec![0, 2])
        );
    }

    let z3 = table("amd-zen3");
    assert!(matches!(
        err(&z3, "cpu/ref-cycles/"),
        ResolveError::UnknownEvent { .. }
    ));
    assert_eq!(cfg(&z3, "cpu/branch-brs/"), 0xc4);
    for (e, want) in [
        (0x07u64, 0x3807u64),
        (0x107, 0x1_0000_3807),
        (0x1c7, 0x1_0000_38c7),
    ] {
        assert_eq!(
            one(&z3, &format!("amd_df/event={e:#x},umask=0x38/")),
            (type_of(&z3, "amd_df"), want, 0, vec![0])
        );
    }
    assert!(matches!(
        err(&z3, "amd_df/event=0x1f,umask=0x7fe/"),
        ResolveError::TooWide { .. }
    ));
    assert!(matches!(
        err(&z3, "ibs_op/l3missonly=1/"),
        ResolveError::UnknownTerm { .. }
    ));
    assert!(matches!(
        err(&z3, "amd_umc_*/event=0x0a,rdwrmask=1/"),
        ResolveError::NoPmu { .. }
    ));

    let z4 = table("amd-zen4");
    assert_eq!(cfg(&z4, "cpu/ref-cycles/"), 0x1_0000_0120);
    for (mask, want) in [(1, 0x10a), (2, 0x20a)] {
        let v = ok(&z4, &format!("amd_umc_*/event=0x0a,rdwrmask={mask}/"));
        assert_eq!(v.len(), 24);
        for (k, i) in v.iter().enumerate() {
            assert_eq!(i.pmu, format!("amd_umc_{k}"));
            assert_eq!(i.type_, type_of(&z4, &i.pmu));
            assert_eq!(i.config[0], want);
            assert_eq!(i.cpus, if k < 12 { vec![0] } else { vec![2] });
        }
    }
    for (e, umask, want) in [
        (0x1f, 0x7fe, 0x700fe1f),
        (0x11f, 0x7fe, 0x1_0700_fe1f),
        (0x2df, 0x7fe, 0x2_0700_fedf),
        (0x1f, 0x7ff, 0x700ff1f),
    ] {
        assert_eq!(
            one(&z4, &format!("amd_df/event={e:#x},umask={umask:#x}/")),
            (type_of(&z4, "amd_df"), want, 0, vec![0, 2])
        );
    }
    assert_eq!(cfg(&z4, "ibs_op/l3missonly=1/"), 1 << 16);
    assert_eq!(
        cfg(&z4, "ibs_fetch/rand_en=1,l3missonly=1/"),
        0xa00_0000_0000_0000
    );
    assert_eq!(
        ok(&z4, "ibs_fetch/rand_en=1/")[0].type_,
        type_of(&z4, "ibs_fetch")
    );
}

/// EXPECTED.md §6: the Arm Neoverse N1 tree.
#[test]
fn arm_neoverse_n1() {
    let mut t = table("arm-neoverse-n1");
    let all: Vec<u32> = vec![0, 1, 2, 3];
    assert_eq!(t.topology.online, all);
    let cores: Vec<&str> = t.core_pmus().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(cores, ["armv8_pmuv3_0"], "`cpus` makes it the core PMU");
    let ty = type_of(&t, "armv8_pmuv3_0");
    // event = config:0-15: a named event's config is its number.
    for (name, c) in [
        ("cpu_cycles", 0x11),
        ("inst_retired", 0x8),
        ("l1d_cache", 0x4),
        ("l1d_cache_refill", 0x3),
        ("l2d_cache", 0x16),
        ("l2d_cache_refill", 0x17),
        ("stall_frontend", 0x23),
        ("stall_backend", 0x24),
        ("br_mis_pred", 0x10),
        ("sample_pop", 0x4000),
    ] {
        let spec = format!("armv8_pmuv3_0/{name}/");
        assert_eq!(one(&t, &spec), (ty, c, 0, all.clone()), "{name}");
    }
    assert_eq!(cfg(&t, "armv8_pmuv3_*/l2d_cache_refill/"), 0x17);
    assert_eq!(one(&t, "armv8_pmuv3_0/event=0x11,long=1/").2, 1);
    assert!(matches!(
        err(&t, "armv8_pmuv3_0/event=0x10000/"),
        ResolveError::TooWide { .. }
    ));
    // Generic events: available when the PMUv3 event the kernel maps them
    // to is implemented (shown in events/).
    assert_eq!(one(&t, "cycles"), (0, 0, 0, all.clone()));
    assert_eq!(one(&t, "stalled-cycles-backend").1, 8);
    assert_eq!(one(&t, "L1-dcache-load-misses").1, 0x10000);
    for hidden in ["branch-instructions", "ref-cycles", "LLC-load-misses"] {
        let e = err(&t, hidden);
        assert!(
            matches!(e, ResolveError::HiddenGeneric { .. }),
            "{hidden}: {e}"
        );
    }
    assert!(err(&t, "branches")
        .to_string()
        .contains("does not offer `pc_write_retired`"));
    // The identity is the MIDR of the PMU's first CPU; no procfs needed.
    t.read_identities(Path::new("/nonexistent-procfs"));
    assert_eq!(
        t.identity_of("armv8_pmuv3_0").known(),
        Some("0x00000000413fd0c1")
    );
}

#[test]
fn vm_no_pmu() {
    let t = table("vm-no-pmu");
    assert_eq!(t.topology.online, vec![0, 1]);
    for s in [
        "cycles",
        "instructions",
        "L1-dcache-load-misses",
        "r3c",
        "core/cpu-cycles/",
    ] {
        assert_eq!(err(&t, s), ResolveError::NoCorePmu, "{s}");
    }
    assert_eq!(one(&t, "cpu-clock"), (1, 0, 0, vec![0, 1]));
    assert_eq!(one(&t, "task-clock"), (1, 1, 0, vec![0, 1]));
    assert_eq!(one(&t, "msr/tsc/"), (9, 0, 0, vec![0, 1]));
    assert!(matches!(
        err(&t, "msr/aperf/"),
        ResolveError::UnknownEvent { .. }
    ));
    assert_eq!(
        one(&t, "uprobe/retprobe=1,ref_ctr_offset=0x1234/"),
        (8, 0x1234_0000_0001, 0, vec![0, 1])
    );
    assert!(matches!(
        err(&t, "kprobe/retprobe=1/"),
        ResolveError::NoPmu { .. }
    ));
    assert!(matches!(
        err(&t, "power/energy-pkg/"),
        ResolveError::NoPmu { .. }
    ));
    assert!(matches!(
        err(&t, "uncore_imc_*/cas_count_read/"),
        ResolveError::NoPmu { .. }
    ));
    let e = err(&t, "mrs/tsc/").to_string();
    assert!(e.contains("did you mean `msr`"), "{e}");
    let e = err(&t, "msr/tcs/").to_string();
    assert!(e.contains("did you mean `tsc`"), "{e}");
    // Tracepoints need tracefs, which a fixture does not have.
    assert!(matches!(
        err(&t, "sched:sched_switch"),
        ResolveError::TracefsMissing { .. }
    ));
}

/// A synthetic tree for what no fixture has: `?` values, no trailing
/// newlines, a missing caps dir, `.per-pkg`, a malformed event.
#[test]
fn synthetic_tree_edge_cases() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let w = |p: &str, s: &str| write_file(r, p, s);
    w("devices/system/cpu/online", "0-3");
    for c in 0..4 {
        w(
            &format!("devices/system/cpu/cpu{c}/topology/physical_package_id"),
            &format!("{}", c / 2),
        );
    }
    let d = "bus/event_source/devices/arm_cmn_0";
    w(&format!("{d}/type"), "42");
    w(&format!("{d}/cpumask"), "0");
    w(&format!("{d}/format/type"), "config:0-15");
    w(&format!("{d}/format/eventid"), "config:16-31");
    w(&format!("{d}/format/nodeid"), "config:32-47");
    w(&format!("{d}/events/dtc_cycles"), "type=0x3");
    w(
        &format!("{d}/events/watchpoint_up"),
        "type=0x5,eventid=0x1,nodeid=?\n",
    );
    w(&format!("{d}/events/broken"), "type=zz");
    let p = "bus/event_source/devices/pkgpmu";
    w(&format!("{p}/type"), "43\n");
    w(&format!("{p}/format/event"), "config:0-7");
    w(&format!("{p}/events/occ"), "event=0x1");
    w(&format!("{p}/events/occ.per-pkg"), "1");
    w("bus/event_source/devices/software/type", "1");
    let t = PmuTable::discover(r).unwrap();
    assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
    assert!(t.warnings[0].contains("broken"));
    assert_eq!(cfg(&t, "arm_cmn/dtc_cycles/"), 3);
    assert!(matches!(
        err(&t, "arm_cmn/watchpoint_up/"),
        ResolveError::RequiredTerm { .. }
    ));
    assert_eq!(
        cfg(&t, "arm_cmn/watchpoint_up,nodeid=0x68/"),
        0x68_0001_0005
    );
    assert!(matches!(
        err(&t, "arm_cmn/type=0x10000/"),
        ResolveError::TooWide { .. }
    ));
    assert!(matches!(
        err(&t, "arm_cmn/bogus=1/"),
        ResolveError::UnknownTerm { .. }
    ));
    assert_eq!(
        ok(&t, "pkgpmu/occ/")[0].cpus,
        vec![0, 2],
        ".per-pkg counts once per package"
    );
    assert_eq!(t.topology.socket_of(3), 1);
}

#[test]
fn default_config_on_every_fixture() {
    let c = Config::default_config();
    let status = |f: &str| {
        let t = table(f);
        let r = resolve_config(&c, &t, &Context::default(), None);
        r.metrics
            .into_iter()
            .map(|m| {
                (
                    m.metric.clone(),
                    (
                        m.status,
                        m.event.clone().unwrap_or_default(),
                        m.instances.len(),
                    ),
                )
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let skx = status("intel-skx");
    assert_eq!(skx["perf_cpu_cycles_total"].0, Status::Resolved);
    assert_eq!(
        skx["perf_dram_read_bytes_total"],
        (Status::Resolved, "uncore_imc_*/cas_count_read/".into(), 6)
    );
    assert_eq!(skx["perf_dram_write_bytes_total"].0, Status::Resolved);
    assert_eq!(skx["perf_energy_package_joules_total"].0, Status::Resolved);
    assert_eq!(skx["perf_dram_bytes_total"].0, Status::Resolved);
    let client = status("intel-client");
    assert_eq!(
        client["perf_dram_read_bytes_total"],
        (Status::Fallback, "uncore_imc/data_reads/".into(), 1)
    );
    let hy = status("intel-hybrid");
    assert_eq!(
        hy["perf_dram_read_bytes_total"],
        (
            Status::Fallback,
            "uncore_imc_free_running_*/data_read/".into(),
            2
        )
    );
    assert_eq!(
        hy["perf_cpu_cycles_total"],
        (Status::Resolved, "cycles".into(), 2)
    );
    let z4 = status("amd-zen4");
    assert_eq!(
        z4["perf_dram_read_bytes_total"],
        (
            Status::Fallback,
            "amd_umc_*/event=0x0a,rdwrmask=1/".into(),
            24
        )
    );
    assert_eq!(
        z4["perf_dram_bytes_total"].1,
        "amd_umc_*/event=0x0a,rdwrmask=1/ + amd_umc_*/event=0x0a,rdwrmask=2/",
        "zen3 DF encodings must not run on zen4"
    );
    let z3 = status("amd-zen3");
    assert_eq!(z3["perf_dram_read_bytes_total"].0, Status::Unavailable);
    assert_eq!(z3["perf_dram_bytes_total"].0, Status::Fallback);
    assert_eq!(z3["perf_dram_bytes_total"].2, 8);
    let vm = status("vm-no-pmu");
    assert_eq!(vm["perf_cpu_cycles_total"].0, Status::Unavailable);
    assert_eq!(vm["perf_instructions_total"].0, Status::Unavailable);
    assert_eq!(vm["perf_dram_read_bytes_total"].0, Status::Unavailable);
    assert_eq!(vm["perf_cpu_clock_seconds_total"].0, Status::Resolved);
    assert_eq!(vm["perf_context_switches_total"].0, Status::Resolved);
    assert_eq!(vm["perf_msr_tsc_total"].0, Status::Resolved);
    assert_eq!(vm["perf_msr_aperf_total"].0, Status::Unavailable);
}

/// One counted encoding: (PMU, type, config, CPUs).
type Enc = (String, u32, u64, Vec<u32>);

fn encodings(t: &PmuTable, metric: &str) -> Vec<Enc> {
    let r = resolve_config(&Config::default_config(), t, &Context::default(), None);
    let m = r.metrics.iter().find(|m| m.metric == metric).expect(metric);
    let mut v: Vec<Enc> = m
        .instances
        .iter()
        .map(|i| {
            assert_eq!(
                (i.inst.scale, i.inst.unit.as_str()),
                (64.0, "bytes"),
                "{metric}: {i:?}"
            );
            (
                i.inst.pmu.clone(),
                i.inst.type_,
                i.inst.config[0],
                i.inst.cpus.clone(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Defect 8: `perf_dram_bytes_total` is a real metric wherever DRAM
/// traffic is counted: the sum of the read and write encodings where the
/// hardware splits them, the data-fabric total on Zen 3 (EXPECTED.md §1,
/// §2, §4, §5), and unavailable only where nothing counts DRAM (§7).
#[test]
fn dram_total_on_every_fixture() {
    let on = |t: &PmuTable, pmus: &str, configs: &[u64]| -> Vec<Enc> {
        let mut v = Vec::new();
        for p in t.matching(pmus) {
            for &c in configs {
                v.push((p.name.clone(), p.type_, c, t.cpus_of(p)));
            }
        }
        v.sort();
        v
    };
    let zen3_df: Vec<u64> = [0x07u64, 0x47, 0x87, 0xc7, 0x107, 0x147, 0x187, 0x1c7]
        .iter()
        .map(|e| (e & 0xff) | 0x38 << 8 | (e >> 8) << 32)
        .collect();
    // (fixture, PMUs, configs): every config on every matching PMU.
    let expected: [(&str, &str, Vec<u64>); 7] = [
        ("intel-skx", "uncore_imc", vec![0x304, 0xc04]),
        ("intel-client", "uncore_imc", vec![0x1, 0x2]),
        (
            "intel-hybrid",
            "uncore_imc_free_running",
            vec![0x20ff, 0x30ff],
        ),
        ("amd-zen4", "amd_umc", vec![0x10a, 0x20a]),
        ("amd-zen3", "amd_df", zen3_df),
        ("vm-no-pmu", "none", vec![]),
        ("arm-neoverse-n1", "none", vec![]),
    ];
    for (f, pmus, configs) in expected {
        let t = table(f);
        let total = encodings(&t, "perf_dram_bytes_total");
        assert_eq!(total, on(&t, pmus, &configs), "{f}");
        // Where reads and writes are counted apart, the total counts
        // exactly their encodings, on the same CPUs.
        let mut split = encodings(&t, "perf_dram_read_bytes_total");
        split.extend(encodings(&t, "perf_dram_write_bytes_total"));
        split.sort();
        if !split.is_empty() {
            assert_eq!(total, split, "{f}: total != read + write");
        }
    }
    // Every uncore encoding is opened on its cpumask CPUs only.
    let z4 = table("amd-zen4");
    let total = encodings(&z4, "perf_dram_bytes_total");
    assert_eq!(total.len(), 48);
    assert!(total.iter().all(|e| e.3.len() == 1));
}

/// The resolver's generic hardware table against the simulated kernel,
/// whose acceptance comes from its own transcription of the kernel's
/// drivers (never from the resolver): for every fixture and every generic
/// name, the resolver says "available" exactly when the kernel opens the
/// id `table` gives that name. Returns the disagreements.
fn hardware_disagreements(table_under_test: &[(&str, u64)]) -> Vec<String> {
    use perf_exporter::perf::sim::SimKernel;
    use perf_exporter::perf::{EventAttr, Kernel};
    let mut out = Vec::new();
    for f in FIXTURES {
        let t = table(f);
        if t.core_pmus().is_empty() {
            continue;
        }
        let k = SimKernel::new(t.clone());
        for &(name, id) in table_under_test {
            let claim = resolve_str(name, &t, &Context::default());
            let claimed = claim.as_ref().map(Vec::len).unwrap_or(0);
            let cores = t.core_pmus();
            // Open the id the table under test gives, on each core PMU's
            // first CPU (with the extended type on hybrids).
            let opened = cores
                .iter()
                .filter(|p| {
                    let ext = if cores.len() > 1 {
                        u64::from(p.type_) << 32
                    } else {
                        0
                    };
                    let attr = EventAttr {
                        type_: 0,
                        config: [id | ext, 0, 0, 0],
                        event: name.into(),
                        pmu: p.name.clone(),
                        exclude: Default::default(),
                    };
                    let cpu = t.cpus_of(p)[0];
                    k.open(&attr, cpu, None).is_ok()
                })
                .count();
            if claimed != opened {
                out.push(format!(
                    "{f}: `{name}` (id {id}): resolver {claim:?}, kernel opens it on {opened} core PMU(s)"
                ));
            }
        }
    }
    out
}

#[test]
fn resolver_hardware_table_agrees_with_the_simulated_kernel() {
    let d = hardware_disagreements(perf_exporter::spec::HARDWARE);
    assert!(d.is_empty(), "{d:#?}");
}

/// The check has teeth: a resolver table with one wrong entry (a
/// stalled-cycles id swapped, or `ref-cycles` given bus-cycles' id) is
/// caught by the simulator's independent tables.
#[test]
fn a_wrong_resolver_table_entry_fails_the_simulated_check() {
    let mutate = |name: &str, id: u64| -> Vec<(&'static str, u64)> {
        perf_exporter::spec::HARDWARE
            .iter()
            .map(|&(n, i)| if n == name { (n, id) } else { (n, i) })
            .collect()
    };
    let swapped = mutate("stalled-cycles-frontend", 8);
    assert!(
        hardware_disagreements(&swapped)
            .iter()
            .any(|d| d.starts_with("amd-zen3: `stalled-cycles-frontend`")),
        "a swapped stalled-cycles id went unnoticed"
    );
    let wrong_ref = mutate("ref-cycles", 6);
    assert!(
        hardware_disagreements(&wrong_ref)
            .iter()
            .any(|d| d.starts_with("amd-zen4: `ref-cycles`")),
        "ref-cycles with bus-cycles' id went unnoticed"
    );
}

/// Where perf's names and the kernel's tables differ, the simulated
/// kernel (its own transcription) decides: AMD's driver has no generic
/// LLC events, and Alder Lake's E-cores no L1D miss event, though perf
/// offers both names. The default config then reports the LLC metric
/// unavailable on AMD and counts L1D misses on the P-cores only.
#[test]
fn simulated_kernel_refuses_what_the_cpu_does_not_count() {
    use perf_exporter::perf::sim::SimKernel;
    use perf_exporter::resolve::chain::Probe;
    let run = |f: &str| {
        let t = table(f);
        let k = SimKernel::new(t.clone());
        let probe = perf_exporter::probe::prober(&k);
        let p: Probe = &probe;
        resolve_config(&Config::default_config(), &t, &Context::default(), Some(p))
    };
    let metric = |r: &perf_exporter::resolve::chain::Resolution, m: &str| {
        r.metrics.iter().find(|x| x.metric == m).cloned().expect(m)
    };
    for f in ["amd-zen3", "amd-zen4"] {
        let r = run(f);
        assert_eq!(
            metric(&r, "perf_llc_read_misses_total").status,
            Status::Unavailable,
            "{f}"
        );
        assert_eq!(
            metric(&r, "perf_l1d_read_misses_total").status,
            Status::Resolved,
            "{f}"
        );
    }
    let skx = run("intel-skx");
    assert_eq!(
        metric(&skx, "perf_llc_read_misses_total").status,
        Status::Resolved
    );
    let hy = run("intel-hybrid");
    let l1d = metric(&hy, "perf_l1d_read_misses_total");
    assert_eq!(l1d.status, Status::Resolved);
    let pmus: Vec<&str> = l1d.instances.iter().map(|i| i.inst.pmu.as_str()).collect();
    assert_eq!(pmus, ["cpu_core"], "{l1d:?}");
    assert_eq!(l1d.partial.len(), 1, "{:?}", l1d.partial);
}

/// Defect 7: tracefs mounted away from `<sysfs>/kernel/tracing` (here at
/// a path only `<procfs>/self/mountinfo` names) is found, and tracepoints
/// resolve from it instead of being "not mounted".
#[test]
fn tracepoints_resolve_from_tracefs_mounted_elsewhere() {
    use perf_exporter::pmu::host::find_tracefs;
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let w = |p: &str, s: &str| write_file(r, p, s);
    w("sys/devices/system/cpu/online", "0-1\n");
    w("sys/bus/event_source/devices/tracepoint/type", "2\n");
    w("sys/bus/event_source/devices/software/type", "1\n");
    std::fs::create_dir_all(r.join("sys/kernel/tracing")).unwrap();
    w("mnt/trace/events/sched/sched_switch/id", "316\n");
    let mount = r.join("mnt/trace");
    w(
        "proc/self/mountinfo",
        &format!(
            "25 1 0:22 / /sys rw - sysfs sysfs rw\n41 25 0:12 / {} rw,nosuid - tracefs tracefs rw\n",
            mount.display()
        ),
    );
    let t = PmuTable::discover(&r.join("sys")).unwrap();
    let ctx = Context::from(find_tracefs(&r.join("sys"), &r.join("proc")));
    let v = resolve_str("sched:sched_switch", &t, &ctx).expect("resolves");
    assert_eq!((v[0].type_, v[0].config[0]), (2, 316));
    // Without the mount, the reason is that tracefs is not mounted.
    let none = Context::from(find_tracefs(&r.join("sys"), &r.join("nowhere")));
    let e = resolve_str("sched:sched_switch", &t, &none)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not mounted"), "{e}");
}

/// Issue 10: resolving reads no file. Tracepoint ids are read by
/// discovery; once the tracefs is gone, the discovered ids still resolve
/// (before, `resolve` read `events/<subsys>/<name>/id` itself and failed
/// here), and a misspelt name gets close names from the table.
#[test]
fn tracepoints_resolve_from_discovery_without_reading_tracefs() {
    use perf_exporter::pmu::host::Tracefs;
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let w = |p: &str, s: &str| write_file(r, p, s);
    w("sys/devices/system/cpu/online", "0-1\n");
    w("sys/bus/event_source/devices/tracepoint/type", "2\n");
    w("trace/events/sched/sched_switch/id", "316\n");
    w("trace/events/sched/sched_wakeup/id", "317\n");
    w("trace/events/sched/enable", "0\n");
    let t = PmuTable::discover(&r.join("sys")).unwrap();
    let ctx = Context::from(Tracefs::at(&r.join("trace")));
    assert_eq!(ctx.tracepoints.len(), 2);
    std::fs::remove_dir_all(r.join("trace")).unwrap();
    let v = resolve_str("sched:sched_wakeup", &t, &ctx).expect("resolves");
    assert_eq!((v[0].type_, v[0].config[0]), (2, 317));
    let e = resolve_str("sched:sched_swich", &t, &ctx)
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean `sched_switch`"), "{e}");
}

/// Issue 11, then 25: `cycles:u` is a generic event with a modifier,
/// never looked up as a tracepoint (whose reason would be tracefs): it
/// resolves with its exclude bits, and an unsupported modifier is refused
/// as a modifier.
#[test]
fn modifiers_are_not_tracepoints() {
    let t = table("intel-skx");
    for s in ["cycles:u", "instructions:k"] {
        let v = ok(&t, s);
        assert!(v.iter().all(|i| i.exclude.any()), "{s}: {v:?}");
        assert_eq!(v[0].pmu, "cpu", "{s}");
    }
    let e = err(&t, "r412e:ppp");
    assert!(matches!(e, ResolveError::Syntax(_)), "{e:?}");
    assert!(
        e.to_string().contains("perf's `p`") && !e.to_string().contains("tracefs"),
        "{e}"
    );
}

/// A counter never resolves to a `.snapshot` reading, nor a gauge to a
/// count: the series would change type from host to host.
#[test]
fn counters_and_gauges_keep_their_kind() {
    let t = table("intel-skx");
    let y = crate::config!("resolve_fixtures/msr_margin");
    let c = Config::parse(y, "t.yaml").unwrap();
    let r = resolve_config(&c, &t, &Context::default(), None);
    let counter = &r.metrics[0];
    assert_eq!(counter.status, Status::Unavailable);
    assert!(
        counter
            .reason()
            .contains("declare the metric `gauge: true`"),
        "{}",
        counter.reason()
    );
    let gauge = &r.metrics[1];
    assert_eq!(gauge.status, Status::Fallback, "{gauge:?}");
    assert!(gauge.gauge);
    assert!(
        gauge.tried[0]
            .problem
            .as_ref()
            .is_some_and(|p| p.to_string().contains("a count, not a reading")),
        "{:?}",
        gauge.tried
    );
}

fn procfs(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/procfs")
        .join(name)
}

/// Issue 17: an alternative whose `requires_cpu` does not match the CPU
/// identity of its PMU is skipped with "no encoding for CPU <identity>"
/// and the next one is chosen; an unknown model (a temp copy of the
/// cpuinfo with another model) leaves the guarded metric to its
/// fallback or unavailable, and the rest keeps working.
#[test]
fn requires_cpu_guards_alternatives_by_cpu_identity() {
    let yaml = crate::config!("resolve_fixtures/requires_cpu_intel");
    let c = Config::parse(yaml, "t.yaml").unwrap();
    let mut t = table("intel-skx");
    t.read_identities(&procfs("intel-skx"));
    assert_eq!(t.identity_of("cpu").known(), Some("GenuineIntel-6-55-4"));
    let r = resolve_config(&c, &t, &Context::default(), None);
    let g = &r.metrics[0];
    assert_eq!(g.status, Status::Fallback, "{g:?}");
    assert_eq!(g.event.as_deref(), Some("cpu/event=0xc0/"));
    let skipped = g.tried[0].problem.as_ref().unwrap();
    assert_eq!(
        skipped.to_string(),
        "no encoding for CPU GenuineIntel-6-55-4"
    );
    assert_eq!(skipped.code(), "no_cpu_encoding");
    assert!(skipped
        .what_to_do()
        .contains("`requires_cpu` matching GenuineIntel-6-55-4"));
    assert_eq!(r.metrics[1].status, Status::Resolved);

    // The same config on an unknown model.
    let tmp = std::env::temp_dir().join(format!("pe-cpuid-unknown-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let text = std::fs::read_to_string(procfs("intel-skx").join("cpuinfo")).unwrap();
    std::fs::write(
        tmp.join("cpuinfo"),
        text.replace("model\t\t: 85", "model\t\t: 999"),
    )
    .unwrap();
    t.read_identities(&tmp);
    std::fs::remove_dir_all(&tmp).unwrap();
    let r = resolve_config(&c, &t, &Context::default(), None);
    assert_eq!(r.metrics[0].status, Status::Unavailable);
    let only = &r.metrics[1];
    assert_eq!(only.status, Status::Unavailable);
    assert_eq!(
        only.problem().unwrap().to_string(),
        "no encoding for CPU GenuineIntel-6-3E7-4"
    );
    assert_eq!(r.metrics[2].status, Status::Resolved);

    // No cpuinfo at all: the identity is unknown, with why.
    t.read_identities(Path::new("/nonexistent-procfs"));
    let r = resolve_config(&c, &t, &Context::default(), None);
    let why = r.metrics[1].problem().unwrap().to_string();
    assert!(why.starts_with("CPU identity unknown (no "), "{why}");
    assert_eq!(r.metrics[2].status, Status::Resolved);
}

/// Issue 17: on a hybrid each core PMU has its own identity, read from
/// the first CPU of its `cpus` file (`cpu_core` CPU 0, `cpu_atom` CPU 16).
/// Raptor Lake reports one model on both kinds of core, so the fixture's
/// identities agree; a copy whose E-cores report another model (a
/// hypothetical part) gives each PMU its own, and a guard then selects
/// per PMU.
#[test]
fn hybrid_core_pmus_have_their_own_identity() {
    let mut t = table("intel-hybrid");
    t.read_identities(&procfs("intel-hybrid"));
    assert_eq!(
        t.identity_of("cpu_core").known(),
        Some("GenuineIntel-6-B7-1")
    );
    assert_eq!(
        t.identity_of("cpu_atom").known(),
        Some("GenuineIntel-6-B7-1")
    );

    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(procfs("intel-hybrid").join("cpuinfo")).unwrap();
    let blocks: Vec<String> = text
        .split_inclusive("\n\n")
        .enumerate()
        .map(|(cpu, b)| {
            if cpu >= 16 {
                b.replace("model\t\t: 183", "model\t\t: 190")
            } else {
                b.to_string()
            }
        })
        .collect();
    std::fs::write(tmp.path().join("cpuinfo"), blocks.concat()).unwrap();
    t.read_identities(tmp.path());
    assert_eq!(
        t.identity_of("cpu_core").known(),
        Some("GenuineIntel-6-B7-1")
    );
    assert_eq!(
        t.identity_of("cpu_atom").known(),
        Some("GenuineIntel-6-BE-1")
    );
    // A metric guarded to the P-core's model is counted on cpu_core only,
    // and the E-core's skip names the E-core's identity.
    let yaml = crate::config!("resolve_fixtures/requires_cpu_hybrid_p_core");
    let c = Config::parse(yaml, "t.yaml").unwrap();
    let r = resolve_config(&c, &t, &Context::default(), None);
    let m = &r.metrics[0];
    let pmus: Vec<&str> = m.instances.iter().map(|i| i.inst.pmu.as_str()).collect();
    assert_eq!(pmus, ["cpu_core"], "{m:?}");
    assert!(
        m.partial
            .iter()
            .any(|p| p.to_string() == "no encoding for CPU GenuineIntel-6-BE-1"),
        "{:?}",
        m.partial
    );
}

/// Issue 17, Arm: the identity is the whole MIDR, so "this part, any
/// revision" is a regex with the variant (bits 23:20) and revision (bits
/// 3:0) digits free, as perf's arm64 mapfile matches `0x00000000410fd0c0`
/// with those bits zero; "r3p1 or later" lists the later digits. A copy
/// of the tree with an r3p0 MIDR keeps the first and loses the second.
#[test]
fn arm_requires_cpu_matches_part_and_revision_by_regex() {
    let yaml = crate::config!("resolve_fixtures/requires_cpu_neoverse");
    let c = Config::parse(yaml, "t.yaml").unwrap();
    let mut t = table("arm-neoverse-n1");
    t.read_identities(Path::new("/nonexistent-procfs"));
    let r = resolve_config(&c, &t, &Context::default(), None);
    assert_eq!(r.metrics[0].status, Status::Resolved);
    assert_eq!(r.metrics[1].status, Status::Resolved);

    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("sys");
    copy_tree(&root("arm-neoverse-n1"), &copy);
    for cpu in 0..4 {
        write_file(
            &copy,
            &format!("devices/system/cpu/cpu{cpu}/regs/identification/midr_el1"),
            "0x00000000413fd0c0\n",
        );
    }
    let mut t = PmuTable::discover(&copy).unwrap();
    t.read_identities(Path::new("/nonexistent-procfs"));
    let r = resolve_config(&c, &t, &Context::default(), None);
    assert_eq!(r.metrics[0].status, Status::Resolved);
    let old = &r.metrics[1];
    assert_eq!(old.status, Status::Unavailable);
    assert_eq!(
        old.problem().unwrap().to_string(),
        "no encoding for CPU 0x00000000413fd0c0"
    );
}

/// Copies a fixture tree (plain files and directories).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}
