//! The real binary's flags and error output, exactly: typed values (log
//! level and format, durations) refused with what is valid, serve-only
//! flags only where they apply, each cause said once, and a closed pipe
//! ending `list` quietly.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

fn run(args: &[&str]) -> Output {
    Command::new(common::EXPORTER)
        .args(args)
        .output()
        .expect("binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Issue 10: `--log.level verbose` turned logging off; `--log.format text`
/// was accepted silently.
#[test]
fn log_level_and_format_are_enumerations() {
    let o = run(&["list", "--log.level", "verbose"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with(
            "error: invalid value 'verbose' for '--log.level <LOG_LEVEL>'\n  [possible values: debug, info, warn, error]\n"
        ),
        "{}",
        stderr(&o)
    );
    let o = run(&["--log.format", "text"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("[possible values: logfmt, json]"),
        "{}",
        stderr(&o)
    );
}

/// Issue 10: a bare number was milliseconds; issue 11: a huge
/// `--web.read-header-timeout` made every connection panic.
#[test]
fn durations_need_a_unit_and_are_bounded() {
    let o = run(&["--web.request-timeout", "5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: invalid value '5' for '--web.request-timeout <DURATION>': `5` has no unit: write `5s` or `5ms` (units: ms, s, m, h, d, w)\n"),
        "{}",
        stderr(&o)
    );
    let o = run(&["serve", "--web.read-header-timeout", "3000000000000000h"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("`3000000000000000h` is longer than the longest allowed duration (1 year)"),
        "{}",
        stderr(&o)
    );
    let o = run(&["--otlp.interval", "60"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// Issue 10: `list --help` and `check --help` showed every serve-only
/// flag, and `list` accepted invalid values for them.
#[test]
fn serve_only_flags_are_not_offered_to_list_and_check() {
    let help = |cmd: &str| String::from_utf8_lossy(&run(&[cmd, "--help"]).stdout).into_owned();
    let (list, check, serve) = (help("list"), help("check"), help("serve"));
    for h in [&list, &check] {
        for serve_only in [
            "--web.listen-address",
            "--web.request-timeout",
            "--otlp.endpoint",
            "--simulate.read-delay",
        ] {
            assert!(!h.contains(serve_only), "{serve_only} in:\n{h}");
        }
        assert!(h.contains("--config.file"), "{h}");
    }
    assert!(check.contains("--web.config.file"), "{check}");
    assert!(serve.contains("--web.request-timeout"), "{serve}");
    let o = run(&["list", "--web.request-timeout", "5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: unexpected argument '--web.request-timeout' found"),
        "{}",
        stderr(&o)
    );
}

/// Issue 11: `--web.telemetry-path metrics` made the metrics unreachable;
/// `/-/healthy` silently replaced a built-in page.
#[test]
fn telemetry_path_is_validated() {
    for (bad, why) in [
        ("metrics", "must start with `/`"),
        ("/-/healthy", "is a built-in page"),
        ("/", "is a built-in page"),
    ] {
        let o = run(&["--web.telemetry-path", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(stderr(&o).contains(why), "{bad}: {}", stderr(&o));
    }
}

/// Issue 10: `No such file or directory (os error 2): No such file or
/// directory (os error 2)`, and `x.yaml:3:5: error: line 3 column 5: ...`.
#[test]
fn each_cause_is_said_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.yaml");
    let m = missing.display().to_string();
    let o = run(&["check", "--config.file", &m]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "perf-exporter: cannot read config file {m}: No such file or directory (os error 2)\n"
        )
    );
    let bad = dir.path().join("x.yaml");
    std::fs::write(&bad, "sets:\n  - name: a\n    bogus: 1\n").expect("write");
    let b = bad.display().to_string();
    let o = run(&["check", "--config.file", &b]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!("perf-exporter: {b}:3:5: unknown field `bogus`, expected one of name, per, per_cpu, events\n")
    );
    let w = dir.path().join("missing-web.yml").display().to_string();
    let o = run(&["check", "--web.config.file", &w]);
    assert_eq!(
        stderr(&o),
        format!("perf-exporter: --web.config.file={w}: cannot read {w}: No such file or directory (os error 2)\n")
    );
}

/// Issue 11: `list --tracepoints | head -1` panicked with exit 101.
#[test]
fn a_closed_pipe_ends_list_quietly() {
    // The live tracefs listed from a fixture tree (no probing: fast), far
    // more than a pipe's 64 KiB buffer.
    let f = common::fixture("vm-no-pmu").display().to_string();
    let mut c = Command::new(common::EXPORTER)
        .args([
            "list",
            "--tracepoints",
            "--path.sysfs",
            &f,
            "--path.tracefs",
            "/sys/kernel/tracing",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(c.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("first line");
    assert!(!first.is_empty());
    drop(out);
    let o = c.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

/// Issue 24 items 13 and 14: the start-up log is logfmt (time, level and
/// msg are keys; values with spaces quoted), and why metrics are not
/// counted is said once per cause, an expected absence at INFO: on a host
/// without a PMU, one line for every metric that needs one.
#[test]
fn start_up_log_is_logfmt_with_one_line_per_cause() {
    let cfg = common::config_path("cli_flags/one_line_per_cause");
    let f = common::fixture("vm-no-pmu");
    let cfg = cfg.to_str().expect("utf-8");
    let mut p = common::proc::Proc::exporter(&[
        "--simulate",
        "--path.sysfs",
        f.to_str().expect("utf-8"),
        "--config.file",
        cfg,
        "--log.format",
        "logfmt",
    ]);
    p.wait_log("msg=\"counters open\"", std::time::Duration::from_secs(30));
    let out = p.output();
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("msg=\"not "))
        .map(|l| {
            let (time, rest) = l.split_once(' ').expect("a key after the time");
            assert!(time.starts_with("time=20") && time.ends_with('Z'), "{time}");
            rest
        })
        .collect();
    let absent = "what_to_do=\"nothing on this host: it is expected on other hardware or kernels (`perf-exporter list` shows what this host offers; add an alternative encoding to count it here)\"";
    assert_eq!(
        lines,
        [
            "level=info target=perf_exporter::app::opening msg=\"not on this platform\" count=3 code=needs_hardware_pmu reason=\"3 metrics need a hardware PMU, which this host does not have (no core PMU in sysfs: no `cpu`, `cpu_core`/`cpu_atom` or `armv8_pmuv3_*`; a VM without a virtual PMU?)\" what_to_do=\"run on bare metal or give the VM a virtual PMU (KVM/QEMU: `-cpu host,pmu=on`; VMware: enable virtualized CPU performance counters; cloud: a bare-metal or full-host instance type); software events, tracepoints and `msr` work without one\" metrics=\"perf_cpu_cycles_total, perf_instructions_total, perf_branch_misses_total\"".to_string(),
            format!("level=info target=perf_exporter::app::opening msg=\"not on this platform\" count=2 code=not_on_platform reason=\"no PMU matches `cpu` on this host; PMUs here: breakpoint, msr, software, tracepoint, uprobe\" {absent} metrics=\"perf_l2_misses_total, perf_l2_references_total\""),
            format!("level=info target=perf_exporter::app::opening msg=\"not on this platform\" count=1 code=not_on_platform reason=\"msr has no event `aperf` (msr offers: tsc)\" {absent} metrics=perf_msr_aperf_total"),
        ],
        "{out}"
    );
    assert!(
        !out.contains("level=warn target=perf_exporter::app::opening msg=\"not"),
        "{out}"
    );
}

/// Issue 24 item 15: a listen address that can never be bound is refused
/// when the command line is parsed (exit 2, before anything starts).
#[test]
fn an_impossible_listen_address_is_refused_when_parsed() {
    let o = run(&["--web.listen-address", "127.0.0.1:99999"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "error: invalid value '127.0.0.1:99999' for '--web.listen-address <[HOST]:PORT>': the port `99999` is not a number from 0 to 65535\n\nFor more information, try '--help'.\n"
    );
}

/// Issue 24 item 15: `--version` (and `perf_exporter_build_info`'s
/// `revision` label, tests/sim/metrics_diff.rs) name the source revision: the
/// checkout's `git rev-parse --short HEAD`, `unknown` outside git.
#[test]
fn version_names_the_revision() {
    let git = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(common::repo_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let revision = git.unwrap_or_else(|| "unknown".into());
    assert_eq!(perf_exporter::REVISION, revision);
    let o = run(&["--version"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!(
            "perf-exporter {} (revision {revision})\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// Issue 24 item 15: `--web.route-prefix` for a reverse proxy that does
/// not strip the prefix: every route is under it, the page's links are
/// relative to it, the bare prefix redirects to the page.
#[test]
fn every_route_is_under_the_route_prefix() {
    let f = common::fixture("vm-no-pmu");
    let mut p = common::proc::Proc::exporter(&[
        "--simulate",
        "--path.sysfs",
        f.to_str().expect("utf-8"),
        "--web.route-prefix",
        "/perf/",
    ]);
    p.wait_log("counters open", std::time::Duration::from_secs(30));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let get = |path: &str| common::try_request("GET", &p.addr, path, &[], "");
    while !get("/perf/-/ready").is_ok_and(|r| r.status == 200) {
        assert!(
            std::time::Instant::now() < deadline,
            "not ready under /perf/ within 10s:\n{}",
            p.output()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(p.output().contains("path=/perf/metrics"), "{}", p.output());
    let ok = |path: &str| {
        let r = get(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r
    };
    let page = ok("/perf/").body;
    for link in [
        "href=\"metrics\"",
        "href=\"api/v1/snapshot\"",
        "href=\"-/healthy\"",
    ] {
        assert!(page.contains(link), "{link} not on the page");
    }
    assert!(ok("/perf/metrics")
        .body
        .contains("perf_exporter_build_info{"));
    assert!(ok("/perf/api/v1/snapshot").body.starts_with('{'));
    assert_eq!(ok("/perf/-/healthy").body, "Healthy\n");
    let bare = get("/perf").expect("/perf");
    assert_eq!(
        (bare.status, bare.header("location")),
        (308, Some("/perf/"))
    );
    for outside in ["/metrics", "/", "/-/healthy", "/perfx/metrics"] {
        assert_eq!(get(outside).expect(outside).status, 404, "{outside}");
    }
}
