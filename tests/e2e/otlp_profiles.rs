//! OTLP profiles end to end (`--otlp.profiles`, issue 31): the real
//! binary on the simulated PMU, whose samplers give each sample a call
//! chain (a kernel frame, then two user frames), pushes one profile per
//! interval over gRPC, gzipped, with a custom header, to the test
//! receiver of `tests/common/otlp.rs`, which decodes it with the official
//! definitions (`opentelemetry-proto`'s `v1development` profiles
//! service). The kernel frame is named by a `kallsyms` in the procfs the
//! test gives.

use crate::common;

use common::otlp::{simulated, str_attr, wait_for, Receiver};
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::profiles::v1development::ProfilesDictionary;
use std::collections::BTreeMap;
use std::time::Duration;

/// The simulated kernel frame (`SIM_KERNEL_FRAME`) falls in the first.
const KALLSYMS: &str = "ffffffff81000000 T do_syscall_64\nffffffff81000800 T entry_SYSCALL_64\n";

/// The simulated period of `cycles` at 99 Hz (2e9 cycles/s ÷ 99).
const PERIOD: i64 = 2_000_000_000 / 99;

/// Whether index `i` is in a table of `n` entries.
fn within(i: i32, n: usize) -> bool {
    usize::try_from(i).is_ok_and(|i| i < n)
}

/// Every index of the dictionary's own entries is in range, and each
/// table starts with its zero value.
fn dictionary_is_consistent(d: &ProfilesDictionary) {
    let (s, a) = (d.string_table.len(), d.attribute_table.len());
    assert_eq!(d.string_table[0], "");
    assert_eq!(
        (
            d.mapping_table[0].filename_strindex,
            d.location_table[0].address,
            d.function_table[0].name_strindex,
            d.stack_table[0].location_indices.len(),
            d.attribute_table[0].key_strindex,
            d.link_table[0].trace_id.len(),
        ),
        (0, 0, 0, 0, 0, 0),
        "each table starts with its zero value"
    );
    assert!(d.attribute_table.iter().all(|x| within(x.key_strindex, s)));
    for m in &d.mapping_table {
        assert!(within(m.filename_strindex, s));
        assert!(m.attribute_indices.iter().all(|&i| within(i, a)));
    }
    for f in &d.function_table {
        assert!(within(f.name_strindex, s) && within(f.system_name_strindex, s));
    }
    for l in &d.location_table {
        assert!(within(l.mapping_index, d.mapping_table.len()));
        let fs = d.function_table.len();
        assert!(l.lines.iter().all(|x| within(x.function_index, fs)));
    }
    let ls = d.location_table.len();
    for st in &d.stack_table {
        assert!(st.location_indices.iter().all(|&i| within(i, ls)));
    }
}

/// The sample values by process name, checking each sample's indexes.
fn values_by_process(r: &ExportProfilesServiceRequest) -> BTreeMap<String, i64> {
    let d = r.dictionary.as_ref().expect("a dictionary");
    dictionary_is_consistent(d);
    let s = |i: i32| d.string_table[i as usize].as_str();
    let p = &r.resource_profiles[0].scope_profiles[0].profiles[0];
    let t = p.sample_type.expect("a sample type");
    assert_eq!(
        (s(t.type_strindex), s(t.unit_strindex)),
        ("cycles", "count")
    );
    assert!(p.duration_nano > 0 && p.time_unix_nano > 0);
    let mut by = BTreeMap::new();
    for x in &p.samples {
        assert!(within(x.stack_index, d.stack_table.len()));
        let mut name = None;
        for &i in &x.attribute_indices {
            assert!(within(i, d.attribute_table.len()));
            let kv = &d.attribute_table[i as usize];
            match (
                s(kv.key_strindex),
                kv.value.as_ref().and_then(|v| v.value.as_ref()),
            ) {
                ("process.executable.name", Some(Value::StringValue(n))) => name = Some(n.clone()),
                ("process.pid", Some(Value::IntValue(_))) => {}
                (k, v) => panic!("unexpected sample attribute {k}={v:?}"),
            }
        }
        // The innermost frame: the kernel's, named from kallsyms.
        let stack = &d.stack_table[x.stack_index as usize];
        assert_eq!(stack.location_indices.len(), 3, "kernel + two user frames");
        let leaf = &d.location_table[stack.location_indices[0] as usize];
        let f = &d.function_table[leaf.lines[0].function_index as usize];
        assert_eq!(s(f.name_strindex), "do_syscall_64");
        assert_eq!(
            s(d.mapping_table[leaf.mapping_index as usize].filename_strindex),
            "[kernel.kallsyms]"
        );
        assert_eq!(x.values.len(), 1);
        assert_eq!(x.values[0] % PERIOD, 0, "a whole number of periods");
        *by.entry(name.expect("a process attribute")).or_default() += x.values[0];
    }
    by
}

#[test]
fn otlp_profiles_decode_with_the_official_definitions() {
    let rx = Receiver::start(None);
    let procfs = tempfile::tempdir().unwrap();
    let fixture = common::fixture_procfs("intel-skx");
    std::fs::copy(fixture.join("cpuinfo"), procfs.path().join("cpuinfo")).unwrap();
    std::fs::write(procfs.path().join("kallsyms"), KALLSYMS).unwrap();
    let mut args = common::fixture_procfs_args("intel-skx");
    args[1] = procfs.path().to_str().unwrap().to_string();
    args.extend(["--otlp.interval", "1s", "--otlp.profiles"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ex = simulated(
        &args,
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", rx.addr)),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip".into()),
            ("K8S_NODE_NAME", "node-prof".into()),
        ],
    );
    wait_for("two profiles", Duration::from_secs(30), || {
        rx.profiles().len() >= 2
    });
    let out = ex.proc.output();
    assert!(
        out.contains("the profiles signal is still in development"),
        "{out}"
    );
    for r in rx.profiles() {
        let res = &r.resource_profiles[0].resource.as_ref().unwrap().attributes;
        assert_eq!(str_attr(res, "k8s.node.name").as_deref(), Some("node-prof"));
        let by = values_by_process(&r);
        let total: i64 = by.values().sum();
        assert!(total >= 10 * PERIOD, "{by:?}");
        // The simulated tasks' weights: postgres 8/20, nginx 5/20.
        let share = |n: &str| by.get(n).copied().unwrap_or(0) as f64 / total as f64;
        assert!((share("postgres") - 0.40).abs() < 0.05, "{by:?}");
        assert!((share("nginx") - 0.25).abs() < 0.05, "{by:?}");
    }
}
