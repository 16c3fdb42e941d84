//! The series budget of a config on a host: how many series each family
//! of a scrape has, in all, and on how many CPUs (issue 29: what a fleet
//! pays for is series). Counted from the engine's plan without opening a
//! counter ([`crate::engine::series_budget`]): what `serve`'s first
//! collection would export there, at the aggregation level each set asks
//! for.

use crate::snapshot::Family;
use crate::terminal::escape;
use serde::Serialize;
use std::fmt::Write as _;

/// One family of the budget.
#[derive(Debug, Serialize)]
pub struct BudgetFamily {
    /// The family's name.
    pub family: String,
    /// Its series (samples of one collection).
    pub series: usize,
}

/// The series the counters' families export (the exporter's own metrics,
/// `perf_exporter_build_info`, `process_*` and the like, are not counted).
#[derive(Debug, Serialize)]
pub struct CheckBudget {
    /// The host's online CPUs.
    pub cpus: usize,
    /// Every family with at least one series, in scrape order.
    pub families: Vec<BudgetFamily>,
    /// All their series.
    pub total: usize,
}

impl CheckBudget {
    /// The budget of one collection's families on `cpus` online CPUs.
    pub fn new(families: &[Family], cpus: usize) -> Self {
        Self::from_counts(
            families
                .iter()
                .map(|f| (f.name.to_string(), f.samples.len()))
                .collect(),
            cpus,
        )
    }

    /// The budget from each family's series count (in scrape order) on
    /// `cpus` online CPUs; families without a series are left out.
    pub fn from_counts(counts: Vec<(String, usize)>, cpus: usize) -> Self {
        let families: Vec<BudgetFamily> = counts
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(family, series)| BudgetFamily { family, series })
            .collect();
        CheckBudget {
            cpus,
            total: families.iter().map(|f| f.series).sum(),
            families,
        }
    }

    /// The text of `check`: the total first, then one line per family.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "series budget: {} series on {} CPUs ({:.1} per CPU), by family:",
            self.total,
            self.cpus,
            self.total as f64 / self.cpus.max(1) as f64
        );
        let w = super::column(self.families.iter().map(|f| f.family.as_str()), "");
        for f in &self.families {
            let _ = writeln!(s, "  {:w$}  {:>6}", escape(&f.family), f.series);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Kind, Labels, Sample};

    fn family(name: &str, n: usize) -> Family {
        Family {
            name: name.to_string().into(),
            help: crate::snapshot::Text::of(""),
            kind: Kind::Gauge,
            samples: (0..n)
                .map(|i| Sample {
                    labels: Labels::new(vec![("cpu", i.to_string())]),
                    value: 1.0,
                    start_unix_nanos: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn counts_series_per_family_and_in_all() {
        let b = CheckBudget::new(
            &[
                family("a_total", 4),
                family("empty", 0),
                family("b\u{1b}", 2),
            ],
            4,
        );
        assert_eq!(b.total, 6);
        assert_eq!(b.families.len(), 2);
        assert_eq!(
            b.text(),
            "series budget: 6 series on 4 CPUs (1.5 per CPU), by family:\n  a_total       4\n  b\\x1b         2\n"
        );
    }
}
