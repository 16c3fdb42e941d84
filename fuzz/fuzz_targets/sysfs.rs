//! Fuzz target `sysfs`: [`perf_exporter::fuzzing::sysfs`] must never panic
//! and its invariants must hold for every input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = perf_exporter::fuzzing::sysfs(data) {
        panic!("invariant broken: {e}");
    }
});
