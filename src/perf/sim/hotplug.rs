//! CPU hotplug in the simulated kernel. As in the kernel, events of a CPU
//! that goes offline are removed from its context and never count again,
//! even when the CPU returns: the caller reopens them.

use super::SimKernel;

impl SimKernel {
    /// Hotplug. An offline CPU refuses opens with ENODEV, and the counters
    /// already open on it stop counting for good (the kernel removes them
    /// from the CPU's context; they do not resume when the CPU returns), so
    /// the caller has to reopen them.
    ///
    /// Each call moves [`Kernel::hotplug_generation`](crate::perf::Kernel::hotplug_generation), as a uevent does on
    /// the live kernel.
    pub fn set_online(&self, cpu: u32, online: bool) {
        let mut st = self.state();
        st.sync_all();
        st.hotplug_generation += 1;
        if online {
            if let Err(pos) = st.online.binary_search(&cpu) {
                st.online.insert(pos, cpu);
            }
        } else {
            st.online.retain(|&c| c != cpu);
            st.freeze_cpu(cpu);
        }
    }

    /// The CPUs online now (initially the table's `topology.online`).
    pub fn online_cpus(&self) -> Vec<u32> {
        self.state().online.clone()
    }
}
