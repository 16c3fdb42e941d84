//! The series table: every counter and gauge series ever planned, by
//! index, with its total, its start time and its labels (each distinct
//! label set rendered once and shared by its series); per metric, its series in export order; and the gauge series, whose
//! readings of one collection are averaged over their groups.
//!
//! Invariants: `index` maps each key (metric, label set) to the one
//! series holding it (its `metric` and labels are the key's); series are never removed, so an
//! index stays valid for the engine's life; after
//! [`SeriesTable::refresh`], `order[m]` holds exactly metric `m`'s series
//! in numeric label order (cpu 2 < 10) and `gauges` the series of open
//! gauge members, ascending, each once.

use super::plan::label_order;
use super::{trust, SeriesKey, SeriesState};
use crate::snapshot::Labels;
use std::collections::HashMap;

#[derive(Debug, Default)]
pub(super) struct SeriesTable {
    all: Vec<SeriesState>,
    /// Each distinct label set once, rendered, with its number: the
    /// series of every metric on one CPU share its `{cpu="N"}`.
    label_sets: HashMap<Vec<(&'static str, String)>, (usize, Labels)>,
    /// (metric, label set number) → its series.
    index: HashMap<(usize, usize), usize>,
    /// Per metric: its series in export order.
    order: Vec<Vec<usize>>,
    /// Series of open snapshot (gauge) members.
    gauges: Vec<usize>,
}

impl std::ops::Deref for SeriesTable {
    type Target = [SeriesState];
    fn deref(&self) -> &[SeriesState] {
        &self.all
    }
}

impl std::ops::DerefMut for SeriesTable {
    fn deref_mut(&mut self) -> &mut [SeriesState] {
        &mut self.all
    }
}

impl<'a> IntoIterator for &'a mut SeriesTable {
    type Item = &'a mut SeriesState;
    type IntoIter = std::slice::IterMut<'a, SeriesState>;
    fn into_iter(self) -> Self::IntoIter {
        self.all.iter_mut()
    }
}

impl SeriesTable {
    /// An empty table for `metrics` metrics.
    pub(super) fn new(metrics: usize) -> SeriesTable {
        SeriesTable {
            order: vec![Vec::new(); metrics],
            ..SeriesTable::default()
        }
    }

    /// The index of a series, created on first use.
    pub(super) fn of(&mut self, key: &SeriesKey) -> usize {
        let (set, labels) = match self.label_sets.get(key.1.as_slice()) {
            Some(known) => known.clone(),
            None => {
                let new = (self.label_sets.len(), Labels::new(key.1.clone()));
                self.label_sets.insert(key.1.clone(), new.clone());
                new
            }
        };
        if let Some(&i) = self.index.get(&(key.0, set)) {
            return i;
        }
        let i = self.all.len();
        self.all.push(SeriesState {
            trouble_labels: None,
            trust: None,
            implausible: None,
            window: trust::Window::default(),
            metric: key.0,
            labels,
            value: 0.0,
            has_data: false,
            live: false,
            start_ns: 0,
            gauge_sum: 0.0,
            gauge_groups: 0,
            gauge_last_group: usize::MAX,
            exported: false,
            detail: false,
        });
        self.index.insert((key.0, set), i);
        i
    }

    /// Every series with its key (for the totals of a reload).
    pub(super) fn keyed(&self) -> impl Iterator<Item = (SeriesKey, &SeriesState)> + '_ {
        self.all
            .iter()
            .map(|st| ((st.metric, st.labels.to_vec()), st))
    }

    /// Per metric, its series in export order.
    pub(super) fn order(&self) -> &[Vec<usize>] {
        &self.order
    }

    /// Recomputes what depends on the open groups: the series of `live`
    /// are live (the others leave the output, keeping their totals), the
    /// export order, and the gauge series (`gauges`).
    pub(super) fn refresh(
        &mut self,
        live: impl IntoIterator<Item = usize>,
        gauges: impl IntoIterator<Item = usize>,
    ) {
        let mut is_live = vec![false; self.all.len()];
        for i in live {
            if let Some(l) = is_live.get_mut(i) {
                *l = true;
            }
        }
        for (st, l) in self.all.iter_mut().zip(is_live) {
            st.live = l;
        }
        for o in &mut self.order {
            o.clear();
        }
        for (i, st) in self.all.iter().enumerate() {
            if let Some(o) = self.order.get_mut(st.metric) {
                o.push(i);
            }
        }
        for o in &mut self.order {
            o.sort_by_cached_key(|&i| label_order(&self.all[i].labels));
        }
        let mut gauges: Vec<usize> = gauges.into_iter().collect();
        gauges.sort_unstable();
        gauges.dedup();
        self.gauges = gauges;
    }

    /// Clears the gauges' sums before a collection's reads.
    pub(super) fn reset_gauges(&mut self) {
        for &s in &self.gauges {
            if let Some(st) = self.all.get_mut(s) {
                st.gauge_sum = 0.0;
                st.gauge_groups = 0;
                st.gauge_last_group = usize::MAX;
            }
        }
    }

    /// Gauges: the mean over the groups that read them this collection.
    pub(super) fn finish_gauges(&mut self) {
        for &s in &self.gauges {
            if let Some(st) = self.all.get_mut(s) {
                if st.gauge_groups > 0 {
                    st.value = st.gauge_sum / f64::from(st.gauge_groups);
                    st.has_data = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(metric: usize, cpu: &str) -> SeriesKey {
        (metric, vec![("cpu", cpu.to_string())])
    }

    #[test]
    fn a_key_is_one_series_for_good() {
        let mut t = SeriesTable::new(2);
        let a = t.of(&key(0, "1"));
        let b = t.of(&key(1, "1"));
        assert_ne!(a, b);
        assert_eq!(t.of(&key(0, "1")), a);
        assert_eq!(t.len(), 2);
        assert_eq!(t[b].metric, 1);
        assert_eq!(t[a].labels.rendered(), r#"{cpu="1"}"#);
        assert_eq!(t.keyed().count(), 2);
        assert!(t.keyed().all(|(k, st)| k.0 == st.metric));
        assert!(
            t[a].labels.same(&t[b].labels),
            "one label set, shared by the metrics"
        );
    }

    #[test]
    fn refresh_orders_numerically_and_marks_the_live() {
        let mut t = SeriesTable::new(1);
        let ten = t.of(&key(0, "10"));
        let two = t.of(&key(0, "2"));
        let one = t.of(&key(0, "1"));
        t.refresh([ten, one], []);
        assert_eq!(t.order(), [vec![one, two, ten]]);
        assert!(t[ten].live && t[one].live && !t[two].live);
        t.refresh([two], []);
        assert!(!t[ten].live && t[two].live);
        assert_eq!(
            t.order(),
            [vec![one, two, ten]],
            "every series keeps its place"
        );
    }

    #[test]
    fn a_gauge_is_the_mean_of_its_groups() {
        let mut t = SeriesTable::new(1);
        let g = t.of(&key(0, "0"));
        t.refresh([g], [g, g]);
        for (group, v) in [(0, 2.0), (1, 4.0)] {
            let st = &mut t[g];
            st.gauge_sum += v;
            if st.gauge_last_group != group {
                st.gauge_last_group = group;
                st.gauge_groups += 1;
            }
        }
        t.finish_gauges();
        assert_eq!(t[g].value, 3.0);
        assert!(t[g].has_data);
        t.reset_gauges();
        t.finish_gauges();
        assert_eq!(t[g].value, 3.0, "no reading: the last one stays");
        assert_eq!(t[g].gauge_groups, 0);
    }
}
