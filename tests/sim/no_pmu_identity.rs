//! A host without a core PMU (the vm-no-pmu fixture: a VM without a
//! virtual PMU) still has a CPU identity: `cpuinfo` under the procfs root
//! (`--path.procfs`). The `requires_cpu` guards are judged against it
//! (`PmuTable::host_identity`), so another vendor's encodings are "no
//! encoding for CPU ..." (not on this platform), while this CPU's wait for
//! a hardware PMU as every core event does. Without a readable cpuinfo
//! nothing is judged: every core event needs a hardware PMU.

use crate::engines::table;
use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::cpuid::CpuIdentity;
use std::sync::Arc;

/// The host identity read, and the default config's engine, on vm-no-pmu
/// with a `cpuinfo` of `vendor`,
/// `family`, `model` (decimal, as the kernel prints them), stepping 1, for
/// CPU 0; `None`: a procfs root without `cpuinfo`.
fn engine(cpu: Option<(&str, u32, u32)>) -> (Option<CpuIdentity>, Engine) {
    let dir = tempfile::tempdir().unwrap();
    if let Some((vendor, family, model)) = cpu {
        std::fs::write(
            dir.path().join("cpuinfo"),
            format!(
                "processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n\
                 model name\t: (modelled)\nstepping\t: 1\n\n"
            ),
        )
        .unwrap();
    }
    let mut t = table("vm-no-pmu");
    assert!(t.core_pmus().is_empty());
    t.read_identities(dir.path());
    let id = t.host_identity.clone();
    let cfg = Config::default_config();
    let k = Arc::new(SimKernel::with_manual_clock(t.clone()));
    let mut e = Engine::for_config(k, t, &cfg, Fds::Unbounded);
    e.set_derived(Arc::new(cfg.derived.clone()));
    (id, e)
}

/// The code of the problem of event metric `metric`.
fn metric_code(e: &Engine, metric: &str) -> &'static str {
    e.problems()
        .into_iter()
        .find(|(n, _)| *n == metric)
        .map(|(_, p)| p.code())
        .unwrap_or_else(|| panic!("{metric}: no problem"))
}

/// The code of the problem of derived metric `name`.
fn derived_code(e: &Engine, name: &str) -> &'static str {
    let d = e
        .host_derived()
        .resolution
        .get(name)
        .unwrap_or_else(|| panic!("{name} not in the table"));
    d.problem()
        .unwrap_or_else(|| panic!("{name}: no problem: {d:?}"))
        .code()
}

/// Zen 4's own counts and shares, and Intel's.
const ZEN4_METRICS: [&str; 2] = [
    "perf_topdown_smt_contention_slots_total",
    "perf_pipeline_microcode_ops_total",
];
const ZEN4_DERIVED: [&str; 3] = ["smt_contention", "retiring_fastpath", "retiring_microcode"];
const INTEL_METRICS: [&str; 2] = [
    "perf_topdown_recovery_slots_total",
    "perf_pipeline_macro_fused_uops_total",
];

/// An Emerald Rapids cpuinfo (GenuineIntel 6, model 0xCF): Zen 4's
/// counts and shares have no encoding for this CPU, the Skylake-only
/// counts neither; `INT_MISC.UOP_DROPPING` (guarded for 6-8F/CF) and the
/// shares over shared counts need a hardware PMU.
#[test]
fn an_intel_cpuinfo_makes_amds_encodings_another_platforms() {
    let (id, e) = engine(Some(("GenuineIntel", 6, 0xCF)));
    assert_eq!(id, Some(CpuIdentity::Known("GenuineIntel-6-CF-1".into())));
    for m in ZEN4_METRICS.iter().chain(&INTEL_METRICS) {
        assert_eq!(metric_code(&e, m), "no_cpu_encoding", "{m}");
    }
    for d in ZEN4_DERIVED {
        assert_eq!(derived_code(&e, d), "no_cpu_encoding", "{d}");
    }
    assert_eq!(
        metric_code(&e, "perf_topdown_uop_dropping_slots_total"),
        "needs_hardware_pmu"
    );
    for d in ["frontend_bound", "retiring", "total_dispatch_slots"] {
        assert_eq!(derived_code(&e, d), "needs_hardware_pmu", "{d}");
    }
}

/// A Zen 4 cpuinfo (AuthenticAMD 25, model 0x11): the other way round.
#[test]
fn an_amd_cpuinfo_makes_intels_encodings_another_platforms() {
    let (id, e) = engine(Some(("AuthenticAMD", 25, 0x11)));
    assert_eq!(id, Some(CpuIdentity::Known("AuthenticAMD-25-11-1".into())));
    for m in INTEL_METRICS
        .iter()
        .chain(&["perf_topdown_uop_dropping_slots_total"])
    {
        assert_eq!(metric_code(&e, m), "no_cpu_encoding", "{m}");
    }
    for m in ZEN4_METRICS {
        assert_eq!(metric_code(&e, m), "needs_hardware_pmu", "{m}");
    }
    for d in ZEN4_DERIVED.iter().chain(&["frontend_bound", "retiring"]) {
        assert_eq!(derived_code(&e, d), "needs_hardware_pmu", "{d}");
    }
}

/// No cpuinfo: the identity is unknown, no guard is judged, and every
/// core count needs a hardware PMU (as before the identity was read).
#[test]
fn without_cpuinfo_every_core_count_needs_a_hardware_pmu() {
    let (id, e) = engine(None);
    assert!(matches!(id, Some(CpuIdentity::Unknown(_))), "{id:?}");
    for m in ZEN4_METRICS.iter().chain(&INTEL_METRICS) {
        assert_eq!(metric_code(&e, m), "needs_hardware_pmu", "{m}");
    }
    for d in ZEN4_DERIVED {
        assert_eq!(derived_code(&e, d), "needs_hardware_pmu", "{d}");
    }
}
