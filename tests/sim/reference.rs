//! The book's reference pages (`docs/src/reference/`) are what the code
//! generates: a changed flag, metric family, problem code or config
//! default fails here until the pages are regenerated.

use clap::CommandFactory;
use perf_exporter::app::reference::{fixtures, pages, REGENERATE};
use perf_exporter::cli::Args;
use std::path::Path;

#[test]
fn committed_reference_pages_are_what_the_code_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference");
    for (name, text) in pages(&fixtures(), &Args::command()) {
        let p = dir.join(name);
        let committed = std::fs::read_to_string(&p).unwrap_or_default();
        if committed != text {
            let line = committed
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(committed.lines().count().min(text.lines().count()));
            panic!(
                "{} differs from what the code generates (first at line {}: {:?}); regenerate with `{REGENERATE}` and review the diff",
                p.display(),
                line + 1,
                text.lines().nth(line).unwrap_or("<end>")
            );
        }
    }
}
