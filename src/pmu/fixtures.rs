//! For the unit tests of every stage: the PMU tables of the sysfs
//! fixtures (`tests/fixtures/sysfs`).

use super::PmuTable;
use std::path::Path;

/// The PMU table of the sysfs fixture `name` (`intel-skx`, `vm-no-pmu`, ...).
pub(crate) fn table(name: &str) -> PmuTable {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name);
    PmuTable::discover(&root).expect("the fixture's PMU table")
}
