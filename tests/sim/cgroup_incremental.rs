//! The selector applies inotify events where they happened instead of
//! walking the tree again: on a plain temporary directory as the cgroup
//! root, after each creation and removal the selection equals a fresh
//! walk's, and the tree was walked from scratch once, until the event
//! queue overflows.

use crate::common;

use common::cgroup::section;
use perf_exporter::cgroup::{Lookup, Selection, Selector};
use std::path::Path;
use std::time::Duration;

const UID: &str = "2567a5ec-9705-4b7a-82c9-84033e06189d";

fn id(i: u32) -> String {
    format!("{i:064x}")
}

/// The cgroupfs driver's burstable pod `n`.
fn pod(n: u32) -> String {
    format!("kubepods/burstable/pod{}{n:04}", &UID[..UID.len() - 4])
}

const YAML: &str =
    "  preset: kubernetes\n  containers: true\n  paths: [\"app/**\"]\n  max_cgroups: 100000\n";

struct Rig {
    dir: tempfile::TempDir,
    s: Selector,
}

impl Rig {
    fn new() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("kubepods/burstable")).unwrap();
        std::fs::create_dir_all(dir.path().join("app")).unwrap();
        let root = Lookup::new(Path::new("/nonexistent"), Some(dir.path()))
            .simulated(true)
            .find()
            .unwrap();
        let mut s = Selector::new(root, section(YAML));
        s.scan_if_changed().unwrap().expect("the first scan");
        Rig { dir, s }
    }

    fn mkdir(&self, rel: &str) {
        std::fs::create_dir_all(self.dir.path().join(rel)).unwrap();
    }

    fn rmdir(&self, rel: &str) {
        common::cgroup::remove_tree(&self.dir.path().join(rel));
    }

    /// What a walk from scratch selects now.
    fn truth(&self) -> Selection {
        let root = Lookup::new(Path::new("/nonexistent"), Some(self.dir.path()))
            .simulated(true)
            .find()
            .unwrap();
        Selector::new(root, section(YAML))
            .without_watches()
            .scan()
            .unwrap()
    }

    /// The selector's next selection (polled: the events of a mkdir are
    /// queued before it returns, but allow for a slow machine).
    fn next(&mut self) -> Selection {
        let every = Duration::from_millis(10);
        common::poll(Duration::from_secs(5), every, || {
            self.s.scan_if_changed().unwrap()
        })
        .expect("the change was not seen")
    }

    /// Each step creates (`+dir`) or removes (`-dir`) a directory, then
    /// [`check`](Self::check)s the selection.
    fn steps(&mut self, steps: &[(String, usize, &str)]) {
        for (dir, counted, what) in steps {
            match dir.split_at(1) {
                ("+", d) => self.mkdir(d),
                ("-", d) => self.rmdir(d),
                _ => panic!("a step is +dir or -dir: {dir}"),
            }
            self.check(*counted, what);
        }
    }

    /// The next selection equals a fresh walk's, with `counted` cgroups.
    fn check(&mut self, counted: usize, what: &str) {
        let sel = self.next();
        assert_eq!(sel, self.truth(), "{what}");
        assert_eq!(sel.counted.len(), counted, "{what}: {sel:?}");
        assert!(sel.left_out.is_empty(), "{what}: {sel:?}");
    }
}

fn rels(sel: &Selection) -> Vec<&str> {
    sel.counted.iter().map(|c| c.rel.as_str()).collect()
}

#[test]
fn creations_and_removals_are_applied_without_walking_again() {
    let mut r = Rig::new();
    let container = |p, c| format!("{}/{}", pod(p), id(c));
    r.steps(&[
        (format!("+{}", container(1, 1)), 2, "a pod with a container"),
        (format!("+{}", container(1, 2)), 3, "a second container"),
        (format!("+{}", pod(2)), 4, "a pod without containers"),
        (
            format!("+{}", container(2, 3)),
            5,
            "a container in a listed pod",
        ),
        (format!("-{}", container(1, 1)), 4, "a container removed"),
        (
            format!("-{}", pod(1)),
            2,
            "a pod removed with its container",
        ),
    ]);
    // Removed and created again under the same name: a new directory.
    r.rmdir(&pod(2));
    r.mkdir(&format!("{}/{}", pod(2), id(4)));
    let sel = r.next();
    assert_eq!(sel, r.truth());
    assert!(rels(&sel).iter().any(|c| c.ends_with(&id(4))), "{sel:?}");
    assert!(!rels(&sel).iter().any(|c| c.ends_with(&id(3))), "{sel:?}");
    assert_eq!(r.s.rewalks(), 1, "each change applied where it happened");
}

/// A directory created and removed before the selector looks changes
/// nothing, and is not reported gone.
#[test]
fn a_directory_created_and_removed_between_checks_changes_nothing() {
    let mut r = Rig::new();
    r.steps(&[("+app/a".into(), 1, "app/a")]);
    r.mkdir("app/brief/x");
    r.rmdir("app/brief");
    let sel = r.next();
    assert_eq!(rels(&sel), ["app/a"]);
    assert!(sel.left_out.is_empty(), "{sel:?}");
    assert_eq!(sel, r.truth());
    // Nothing more is pending.
    assert_eq!(r.s.scan_if_changed().unwrap(), None);
    assert_eq!(r.s.rewalks(), 1);
}

/// `mkdir -p` of several levels at once: the levels below the first were
/// created before any watch was on their parents; listing the new
/// directory finds them, and later changes deep down are seen.
#[test]
fn nested_creation_is_listed_and_watched() {
    let mut r = Rig::new();
    r.steps(&[
        ("+app/x/y/z".into(), 3, "app/x, app/x/y, app/x/y/z"),
        ("+app/x/y/z/w".into(), 4, "one level deeper"),
        ("-app/x/y".into(), 1, "the subtree removed"),
    ]);
    assert_eq!(r.s.rewalks(), 1);
    // Watches of removed directories are gone with them.
    assert_eq!(
        r.s.watches(),
        5,
        "the root, kubepods, kubepods/burstable, app and app/x"
    );
}

/// More events than the kernel queues (`IN_Q_OVERFLOW`): the selector
/// walks from scratch, and the selection is right.
#[test]
fn a_queue_overflow_falls_back_to_a_walk() {
    let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .expect("/proc/sys/fs/inotify/max_queued_events")
        .trim()
        .parse()
        .unwrap();
    assert!(
        max <= 1 << 20,
        "max_queued_events {max} is too many to overflow here"
    );
    let mut r = Rig::new();
    // Directories in a watched QoS level that are no pods: the events
    // overflow the queue, the selection stays small (a quick test).
    for i in 0..max + 64 {
        std::fs::create_dir(r.dir.path().join(format!("kubepods/burstable/x{i}"))).unwrap();
    }
    r.mkdir(&pod(1));
    let sel = r.next();
    assert_eq!(rels(&sel), [pod(1).as_str()]);
    assert_eq!(sel, r.truth());
    assert_eq!(r.s.rewalks(), 2, "the overflow made one walk from scratch");
    r.steps(&[(format!("+{}", pod(2)), 2, "incremental again")]);
    assert_eq!(r.s.rewalks(), 2);
}
