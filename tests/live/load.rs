//! Load: many concurrent scrapers on loopback against the live exporter
//! (root) for about 30 s. Every scrape must succeed and be a valid
//! exposition with every online CPU's counters, never going backwards;
//! the exporter's resident memory may grow by less than 1 MiB between
//! the end of a 5 s warm-up and the end of the run.
//!
//! Bounded: 24 keep-alive scrapers, 4 scrapers that open a connection per
//! scrape (a bounded rate, to stay clear of ephemeral-port exhaustion)
//! and 2 OpenMetrics scrapers, below the default `--web.max-requests` of
//! 40 so no scrape may be refused.

use crate::common;

use common::{by_cpu, parse_exposition, KeepAlive, Proc};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const KEEP_ALIVE: usize = 24;
const FRESH: usize = 4;
const OPENMETRICS: usize = 2;
const WARM_UP: Duration = Duration::from_secs(5);
const RUN: Duration = Duration::from_secs(30);
const MAX_RSS_GROWTH_KIB: u64 = 1024;

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

/// Checks one text-format scrape; `last` holds this scraper's previous
/// cpu-clock values.
fn check(body: &str, online: &[u32], last: &mut BTreeMap<u32, f64>) -> Result<(), String> {
    let s = parse_exposition(body)?;
    if !s.keys().any(|k| k.starts_with("perf_exporter_build_info{")) {
        return Err("no perf_exporter_build_info".into());
    }
    if !s.contains_key("perf_scrape_duration_seconds") {
        return Err("no perf_scrape_duration_seconds".into());
    }
    let clock = by_cpu(&s, "perf_cpu_clock_seconds_total");
    if clock.keys().copied().collect::<Vec<_>>() != online {
        return Err(format!(
            "cpu-clock series {clock:?}, online CPUs {online:?}"
        ));
    }
    for (cpu, v) in &clock {
        if let Some(prev) = last.get(cpu) {
            if v < prev {
                return Err(format!(
                    "cpu-clock of cpu {cpu} went backwards: {prev} -> {v}"
                ));
            }
        }
    }
    *last = clock;
    Ok(())
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario; to be split into steps (issue 26)
fn many_concurrent_scrapers_for_thirty_seconds() {
    // Live counting: not beside the other live tests (tests/live/main.rs).
    let _serial = common::serial();
    common::require_perf_privilege();
    // Per CPU (the default sums software events per node): each scrape
    // checks one monotonic cpu-clock series per online CPU.
    let dir = tempfile::tempdir().expect("tempdir");
    let per_cpu = common::per_cpu_default_config(dir.path());
    let per_cpu: Vec<&str> = per_cpu.iter().map(String::as_str).collect();
    let mut p = Proc::exporter(&per_cpu);
    p.wait_ready();
    let online = common::online_cpus();
    let stop = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(AtomicU64::new(0));
    let errors: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..KEEP_ALIVE + FRESH + OPENMETRICS {
        let (addr, stop, n, errors, online) = (
            p.addr.clone(),
            stop.clone(),
            scrapes.clone(),
            errors.clone(),
            online.clone(),
        );
        handles.push(thread::spawn(move || {
            let fail = |e: String| errors.lock().unwrap_or_else(|p| p.into_inner()).push(e);
            let mut last = BTreeMap::new();
            let mut conn: Option<KeepAlive> = None;
            while !stop.load(Ordering::SeqCst) {
                let (r, om) = if i < KEEP_ALIVE {
                    let c = match &mut conn {
                        Some(c) => c,
                        None => match KeepAlive::connect(&addr) {
                            Ok(c) => conn.insert(c),
                            Err(e) => {
                                fail(format!("scraper {i}: {e}"));
                                return;
                            }
                        },
                    };
                    (c.get("/metrics", &[]), false)
                } else if i < KEEP_ALIVE + FRESH {
                    // The fresh-connection scrapers' pace (the load).
                    thread::sleep(Duration::from_millis(20));
                    (
                        common::try_request("GET", &addr, "/metrics", &[], ""),
                        false,
                    )
                } else {
                    let accept = [("Accept", "application/openmetrics-text; version=1.0.0")];
                    (
                        common::try_request("GET", &addr, "/metrics", &accept, ""),
                        true,
                    )
                };
                n.fetch_add(1, Ordering::Relaxed);
                match r {
                    Err(e) => {
                        fail(format!("scraper {i}: request failed: {e}"));
                        return;
                    }
                    Ok(r) if r.status != 200 => {
                        fail(format!("scraper {i}: status {}: {}", r.status, r.body));
                        return;
                    }
                    Ok(r) if om => {
                        let ok = r.body.ends_with("# EOF\n")
                            && r.body.contains("perf_cpu_clock_seconds_total{cpu=\"0\"}")
                            && r.header("content-type")
                                .is_some_and(|c| c.starts_with("application/openmetrics-text"));
                        if !ok {
                            fail(format!("scraper {i}: bad OpenMetrics scrape:\n{}", r.body));
                            return;
                        }
                    }
                    Ok(r) => {
                        if let Err(e) = check(&r.body, &online, &mut last) {
                            fail(format!("scraper {i}: invalid scrape: {e}\n{}", r.body));
                            return;
                        }
                    }
                }
            }
        }));
    }
    // The measurement: memory after the warm-up and at the end of the
    // run, scrapes counted over it.
    thread::sleep(WARM_UP);
    let rss0 = rss_kib(p.pid());
    let at_warm_up = scrapes.load(Ordering::Relaxed);
    thread::sleep(RUN - WARM_UP);
    let rss1 = rss_kib(p.pid());
    stop.store(true, Ordering::SeqCst);
    for h in handles {
        h.join().expect("scraper thread");
    }
    let total = scrapes.load(Ordering::Relaxed);
    let errors = errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(
        errors.is_empty(),
        "{} scraper(s) failed, first: {}\nexporter output:\n{}",
        errors.len(),
        errors[0],
        p.output()
    );
    assert!(
        total > at_warm_up,
        "no scrapes after the warm-up ({at_warm_up} before, {total} in all)"
    );
    eprintln!(
        "load: {total} scrapes in {RUN:?} by {} scrapers; RSS {rss0} KiB after warm-up, {rss1} KiB at the end",
        KEEP_ALIVE + FRESH + OPENMETRICS
    );
    assert!(
        rss1 < rss0 + MAX_RSS_GROWTH_KIB,
        "RSS grew by {} KiB (from {rss0} to {rss1} KiB) under steady load",
        rss1.saturating_sub(rss0)
    );
    // Healthy, and nothing was refused.
    let r = p.get("/metrics");
    assert_eq!(r.status, 200);
    for reason in [
        "max_requests",
        "rate_limit",
        "unauthorized",
        "timeout",
        "auth_busy",
    ] {
        let line = format!("perf_http_rejected_requests_total{{reason=\"{reason}\"}} 0");
        assert!(r.body.contains(&line), "{line} expected:\n{}", r.body);
    }
}
