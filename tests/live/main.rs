//! The `live` suite: real `perf_event_open` on this host (system-wide
//! counting, CPU hotplug, real cgroups and the BPF backend, faults as
//! other users, a hung mount, `stat` and `top` against other clocks, the
//! exporter under load). Run as root (`scripts/test.sh`).
//!
//! Every test here that counts on this host's real counters, changes CPU
//! state or loads the machine takes [`common::serial`], so no two of them
//! overlap (as when each file was its own test crate and cargo ran the
//! crates one after the other); only those on the simulated PMU, or that
//! fail at start, run beside them.
//!
//! One test binary for all of them (each test crate is a separate link);
//! a test is `MODULE::NAME`, e.g. `cargo test --test live live::`.

#[path = "../common/mod.rs"]
mod common;

mod cgroup_bpf;
mod cgroup_discovery;
mod cgroup_hybrid;
mod cgroup_live;
mod cgroup_usage;
mod faults;
mod flame;
mod hardware_pmu;
mod live;
mod load;
mod profile;
mod read_timeout;
mod stat;
mod top;
