//! Writing the imported config: the report as comments, `sets:`, then
//! `derived:`.

use std::fmt::Write as _;

use super::{Counted, Skipped, Taken};

/// A YAML string: JSON's double-quoted form is YAML's.
pub(super) fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Text from the files as one comment line's worth: no line breaks, no
/// control characters.
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

pub(super) fn write_yaml(
    files: &[(String, String)],
    sets: &[(String, Vec<Counted>)],
    order: &[&Taken],
    skipped: &[Skipped],
    dropped: &[Skipped],
) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "# Written by `perf-exporter metrics import` from:");
    for (f, _) in files {
        let _ = writeln!(y, "#   {}", comment(f));
    }
    let _ = writeln!(
        y,
        "# {} metrics taken, {} left out.",
        order.len(),
        skipped.len()
    );
    for s in skipped {
        let _ = writeln!(y, "# left out: {}: {}", comment(&s.metric), comment(&s.why));
    }
    for s in dropped {
        let _ = writeln!(
            y,
            "# threshold left out: {}: {}",
            comment(&s.metric),
            comment(&s.why)
        );
    }
    let _ = writeln!(y, "sets:");
    for (name, events) in sets {
        let _ = writeln!(y, "  - name: {}", q(name));
        let _ = writeln!(y, "    per: socket");
        let _ = writeln!(y, "    events:");
        for c in events {
            let _ = writeln!(y, "      - metric: {}", q(&c.metric));
            if let Some(h) = &c.help {
                let _ = writeln!(y, "        help: {}", q(h));
            }
            let specs: Vec<String> = c.specs.iter().map(|s| q(s)).collect();
            let _ = writeln!(y, "        event: [{}]", specs.join(", "));
        }
    }
    let _ = writeln!(y, "derived:");
    for t in order {
        let _ = writeln!(y, "  - name: {}", q(&t.name));
        if let Some(h) = &t.help {
            let _ = writeln!(y, "    help: {}", q(h));
        }
        if let Some(u) = &t.unit {
            let _ = writeln!(y, "    unit: {}", q(u));
        }
        if let Some(g) = &t.group {
            let _ = writeln!(y, "    group: {}", q(g));
        }
        match &t.requires_cpu {
            None => {
                let _ = writeln!(y, "    expr: {}", q(&t.expr));
            }
            Some(g) => {
                let _ = writeln!(y, "    expr:");
                let _ = writeln!(y, "      - expr: {}", q(&t.expr));
                let _ = writeln!(y, "        requires_cpu: {}", q(g));
            }
        }
        if let Some(th) = &t.threshold {
            let _ = writeln!(y, "    threshold: {}", q(th));
        }
        if let Some(r) = &t.record {
            let _ = writeln!(y, "    record: {}", q(r));
        }
    }
    y
}
