//! The `list` and `check` reports, as data (serialisable to JSON) and as
//! text for terminals, and when `check` fails ([`CheckReport::failure`],
//! the same rule `serve` refuses by: [`nothing_to_count`]).

/// The widest name column of the text reports: longer names overflow it
/// (a format width must stay below 65,536, and a table that wide helps
/// no one).
const MAX_COLUMN: usize = 64;

mod budget;
mod cgroups;
mod check;
pub mod counters;
mod derived;
mod identity;
mod list;
mod refusal;
pub mod selftest;
mod tried;
pub use budget::{BudgetFamily, CheckBudget};
pub use cgroups::{backend_line, cgroup_rows, CgroupRow, CheckBackend, CheckCgroups};
pub use check::{CheckInstance, CheckMetric, CheckReport};
pub use derived::{CheckDefaultTable, CheckDerived};
pub use identity::CheckIdentity;
pub use list::{ListEvent, ListReport};
pub use refusal::{diagnose, explain_first, nothing_to_count, Counting, NothingToCount};
pub use tried::CheckTried;

/// The width of a name column: its widest name, or its heading if wider,
/// at most [`MAX_COLUMN`].
fn column<'a>(names: impl Iterator<Item = &'a str>, heading: &str) -> usize {
    names
        .map(str::len)
        .max()
        .unwrap_or(0)
        .max(heading.len())
        .min(MAX_COLUMN)
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}
