//! Checks the top-down tests share: each share against its value computed
//! by hand, each level-2 pair against its level-1 parent, each core type's
//! four level-1 shares against 1.

use std::collections::BTreeMap;

/// The P-cores' (and the parts without hybrid cores') level-2 pairs, each
/// with its level-1 parent: (parent, first, second).
pub(crate) const P_CORE_PAIRS: [(&str, &str, &str); 4] = [
    (
        "frontend_bound",
        "frontend_bound_latency",
        "frontend_bound_bandwidth",
    ),
    (
        "bad_speculation",
        "bad_speculation_mispredicts",
        "bad_speculation_pipeline_restarts",
    ),
    ("backend_bound", "backend_bound_memory", "backend_bound_cpu"),
    (
        "retiring",
        "retiring_heavy_operations",
        "retiring_light_operations",
    ),
];

/// The value of `name` in `d`; a panic naming it (and `d`) when it has none.
pub(crate) fn value(d: &BTreeMap<String, Option<f64>>, name: &str) -> f64 {
    d.get(name)
        .copied()
        .flatten()
        .unwrap_or_else(|| panic!("{name}: no value in {d:?}"))
}

/// Every `(name, value by hand)` of `want` within 1e-9; every pair of
/// `pairs` adding up to its parent; and, for each prefix of `level_1`
/// (`""` for the P-cores, `"atom_"` for the E-cores), the four level-1
/// shares adding up to 1.
pub(crate) fn check_shares(
    d: &BTreeMap<String, Option<f64>>,
    want: &[(&str, f64)],
    pairs: &[(&str, &str, &str)],
    level_1: &[&str],
) {
    for (n, w) in want {
        let v = value(d, n);
        assert!((v - w).abs() < 1e-9, "{n}: {v}, by hand {w}");
    }
    for (parent, a, b) in pairs {
        let sum = value(d, a) + value(d, b);
        let p = value(d, parent);
        assert!((sum - p).abs() < 1e-9, "{a} + {b} = {sum}, {parent} {p}");
    }
    for prefix in level_1 {
        let sum: f64 = [
            "frontend_bound",
            "bad_speculation",
            "backend_bound",
            "retiring",
        ]
        .iter()
        .map(|n| value(d, &format!("{prefix}{n}")))
        .sum();
        assert!(
            (sum - 1.0).abs() < 1e-9,
            "level 1 of {prefix:?} adds up to {sum}"
        );
    }
}
