//! What noticing cgroup churn costs per collection, on a generated tree
//! in the kubelet's systemd layout with 1,000 pods (two containers each,
//! one of them CRI-O's `crio-conmon-*` monitor, which is skipped),
//! `preset: kubernetes`, `containers: true`:
//!
//! * `full_scan`: the cheap rescan (list kubepods, the QoS levels and
//!   every pod, stat each selected cgroup) at every collection;
//! * `full_scan_with_watches`: the same plus an inotify watch on every
//!   listed directory: what a scan costs once a change was noticed;
//! * `stat_listed_dirs`: the cheapest rescan that could notice a change
//!   without inotify, one `stat(2)` of every listed directory (comparing
//!   `st_nlink`; the mtime does not move on cgroupfs), which still misses
//!   a pod replaced by another between two collections;
//! * `inotify_unchanged`: [`Selector::changed`] when nothing changed: one
//!   non-blocking `read(2)`.
//!
//! The tree is on the temporary directory (tmpfs or disk); with
//! `CGROUP_SCAN_REAL=1` (as root) the same tree is also created under
//! the real cgroup2 root (`cgdisc-bench-<pid>`, removed at the end).
//!
//! `cargo bench --bench cgroup_scan`; `-- --test` runs each once.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion};
use perf_exporter::cgroup::{find_root, Hierarchy, Root, Selector};
use perf_exporter::config::Config;
use std::hint::black_box;
use std::path::{Path, PathBuf};

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
    let mut w = selector(root, true);
    g.bench_function("full_scan_with_watches", |b| {
        b.iter(|| black_box(w.scan().unwrap()))
    });
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
    w.scan().unwrap();
    assert!(w.watches() > PODS, "{} watches", w.watches());
    g.bench_function("inotify_unchanged", |b| {
        b.iter(|| assert!(!black_box(w.changed())))
    });
    g.finish();
}

/// The real-cgroupfs copy, removed (deepest first) on drop.
struct RealTree(PathBuf);

impl Drop for RealTree {
    fn drop(&mut self) {
        fn rm(d: &Path) {
            if let Ok(rd) = std::fs::read_dir(d) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        rm(&e.path());
                    }
                }
            }
            let _ = std::fs::remove_dir(d);
        }
        rm(&self.0);
    }
}

fn benches(c: &mut Criterion) {
    let t = tempfile::tempdir().unwrap();
    let listed = generate(t.path(), false);
    bench_tree(c, "tmpdir", t.path(), &listed);
    if std::env::var_os("CGROUP_SCAN_REAL").is_some() {
        let root = find_root(Path::new("/proc"), None).unwrap();
        let real = RealTree(
            root.path
                .join(format!("cgdisc-bench-{}", std::process::id())),
        );
        let listed = generate(&real.0, true);
        bench_tree(c, "cgroupfs", &real.0, &listed);
    }
}

criterion_group!(cgroup_benches, benches);
criterion_main!(cgroup_benches);
