//! A profile's samples: the stacks of [`Stacks`], each named by its
//! attribution key (a process's name, a cgroup's path, a pod's uid),
//! filtered, and symbolized by [`Symbolizer`]. Equal results are summed.

use super::stacks::Stacks;
use super::symbolize::{Backend, Frame, Symbolizer};
use super::{Aggregate, Namer};
use std::collections::HashMap;

/// Which samples a profile keeps.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProfileFilter {
    /// All of them.
    #[default]
    All,
    /// Those whose key has this name (a pod's uid with `by pod`, a
    /// cgroup's path with `by cgroup`, a process's name).
    Name(String),
    /// Those of this process.
    Pid(u32),
}

/// One stack of a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileSample {
    /// The frames, innermost first.
    pub frames: Vec<Frame>,
    /// The name of its attribution key.
    pub name: String,
    /// The process.
    pub pid: u32,
    /// Samples.
    pub samples: u64,
    /// Sum of their periods.
    pub events: u64,
}

/// The samples of `stacks` that `filter` keeps, named and symbolized,
/// sorted by samples (most first); with `limit`, only that many of the
/// hottest stacks (before symbolization, so only they cost lookups).
pub(super) fn build(
    stacks: &Stacks,
    sy: &mut Symbolizer,
    agg: &Aggregate,
    namer: &mut Namer,
    filter: &ProfileFilter,
    limit: Option<usize>,
) -> Vec<ProfileSample> {
    let bz = Backend::new();
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut out: HashMap<(String, u32, Vec<Frame>), (u64, u64)> = HashMap::new();
    // With a limit, only the hottest raw stacks are symbolized.
    let mut raw: Vec<_> = stacks.map.iter().collect();
    if limit.is_some() {
        raw.sort_by(|a, b| b.1.samples.cmp(&a.1.samples).then_with(|| a.0.cmp(b.0)));
    }
    let mut kept = 0usize;
    for (k, sums) in raw {
        if limit.is_some_and(|l| kept >= l) {
            break;
        }
        if let ProfileFilter::Pid(p) = filter {
            if k.pid != *p {
                continue;
            }
        }
        let name = names
            .entry(k.key)
            .or_insert_with(|| namer.name(agg, k.key).0)
            .clone();
        if let ProfileFilter::Name(n) = filter {
            if *n != name {
                continue;
            }
        }
        kept += 1;
        let frames = sy.resolve(&bz, k.pid, &k.frames);
        let e = out.entry((name, k.pid, frames)).or_default();
        e.0 += sums.samples;
        e.1 += sums.events;
    }
    let mut v: Vec<ProfileSample> = out
        .into_iter()
        .map(|((name, pid, frames), (samples, events))| ProfileSample {
            frames,
            name,
            pid,
            samples,
            events,
        })
        .collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
    v
}
