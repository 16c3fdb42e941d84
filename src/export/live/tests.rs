use super::*;
use crate::snapshot::{Family, Kind, Labels, Sample};

fn sample(labels: &[(&'static str, &str)], value: f64, start: u64) -> Sample {
    Sample {
        labels: Labels::new(labels.iter().map(|(k, v)| (*k, v.to_string())).collect()),
        value,
        start_unix_nanos: start,
    }
}

fn counter(name: &str, samples: Vec<Sample>) -> Family {
    Family {
        name: name.into(),
        help: String::new(),
        kind: Kind::Counter,
        samples,
    }
}

fn per_cpu(name: &str, values: &[f64]) -> Family {
    let cpus = ["0", "1"];
    counter(
        name,
        values
            .iter()
            .zip(cpus)
            .map(|(v, c)| sample(&[("cpu", c)], *v, 1))
            .collect(),
    )
}

fn avail(entries: &[(&str, bool, &str)]) -> Vec<Family> {
    let gauge = |name: &str, samples| Family {
        name: name.into(),
        help: String::new(),
        kind: Kind::Gauge,
        samples,
    };
    vec![
        gauge(
            "perf_event_available",
            entries
                .iter()
                .map(|(m, ok, _)| sample(&[("metric", m)], if *ok { 1.0 } else { 0.0 }, 0))
                .collect(),
        ),
        gauge(
            "perf_event_unavailable_info",
            entries
                .iter()
                .filter(|(_, ok, _)| !ok)
                .map(|(m, _, r)| {
                    sample(
                        &[("metric", m), ("reason", r), ("class", "not_on_platform")],
                        1.0,
                        0,
                    )
                })
                .collect(),
        ),
    ]
}

#[test]
fn deltas_ratios_and_rates() {
    let prev = vec![
        per_cpu("perf_instructions_total", &[100.0, 1000.0]),
        per_cpu("perf_cpu_cycles_total", &[100.0, 1000.0]),
        per_cpu("perf_context_switches_total", &[10.0, 10.0]),
    ];
    let cur = vec![
        per_cpu("perf_instructions_total", &[300.0, 1000.0]),
        per_cpu("perf_cpu_cycles_total", &[200.0, 1000.0]),
        per_cpu("perf_context_switches_total", &[30.0, 50.0]),
    ];
    let f = frame(&prev, &cur, 2.0, &Reasons::new());
    assert_eq!(f.counts["perf_instructions_total"], 200.0);
    assert_eq!(f.derived["ipc"], Some(2.0));
    assert_eq!(f.derived["context_switches_per_second"], Some(30.0));
    assert_eq!(f.per_cpu[&0].derived["ipc"], Some(2.0));
    // CPU 1 was idle: its IPC is undefined (null), not 0.
    assert_eq!(f.per_cpu[&1].derived["ipc"], None);
    assert_eq!(
        f.per_cpu[&1].derived["context_switches_per_second"],
        Some(20.0)
    );
}

#[test]
fn restarted_series_count_since_the_restart() {
    let prev = vec![counter(
        "perf_x_total",
        vec![sample(&[("cpu", "0")], 500.0, 1)],
    )];
    let cur = vec![counter(
        "perf_x_total",
        vec![sample(&[("cpu", "0")], 20.0, 2)],
    )];
    let f = frame(&prev, &cur, 1.0, &Reasons::new());
    assert_eq!(f.counts["perf_x_total"], 20.0);
}

#[test]
fn unavailable_inputs_name_the_reason() {
    let mut cur = avail(&[
        ("perf_cpu_cycles_total", false, "needs_hardware_pmu"),
        ("perf_context_switches_total", true, ""),
    ]);
    cur.push(per_cpu("perf_context_switches_total", &[1.0, 1.0]));
    let mut reasons = Reasons::new();
    reasons.insert(
        "perf_cpu_cycles_total".into(),
        "cycles needs a hardware PMU".into(),
    );
    let f = frame(&cur, &cur, 1.0, &reasons);
    assert_eq!(
        f.unavailable["perf_cpu_cycles_total"],
        "cycles needs a hardware PMU"
    );
    // IPC names the missing input that is not counted (instructions is
    // not in this config at all, and is checked first).
    assert_eq!(
        f.unavailable["ipc"],
        "needs perf_instructions_total: perf_instructions_total is not in the config"
    );
    assert!(!f.derived.contains_key("ipc"));
    // Without an explanation, the snapshot's code and class.
    let f = frame(&cur, &cur, 1.0, &Reasons::new());
    assert_eq!(
        f.unavailable["perf_cpu_cycles_total"],
        "needs_hardware_pmu (not on platform)"
    );
    // Every derived value is in exactly one of the two maps.
    for (name, _, _) in DERIVED {
        assert!(
            f.derived.contains_key(*name) != f.unavailable.contains_key(*name),
            "{name}"
        );
    }
}

#[test]
fn dram_rates_per_socket() {
    let dram = |v: [f64; 3]| {
        counter(
            "perf_dram_read_bytes_total",
            vec![
                sample(&[("pmu", "imc0"), ("socket", "0")], v[0], 1),
                sample(&[("pmu", "imc1"), ("socket", "0")], v[1], 1),
                sample(&[("pmu", "imc2"), ("socket", "1")], v[2], 1),
            ],
        )
    };
    let f = frame(
        &[dram([0.0, 0.0, 0.0])],
        &[dram([100.0, 300.0, 50.0])],
        2.0,
        &Reasons::new(),
    );
    assert_eq!(f.per_socket["0"]["dram_read_bytes_per_second"], Some(200.0));
    assert_eq!(f.per_socket["1"]["dram_read_bytes_per_second"], Some(25.0));
    assert_eq!(f.derived["dram_read_bytes_per_second"], Some(225.0));
}

#[test]
fn schema() {
    let f = frame(&[], &[], 1.0, &Reasons::new());
    let v = serde_json::to_value(&f).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "counts",
            "derived",
            "interval_seconds",
            "per_cpu",
            "per_socket",
            "unavailable"
        ]
    );
}
