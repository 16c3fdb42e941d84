//! Fuzz target `perf_record`: [`perf_exporter::fuzzing::perf_record`] must never panic
//! and its invariants must hold for every input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = perf_exporter::fuzzing::perf_record(data) {
        panic!("invariant broken: {e}");
    }
});
