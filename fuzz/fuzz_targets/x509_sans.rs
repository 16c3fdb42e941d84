//! Fuzz target `x509_sans`: [`perf_exporter::fuzzing::x509_sans`] must never panic
//! and its invariants must hold for every input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = perf_exporter::fuzzing::x509_sans(data) {
        panic!("invariant broken: {e}");
    }
});
