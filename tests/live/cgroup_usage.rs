//! `perf_cgroup_cpu_usage_seconds_total` (issue 24 item 8) on this
//! machine's live kernel, as root: the real binary counts a real cgroup
//! (under the cgroup2 root, removed on drop) with a CPU burner in it, and
//! the family is compared with the cgroup's own `cpu.stat` read around
//! each scrape. The exporter reads `cpu.stat` every `rank_interval` (1 s
//! here), never at a scrape, so while the burner runs the value lies
//! between `cpu.stat` now and `cpu.stat` one interval (plus slack) ago;
//! once the cgroup is idle it equals `cpu.stat` exactly.

use crate::common;

/// The test counts CPU time: one at a time.
use common::serial;

use common::cgroup::{burner, python_in, usage_usec, CgroupTree, CLOCKS_YAML as YAML};
use common::Reaped;
use std::path::Path;
use std::time::{Duration, Instant};

/// The rank interval of the test's config, in seconds.
const RANK_SECS: f64 = 1.0;

/// How much older than one rank interval the value may be: the read
/// happens at the first collection (scrape) after it is due, and the
/// scrape and the `cpu.stat` reads around it take time on a busy machine.
/// The burner uses at most one CPU, so its usage grows at most 1 s/s.
const SLACK_SECS: f64 = 1.0;

fn seconds(dir: &Path) -> f64 {
    usage_usec(dir) as f64 * 1e-6
}

/// The family's value for `cgroup="<rel>"` in an exposition.
fn value(body: &str, rel: &str) -> Option<f64> {
    let prefix = format!("perf_cgroup_cpu_usage_seconds_total{{cgroup=\"{rel}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
}

#[test]
fn cpu_usage_per_cgroup_is_cpu_stat_at_most_one_rank_interval_old() {
    let _s = serial();
    common::require_root();
    common::require_perf_privilege();
    let tree = CgroupTree::new("pe-usage", "t");
    tree.mkdir("w");
    let dir = tree.top.join("w");
    let top = tree.top.file_name().unwrap().to_str().unwrap().to_string();
    let rel = format!("{top}/w");
    let burning = Reaped(python_in(&dir, &burner(0.5)));
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("c.yaml");
    let yaml = format!(
        "{YAML}cgroups:\n  paths: [\"{top}/*\"]\n  sets: [software]\n  rank_interval: {RANK_SECS}s\n"
    );
    std::fs::write(&cfg, yaml).unwrap();
    let mut p = common::exporter(&["--config.file", cfg.to_str().unwrap()]);
    p.wait_log("cgroups counted", Duration::from_secs(10));
    // While it burns, over several intervals: never ahead of cpu.stat,
    // never more than an interval (and the slack) behind.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut values: Vec<f64> = Vec::new();
    while values.len() < 3 {
        assert!(
            Instant::now() < deadline,
            "{rel}: 3 distinct values in 20 s: {values:?}\n{}",
            p.get("/metrics").body
        );
        let before = seconds(&dir);
        let body = p.get("/metrics").body;
        let after = seconds(&dir);
        std::thread::sleep(Duration::from_millis(100));
        let Some(v) = value(&body, &rel) else {
            continue;
        };
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        assert!(
            v <= after + 1e-6,
            "ahead of cpu.stat: {v} > {after} (load {load})"
        );
        assert!(
            v >= before - RANK_SECS - SLACK_SECS,
            "more than {RANK_SECS} s + {SLACK_SECS} s of CPU behind cpu.stat: {v} < {before} (load {load})"
        );
        if values.last() != Some(&v) {
            values.push(v);
        }
    }
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    // Idle: after one interval the value is cpu.stat's, exactly.
    drop(burning);
    let want = seconds(&dir);
    let settled = common::poll(Duration::from_secs(10), Duration::from_millis(100), || {
        let v = value(&p.get("/metrics").body, &rel);
        v.is_some_and(|v| (v - want).abs() < 1e-7).then_some(())
    });
    assert!(
        settled.is_some(),
        "{:?} is not cpu.stat's {want} s after {RANK_SECS} s idle",
        value(&p.get("/metrics").body, &rel)
    );
    assert_eq!(seconds(&dir), want, "the cgroup stayed idle");
}
