//! Tests of the derived section: parsing, resolution against the
//! config's metrics, evaluation order and the per-CPU forms.

use super::*;
use crate::config::Config;

const SETS: &str = "sets:\n  - name: core\n    events:\n      - metric: perf_cpu_cycles_total\n        event: [cycles, \"core/cpu-cycles/\"]\n      - metric: perf_instructions_total\n        event: [instructions]\n      - metric: perf_l1d_read_misses_total\n        event: [L1-dcache-load-misses]\n      - metric: perf_ref_total\n        event: [\"cpu/event=0x3c/\"]\n";

pub(super) fn with(derived: &str) -> Result<Config, String> {
    Config::parse(&format!("{SETS}derived:\n{derived}"), "t.yaml").map_err(|e| e.to_string())
}

/// Without the section, the default config's derived metrics (over
/// this config's metrics where it counts them); `derived: []` has
/// none.
#[test]
fn absent_section_is_the_defaults_and_an_empty_one_is_empty() {
    let c = Config::parse(SETS, "t.yaml").unwrap();
    let default = Config::default_config().derived;
    assert_eq!(default.implicit, None);
    // Only the default entries whose inputs this config counts
    // (`perf_cpu_cycles_total`, `perf_instructions_total`,
    // `perf_l1d_read_misses_total`): the others are left out.
    let names: Vec<&str> = c.derived.metrics.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["ipc", "l1d_generic_read_mpki"]);
    assert_eq!(c.derived.get("ipc"), default.get("ipc"));
    let left = c.derived.implicit.as_ref().unwrap();
    assert_eq!(left.len() + 2, default.metrics.len());
    let l1d = left.iter().find(|l| l.name == "l1d_miss_ratio").unwrap();
    assert_eq!(l1d.missing, ["perf_l1d_reads_total"]);
    let c = Config::parse(&format!("{SETS}derived: []\n"), "t.yaml").unwrap();
    assert!(c.derived.metrics.is_empty());
    assert_eq!(c.derived.implicit, None);
}

#[test]
fn operands_resolve_to_metrics_specs_derived_and_duration() {
    let c = with(concat!(
        "  - name: cpi\n    expr: 1 / ipc\n",
        "  - name: ipc\n    help: Instructions per cycle.\n    unit: ratio\n    group: core\n    expr: instructions / perf_cpu_cycles_total\n    threshold: ipc < 0.5\n",
        "  - name: l1d_mpki\n    expr: 1e3 * L1\\-dcache\\-load\\-misses / instructions\n",
        "  - name: ref_per_second\n    expr: cpu@event\\=0x3c@ / duration_time if has_event(nothing) else core@cpu\\-cycles@\n",
    ))
    .unwrap();
    let names: Vec<&str> = c.derived.metrics.iter().map(|d| d.name.as_str()).collect();
    // `ipc` comes before `cpi`, which reads it.
    assert_eq!(names, ["ipc", "cpi", "l1d_mpki", "ref_per_second"]);
    let ipc = c.derived.get("ipc").unwrap();
    assert_eq!(
        ipc.formula.inputs,
        [
            Input {
                operand: "instructions".into(),
                source: Source::Metric("perf_instructions_total".into())
            },
            Input {
                operand: "perf_cpu_cycles_total".into(),
                source: Source::Metric("perf_cpu_cycles_total".into())
            },
        ]
    );
    assert_eq!(ipc.unit.as_deref(), Some("ratio"));
    assert_eq!(ipc.group.as_deref(), Some("core"));
    assert_eq!(
        ipc.threshold.as_ref().unwrap().inputs[0].source,
        Source::Derived("ipc".into())
    );
    let cpi = c.derived.get("cpi").unwrap();
    assert_eq!(cpi.formula.inputs[0].source, Source::Derived("ipc".into()));
    let l1 = c.derived.get("l1d_mpki").unwrap();
    assert_eq!(
        l1.formula.inputs[0].source,
        Source::Metric("perf_l1d_read_misses_total".into())
    );
    let r = c.derived.get("ref_per_second").unwrap();
    let sources: Vec<&Source> = r.formula.inputs.iter().map(|i| &i.source).collect();
    assert_eq!(
        sources,
        [
            &Source::Metric("perf_ref_total".into()),
            &Source::Duration,
            &Source::Metric("perf_cpu_cycles_total".into()),
        ]
    );
}

#[test]
fn unknown_operands_are_named_with_the_line_and_column() {
    let e = with("  - name: ipc\n    expr: instructions / cycels\n").unwrap_err();
    assert!(e.starts_with("t.yaml:14:26: "), "{e}");
    assert!(
        e.contains("derived metric `ipc`: `expr` column 16: unknown operand `cycels`: did you mean `cycles`"),
        "{e}"
    );
    let e = with("  - name: x\n    expr: zzz_qqq\n").unwrap_err();
    assert!(e.contains("an operand is a metric of the config"), "{e}");
    let e = with("  - name: x\n    expr: 1 +\n").unwrap_err();
    assert!(
        e.starts_with("t.yaml:14:14: ") && e.contains("`expr`: column 4: the expression ends"),
        "{e}"
    );
    let e = with("  - name: x\n    expr: instructions\n    threshold: x > #smt_on\n").unwrap_err();
    assert!(
        e.contains("quote an expression that holds a `#` literal"),
        "{e}"
    );
    let e = with("  - name: x\n    expr: instructions\n    threshold: 'x > #nope'\n").unwrap_err();
    assert!(
        e.contains("`threshold`: column 5: unknown literal `#nope`"),
        "{e}"
    );
}

#[test]
fn cycles_are_refused_with_their_path() {
    let e = with("  - name: a\n    expr: b + 1\n  - name: b\n    expr: c * 2\n  - name: c\n    expr: a / instructions\n").unwrap_err();
    assert!(e.contains("cycle: a → b → c → a"), "{e}");
    assert!(e.starts_with("t.yaml:13:11: "), "{e}");
    let e = with("  - name: a\n    expr: a + 1\n").unwrap_err();
    assert!(e.contains("cycle: a → a"), "{e}");
    // A threshold may read its own metric.
    assert!(with("  - name: a\n    expr: instructions\n    threshold: a > 1\n").is_ok());
}

#[test]
fn one_window_evaluates_in_order_and_says_why_not() {
    let c = with(concat!(
        "  - name: cpi\n    expr: 1 / ipc\n",
        "  - name: ipc\n    expr: instructions / cycles\n",
        "  - name: ips\n    expr: instructions / duration_time if has_event(cycles) else 0\n",
        "  - name: smt\n    expr: \"cycles * #smt_on\"\n",
    ))
    .unwrap();
    let deltas = |m: &str| match m {
        "perf_instructions_total" => Some(3000.0),
        "perf_cpu_cycles_total" => Some(1500.0),
        _ => None,
    };
    let lits = |l: Literal| Err(format!("`{l}` is not read by this exporter yet"));
    let got = c.derived.evaluate(&deltas, Some(2.0), &lits);
    assert_eq!(got[0], ("ipc", Ok(2.0)));
    assert_eq!(got[1], ("cpi", Ok(0.5)));
    assert_eq!(got[2], ("ips", Ok(1500.0)));
    assert_eq!(
        got[3].1.as_ref().unwrap_err().to_string(),
        "the literal `#smt_on` has no value: `#smt_on` is not read by this exporter yet"
    );
    // No cycles in the window: ipc is undefined, cpi names its input.
    let idle = |m: &str| {
        (m == "perf_instructions_total")
            .then_some(10.0)
            .or(Some(0.0))
    };
    let got = c.derived.evaluate(&idle, None, &lits);
    assert_eq!(got[0], ("ipc", Err(DeriveError::Undefined)));
    assert_eq!(got[1], ("cpi", Err(DeriveError::Missing("ipc".into()))));
    assert_eq!(
        got[2],
        ("ips", Err(DeriveError::Missing("duration_time".into())))
    );
}

#[test]
fn expr_takes_a_list_of_alternatives() {
    let c = with(concat!(
        "  - name: ipc\n    expr: [instructions / perf_ref_total, instructions / cycles]\n",
        "  - name: cpi\n    expr: 1 / ipc\n",
    ))
    .unwrap();
    let ipc = c.derived.get("ipc").unwrap();
    assert_eq!(ipc.formula.text, "instructions / perf_ref_total");
    assert_eq!(ipc.fallbacks.len(), 1);
    assert_eq!(ipc.fallbacks[0].text, "instructions / cycles");
    assert_eq!(ipc.formulas().count(), 2);
    // The table of a host that takes the second alternative.
    let chosen = c.derived.choose(&|n| (n == "ipc").then_some(1));
    assert_eq!(
        chosen.get("ipc").unwrap().formula.text,
        "instructions / cycles"
    );
    assert!(chosen.get("ipc").unwrap().fallbacks.is_empty());
    assert_eq!(chosen.get("cpi").unwrap().formula.text, "1 / ipc");
    // An error names the alternative.
    let e = with("  - name: x\n    expr: [cycles, cycels]\n").unwrap_err();
    assert!(
        e.contains(
            "derived metric `x`: `expr` alternative 2 `cycels` column 1: unknown operand `cycels`"
        ),
        "{e}"
    );
    let e = with("  - name: x\n    expr: []\n").unwrap_err();
    assert!(
        e.contains("`expr` lists 0 alternatives; give 1 to 16"),
        "{e}"
    );
    // A cycle through a later alternative is still a cycle.
    let e = with("  - name: a\n    expr: [cycles, b]\n  - name: b\n    expr: a\n").unwrap_err();
    assert!(e.contains("cycle: a → b → a"), "{e}");
}

#[test]
fn names_are_checked() {
    let e = with("  - name: perf_instructions_total\n    expr: cycles\n").unwrap_err();
    assert!(e.contains("has the name of an event metric"), "{e}");
    let e = with("  - name: a\n    expr: cycles\n  - name: a\n    expr: cycles\n").unwrap_err();
    assert!(
        e.contains("defined twice") && e.starts_with("t.yaml:15:"),
        "{e}"
    );
    let e = with("  - name: 9a\n    expr: cycles\n").unwrap_err();
    assert!(e.contains("not a valid metric name"), "{e}");
    let e = with("  - name: a\n    expr: cycles\n    colour: red\n").unwrap_err();
    assert!(e.contains("colour"), "{e}");
}

#[test]
fn a_spec_two_metrics_count_is_ambiguous() {
    let y = "sets:\n  - name: a\n    events:\n      - metric: x_total\n        event: cycles\n      - metric: y_total\n        event: [\"core/cpu-cycles/\", cycles]\nderived:\n  - name: d\n    expr: cycles\n";
    let e = Config::parse(y, "t.yaml").unwrap_err().to_string();
    assert!(
        e.contains("`cycles` is counted by `x_total` or `y_total`: name the metric instead"),
        "{e}"
    );
}
