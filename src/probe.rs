//! The availability probe: an instance is opened on its first CPU and
//! closed again, the proof that the kernel accepts it on this host.
//! Resolution ([`crate::resolve::chain::resolve_config`]) takes it as a
//! closure; `list` and `check` probe the same way.

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
    kernel
        .open(&attr, cpu, None)
        .map(drop)
        .map_err(|e| e.problem())
}

/// A probe closure over a kernel, for [`crate::resolve::chain::resolve_config`].
pub fn prober(kernel: &dyn Kernel) -> impl Fn(&str, &Instance) -> Result<(), Problem> + '_ {
    move |spec, inst| probe_instance(kernel, spec, inst)
}
