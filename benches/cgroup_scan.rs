//! What noticing cgroup churn costs per collection, on a generated tree
//! in the kubelet's systemd layout with 1,000 pods (two containers each,
//! one of them CRI-O's `crio-conmon-*` monitor, which is skipped),
//! `preset: kubernetes`, `containers: true`:
//!
//! * `full_scan`: the cheap rescan (list kubepods, the QoS levels and
//!   every pod, stat each selected cgroup) at every collection;
//! * `walk_with_watches`: a walk from scratch adding an inotify watch on
//!   every listed directory (a fresh selector each time): what every
//!   noticed change cost until 2026-11-23, and what one costs now only
//!   after the event queue overflowed;
//! * `pod_created_and_removed`: a pod cgroup with a container created,
//!   the change applied ([`Selector::scan_if_changed`]), removed, applied
//!   again: two changes applied where they happened (the `mkdir` and
//!   `rmdir` themselves are not timed);
//! * `stat_listed_dirs`: the cheapest rescan that could notice a change
//!   without inotify, one `stat(2)` of every listed directory (comparing
//!   `st_nlink`; the mtime does not move on cgroupfs), which still misses
//!   a pod replaced by another between two collections;
//! * `inotify_unchanged`: [`Selector::changed`] when nothing changed: one
//!   non-blocking `read(2)`.
//!
//! The tree is on the temporary directory (tmpfs or disk); with
//! `CGROUP_SCAN_REAL=1` (as root) the same tree is also created under
//! the real cgroup2 root (`cgscan-<pid>-bench`, removed at the end).
//!
//! `cargo bench --bench cgroup_scan`; `-- --test` runs each once.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion};
use perf_exporter::cgroup::{Hierarchy, Root, Selector};
use perf_exporter::config::Config;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[allow(dead_code)]
#[path = "../tests/common/cgroup.rs"]
mod trees;

const PODS: usize = 1000;

/// Creates the tree under `root`; returns the directories a scan lists.
fn generate(root: &Path, real: bool) -> Vec<PathBuf> {
    let k = root.join("kubepods.slice");
    let mut listed = vec![k.clone()];
    for i in 0..PODS {
        let (level, qos) = match i % 3 {
            0 => (k.clone(), None),
            1 => (k.join("kubepods-burstable.slice"), Some("burstable")),
            _ => (k.join("kubepods-besteffort.slice"), Some("besteffort")),
        };
        let uid = format!("{i:08x}_0000_4000_8000_{i:012x}");
        let pod = match qos {
            None => level.join(format!("kubepods-pod{uid}.slice")),
            Some(q) => level.join(format!("kubepods-{q}-pod{uid}.slice")),
        };
        for name in [
            format!("cri-containerd-{i:064x}.scope"),
            format!("crio-conmon-{:064x}.scope", i + PODS),
        ] {
            let c = pod.join(name);
            std::fs::create_dir_all(&c).unwrap();
            if !real {
                std::fs::write(c.join("cpu.stat"), "usage_usec 1\n").unwrap();
            }
        }
        if !real {
            std::fs::write(pod.join("cpu.stat"), "usage_usec 2\n").unwrap();
        }
        if i < 3 && qos.is_some() {
            listed.push(level.clone());
        }
        listed.push(pod);
    }
    listed
}

fn selector(root: &Path, watches: bool) -> Selector {
    let text = "sets:\n  - name: software\n    events:\n      - metric: perf_cpu_clock_seconds_total\n        event: cpu-clock\ncgroups:\n  preset: kubernetes\n  containers: true\n  max_cgroups: 5000\n";
    let cfg = Config::parse(text, "bench.yaml").unwrap().cgroups.unwrap();
    let root = Root {
        path: root.to_path_buf(),
        hierarchy: Hierarchy::V2,
    };
    let s = Selector::new(root, cfg);
    if watches {
        s
    } else {
        s.without_watches()
    }
}

fn bench_tree(c: &mut Criterion, name: &str, root: &Path, listed: &[PathBuf]) {
    let mut g = c.benchmark_group(format!("cgroup_scan/{name}/{PODS}_pods"));
    g.sample_size(20);
    let mut s = selector(root, false);
    assert_eq!(s.scan().unwrap().counted.len(), 2 * PODS);
    g.bench_function("full_scan", |b| b.iter(|| black_box(s.scan().unwrap())));
    g.bench_function("walk_with_watches", |b| {
        b.iter(|| black_box(selector(root, true).scan().unwrap()))
    });
    let mut w = selector(root, true);
    w.scan().unwrap();
    let pod = root.join("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podffffffff_0000_4000_8000_ffffffffffff.slice");
    let container = pod.join(format!("cri-containerd-{}.scope", "f".repeat(64)));
    g.bench_function("pod_created_and_removed", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                std::fs::create_dir_all(&container).unwrap();
                let t = Instant::now();
                let sel = w.scan_if_changed().unwrap().expect("the new pod");
                spent += t.elapsed();
                assert_eq!(sel.counted.len(), 2 * PODS + 2);
                std::fs::remove_dir(&container).unwrap();
                std::fs::remove_dir(&pod).unwrap();
                let t = Instant::now();
                let sel = w.scan_if_changed().unwrap().expect("the pod gone");
                spent += t.elapsed();
                assert_eq!(sel.counted.len(), 2 * PODS);
            }
            spent
        })
    });
    assert_eq!(w.rewalks(), 1, "every change applied where it happened");
    g.bench_function("stat_listed_dirs", |b| {
        b.iter(|| {
            let mut links = 0u64;
            for d in listed {
                use std::os::unix::fs::MetadataExt;
                links += std::fs::metadata(d).map_or(0, |m| m.nlink());
            }
            black_box(links)
        })
    });
    assert!(w.watches() > PODS, "{} watches", w.watches());
    g.bench_function("inotify_unchanged", |b| {
        b.iter(|| assert!(!black_box(w.changed())))
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let t = tempfile::tempdir().unwrap();
    let listed = generate(t.path(), false);
    bench_tree(c, "tmpdir", t.path(), &listed);
    if std::env::var_os("CGROUP_SCAN_REAL").is_some() {
        let real = trees::CgroupTree::new("cgscan", "bench");
        let listed = generate(&real.top, true);
        bench_tree(c, "cgroupfs", &real.top, &listed);
    }
}

criterion_group!(cgroup_benches, benches);
criterion_main!(cgroup_benches);
