//! The `sim` suite: the library in-process on the simulated PMU and the
//! sysfs/procfs/cgroup fixtures (resolution, the engine, counter states,
//! reload, golden scrapes, cgroup selection, the fuzz corpora, the
//! benchmarks' support code). No privilege, no real counter, no CPU state
//! changed: its tests run in parallel.
//!
//! One test binary for all of them (each test crate is a separate link);
//! a test is `MODULE::NAME`, e.g. `cargo test --test sim sim_engine::`.

#[path = "../common/mod.rs"]
mod common;

mod aggregation;
mod bench_support;
mod cgroup_incremental;
mod cgroup_sim;
mod counter_budget;
mod counter_state;
mod engine_reload;
mod engines;
mod fuzz_corpus;
mod metrics_diff;
mod no_pmu_identity;
mod plausibility;
mod reference;
mod resolve_fixtures;
mod shares;
mod sim_engine;
mod topdown_arm;
mod topdown_hybrid;
mod topdown_icx;
mod topdown_l2;
mod topdown_spr;
