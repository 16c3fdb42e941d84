use super::*;
use crate::snapshot::{Family, Kind, Labels, Sample};

fn sample(labels: &[(&'static str, &str)], value: f64, start: u64) -> Sample {
    Sample {
        labels: Labels::new(labels.iter().map(|(k, v)| (*k, v.to_string())).collect()),
        value,
        start_unix_nanos: start,
    }
}

/// The default config's derived metrics.
fn table() -> &'static DerivedTable {
    static T: std::sync::OnceLock<DerivedTable> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        crate::config::Config::parse(crate::config::DEFAULT_CONFIG, "<default>")
            .unwrap()
            .derived
    })
}

fn counter(name: &str, samples: Vec<Sample>) -> Family {
    Family {
        name: name.to_string().into(),
        help: crate::snapshot::Text::of(""),
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
        name: name.to_string().into(),
        help: crate::snapshot::Text::of(""),
        kind: Kind::Gauge,
        samples,
    };
    vec![gauge(
        "perf_event_available",
        entries
            .iter()
            .map(|(m, ok, r)| {
                if *ok {
                    sample(&[("metric", m)], 1.0, 0)
                } else {
                    sample(
                        &[("metric", m), ("reason", r), ("class", "not_on_platform")],
                        0.0,
                        0,
                    )
                }
            })
            .collect(),
    )]
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
    let f = Framer::default().frame(
        &prev,
        &cur,
        2.0,
        &Reasons::new(),
        PerCpuDetail::All,
        table(),
    );
    assert_eq!(f.counts["perf_instructions_total"], 200.0);
    assert_eq!(f.derived["ipc"], Some(2.0));
    assert_eq!(f.derived["context_switches_per_second"], Some(30.0));
    let c = f.per_cpu.as_ref().unwrap();
    assert_eq!(c.cpus, [0, 1]);
    assert_eq!(c.derived("ipc", 0), Some(2.0));
    // CPU 1 was idle: its IPC is undefined (null), not 0.
    assert_eq!(c.derived("ipc", 1), None);
    assert_eq!(c.derived("context_switches_per_second", 1), Some(20.0));
    assert_eq!(c.count("perf_context_switches_total", 1), Some(40.0));
    // In the order the heatmap prefers them.
    assert_eq!(
        c.derived_names().collect::<Vec<_>>(),
        ["ipc", "context_switches_per_second"]
    );
    // The per-CPU detail is in by default; left out, the rest is the same.
    assert_eq!(frame(&prev, &cur, 2.0, &Reasons::new(), table()), f);
    let plain = Framer::default().frame(
        &prev,
        &cur,
        2.0,
        &Reasons::new(),
        PerCpuDetail::Off,
        table(),
    );
    assert_eq!(plain.per_cpu, None);
    assert_eq!(plain, Frame { per_cpu: None, ..f });
}

#[test]
fn per_cpu_columns_are_in_cpu_order() {
    let fam = |v: [f64; 3]| {
        counter(
            "perf_context_switches_total",
            vec![
                sample(&[("cpu", "10")], v[0], 1),
                sample(&[("cpu", "2")], v[1], 1),
                sample(&[("cpu", "7")], v[2], 1),
            ],
        )
    };
    let uncore = counter(
        "perf_dram_read_bytes_total",
        vec![sample(&[("socket", "0")], 5.0, 1)],
    );
    let f = Framer::default().frame(
        &[fam([0.0; 3])],
        &[fam([10.0, 2.0, 7.0]), uncore],
        1.0,
        &Reasons::new(),
        PerCpuDetail::All,
        table(),
    );
    let c = f.per_cpu.unwrap();
    assert_eq!(c.cpus, [2, 7, 10]);
    assert_eq!(
        c.values_of("perf_context_switches_total").unwrap(),
        [Some(2.0), Some(7.0), Some(10.0)]
    );
    // A counter without a CPU is not given per CPU.
    assert_eq!(c.values_of("perf_dram_read_bytes_total"), None);
    assert_eq!(c.counts().count(), 1);
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
    let f = frame(&prev, &cur, 1.0, &Reasons::new(), table());
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
    let f = frame(&cur, &cur, 1.0, &reasons, table());
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
    let f = frame(&cur, &cur, 1.0, &Reasons::new(), table());
    assert_eq!(
        f.unavailable["perf_cpu_cycles_total"],
        "needs_hardware_pmu (not on platform)"
    );
    // Every derived value is in exactly one of the two maps.
    for d in &table().metrics {
        let name = &d.name;
        assert!(
            f.derived.contains_key(name) != f.unavailable.contains_key(name),
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
        table(),
    );
    assert_eq!(f.per_socket["0"]["dram_read_bytes_per_second"], Some(200.0));
    assert_eq!(f.per_socket["1"]["dram_read_bytes_per_second"], Some(25.0));
    assert_eq!(f.derived["dram_read_bytes_per_second"], Some(225.0));
}

#[test]
fn schema() {
    let keys = |f: &Frame| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&f.to_json()).unwrap();
        v.as_object().unwrap().keys().cloned().collect()
    };
    assert_eq!(
        keys(&frame(&[], &[], 1.0, &Reasons::new(), table())),
        FRAME_KEYS
    );
    let without =
        keys(&Framer::default().frame(&[], &[], 1.0, &Reasons::new(), PerCpuDetail::Off, table()));
    let want: Vec<&str> = FRAME_KEYS
        .iter()
        .filter(|k| **k != "per_cpu")
        .copied()
        .collect();
    assert_eq!(without, want);
}

/// A pod and its container, both counted (the `kubernetes` preset with
/// `containers: true`): the container's counts are inside the pod's, so
/// the top list nests it, nothing is added twice, and no per-cgroup count
/// reaches the node-level `counts`.
#[test]
fn nested_cgroups_are_never_counted_twice() {
    let pod = "kubepods.slice/kubepods-pod1.slice";
    let ctr = "kubepods.slice/kubepods-pod1.slice/cri-containerd-c1.scope";
    let other = "kubepods.slice/kubepods-pod2.slice";
    let clock = |v: [f64; 3], cpu_v: [f64; 2]| {
        vec![
            counter(
                "perf_cpu_clock_seconds_total",
                vec![
                    sample(&[("cpu", "0")], cpu_v[0], 1),
                    sample(&[("cpu", "1")], cpu_v[1], 1),
                ],
            ),
            counter(
                "perf_cgroup_cpu_clock_seconds_total",
                vec![
                    sample(
                        &[("cgroup", pod), ("pod_uid", "1"), ("cpu", "0")],
                        v[0] / 2.0,
                        1,
                    ),
                    sample(
                        &[("cgroup", pod), ("pod_uid", "1"), ("cpu", "1")],
                        v[0] / 2.0,
                        1,
                    ),
                    sample(
                        &[("cgroup", ctr), ("container_id", "c1"), ("cpu", "0")],
                        v[1],
                        1,
                    ),
                    sample(
                        &[("cgroup", other), ("pod_uid", "2"), ("cpu", "0")],
                        v[2],
                        1,
                    ),
                ],
            ),
            counter(
                "perf_cgroup_group_enabled_seconds_total",
                vec![sample(
                    &[("cgroup", pod), ("set", "software")],
                    100.0 * v[0],
                    1,
                )],
            ),
        ]
    };
    let f = Framer::default().frame(
        &clock([0.0; 3], [0.0; 2]),
        &clock([0.6, 0.4, 0.8], [1.0, 1.0]),
        1.0,
        &Reasons::new(),
        PerCpuDetail::All,
        table(),
    );
    assert_eq!(
        f.counts.keys().collect::<Vec<_>>(),
        ["perf_cpu_clock_seconds_total"]
    );
    assert_eq!(f.counts["perf_cpu_clock_seconds_total"], 2.0);
    let c = f.per_cpu.as_ref().unwrap();
    assert_eq!(
        c.counts().map(|(k, _)| k).collect::<Vec<_>>(),
        ["perf_cpu_clock_seconds_total"]
    );
    let top = f.per_cgroup.as_ref().unwrap();
    assert_eq!(top.counted, 3);
    assert_eq!(top.rank_by, "perf_cgroup_cpu_clock_seconds_total");
    // Busiest first; the container under its pod, not beside it.
    let rows: Vec<&str> = top.top.iter().map(|r| r.cgroup.as_str()).collect();
    assert_eq!(rows, [other, pod]);
    let p = &top.top[1];
    assert_eq!(p.counts["perf_cgroup_cpu_clock_seconds_total"], 0.6);
    assert_eq!(p.counts.len(), 1, "group times are not counts: {p:?}");
    assert_eq!(p.labels["pod_uid"], "1");
    assert!(!p.labels.contains_key("cpu"));
    // CPUs' worth of time: 0.6 s of cpu-clock in 1 s.
    assert_eq!(p.derived["cpus_utilized"], Some(0.6));
    assert_eq!(p.nested.len(), 1);
    assert_eq!(p.nested[0].cgroup, ctr);
    assert_eq!(
        p.nested[0].counts["perf_cgroup_cpu_clock_seconds_total"],
        0.4
    );
    // The outermost rows sum to no more than the node.
    let outer: f64 = top
        .top
        .iter()
        .map(|r| r.counts["perf_cgroup_cpu_clock_seconds_total"])
        .sum();
    assert!(outer <= f.counts["perf_cpu_clock_seconds_total"]);
    // No cycles per cgroup: no IPC in the rows, nor among the columns.
    assert!(!p.derived.contains_key("ipc"));
    let columns: Vec<&str> = top.derived.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(columns, ["cpus_utilized"]);
}

#[test]
fn the_top_list_is_capped_and_absent_without_cgroups() {
    assert_eq!(
        frame(&[], &[], 1.0, &Reasons::new(), table()).per_cgroup,
        None
    );
    let many = |scale: f64| {
        vec![counter(
            "perf_cgroup_context_switches_total",
            (0..25)
                .map(|i| sample(&[("cgroup", &format!("app/{i:02}"))], scale * i as f64, 1))
                .collect(),
        )]
    };
    let f = frame(&many(0.0), &many(1.0), 2.0, &Reasons::new(), table());
    let top = f.per_cgroup.unwrap();
    assert_eq!(top.counted, 25);
    assert_eq!(top.top.len(), TOP_CGROUPS);
    assert_eq!(top.top[0].cgroup, "app/24");
    assert_eq!(
        top.top[0].derived["context_switches_per_second"],
        Some(12.0)
    );
}

/// The per-CPU detail as sent: the CPUs once, integers where the counts
/// are integers, seconds to the nanosecond, `null` where a CPU has no
/// series, uncore families left out, and the
/// per-CPU derived values as formulas over the arrays.
#[test]
fn per_cpu_json_is_columns_of_integers_and_formulas() {
    let on = |name: &str, cpus: &[&str], v: &[f64]| {
        counter(
            name,
            cpus.iter()
                .zip(v)
                .map(|(c, v)| sample(&[("cpu", c)], *v, 1))
                .collect(),
        )
    };
    let fams = |k: f64| {
        vec![
            on("perf_instructions_total", &["0", "1"], &[300.0 * k, 1000.0]),
            on("perf_cpu_cycles_total", &["0", "1"], &[200.0 * k, 1000.0]),
            on(
                "perf_cpu_clock_seconds_total",
                &["0", "1", "2"],
                &[3.0 + 1.000000417 * k, 7.0 + 1.5 * k, 0.25 * k],
            ),
            counter(
                "perf_group_enabled_seconds_total",
                vec![sample(&[("set", "core"), ("cpu", "0")], k, 1)],
            ),
            counter(
                "perf_dram_read_bytes_total",
                vec![sample(&[("socket", "0")], 64.0 * k, 1)],
            ),
        ]
    };
    let f = frame(&fams(0.0), &fams(1.0), 1.0, &Reasons::new(), table());
    // The engine's own families are not in frames at all.
    assert!(!f.counts.contains_key("perf_group_enabled_seconds_total"));
    let json = f.per_cpu.as_ref().unwrap().to_json();
    assert_eq!(
        json,
        concat!(
            r#"{"cpus":[0,1,2],"counts":{"#,
            r#""perf_cpu_clock_seconds_total":[1.000000417,1.5,0.25],"#,
            r#""perf_cpu_cycles_total":[200,0,null],"#,
            r#""perf_instructions_total":[300,0,null]},"#,
            r#""formulas":{"ipc":{"ratio":["perf_instructions_total","perf_cpu_cycles_total"],"format":"ratio"}}}"#
        )
    );
    // The frame's JSON carries the same object.
    assert!(f.to_json().contains(&format!(r#""per_cpu":{json}"#)));
    let c = f.per_cpu.unwrap();
    assert_eq!(c.derived("ipc", 0), Some(1.5));
    assert_eq!(c.derived("ipc", 2), None);
}

/// A [`Framer`] remembers which CPU each series is on: reused, it gives
/// the frames a fresh one gives, also when a position holds another
/// series, a CPU goes away, or a higher CPU appears in a later family.
#[test]
fn a_framer_follows_series_that_move_between_cpus() {
    let fam = |name: &str, cpus: &[&str], v: f64| {
        counter(
            name,
            cpus.iter().map(|c| sample(&[("cpu", c)], v, 1)).collect(),
        )
    };
    let a = vec![
        fam("perf_context_switches_total", &["0", "1"], 0.0),
        fam("perf_interrupts_total", &["0", "1"], 0.0),
    ];
    let b = vec![
        fam("perf_context_switches_total", &["0", "1"], 10.0),
        fam("perf_interrupts_total", &["0", "1"], 20.0),
    ];
    // Position 1 is now CPU 5 (CPU 1 went offline), and a later family
    // has a CPU beyond every earlier one.
    let c = vec![
        fam("perf_context_switches_total", &["0"], 10.0),
        fam("perf_interrupts_total", &["0", "5"], 30.0),
        fam("perf_softirqs_total", &["9"], 1.0),
    ];
    let mut framer = Framer::default();
    let r = Reasons::new();
    for (prev, cur) in [(&a, &b), (&a, &b), (&b, &c), (&c, &c), (&a, &b)] {
        let reused = framer.frame(prev, cur, 1.0, &r, PerCpuDetail::All, table());
        assert_eq!(reused, frame(prev, cur, 1.0, &r, table()));
    }
    let f = framer.frame(&b, &c, 1.0, &r, PerCpuDetail::All, table());
    let p = f.per_cpu.unwrap();
    assert_eq!(p.cpus, [0, 5, 9]);
    assert_eq!(
        p.values_of("perf_context_switches_total").unwrap(),
        [Some(0.0), None, None]
    );
    assert_eq!(
        p.values_of("perf_interrupts_total").unwrap(),
        [Some(10.0), Some(30.0), None]
    );
    assert_eq!(
        p.values_of("perf_softirqs_total").unwrap(),
        [None, None, Some(1.0)]
    );
    assert_eq!(p.count("perf_interrupts_total", 1), None);
    // The JSON encoder sizes its buffer from the last frame.
    let f = framer.frame(&a, &b, 1.0, &r, PerCpuDetail::All, table());
    let json = framer.encode(&f);
    assert_eq!(json, frame(&a, &b, 1.0, &r, table()).to_json());
}

/// The per-CPU values the page computes are the served derived table's
/// entries marked `per_cpu: true`, in its order, each applied to one CPU's
/// columns: nothing is listed by the exporter. The default marks `ipc`,
/// `busy_ratio` and the OS event rates, never `cpus_utilized` (a sum over
/// CPUs: the CPUs counted); a config's own entries are given as it marks
/// them, and `per_cpu: true` on a value with no per-CPU form is refused.
#[test]
fn per_cpu_formulas_are_the_configs() {
    let forms = per_cpu::formulas(table());
    let marked: Vec<&str> = table()
        .metrics
        .iter()
        .filter(|d| d.per_cpu)
        .map(|d| d.name.as_str())
        .collect();
    let names: Vec<&str> = forms.iter().map(|(n, ..)| n.as_str()).collect();
    assert_eq!(names, marked);
    assert_eq!(
        names,
        [
            "ipc",
            "busy_ratio",
            "context_switches_per_second",
            "interrupts_per_second",
            "softirqs_per_second"
        ]
    );
    for (name, form, _) in &forms {
        let want = match form {
            per_cpu::Form::Ratio(n, d) => format!("{n} / {d}"),
            per_cpu::Form::Rate(m) => format!("{m} / duration_time"),
        };
        assert_eq!(table().get(name).unwrap().formula.text, want, "{name}");
    }
    let formats: Vec<Format> = forms.iter().map(|(.., f)| *f).collect();
    assert_eq!(
        formats,
        [
            Format::Ratio,
            Format::Percent,
            Format::Rate,
            Format::Rate,
            Format::Rate
        ]
    );
    // `cpus_utilized` has a per-CPU form, but is a node-wide sum (each
    // CPU's would be 1, idle or not): not per CPU. Its unit is no rate:
    // shown as a number, also over time.
    let cpus = table().get("cpus_utilized").unwrap();
    assert!(!cpus.per_cpu);
    assert!(cpus.formula.per_cpu().is_some());
    assert_eq!(Format::of(cpus), Format::Ratio);
    let help = cpus.help.as_deref().unwrap();
    assert!(
        help.starts_with("Node-wide sum over CPUs, not a per-CPU value"),
        "{help}"
    );
    // A config's own table: its marked entries, whatever their names.
    let yaml = "sets:\n  - name: s\n    events:\n      - metric: perf_a_total\n        event: instructions\n      - metric: perf_b_total\n        event: cycles\nderived:\n  - name: ipc\n    expr: perf_b_total / perf_a_total\n  - name: cycles_per_instruction\n    per_cpu: true\n    expr: perf_b_total / perf_a_total\n  - name: context_switches_per_second\n    expr: 2 * perf_a_total / duration_time\n";
    let cfg = crate::config::Config::parse(yaml, "t.yaml").unwrap();
    let forms = per_cpu::formulas(&cfg.derived);
    assert_eq!(
        forms,
        [(
            "cycles_per_instruction".to_string(),
            per_cpu::Form::Ratio("perf_b_total".into(), "perf_a_total".into()),
            Format::Ratio
        )]
    );
    // Refused where the expression has no per-CPU form.
    let bad = yaml.replace(
        "  - name: context_switches_per_second\n",
        "  - name: context_switches_per_second\n    per_cpu: true\n",
    );
    let err = crate::config::Config::parse(&bad, "t.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("derived metric `context_switches_per_second` has `per_cpu: true`, but `2 * perf_a_total / duration_time` has no per-CPU form"),
        "{err}"
    );
}

/// A cgroup's derived value without a value says why exactly as the
/// node's does (one function, [`why_missing`]): the input it lacks, and
/// through a derived input the whole chain, down to that metric's reason
/// (here: never ran in the cgroup, as the node's metric is not counted on
/// this host), including an operand only a `has_event` probe reads.
#[test]
fn a_cgroups_missing_operand_says_the_nodes_reason_chain() {
    let yaml = "sets:\n  - name: s\n    events:\n      - metric: perf_context_switches_total\n        event: context-switches\n      - metric: perf_cpu_clock_seconds_total\n        event: cpu-clock\n      - metric: perf_interrupts_total\n        event: \"irq:irq_handler_entry\"\nderived:\n  - name: busy\n    expr: perf_cpu_clock_seconds_total / duration_time\n  - name: switches_per_busy\n    expr: perf_context_switches_total / busy\n";
    let table = crate::config::Config::parse(yaml, "t.yaml")
        .unwrap()
        .derived;
    let states = |k: f64| Family {
        name: CGROUP_STATE.into(),
        help: crate::snapshot::Text::of(""),
        kind: Kind::Gauge,
        samples: vec![sample(
            &[
                ("cgroup", "app"),
                ("metric", "perf_cgroup_cpu_clock_seconds_total"),
                ("state", "never_ran"),
            ],
            k.max(1.0),
            1,
        )],
    };
    let fams = |k: f64| {
        let mut v = vec![
            per_cpu("perf_context_switches_total", &[100.0 * k, 300.0 * k]),
            counter(
                "perf_cgroup_context_switches_total",
                vec![sample(&[("cgroup", "app"), ("cpu", "0")], 50.0 * k, 1)],
            ),
            counter(
                "perf_cgroup_cpu_clock_seconds_total",
                vec![sample(&[("cgroup", "app"), ("cpu", "0")], 0.0, 1)],
            ),
            states(k),
        ];
        v.extend(avail(&[
            ("perf_context_switches_total", true, ""),
            ("perf_cpu_clock_seconds_total", false, "no clock here"),
        ]));
        v
    };
    let f = frame(&fams(0.0), &fams(1.0), 1.0, &Reasons::new(), &table);
    let node_clock = f.unavailable["perf_cpu_clock_seconds_total"].clone();
    assert_eq!(
        f.unavailable["busy"],
        format!("needs perf_cpu_clock_seconds_total: {node_clock}")
    );
    assert_eq!(
        f.unavailable["switches_per_busy"],
        format!("needs busy: needs perf_cpu_clock_seconds_total: {node_clock}")
    );
    let top = f.per_cgroup.unwrap();
    let row = &top.top[0];
    let never = CounterState::NeverRan.explain();
    assert_eq!(
        row.unavailable,
        [
            (
                "busy".to_string(),
                format!("needs perf_cgroup_cpu_clock_seconds_total: {never}")
            ),
            (
                "switches_per_busy".to_string(),
                format!("needs busy: needs perf_cgroup_cpu_clock_seconds_total: {never}")
            ),
        ]
        .into_iter()
        .collect()
    );
    assert!(row.derived.is_empty(), "{:?}", row.derived);
    // The same function, the same chain: only the metric's name (its
    // per-cgroup family) and its own reason differ.
    let strip = |s: &str, why: &str| s.replace("perf_cgroup_", "perf_").replace(why, "WHY");
    assert_eq!(
        strip(&row.unavailable["switches_per_busy"], never),
        strip(&f.unavailable["switches_per_busy"], &node_clock)
    );
    // A `has_event` probe's operand is found too (the cgroup copy missed
    // them): the reason names it, never "not in the config".
    let busy = table.get("busy").unwrap();
    let probed = DerivedTable {
        metrics: vec![crate::config::derived::Derived {
            formula: crate::config::derived::Formula {
                inputs: Vec::new(),
                probes: busy.formula.inputs.clone(),
                ..busy.formula.clone()
            },
            ..busy.clone()
        }],
        implicit: None,
    };
    let op = "perf_cpu_clock_seconds_total";
    assert_eq!(
        why_missing(
            &probed,
            "busy",
            crate::derive::DeriveError::Missing(op.into()),
            &|_| Some("down".to_string()),
        ),
        Some(format!("needs {op}: down"))
    );
}

/// Two software counters, node-wide per CPU and per cgroup (one cgroup),
/// for the frames of a config's own derived table.
fn cgroup_collection(k: f64) -> Vec<Family> {
    vec![
        per_cpu("perf_context_switches_total", &[100.0 * k, 300.0 * k]),
        per_cpu("perf_cpu_clock_seconds_total", &[k, k]),
        per_cpu("perf_interrupts_total", &[10.0 * k, 30.0 * k]),
        counter(
            "perf_cgroup_context_switches_total",
            vec![sample(&[("cgroup", "app"), ("cpu", "0")], 50.0 * k, 1)],
        ),
        counter(
            "perf_cgroup_cpu_clock_seconds_total",
            vec![sample(&[("cgroup", "app"), ("cpu", "0")], 0.25 * k, 1)],
        ),
    ]
}

/// A config's `derived:` (not the default's), with three software
/// metrics; `extra` is appended to its derived entries.
fn software_config(extra: &str) -> DerivedTable {
    let yaml = format!(
        "sets:\n  - name: s\n    events:\n      - metric: perf_context_switches_total\n        event: context-switches\n      - metric: perf_cpu_clock_seconds_total\n        event: cpu-clock\n      - metric: perf_interrupts_total\n        event: \"irq:irq_handler_entry\"\nderived:\n  - name: context_switches_per_second\n    unit: per second\n    per_cpu: true\n    expr: perf_context_switches_total / duration_time\n  - name: irq_per_switch\n    expr: perf_interrupts_total / perf_context_switches_total\n{extra}"
    );
    crate::config::Config::parse(&yaml, "t.yaml")
        .unwrap()
        .derived
}

/// The per-cgroup columns and the heatmap's choices are the config's
/// derived table: a custom entry whose inputs are counted per cgroup is a
/// column with its value in each row (evaluated over the row's counts),
/// one with an input not counted per cgroup (`irq_per_switch`: no
/// per-cgroup interrupts) is no column, and the per-CPU formulas are
/// the config's entries of the heatmap's names. The exact frames.
#[test]
fn per_cgroup_columns_are_the_configs_derived_entries() {
    let with = software_config(
        "  - name: switches_per_cpu_second\n    expr: perf_context_switches_total / perf_cpu_clock_seconds_total\n  - name: busy_share\n    unit: ratio\n    expr: perf_cpu_clock_seconds_total / (2 * duration_time)\n",
    );
    let f = Framer::default().frame(
        &cgroup_collection(0.0),
        &cgroup_collection(1.0),
        2.0,
        &Reasons::new(),
        PerCpuDetail::Derived,
        &with,
    );
    assert_eq!(
        f.to_json(),
        concat!(
            r#"{"interval_seconds":2.0,"#,
            r#""counts":{"perf_context_switches_total":400.0,"perf_cpu_clock_seconds_total":2.0,"perf_interrupts_total":40.0},"#,
            r#""derived":{"busy_share":0.5,"context_switches_per_second":200.0,"irq_per_switch":0.1,"switches_per_cpu_second":200.0},"#,
            r#""per_socket":{},"#,
            r#""per_cpu":{"cpus":[0,1],"counts":{"perf_context_switches_total":[100,300]},"#,
            r#""formulas":{"context_switches_per_second":{"rate":"perf_context_switches_total","format":"rate"}}},"#,
            r#""unavailable":{},"#,
            r#""per_cgroup":{"counted":1,"rank_by":"perf_cgroup_cpu_clock_seconds_total","#,
            r#""derived":[{"name":"context_switches_per_second","format":"rate"},"#,
            r#"{"name":"switches_per_cpu_second","format":"ratio"},"#,
            r#"{"name":"busy_share","format":"percent"}],"#,
            r#""top":[{"cgroup":"app","labels":{},"#,
            r#""counts":{"perf_cgroup_context_switches_total":50.0,"perf_cgroup_cpu_clock_seconds_total":0.25},"#,
            r#""derived":{"busy_share":0.0625,"context_switches_per_second":25.0,"switches_per_cpu_second":200.0}}]}}"#
        )
    );
    // The same config without the custom entries: no such columns.
    let without = software_config("");
    let f = Framer::default().frame(
        &cgroup_collection(0.0),
        &cgroup_collection(1.0),
        2.0,
        &Reasons::new(),
        PerCpuDetail::Derived,
        &without,
    );
    assert_eq!(
        f.to_json(),
        concat!(
            r#"{"interval_seconds":2.0,"#,
            r#""counts":{"perf_context_switches_total":400.0,"perf_cpu_clock_seconds_total":2.0,"perf_interrupts_total":40.0},"#,
            r#""derived":{"context_switches_per_second":200.0,"irq_per_switch":0.1},"#,
            r#""per_socket":{},"#,
            r#""per_cpu":{"cpus":[0,1],"counts":{"perf_context_switches_total":[100,300]},"#,
            r#""formulas":{"context_switches_per_second":{"rate":"perf_context_switches_total","format":"rate"}}},"#,
            r#""unavailable":{},"#,
            r#""per_cgroup":{"counted":1,"rank_by":"perf_cgroup_cpu_clock_seconds_total","#,
            r#""derived":[{"name":"context_switches_per_second","format":"rate"}],"#,
            r#""top":[{"cgroup":"app","labels":{},"#,
            r#""counts":{"perf_cgroup_context_switches_total":50.0,"perf_cgroup_cpu_clock_seconds_total":0.25},"#,
            r#""derived":{"context_switches_per_second":25.0}}]}}"#
        )
    );
    // A config whose table is empty (`derived: []`; without the section
    // it has the default's): no per-cgroup column, and the heatmap has
    // nothing to offer.
    let yaml = "sets:\n  - name: s\n    events:\n      - metric: perf_context_switches_total\n        event: context-switches\nderived: []\n";
    let none = crate::config::Config::parse(yaml, "t.yaml")
        .unwrap()
        .derived;
    let f = Framer::default().frame(
        &cgroup_collection(0.0),
        &cgroup_collection(1.0),
        2.0,
        &Reasons::new(),
        PerCpuDetail::Derived,
        &none,
    );
    let json: serde_json::Value = serde_json::from_str(&f.to_json()).unwrap();
    assert_eq!(json["per_cpu"]["formulas"], serde_json::json!({}));
    assert_eq!(json["per_cgroup"]["derived"], serde_json::json!([]));
    assert_eq!(
        json["per_cgroup"]["top"][0]["derived"],
        serde_json::json!({})
    );
}

/// A row whose input never moved has a `null` ratio (undefined), and one
/// without a count of an input (it never ran in that cgroup) has none.
#[test]
fn per_cgroup_values_are_null_when_undefined_and_absent_without_counts() {
    let table = software_config(
        "  - name: switches_per_cpu_second\n    expr: perf_context_switches_total / perf_cpu_clock_seconds_total\n",
    );
    let fams = |k: f64| {
        vec![
            counter(
                "perf_cgroup_context_switches_total",
                vec![
                    sample(&[("cgroup", "idle")], 0.0, 1),
                    sample(&[("cgroup", "busy")], 10.0 * k, 1),
                ],
            ),
            counter(
                "perf_cgroup_cpu_clock_seconds_total",
                vec![sample(&[("cgroup", "idle")], 0.0, 1)],
            ),
        ]
    };
    let f = frame(&fams(0.0), &fams(1.0), 1.0, &Reasons::new(), &table);
    let top = f.per_cgroup.unwrap();
    let row = |c: &str| top.top.iter().find(|r| r.cgroup == c).unwrap();
    assert_eq!(row("idle").derived["switches_per_cpu_second"], None);
    assert_eq!(row("busy").derived.get("switches_per_cpu_second"), None);
    assert_eq!(
        row("busy").derived["context_switches_per_second"],
        Some(10.0)
    );
}

/// A stream's frames carry `unavailable` first, then only when it changed
/// or a viewer joined (`full`); `encode` (snapshots, `stat`) always.
#[test]
fn a_stream_leaves_out_unchanged_reasons() {
    let mut framer = Framer::default();
    let mut f = Frame {
        interval_seconds: 1.0,
        ..Frame::default()
    };
    f.unavailable
        .insert("ipc".into(), "needs a hardware PMU".into());
    let has = |json: &str| json.contains(r#""unavailable":"#);
    assert!(has(&framer.encode_stream(&f, false)), "the first frame");
    assert!(!has(&framer.encode_stream(&f, false)), "unchanged");
    assert!(has(&framer.encode_stream(&f, true)), "a viewer joined");
    assert!(has(&framer.encode(&f)), "a snapshot");
    assert!(!has(&framer.encode_stream(&f, false)), "unchanged again");
    f.unavailable.clear();
    let json = framer.encode_stream(&f, false);
    assert!(
        json.contains(r#""unavailable":{}"#),
        "changed to empty: {json}"
    );
    assert!(!has(&framer.encode_stream(&f, false)), "{json}");
}
