//! The increases of a family's series over a frame's window, and their
//! sum: the inner loop of every frame (at 512 CPUs, about 11,000 series).
//!
//! The engine keeps its series in the same order from one collection to
//! the next and shares each series' label set between collections, so a
//! series is found in the previous collection at the same position, by
//! comparing one pointer. The increases are computed in one tight pass
//! into a buffer the [`Framer`](super::Framer) keeps, and summed with
//! four running sums: a single running sum is a chain of dependent
//! additions (four cycles each), which made it the most expensive part of
//! building a frame.

use crate::snapshot::{Labels, Sample};
use std::collections::HashMap;

/// The increase of each sample of `cur` since `old` (the same family in
/// the previous collection, if it had it), into `out`, in `cur`'s order.
pub(super) fn deltas_into<'o>(
    old: Option<&[Sample]>,
    cur: &[Sample],
    out: &'o mut Vec<f64>,
) -> &'o [f64] {
    out.clear();
    let Some(old) = old else {
        // The family appeared in the window: counted since then.
        out.extend(cur.iter().map(|s| s.value));
        return out;
    };
    // The series at the same positions (the usual case: all of them), in
    // one pass over both collections.
    out.reserve(cur.len());
    for (o, s) in old.iter().zip(cur) {
        if !same_labels(&o.labels, &s.labels) {
            break;
        }
        out.push(delta(Some(o), s));
    }
    let same = out.len();
    if same < cur.len() {
        // The order changed (series came or went): by labels.
        let by_labels: HashMap<&Labels, &Sample> = old.iter().map(|s| (&s.labels, s)).collect();
        out.extend(
            cur[same..]
                .iter()
                .map(|s| delta(by_labels.get(&s.labels).copied(), s)),
        );
    }
    out
}

/// The sum of `v`, by four running sums.
pub(super) fn sum(v: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut quads = v.chunks_exact(4);
    for q in &mut quads {
        for (a, x) in acc.iter_mut().zip(q) {
            *a += x;
        }
    }
    let tail: f64 = quads.remainder().iter().sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// Label sets are shared between collections (cloning one is a reference
/// count): the same pairs in memory are equal without comparing strings.
/// Otherwise their rendered forms are compared (one comparison of bytes
/// instead of one per key and value; the rendering is one-to-one).
pub(super) fn same_labels(a: &Labels, b: &Labels) -> bool {
    a.same(b) || a.rendered() == b.rendered()
}

/// The increase of `s` since `old`.
fn delta(old: Option<&Sample>, s: &Sample) -> f64 {
    match old {
        Some(o) if o.start_unix_nanos == s.start_unix_nanos && s.value >= o.value => {
            s.value - o.value
        }
        // Restarted in the window (or appeared): counted since then.
        _ => s.value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(labels: &Labels, value: f64, start: u64) -> Sample {
        Sample {
            labels: labels.clone(),
            value,
            start_unix_nanos: start,
        }
    }

    fn cpu(c: u32) -> Labels {
        Labels::new(vec![("cpu", c.to_string())])
    }

    #[test]
    fn increases_by_position_by_labels_restarts_and_newcomers() {
        let (a, b, c) = (cpu(0), cpu(1), cpu(2));
        let old = [sample(&a, 10.0, 1), sample(&b, 20.0, 1)];
        let mut out = Vec::new();
        // Same order; b restarted (new start time).
        let cur = [sample(&a, 15.0, 1), sample(&b, 3.0, 2)];
        assert_eq!(deltas_into(Some(&old), &cur, &mut out), [5.0, 3.0]);
        // Order changed, a new series, a label set made anew (equal pairs,
        // another allocation), and one that went down (counted since).
        let cur = [
            sample(&c, 7.0, 1),
            sample(&cpu(0), 12.0, 1),
            sample(&b, 19.0, 1),
        ];
        assert_eq!(deltas_into(Some(&old), &cur, &mut out), [7.0, 2.0, 19.0]);
        // A family that appeared.
        assert_eq!(deltas_into(None, &cur, &mut out), [7.0, 12.0, 19.0]);
    }

    #[test]
    fn the_sum_is_the_sum() {
        for n in 0..11 {
            let v: Vec<f64> = (0..n).map(|i| f64::from(i) * 1.5).collect();
            let want: f64 = v.iter().sum();
            assert_eq!(sum(&v), want, "{n} values");
        }
    }
}
