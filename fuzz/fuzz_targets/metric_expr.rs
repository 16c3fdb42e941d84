//! Fuzz target `metric_expr`: [`perf_exporter::fuzzing::metric_expr`] must never panic
//! and its invariants must hold for every input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = perf_exporter::fuzzing::metric_expr(data) {
        panic!("invariant broken: {e}");
    }
});
