//! `check`'s start-up self-test (`--collector.self-test`): per core PMU,
//! whether its counters counted a calibrated loop as it ran
//! ([`crate::engine::selftest`]), and if not, why and what to do.

use crate::engine::selftest::{Outcome, SelfTest};
use crate::terminal::escape;
use serde::Serialize;
use std::fmt::Write as _;

/// One core PMU's self-test: JSON `self_test`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckSelfTest {
    /// The core PMU (empty when the host has none).
    pub pmu: String,
    /// The CPU the loop ran on.
    pub cpu: Option<u32>,
    /// `passed`, `failed` or `skipped`.
    pub result: &'static str,
    /// The loop's iterations (`null` when skipped).
    pub iterations: Option<u64>,
    /// Instructions counted (`null` unless passed).
    pub instructions: Option<f64>,
    /// Cycles counted (`null` unless passed).
    pub cycles: Option<f64>,
    /// The problem's code (`self_test_failed`) when failed.
    pub problem: Option<&'static str>,
    /// Why it failed or was skipped.
    pub reason: Option<String>,
    /// What to do when failed.
    pub what_to_do: Option<String>,
}

impl CheckSelfTest {
    /// From a verdict.
    pub fn of(t: &SelfTest) -> Self {
        let mut c = CheckSelfTest {
            pmu: t.pmu.clone(),
            cpu: t.cpu,
            result: t.result(),
            iterations: None,
            instructions: None,
            cycles: None,
            problem: None,
            reason: None,
            what_to_do: None,
        };
        match &t.outcome {
            Outcome::Passed(n) => {
                c.iterations = Some(n.iterations);
                c.instructions = Some(n.instructions);
                c.cycles = Some(n.cycles);
            }
            Outcome::Failed(p) => {
                c.iterations = Some(crate::engine::selftest::ITERATIONS);
                c.problem = Some(p.code());
                c.reason = Some(p.to_string());
                c.what_to_do = Some(p.what_to_do());
            }
            Outcome::Skipped(why) => c.reason = Some(why.clone()),
        }
        c
    }
}

/// The text lines: `self-test: cpu: passed on CPU 0 (...)`, and what to
/// do after a failure.
pub fn text(tests: &[SelfTest]) -> String {
    let mut s = String::new();
    for t in tests {
        let _ = writeln!(s, "self-test: {}", escape(&t.summary()));
        if let Outcome::Failed(p) = &t.outcome {
            let _ = writeln!(s, "    what to do: {}", escape(&p.what_to_do()));
        }
    }
    s
}
