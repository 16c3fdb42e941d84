//! Profiles as a flame graph's tree in JSON, for the live page (which
//! draws it without a protobuf decoder): `GET /api/v1/profile?format=json`.
//!
//! The samples' stacks merged from the outermost frame in: each node is a
//! frame under its caller, with the samples and events of the stacks
//! through it (its own and its callees'); children sorted by name.
//!
//! ```text
//! {"event": "cpu-clock", "unit": "nanoseconds", "label": "cgroup",
//!  "seconds": 3.0, "notes": [...], "frames_left_out": 0,
//!  "root": {"name": "all", "kind": "root", "samples": 10, "events": 100,
//!           "children": [{"name": "main", "kind": "user", ...}]}}
//! ```
//!
//! `kind` is `kernel` (a kernel frame), `user` (a symbolized user frame)
//! or `unsymbolized` (named `<file name>+0x<offset>`, the offset in the
//! module's file). Bounds: at most [`MAX_NODES`] frames (the hottest: a
//! frame left out counts in its caller's value, and `frames_left_out`
//! says how many), names of at most [`MAX_NAME_BYTES`] bytes (longer ones
//! cut, with `…`); so an answer is at most about 3.5 MB.

use super::pprof::{unit, Meta};
use crate::engine::sample::{Frame, ProfileSample, KERNEL_MODULE};
use serde::Serialize;
use std::collections::BTreeMap;

/// Frames of a flame graph at most (besides its root).
pub const MAX_NODES: usize = 10_000;
/// A frame's name at most, in bytes (a longer one is cut).
pub const MAX_NAME_BYTES: usize = 256;

/// One frame of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// The function, or `<file name>+0x<offset>`.
    pub name: String,
    /// `root`, `kernel`, `user` or `unsymbolized`.
    pub kind: &'static str,
    /// Samples of the stacks through it.
    pub samples: u64,
    /// Their events (the sum of their periods).
    pub events: u64,
    /// Its callees, by name.
    pub children: Vec<Node>,
}

/// The flame graph of a profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flame {
    /// The sampled event.
    pub event: String,
    /// The unit of `events` (`nanoseconds` or `count`).
    pub unit: &'static str,
    /// What the profile was filtered and labelled by.
    pub label: &'static str,
    /// How long it sampled.
    pub seconds: f64,
    /// What was said of it (the fallback event, lost records, ...).
    pub notes: Vec<String>,
    /// Frames left out over [`MAX_NODES`].
    pub frames_left_out: usize,
    /// The root (`all`), holding every sample.
    pub root: Node,
}

/// A node while the tree is built: children by (name, kind).
struct Tmp {
    name: String,
    kind: &'static str,
    samples: u64,
    events: u64,
    depth: usize,
    children: BTreeMap<(String, &'static str), usize>,
}

/// `s` cut to at most [`MAX_NAME_BYTES`] bytes (at a character boundary,
/// ending in `…`).
fn bounded(s: &str) -> String {
    if s.len() <= MAX_NAME_BYTES {
        return s.to_string();
    }
    let mut end = MAX_NAME_BYTES - '…'.len_utf8();
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn name_of(f: &Frame) -> (String, &'static str) {
    let kind = if &*f.module == KERNEL_MODULE {
        "kernel"
    } else if f.function.is_some() {
        "user"
    } else {
        "unsymbolized"
    };
    let name = match &f.function {
        Some(n) => bounded(n),
        None => {
            let file = f.module.rsplit('/').next().unwrap_or(&f.module);
            bounded(&format!("{file}+{:#x}", f.address))
        }
    };
    (name, kind)
}

/// The flame graph of `samples` (`max_nodes` frames at most).
fn build(meta: &Meta, samples: &[ProfileSample], max_nodes: usize) -> Flame {
    let mut arena = vec![Tmp {
        name: "all".into(),
        kind: "root",
        samples: 0,
        events: 0,
        depth: 0,
        children: BTreeMap::new(),
    }];
    for s in samples {
        let mut at = 0;
        add(&mut arena[at], s);
        for f in s.frames.iter().rev() {
            let key = name_of(f);
            let next = arena.len();
            let depth = arena[at].depth + 1;
            let child = *arena[at].children.entry(key.clone()).or_insert(next);
            if child == next {
                arena.push(Tmp {
                    name: key.0,
                    kind: key.1,
                    samples: 0,
                    events: 0,
                    depth,
                    children: BTreeMap::new(),
                });
            }
            at = child;
            add(&mut arena[at], s);
        }
    }
    // Over the bound, the hottest frames are kept: a caller has at least
    // its callees' samples and is shallower, so it sorts before them and
    // every kept frame's caller is kept.
    let mut keep = vec![true; arena.len()];
    let frames = arena.len() - 1;
    if frames > max_nodes {
        let mut order: Vec<usize> = (1..arena.len()).collect();
        order.sort_by(|&a, &b| {
            arena[b]
                .samples
                .cmp(&arena[a].samples)
                .then(arena[a].depth.cmp(&arena[b].depth))
                .then(a.cmp(&b))
        });
        for &i in &order[max_nodes..] {
            keep[i] = false;
        }
    }
    Flame {
        event: meta.event.clone(),
        unit: unit(&meta.event),
        label: meta.label,
        seconds: meta.duration.as_secs_f64(),
        notes: meta.comments.clone(),
        frames_left_out: frames.saturating_sub(max_nodes),
        root: node(&arena, &keep, 0),
    }
}

fn add(t: &mut Tmp, s: &ProfileSample) {
    t.samples = t.samples.saturating_add(s.samples);
    t.events = t.events.saturating_add(s.events);
}

fn node(arena: &[Tmp], keep: &[bool], i: usize) -> Node {
    let t = &arena[i];
    Node {
        name: t.name.clone(),
        kind: t.kind,
        samples: t.samples,
        events: t.events,
        children: t
            .children
            .values()
            .filter(|&&c| keep[c])
            .map(|&c| node(arena, keep, c))
            .collect(),
    }
}

/// The flame graph of `samples`, bounded (see the module's doc).
pub fn flame(meta: &Meta, samples: &[ProfileSample]) -> Flame {
    build(meta, samples, MAX_NODES)
}

/// [`flame`] as JSON.
pub fn json(meta: &Meta, samples: &[ProfileSample]) -> Vec<u8> {
    // Strings and numbers only: serializing cannot fail.
    serde_json::to_vec(&flame(meta, samples)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    fn frame(f: Option<&str>, module: &str, address: u64) -> Frame {
        Frame {
            function: f.map(Arc::from),
            module: module.into(),
            build_id: None,
            address,
        }
    }

    fn sample(frames: Vec<Frame>, samples: u64) -> ProfileSample {
        ProfileSample {
            frames,
            name: "/w".into(),
            pid: 7,
            samples,
            events: samples * 10,
        }
    }

    fn meta() -> Meta {
        Meta {
            event: "cpu-clock".into(),
            label: "cgroup",
            start: SystemTime::UNIX_EPOCH,
            duration: Duration::from_millis(1500),
            comments: vec!["no PMU: cpu-clock".into()],
        }
    }

    /// Stacks (innermost first) merged from the outermost frame; kernel
    /// and unsymbolized frames named and kinded; names escaped by JSON.
    #[test]
    fn stacks_merge_into_one_tree_in_exact_json() {
        let main = || frame(Some("main"), "/bin/hot", 0x10);
        let samples = vec![
            sample(vec![frame(Some("hot_spin"), "/bin/hot", 0x20), main()], 8),
            sample(
                vec![
                    frame(Some("do_syscall_64"), KERNEL_MODULE, 0xffff_0000),
                    frame(None, "/lib/libc.so.6", 0x2724a),
                    main(),
                ],
                1,
            ),
            sample(vec![frame(Some("a\"<b>"), "/bin/hot", 0x30)], 1),
        ];
        let got = String::from_utf8(json(&meta(), &samples)).unwrap();
        let want = concat!(
            r#"{"event":"cpu-clock","unit":"nanoseconds","label":"cgroup","seconds":1.5,"#,
            r#""notes":["no PMU: cpu-clock"],"frames_left_out":0,"#,
            r#""root":{"name":"all","kind":"root","samples":10,"events":100,"children":["#,
            r#"{"name":"a\"<b>","kind":"user","samples":1,"events":10,"children":[]},"#,
            r#"{"name":"main","kind":"user","samples":9,"events":90,"children":["#,
            r#"{"name":"hot_spin","kind":"user","samples":8,"events":80,"children":[]},"#,
            r#"{"name":"libc.so.6+0x2724a","kind":"unsymbolized","samples":1,"events":10,"children":["#,
            r#"{"name":"do_syscall_64","kind":"kernel","samples":1,"events":10,"children":[]}]}]}]}}"#
        );
        assert_eq!(got, want);
        let empty = String::from_utf8(json(&meta(), &[])).unwrap();
        assert!(
            empty.ends_with(
                r#""root":{"name":"all","kind":"root","samples":0,"events":0,"children":[]}}"#
            ),
            "{empty}"
        );
    }

    /// Over the bound the hottest frames stay, each with its callers;
    /// the rest count in their callers and are counted as left out.
    #[test]
    fn the_hottest_frames_are_kept_and_names_are_bounded() {
        let long = "x".repeat(300);
        let samples = vec![
            sample(
                vec![
                    frame(Some("hot"), "/b", 1),
                    frame(Some("mid"), "/b", 2),
                    frame(Some("main"), "/b", 3),
                ],
                5,
            ),
            sample(
                vec![frame(Some(&long), "/b", 4), frame(Some("main"), "/b", 3)],
                2,
            ),
            sample(vec![frame(Some("cold"), "/b", 5)], 1),
        ];
        let f = build(&meta(), &samples, 3);
        assert_eq!(f.frames_left_out, 2);
        assert_eq!(f.root.samples, 8);
        let main = &f.root.children[0];
        assert_eq!((main.name.as_str(), main.samples), ("main", 7));
        let names: Vec<&str> = main.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["mid"]);
        assert_eq!(main.children[0].children[0].name, "hot");
        assert_eq!(f.root.children.len(), 1, "cold is left out");
        let f = flame(&meta(), &samples);
        let cut = &f.root.children[1].children[1].name;
        assert!(cut.len() <= MAX_NAME_BYTES && cut.ends_with('…'), "{cut}");
    }
}
