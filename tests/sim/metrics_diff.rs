//! Golden scrapes: the binary on a simulated PMU (`--simulate --path.sysfs
//! <fixture>`) is scraped twice and the second scrape, with time-dependent
//! values masked, must equal `tests/golden/<fixture>.metrics` exactly.
//! And with exact values: the engine on the simulated PMU with a manual
//! clock, 10 s after its first collection, encoded as text, must equal
//! `tests/golden/<fixture>.exact.metrics` to the last digit.
//!
//! Regenerate with `UPDATE_GOLDEN=1 cargo test --test sim metrics_diff::` and
//! review the diff.

use crate::common;

use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::export::prometheus::encode_text;
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use std::path::PathBuf;
use std::sync::Arc;

/// Families whose values are exact, not time-dependent (a simulated PMU
/// never fails a read, so `perf_read_errors_total` is exactly 0).
const EXACT: &[&str] = &[
    "perf_counter_running_ratio",
    "perf_counter_state",
    "perf_counter_states",
    "perf_event_available",
    "perf_exporter_build_info",
    "perf_read_errors_total",
];

/// Replaces every sample value with `<v>` (except [`EXACT`] families) and
/// the build's version label with `<version>`.
fn mask(scrape: &str) -> String {
    let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
    let revision = format!("revision=\"{}\"", perf_exporter::REVISION);
    let mut out = String::with_capacity(scrape.len());
    for line in scrape.lines() {
        if line.starts_with('#') || line.is_empty() {
            out.push_str(line);
        } else {
            let name = line
                .split(['{', ' '])
                .next()
                .expect("split yields at least one item");
            // No timestamps are exported: the value is the last field
            // (label values may contain spaces).
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("sample line without a value: {line:?}"));
            if name == "perf_exporter_build_info" {
                assert!(
                    series.contains(&version) && series.contains(&revision),
                    "{line}"
                );
            }
            out.push_str(
                &series
                    .replace(&version, "version=\"<version>\"")
                    .replace(&revision, "revision=\"<revision>\""),
            );
            out.push(' ');
            if EXACT.contains(&name) {
                out.push_str(value);
            } else {
                assert!(
                    value.parse::<f64>().is_ok_and(|v| v.is_finite()),
                    "not a finite number in {line:?}"
                );
                out.push_str("<v>");
            }
        }
        out.push('\n');
    }
    out
}

/// First differing lines plus every line only on one side.
fn describe_diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let mut s = String::new();
    if let Some(i) = (0..e.len().max(a.len())).find(|&i| e.get(i) != a.get(i)) {
        s.push_str(&format!(
            "first difference at line {}:\n  expected: {:?}\n  actual:   {:?}\n",
            i + 1,
            e.get(i),
            a.get(i)
        ));
    }
    for l in e.iter().filter(|l| !a.contains(l)) {
        s.push_str(&format!("- {l}\n"));
    }
    for l in a.iter().filter(|l| !e.contains(l)) {
        s.push_str(&format!("+ {l}\n"));
    }
    s
}

fn golden(fixture: &str) {
    let exp = common::simulated_exporter(fixture);
    let first = exp.get("/metrics");
    assert_eq!(first.status, 200, "{}", first.body);
    let second = exp.get("/metrics");
    assert_eq!(second.status, 200, "{}", second.body);
    let actual = mask(&second.body);
    compare(
        &format!("{fixture}.metrics"),
        &actual,
        &format!("scrape of --simulate --path.sysfs tests/fixtures/sysfs/{fixture}"),
    );
}

/// Compares `actual` with `tests/golden/<name>`, or writes it there with
/// `UPDATE_GOLDEN=1`.
fn compare(name: &str, actual: &str, what: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).expect("mkdir tests/golden");
        std::fs::write(&path, actual).expect("write golden file");
        eprintln!("wrote {}", path.display());
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; generate it with UPDATE_GOLDEN=1 cargo test --test sim metrics_diff::",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{what} differs from {}\n{}\
         (if the change is intended: UPDATE_GOLDEN=1 cargo test --test sim metrics_diff::, and review the diff)\n\
         full output:\n{actual}",
        path.display(),
        describe_diff(&expected, actual)
    );
}

/// The embedded default config on the simulated PMU of `fixture`, on a
/// manual clock: collected at 0 and again 10 s later, every value exact.
fn exact(fixture: &str) {
    let mut table = PmuTable::discover(&common::fixture(fixture)).expect("fixture");
    table.read_identities(&common::fixture_procfs(fixture));
    let kernel = Arc::new(SimKernel::with_manual_clock(table.clone()));
    let cfg = Config::default_config();
    let mut engine = Engine::for_config(kernel.clone(), table, &cfg, Fds::Unbounded);
    engine.collect();
    kernel.advance(10_000_000_000);
    let snap = engine.collect();
    let mut text = String::new();
    encode_text(&snap.families, &mut text);
    compare(
        &format!("{fixture}.exact.metrics"),
        &text,
        &format!("the default config on {fixture}'s simulated PMU after 10 s of a manual clock"),
    );
}

#[test]
fn exact_intel_skx() {
    exact("intel-skx");
}

#[test]
fn exact_amd_zen4() {
    exact("amd-zen4");
}

#[test]
fn exact_intel_hybrid() {
    exact("intel-hybrid");
}

#[test]
fn exact_arm_neoverse_n1() {
    exact("arm-neoverse-n1");
}

#[test]
fn golden_intel_skx() {
    golden("intel-skx");
}

#[test]
fn golden_amd_zen4() {
    golden("amd-zen4");
}

#[test]
fn mask_keeps_exact_values_and_labels_with_spaces() {
    let v = env!("CARGO_PKG_VERSION");
    let s = format!(
        "# HELP x X.\n# TYPE x counter\nx{{cpu=\"0\"}} 12.5\n\
         perf_event_available{{metric=\"m\",event=\"a + b\",reason=\"config\"}} 0\n\
         perf_exporter_build_info{{version=\"{v}\",revision=\"{r}\",simulated=\"true\"}} 1\nperf_scrape_duration_seconds 0.001\n",
        r = perf_exporter::REVISION
    );
    assert_eq!(
        mask(&s),
        "# HELP x X.\n# TYPE x counter\nx{cpu=\"0\"} <v>\n\
         perf_event_available{metric=\"m\",event=\"a + b\",reason=\"config\"} 0\n\
         perf_exporter_build_info{version=\"<version>\",revision=\"<revision>\",simulated=\"true\"} 1\nperf_scrape_duration_seconds <v>\n"
    );
}

/// `check --json` of the embedded default config on each fixture's
/// simulated PMU, with the fixture's procfs (CPU identities), must equal
/// `tests/golden/<fixture>.check.json`.
#[test]
fn check_json_per_fixture() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs");
    let mut fixtures: Vec<String> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    fixtures.sort();
    assert!(fixtures.len() >= 6, "{fixtures:?}");
    for fixture in fixtures {
        let f = common::fixture(&fixture).display().to_string();
        let o = std::process::Command::new(common::EXPORTER)
            .args(["check", "--json", "--simulate", "--path.sysfs", &f])
            .args(common::fixture_procfs_args(&fixture))
            .output()
            .expect("run check");
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{fixture}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        compare(
            &format!("{fixture}.check.json"),
            &stdout,
            &format!("check --json --simulate --path.sysfs tests/fixtures/sysfs/{fixture}"),
        );
    }
}

/// A Sapphire-Rapids-like tree made from intel-skx: `caps/pmu_name`
/// `sapphire_rapids` (what that kernel shows) and a cpuinfo of family 6
/// model 143, in a temporary directory: (the guard, sysfs, procfs).
fn sapphire_rapids_tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let sysfs = dir.path().join("sysfs");
    let o = std::process::Command::new("cp")
        .arg("-a")
        .arg(common::fixture("intel-skx"))
        .arg(&sysfs)
        .output()
        .expect("run cp -a");
    assert!(
        o.status.success(),
        "cp -a of intel-skx failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let caps = sysfs.join("bus/event_source/devices/cpu/caps/pmu_name");
    let before = std::fs::read_to_string(&caps).expect("intel-skx has caps/pmu_name");
    assert_eq!(before.trim(), "skylake");
    std::fs::write(&caps, "sapphire_rapids\n").expect("write pmu_name");
    let procfs = dir.path().join("procfs");
    std::fs::create_dir(&procfs).expect("mkdir procfs");
    let skx = std::fs::read_to_string(common::fixture_procfs("intel-skx").join("cpuinfo"))
        .expect("intel-skx cpuinfo");
    let spr = skx.replace("model\t\t: 85\n", "model\t\t: 143\n");
    assert_ne!(spr, skx, "the skx cpuinfo names model 85");
    std::fs::write(procfs.join("cpuinfo"), spr).expect("write cpuinfo");
    (dir, sysfs, procfs)
}

/// `config` on the simulated PMU of `sysfs`/`procfs`: the resolution and
/// the text of a collection 10 s after the first.
fn run(
    sysfs: &std::path::Path,
    procfs: &std::path::Path,
    config: &Config,
) -> (perf_exporter::resolve::chain::Resolution, String) {
    let mut table = PmuTable::discover(sysfs).expect("tree");
    table.read_identities(procfs);
    let kernel = Arc::new(SimKernel::with_manual_clock(table.clone()));
    let mut engine = Engine::for_config(kernel.clone(), table, config, Fds::Unbounded);
    let res = engine.resolution().clone();
    engine.collect();
    kernel.advance(10_000_000_000);
    let snap = engine.collect();
    let mut text = String::new();
    encode_text(&snap.families, &mut text);
    (res, text)
}

/// The sum of a family's samples in `text`.
fn total(text: &str, family: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) || l.starts_with(&format!("{family} ")))
        .map(|l| {
            let (_, v) = l.rsplit_once(' ').expect("a value");
            v.parse::<f64>().expect("a number")
        })
        .sum()
}

/// The default config on a simulated Sapphire Rapids: the core metrics
/// take their generic encodings (not the `cpu/...` fallbacks), and the
/// L1d, LLC and L1i-miss metrics count, as on a real one. Before, the
/// simulator knew no `sapphire_rapids` table: the core metrics fell back
/// and the cache metrics were "not on this platform".
#[test]
fn default_config_on_a_sapphire_rapids_tree() {
    use perf_exporter::resolve::chain::Status;
    let (_dir, sysfs, procfs) = sapphire_rapids_tree();
    let (res, text) = run(&sysfs, &procfs, &Config::default_config());
    let metric = |name: &str| {
        res.metrics
            .iter()
            .find(|m| m.metric == name)
            .unwrap_or_else(|| panic!("{name} not in the default config"))
    };
    for (name, event) in [
        ("perf_cpu_cycles_total", "cycles"),
        ("perf_instructions_total", "instructions"),
        ("perf_branch_instructions_total", "branch-instructions"),
        ("perf_branch_misses_total", "branch-misses"),
        ("perf_cache_references_total", "cache-references"),
        ("perf_cache_misses_total", "cache-misses"),
        ("perf_l1d_read_misses_total", "L1-dcache-load-misses"),
        ("perf_llc_read_misses_total", "LLC-load-misses"),
        ("perf_l1d_reads_total", "L1-dcache-loads"),
        ("perf_llc_reads_total", "LLC-loads"),
        ("perf_l1i_read_misses_total", "L1-icache-load-misses"),
    ] {
        let m = metric(name);
        assert_eq!(
            (m.status, m.event.as_deref()),
            (Status::Resolved, Some(event)),
            "{name}: {:?}",
            m.problems().collect::<Vec<_>>()
        );
        assert!(total(&text, name) > 0.0, "{name} counted nothing:\n{text}");
    }
    // Golden Cove's table has no L1-icache-loads (perf: <not supported>).
    assert_eq!(metric("perf_l1i_reads_total").status, Status::Unavailable);
}

/// A config naming only `cycles` counts on a simulated Sapphire Rapids
/// (before, nothing: the simulator refused every generic event there).
#[test]
fn cycles_alone_counts_on_a_sapphire_rapids_tree() {
    let (_dir, sysfs, procfs) = sapphire_rapids_tree();
    let yaml = crate::config!("metrics_diff/cycles");
    let cfg = Config::parse(yaml, "t.yaml").expect("config");
    let (res, text) = run(&sysfs, &procfs, &cfg);
    assert!(
        !res.counts_nothing(),
        "{:?}",
        res.metrics[0].problems().collect::<Vec<_>>()
    );
    assert!(total(&text, "perf_cpu_cycles_total") > 0.0, "{text}");
}

/// Issue 24 item 15: the exporter's own process metrics, named as
/// node_exporter's, read from `--path.procfs`'s `self/` (a fixture procfs
/// without `self/`, as in the goldens above, has none: never zeros).
#[test]
fn process_metrics_as_node_exporter_names_them() {
    let exp = common::exporter(&[
        "--simulate",
        "--path.sysfs",
        common::fixture("vm-no-pmu").to_str().expect("utf-8"),
        "--path.procfs",
        "/proc",
    ]);
    let body = exp.get("/metrics").body;
    let types: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("# TYPE process_"))
        .collect();
    assert_eq!(
        types,
        [
            "# TYPE process_cpu_seconds_total counter",
            "# TYPE process_open_fds gauge",
            "# TYPE process_max_fds gauge",
            "# TYPE process_virtual_memory_bytes gauge",
            "# TYPE process_resident_memory_bytes gauge",
            "# TYPE process_start_time_seconds gauge",
        ],
        "{body}"
    );
    let value = |name: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{body}"))
    };
    // The exporter's own process: its pid's start time and descriptors.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", exp.pid())).expect("stat");
    let ticks: f64 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .and_then(|v| v.parse().ok())
        .expect("starttime");
    let btime: f64 = std::fs::read_to_string("/proc/stat")
        .expect("/proc/stat")
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .expect("btime");
    assert_eq!(value("process_start_time_seconds"), btime + ticks / 100.0);
    let fds = std::fs::read_dir(format!("/proc/{}/fd", exp.pid()))
        .expect("fd dir")
        .count() as f64;
    let open = value("process_open_fds");
    assert!(
        (open - fds).abs() <= 4.0,
        "{open} open fds, /proc says {fds}"
    );
    assert!(value("process_resident_memory_bytes") > 1e6);
    assert!(value("process_max_fds") >= open);
}

/// `--web.disable-exporter-metrics` leaves out the families about the
/// exporter itself, as node_exporter's flag of that name leaves out its
/// `process_*` and `promhttp_*`: the process's and the HTTP server's
/// (`perf_http_rejected_requests_total`, `perf_live_streams_closed_total`),
/// and nothing else: what it counts and how (scrape duration, reloads,
/// counter states) stays.
#[test]
fn disable_exporter_metrics_leaves_out_the_process_and_http_server_families_only() {
    let sysfs = common::fixture("vm-no-pmu");
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "--simulate",
            "--path.sysfs",
            sysfs.to_str().expect("utf-8"),
            "--path.procfs",
            "/proc",
        ];
        a.extend_from_slice(extra);
        a
    };
    let types = |body: &str| -> Vec<String> {
        body.lines()
            .filter(|l| l.starts_with("# TYPE "))
            .map(str::to_string)
            .collect()
    };
    let with = types(&common::exporter(&args(&[])).get("/metrics").body);
    let without = types(
        &common::exporter(&args(&["--web.disable-exporter-metrics"]))
            .get("/metrics")
            .body,
    );
    let kept: Vec<String> = with
        .iter()
        .filter(|t| {
            !t.starts_with("# TYPE process_")
                && !t.starts_with("# TYPE perf_http_rejected_requests_total ")
                && !t.starts_with("# TYPE perf_live_streams_closed_total ")
        })
        .cloned()
        .collect();
    assert_eq!(with.len(), kept.len() + 8, "{with:?}");
    assert!(
        kept.iter()
            .any(|t| t.starts_with("# TYPE perf_scrape_duration_seconds "))
            && kept
                .iter()
                .any(|t| t.starts_with("# TYPE perf_counter_states ")),
        "{kept:?}"
    );
    assert_eq!(without, kept);
}
