//! Reload and shutdown on the real binary, counting for real (root):
//! SIGHUP with a changed config (the new metric appears, an unchanged
//! counter keeps increasing, no reset), SIGHUP with a broken config (the
//! old one keeps serving, `perf_config_last_reload_successful` goes to 0),
//! `POST /-/reload` behind `--web.enable-lifecycle`, the web config
//! re-read on reload, and SIGTERM ending the process within a second.

use crate::common;

use common::{by_cpu, scalar, Proc};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const CLOCK: &str = "perf_cpu_clock_seconds_total";
const SWITCHES: &str = "perf_context_switches_total";

const BEFORE: &str = crate::config!("reload/before");

const AFTER: &str = crate::software_set!();

/// How long a reload may take to show in a scrape (it runs in the
/// background).
const RELOAD_WITHIN: Duration = Duration::from_secs(10);

fn live(config: &Path, extra: &[&str]) -> Proc {
    common::require_perf_privilege();
    let c = config.display().to_string();
    let mut args = vec!["--config.file", c.as_str()];
    args.extend_from_slice(extra);
    let mut p = Proc::exporter(&args);
    p.wait_ready();
    p
}

/// Every CPU's cpu-clock is above zero.
fn counting(s: &BTreeMap<String, f64>) -> bool {
    let c = by_cpu(s, CLOCK);
    !c.is_empty() && c.values().all(|v| *v > 0.0)
}

fn assert_not_below(before: &BTreeMap<u32, f64>, after: &BTreeMap<u32, f64>, what: &str) {
    for (cpu, v0) in before {
        let v1 = after
            .get(cpu)
            .unwrap_or_else(|| panic!("{what}: cpu {cpu} missing after: {after:?}"));
        assert!(v1 >= v0, "{what}: cpu {cpu} went backwards {v0} -> {v1}");
    }
}

#[test]
fn sighup_adds_the_new_metric_and_unchanged_counters_continue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("perf.yaml");
    std::fs::write(&cfg, BEFORE).expect("write");
    let mut p = live(&cfg, &[]);
    let s0 = p.scrape_until(RELOAD_WITHIN, "counting", counting);
    let c0 = by_cpu(&s0, CLOCK);
    assert!(!c0.is_empty(), "{s0:?}");
    assert!(by_cpu(&s0, SWITCHES).is_empty());
    assert_eq!(scalar(&s0, "perf_config_last_reload_successful"), Some(1.0));
    let t0 = scalar(&s0, "perf_config_last_reload_success_timestamp_seconds").expect("ts");

    std::fs::write(&cfg, AFTER).expect("write");
    p.signal("HUP");
    let s1 = p.scrape_until(RELOAD_WITHIN, "the new metric after SIGHUP", |s| {
        !by_cpu(s, SWITCHES).is_empty()
    });
    // No reset: at least what it was, then still increasing.
    assert_not_below(&c0, &by_cpu(&s1, CLOCK), "cpu-clock across the reload");
    let c1 = by_cpu(&s1, CLOCK);
    let s2 = p.scrape_until(RELOAD_WITHIN, "cpu-clock advancing after the reload", |s| {
        let c = by_cpu(s, CLOCK);
        c1.iter()
            .all(|(cpu, v1)| c.get(cpu).is_some_and(|v| v > v1))
    });
    let c2 = by_cpu(&s2, CLOCK);
    for (cpu, v1) in &c1 {
        assert!(
            c2[cpu] > *v1,
            "cpu-clock on cpu {cpu} stopped after the reload: {v1} -> {}",
            c2[cpu]
        );
        // A reset would put it near the 0.3 s since the reload, far below
        // its total since start.
        assert!(
            c2[cpu] >= c0[cpu],
            "cpu {cpu} reset: {} -> {}",
            c0[cpu],
            c2[cpu]
        );
    }
    assert_eq!(scalar(&s2, "perf_config_last_reload_successful"), Some(1.0));
    assert!(scalar(&s2, "perf_config_last_reload_success_timestamp_seconds").expect("ts") >= t0);
    // The summary is logged after the new collection serves: poll for it.
    p.wait_log("1 continue their counts, 1 start from zero", RELOAD_WITHIN);
}

/// Issue 11 (grace period): a reload that removes a metric by mistake,
/// then one that restores it: the metric continues from its total
/// (before, it restarted from zero, as after `sets: []` and a fix).
#[test]
fn a_metric_removed_then_restored_continues_its_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("perf.yaml");
    std::fs::write(&cfg, BEFORE).expect("write");
    let mut p = live(&cfg, &[]);
    // cpu-clock counts nanoseconds: 1 s of counting on every CPU is far
    // more than a restart would reach in the time of two reloads.
    let s0 = p.scrape_until(RELOAD_WITHIN, "a second of cpu-clock", |s| {
        let c = by_cpu(s, CLOCK);
        !c.is_empty() && c.values().all(|v| *v > 1.0)
    });
    let c0 = by_cpu(&s0, CLOCK);
    let only_switches = AFTER.replace(
        "      - metric: perf_cpu_clock_seconds_total\n        event: cpu-clock\n",
        "",
    );
    std::fs::write(&cfg, &only_switches).expect("write");
    p.signal("HUP");
    p.scrape_until(RELOAD_WITHIN, "cpu-clock removed", |s| {
        by_cpu(s, CLOCK).is_empty()
    });
    std::fs::write(&cfg, BEFORE).expect("write");
    p.signal("HUP");
    let s1 = p.scrape_until(RELOAD_WITHIN, "cpu-clock restored", |s| {
        !by_cpu(s, CLOCK).is_empty()
    });
    assert_not_below(&c0, &by_cpu(&s1, CLOCK), "cpu-clock removed and restored");
    // The summary is logged after the new collection serves (the scrape
    // above can see it first): poll for it.
    p.wait_log(
        "the totals of 1 removed or changed metrics are kept until the next reload",
        RELOAD_WITHIN,
    );
    p.wait_log("1 continue their counts", RELOAD_WITHIN);
}

#[test]
fn a_broken_config_on_sighup_keeps_the_old_one_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("perf.yaml");
    std::fs::write(&cfg, AFTER).expect("write");
    let mut p = live(&cfg, &[]);
    let s0 = p.scrape_until(RELOAD_WITHIN, "counting", counting);
    let c0 = by_cpu(&s0, CLOCK);

    for broken in [
        "sets:\n  - name: software\n    events:\n      - metric: perf_cpu_clock_seconds_total\n        event: cpu-clokc\n",
        "sets: [\n",
        "sets:\n  - name: x\n    events:\n      - metric: bad name\n        event: cpu-clock\n",
    ] {
        std::fs::write(&cfg, broken).expect("write");
        p.signal("HUP");
        let s = p.scrape_until(RELOAD_WITHIN, "perf_config_last_reload_successful 0", |s| {
            scalar(s, "perf_config_last_reload_successful") == Some(0.0)
        });
        // The old config still serves, every metric of it, still counting.
        assert!(!by_cpu(&s, SWITCHES).is_empty(), "{s:?}");
        assert_not_below(&c0, &by_cpu(&s, CLOCK), "cpu-clock after a refused reload");
        p.wait_log("configuration reload refused", RELOAD_WITHIN);
        // Back to good for the next round.
        std::fs::write(&cfg, AFTER).expect("write");
        p.signal("HUP");
        p.scrape_until(RELOAD_WITHIN, "perf_config_last_reload_successful 1", |s| {
            scalar(s, "perf_config_last_reload_successful") == Some(1.0)
        });
    }
    p.wait_log("perf.yaml:5:", RELOAD_WITHIN);
    let s = p.scrape();
    assert_not_below(&c0, &by_cpu(&s, CLOCK), "cpu-clock after three reloads");
}

#[test]
fn reload_endpoint_behind_enable_lifecycle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("perf.yaml");
    std::fs::write(&cfg, BEFORE).expect("write");
    let p = live(&cfg, &["--web.enable-lifecycle"]);
    std::fs::write(&cfg, AFTER).expect("write");
    let r = p.request("POST", "/-/reload", &[], "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("2 of 2 metrics counted"), "{}", r.body);
    // Synchronous: the metric is there at once.
    assert!(!by_cpu(&p.scrape(), SWITCHES).is_empty());
    std::fs::write(&cfg, "sets: 7\n").expect("write");
    let r = p.request("PUT", "/-/reload", &[], "");
    assert_eq!(r.status, 500, "{}", r.body);
    assert!(
        r.body.contains("failed to reload config") && r.body.contains("perf.yaml:1:"),
        "{}",
        r.body
    );
    let s = p.scrape();
    assert_eq!(scalar(&s, "perf_config_last_reload_successful"), Some(0.0));
    assert!(
        !by_cpu(&s, SWITCHES).is_empty(),
        "the old config stopped serving"
    );
    let r = p.get("/-/reload");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST, PUT"));
}

#[test]
fn sighup_rereads_the_web_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wc = dir.path().join("web.yml");
    let hash = |pw: &str| bcrypt::hash(pw, 5).expect("bcrypt");
    std::fs::write(&wc, format!("basic_auth_users:\n  u: {}\n", hash("old"))).expect("write");
    let f = common::fixture("vm-no-pmu").display().to_string();
    let w = wc.display().to_string();
    let mut p = Proc::exporter(&["--simulate", "--path.sysfs", &f, "--web.config.file", &w]);
    p.wait_log("counters open", Duration::from_secs(15));
    let auth = |pw: &str| common::basic("u", pw);
    let addr = p.addr.clone();
    let get = |pw: &str| {
        let a = auth(pw);
        let mut last = None;
        for _ in 0..100 {
            match common::try_request("GET", &addr, "/metrics", &[("Authorization", &a)], "") {
                Ok(r) => return r.status,
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{last:?}");
    };
    assert_eq!(get("old"), 200);
    std::fs::write(&wc, format!("basic_auth_users:\n  u: {}\n", hash("new"))).expect("write");
    p.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    while get("new") != 200 {
        assert!(
            Instant::now() < deadline,
            "new password not accepted:\n{}",
            p.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(get("old"), 401);
    // A broken web config is refused like a broken config.
    std::fs::write(&wc, "basic_auth_users:\n  u: not-a-hash\n").expect("write");
    p.signal("HUP");
    p.wait_log("not a bcrypt hash", Duration::from_secs(10));
    assert_eq!(get("new"), 200);
}

#[test]
fn sigterm_exits_within_a_second() {
    common::require_perf_privilege();
    let mut p = Proc::exporter(&[]);
    p.wait_ready();
    // An idle keep-alive connection must not hold the shutdown up.
    let mut ka = common::KeepAlive::connect(&p.addr).expect("connect");
    assert_eq!(ka.get("/metrics", &[]).expect("scrape").status, 200);
    let t = Instant::now();
    p.signal("TERM");
    let status = p
        .wait_exit(Duration::from_secs(1))
        .unwrap_or_else(|| panic!("still running 1 s after SIGTERM; output:\n{}", p.output()));
    let took = t.elapsed();
    assert!(
        status.success(),
        "exit status {status}; output:\n{}",
        p.output()
    );
    assert!(took <= Duration::from_secs(1), "{took:?}");
    assert!(p.output().contains("shutting down"), "{}", p.output());
}

#[test]
fn sigterm_with_a_slow_scrape_in_flight_exits_within_a_second() {
    let f = common::fixture("vm-no-pmu").display().to_string();
    let mut p = Proc::exporter(&[
        "--simulate",
        "--path.sysfs",
        &f,
        "--simulate.read-delay",
        "2s",
        "--web.request-timeout",
        "100ms",
    ]);
    p.wait_ready();
    let a = p.addr.clone();
    let _slow = std::thread::spawn(move || common::try_request("GET", &a, "/metrics", &[], ""));
    // The collection is in flight once it has overrun the request timeout
    // (then /-/healthy says 503).
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.get("/-/healthy").status != 503 {
        assert!(
            Instant::now() < deadline,
            "the slow collection never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    p.signal("TERM");
    let status = p
        .wait_exit(Duration::from_secs(1))
        .unwrap_or_else(|| panic!("still running 1 s after SIGTERM; output:\n{}", p.output()));
    assert!(status.success(), "{status}");
    assert!(t.elapsed() <= Duration::from_secs(1));
}

const ONE_SET: &str = crate::config!("cpu_clock");

fn mkfifo(p: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .expect("run mkfifo")
        .success();
    assert!(ok, "mkfifo {}", p.display());
}

/// Whether one of the process's threads is named `name`.
fn has_thread(p: &Proc, name: &str) -> bool {
    std::fs::read_dir(format!("/proc/{}/task", p.pid()))
        .map(|d| {
            d.flatten().any(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name)
            })
        })
        .unwrap_or(false)
}

fn simulated(cfg: &Path, extra: &[&str]) -> Proc {
    let f = common::fixture("vm-no-pmu").display().to_string();
    let c = cfg.display().to_string();
    let mut args = vec!["--simulate", "--path.sysfs", &f, "--config.file", &c];
    args.extend_from_slice(extra);
    let mut p = Proc::exporter(&args);
    p.wait_ready();
    p
}

/// Issue 11: a SIGHUP during start-up ended the process (exit 129), and a
/// start-up read that never returns held off SIGTERM. The sysfs tree's
/// `msr/type` is a FIFO here: PMU discovery used to block on it; now it
/// skips that PMU at once, naming the file. SIGHUPs arrive during
/// start-up when the test sees it, else right after; either way they are
/// harmless, and SIGTERM ends the process.
#[test]
fn sighup_during_start_up_is_harmless_and_sigterm_still_ends_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sys");
    let ok = std::process::Command::new("cp")
        .arg("-r")
        .arg(common::fixture("vm-no-pmu"))
        .arg(&root)
        .status()
        .expect("cp")
        .success();
    assert!(ok);
    let ty = root.join("bus/event_source/devices/msr/type");
    std::fs::remove_file(&ty).expect("rm");
    mkfifo(&ty);
    let r = root.display().to_string();
    let mut p = Proc::exporter(&["--simulate", "--path.sysfs", &r]);
    let deadline = Instant::now() + Duration::from_secs(10);
    // The handler is installed before the start-up thread starts: wait
    // for that thread, or for the end of start-up, before any SIGHUP.
    while !has_thread(&p, "start-up") && !p.output().contains("counters open") {
        if let Some(status) = p.exited() {
            panic!("exited ({status}) during start-up:\n{}", p.output());
        }
        assert!(Instant::now() < deadline, "{}", p.output());
        std::thread::sleep(Duration::from_millis(10));
    }
    p.signal("HUP");
    p.signal("HUP");
    assert_eq!(
        p.wait_exit(Duration::from_millis(300)),
        None,
        "{}",
        p.output()
    );
    p.signal("TERM");
    let status = p
        .wait_exit(Duration::from_secs(2))
        .unwrap_or_else(|| panic!("SIGTERM ignored during start-up:\n{}", p.output()));
    assert!(status.success(), "{status}; output:\n{}", p.output());
    let refused = format!("{}: not a regular file (a FIFO): refused", ty.display());
    assert!(p.output().contains(&refused), "{}", p.output());
}

/// Issue 11: a FIFO as the config hung start-up and every reload.
#[test]
fn a_fifo_config_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("perf.yaml");
    mkfifo(&fifo);
    let f = common::fixture("vm-no-pmu").display().to_string();
    let c = fifo.display().to_string();
    let mut p = Proc::exporter(&["--simulate", "--path.sysfs", &f, "--config.file", &c]);
    let status = p
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("blocked on a FIFO config:\n{}", p.output()));
    assert_eq!(status.code(), Some(1));
    assert!(
        p.output().ends_with(&format!(
            "perf-exporter: cannot read config file {c}: not a regular file (a FIFO): refused\n"
        )),
        "{}",
        p.output()
    );
}

/// Issue 11: `sets: []` on reload was accepted and every metric vanished.
#[test]
fn an_empty_config_is_refused_on_reload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("perf.yaml");
    std::fs::write(&cfg, ONE_SET).expect("write");
    let mut p = simulated(&cfg, &[]);
    for empty in ["sets: []\n", "sets:\n"] {
        std::fs::write(&cfg, empty).expect("write");
        p.signal("HUP");
        p.wait_log("the configuration has no sets", Duration::from_secs(10));
        let s = p.scrape_until(RELOAD_WITHIN, "the refusal recorded", |s| {
            scalar(s, "perf_config_last_reload_successful") == Some(0.0)
        });
        assert!(!by_cpu(&s, CLOCK).is_empty(), "{s:?}");
        std::fs::write(&cfg, ONE_SET).expect("write");
        p.signal("HUP");
        p.scrape_until(RELOAD_WITHIN, "the good config reloaded", |s| {
            scalar(s, "perf_config_last_reload_successful") == Some(1.0)
        });
    }
}

/// Issue 11: an empty (truncated) web config on reload turned auth off.
#[test]
fn a_reload_may_not_drop_authentication() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("perf.yaml");
    std::fs::write(&cfg, ONE_SET).expect("write");
    let wc = dir.path().join("web.yml");
    let hash = bcrypt::hash("pw", 5).expect("bcrypt");
    std::fs::write(&wc, format!("basic_auth_users:\n  u: {hash}\n")).expect("write");
    let w = wc.display().to_string();
    let f = common::fixture("vm-no-pmu").display().to_string();
    let c = cfg.display().to_string();
    let mut p = Proc::exporter(&[
        "--simulate",
        "--path.sysfs",
        &f,
        "--config.file",
        &c,
        "--web.config.file",
        &w,
    ]);
    p.wait_log("counters open", Duration::from_secs(15));
    std::fs::write(&wc, "# truncated during rotation\n").expect("write");
    p.signal("HUP");
    p.wait_log("drops basic authentication", Duration::from_secs(10));
    let out = p.output();
    let line = out
        .lines()
        .find(|l| l.contains("drops basic authentication"))
        .expect("line");
    assert!(line.contains(" level=error "), "{line}");
    assert!(line.contains("--web.config.allow-downgrade"), "{line}");
    let r = common::try_request("GET", &p.addr, "/metrics", &[], "").expect("request");
    assert_eq!(r.status, 401, "{}", r.body);
    let a = common::basic("u", "pw");
    let r = common::try_request("GET", &p.addr, "/metrics", &[("Authorization", &a)], "")
        .expect("request");
    assert!(
        r.body.contains("perf_config_last_reload_successful 0"),
        "{}",
        r.body
    );
}

/// Issue 11: SIGHUPs while the config path blocked (a FIFO) each took a
/// blocking thread until `/metrics` answered 503 forever. A FIFO is refused
/// at once now; reloads run (coalesced) on their own thread either way
/// (`app::reload`'s unit test blocks one for real).
#[test]
fn sighups_with_a_fifo_config_do_not_take_metrics_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("perf.yaml");
    std::fs::write(&cfg, ONE_SET).expect("write");
    let mut p = simulated(&cfg, &["--web.request-timeout", "2s"]);
    std::fs::remove_file(&cfg).expect("rm");
    mkfifo(&cfg);
    for _ in 0..40 {
        p.signal("HUP");
    }
    for _ in 0..5 {
        let s = p.scrape();
        assert!(!by_cpu(&s, CLOCK).is_empty(), "{s:?}");
    }
    assert_eq!(p.get("/-/healthy").status, 200);
    p.wait_log("not a regular file", Duration::from_secs(10));
    p.scrape_until(RELOAD_WITHIN, "the refusal recorded", |s| {
        scalar(s, "perf_config_last_reload_successful") == Some(0.0)
    });
}

/// Issue 11: with the OTLP CA a FIFO, start-up blocked and SIGTERM was
/// ignored while the port was held.
#[test]
fn sigterm_ends_a_start_up_blocked_on_the_otlp_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("ca.pem");
    mkfifo(&fifo);
    let f = common::fixture("vm-no-pmu").display().to_string();
    let c = fifo.display().to_string();
    let mut p = Proc::exporter(&[
        "--simulate",
        "--path.sysfs",
        &f,
        "--otlp.endpoint",
        "https://127.0.0.1:9",
        "--otlp.certificate",
        &c,
    ]);
    // Either the read blocks (on its own thread) or the file is refused.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = p.exited() {
            assert!(!status.success());
            assert!(p.output().contains("ca.pem"), "{}", p.output());
            return;
        }
        let blocked = has_thread(&p, "otlp-start");
        if blocked {
            break;
        }
        assert!(Instant::now() < deadline, "{}", p.output());
        std::thread::sleep(Duration::from_millis(10));
    }
    p.signal("TERM");
    let status = p
        .wait_exit(Duration::from_secs(2))
        .unwrap_or_else(|| panic!("SIGTERM ignored during the OTLP start:\n{}", p.output()));
    // Ended by SIGTERM, or refused the FIFO just before it (the thread
    // was seen while it refused).
    assert!(
        status.success() || (status.code() == Some(1) && p.output().contains("ca.pem")),
        "{status}; output:\n{}",
        p.output()
    );
}

/// Issue 24 item 1: every reload, even of an unchanged config, reset the
/// per-cgroup group times (`perf_cgroup_group_{enabled,running}_seconds_total`
/// 0.373 -> 0.053) while the per-cgroup counters continued. On the
/// simulated PMU with the Kubernetes cgroup fixture: no per-cgroup series,
/// group times included, goes down over a `POST /-/reload` (the path
/// SIGHUP takes too).
#[test]
fn a_reload_continues_the_per_cgroup_group_times() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("perf.yaml");
    let cg = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroup/kubernetes-systemd");
    std::fs::write(
        &cfg,
        format!("{AFTER}cgroups:\n  preset: kubernetes\n  sets: [software]\n"),
    )
    .expect("write");
    let cgs = cg.display().to_string();
    let p = simulated(
        &cfg,
        &["--web.enable-lifecycle", "--path.cgroupfs", cgs.as_str()],
    );
    let per_cgroup = |s: &BTreeMap<String, f64>| -> BTreeMap<String, f64> {
        s.iter()
            .filter(|(k, _)| k.starts_with("perf_cgroup_"))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    // Long enough counted that a restart from zero shows at once.
    let enough = |s: &BTreeMap<String, f64>| {
        s.iter()
            .any(|(k, v)| k.starts_with("perf_cgroup_group_enabled_seconds_total{") && *v > 0.5)
    };
    let before =
        per_cgroup(&p.scrape_until(RELOAD_WITHIN, "per-cgroup group times above 0.5 s", enough));
    let r = p.request("POST", "/-/reload", &[], "");
    assert_eq!(r.status, 200, "{}", r.body);
    let after = per_cgroup(&p.scrape());
    for (series, v0) in &before {
        let v1 = after
            .get(series)
            .unwrap_or_else(|| panic!("{series} gone after the reload: {after:?}"));
        assert!(v1 >= v0, "{series} reset by the reload: {v0} -> {v1}");
    }
    assert!(
        before
            .keys()
            .any(|k| k.starts_with("perf_cgroup_group_running_seconds_total{")),
        "{before:?}"
    );
}

/// Whether a scrape has a series of family `name`.
fn has(s: &BTreeMap<String, f64>, name: &str) -> bool {
    s.keys()
        .any(|k| k == name || k.strip_prefix(name).is_some_and(|r| r.starts_with('{')))
}

/// Issue 28 item 11: a reload of 10,000 sets held the engine lock while it
/// built the new engine, and every scrape meanwhile got 503. The new
/// engine is built beside the serving one: with every simulated open
/// slowed (`--simulate.open-delay`), the default config's counters on the
/// simulated 28-CPU hybrid part take seconds to open, and all the while
/// scrapes answer 200 at once with the old config's series; then the
/// reload completes and the new series appear.
#[test]
fn scrapes_are_served_by_the_old_engine_while_a_reload_opens_its_counters() {
    const NEW: &str = "perf_instructions_total";
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("perf.yaml");
    std::fs::write(&cfg, BEFORE).expect("write");
    let extra = [
        "--config.file",
        cfg.to_str().expect("utf-8 path"),
        "--simulate.open-delay",
        "5ms",
        "--log.level",
        "debug",
    ];
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let mut p = common::simulated_exporter_with("intel-hybrid", &extra);
    let s0 = p.scrape();
    assert!(has(&s0, CLOCK) && !has(&s0, NEW), "{s0:?}");
    let default = std::fs::read_to_string(common::repo_root().join("config/default.yaml"))
        .expect("the default config");
    std::fs::write(&cfg, default).expect("write");
    p.signal("HUP");
    p.wait_log(
        "reload: opening the new counters beside the serving ones",
        RELOAD_WITHIN,
    );
    // Every scrape from now on is served at once: by the old engine until
    // the swap, then by the new one.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut during = 0;
    let swapped = loop {
        let t = Instant::now();
        let r = p.get("/metrics");
        let took = t.elapsed();
        assert_eq!(r.status, 200, "a scrape during the reload: {}", r.body);
        assert!(
            took < Duration::from_secs(3),
            "a scrape waited {took:?} during the reload"
        );
        let s = common::parse_exposition(&r.body).expect("a valid exposition");
        if has(&s, NEW) {
            break s;
        }
        assert!(has(&s, CLOCK), "neither config's series: {s:?}");
        during += 1;
        assert!(
            Instant::now() < deadline,
            "the reload did not complete in 120 s:\n{}",
            p.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        during >= 3,
        "only {during} scrapes while the reload opened its counters (too quick to tell):\n{}",
        p.output()
    );
    assert!(has(&swapped, CLOCK));
    let s = p.scrape_until(RELOAD_WITHIN, "the reload's outcome", |s| {
        scalar(s, "perf_config_last_reload_successful") == Some(1.0)
            && p.output().contains("configuration reloaded")
    });
    assert!(has(&s, NEW));
}
