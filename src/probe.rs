//! The availability probe: an instance is opened on its first CPU and
//! closed again, the proof that the kernel accepts it on this host.
//! Resolution ([`crate::resolve::chain::resolve_config`]) takes it as a
//! closure; `list` and `check` probe the same way. An Intel perf-metrics
//! event (`topdown-*`), which the kernel refuses outside a group led by
//! `slots`, is probed in such a group.

use crate::perf::abi::{intel_topdown, INTEL_TD_SLOTS};
use crate::perf::{EventAttr, Kernel};
use crate::problem::Problem;
use crate::resolve::Instance;

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
