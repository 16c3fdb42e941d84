//! The availability probe: an instance is opened on its first CPU and
//! closed again, the proof that the kernel accepts it on this host.
//! Resolution ([`crate::resolve::chain::resolve_config`]) takes it as a
//! closure; `list` and `check` probe the same way. An Intel perf-metrics
//! event (`topdown-*`), which the kernel refuses outside a group led by
//! `slots`, is probed in such a group.

use crate::perf::{EventAttr, Kernel};
use crate::problem::Problem;
use crate::resolve::Instance;
use crate::sys::abi::{intel_topdown, INTEL_TD_SLOTS};

/// Opens an instance on its first CPU and closes it again.
pub fn probe_instance(kernel: &dyn Kernel, spec: &str, inst: &Instance) -> Result<(), Problem> {
    let Some(&cpu) = inst.cpus.first() else {
        return Err(Problem::NoOnlineCpu {
            event: spec.to_string(),
            pmu: inst.pmu.clone(),
        });
    };
    let attr = EventAttr {
        type_: inst.type_,
        config: inst.config,
        event: spec.to_string(),
        pmu: inst.pmu.clone(),
        exclude: inst.exclude,
    };
    match kernel.open(&attr, cpu, None) {
        Ok(_) => Ok(()),
        Err(e) if e.errno == libc::EINVAL && intel_topdown(inst.config[0]) == Some(false) => {
            // An Intel perf-metrics event opens only under a `slots`
            // leader (see `engine::plan`): probe it in such a group.
            let slots = EventAttr {
                config: [INTEL_TD_SLOTS, 0, 0, 0],
                event: "slots".into(),
                ..attr.clone()
            };
            let leader = kernel.open(&slots, cpu, None).map_err(|_| e.problem())?;
            kernel
                .open(&attr, cpu, Some(&leader))
                .map(drop)
                .map_err(|e| e.problem())
        }
        Err(e) => Err(e.problem()),
    }
}

/// A probe closure over a kernel, for [`crate::resolve::chain::resolve_config`].
pub fn prober(kernel: &dyn Kernel) -> impl Fn(&str, &Instance) -> Result<(), Problem> + '_ {
    move |spec, inst| probe_instance(kernel, spec, inst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::sim::SimKernel;

    fn instance(pmu: &str, type_: u32, config: u64, cpu: u32) -> Instance {
        Instance {
            pmu: pmu.into(),
            type_,
            config: [config, 0, 0, 0],
            cpus: vec![cpu],
            uncore: false,
            scale: 1.0,
            unit: String::new(),
            snapshot: false,
            exclude: Default::default(),
        }
    }

    /// `topdown-retiring` alone is refused (EINVAL); the probe opens it
    /// under a `slots` leader, as the engine will. A refusal for another
    /// reason stays a refusal.
    #[test]
    fn a_perf_metrics_event_is_probed_under_a_slots_leader() {
        let k = SimKernel::with_manual_clock(crate::pmu::fixtures::table("intel-hybrid"));
        let retiring = instance("cpu_core", 4, 0x8000, 0);
        let alone = EventAttr {
            type_: 4,
            config: [0x8000, 0, 0, 0],
            event: "core/topdown-retiring/".into(),
            pmu: "cpu_core".into(),
            exclude: Default::default(),
        };
        assert_eq!(
            k.open(&alone, 0, None).map(drop).map_err(|e| e.errno),
            Err(libc::EINVAL)
        );
        assert_eq!(
            probe_instance(&k, "core/topdown-retiring/", &retiring),
            Ok(())
        );
        // cpu_core's CPUs only (ENOENT on an E-core CPU), leader or not.
        let elsewhere = instance("cpu_core", 4, 0x8000, 16);
        assert!(probe_instance(&k, "core/topdown-retiring/", &elsewhere).is_err());
        assert_eq!(k.live_counters(), 0, "the probe closes what it opened");
    }
}
