//! `perf-exporter rules`: the Prometheus recording rules of the config's
//! derived metrics (`derived:`), the same table `stat`, the live view and
//! OTLP evaluate. Each entry whose expression has a rate form
//! ([`crate::derive::promql`]) becomes a rule named by its `record:`
//! (`instance:perf_<name>:rate5m` without one) over the node's summed
//! 5-minute rates; an entry with alternatives (`expr:` as a list) is one
//! rule joining all of them with `or`, so the series each platform
//! exports give its value (and is a rule only when every alternative has
//! a rate form). Each other entry becomes a comment saying why: the
//! exporter evaluates it (`stat`, the live view, OTLP gauges, and the
//! `/metrics` gauge `perf_derived_<name>`:
//! [`crate::export::prometheus::derived`], which partitions the table).
//!
//! Without `--splice` the output is a rules file of one group,
//! `perf-exporter.derived.rules`. With `--splice FILE` the rules replace
//! the lines between `# BEGIN perf-exporter rules` and `# END
//! perf-exporter rules` in FILE (how the shipped
//! `grafana/rules/perf-exporter.rules.yml` is generated: a test fails
//! when it drifts from the default config's table).

use std::fmt::Write as _;
use std::path::Path;

use super::{AppError, Output};
use crate::config::derived::{Derived, DerivedTable};
use crate::export::prometheus::derived::{gauge_name, partition, Form};
use crate::terminal::escape;

/// The line before the generated rules in a spliced file.
pub(super) const BEGIN: &str = "# BEGIN perf-exporter rules";
/// The line after them.
pub(super) const END: &str = "# END perf-exporter rules";

/// The largest file `--splice` reads.
const MAX_FILE: u64 = 4 << 20;

/// Rule items' indentation (under `groups: - rules:`).
const INDENT: &str = "      ";

/// The record name of `d`.
pub(super) fn record(d: &Derived) -> String {
    d.record
        .clone()
        .unwrap_or_else(|| format!("instance:perf_{}:rate5m", d.name))
}

/// One comment line per line of `text` (controls escaped).
fn comment(out: &mut String, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "{INDENT}# {}", escape(line));
    }
}

/// The rule items of `table` (each at [`INDENT`]), in the table's order.
pub(super) fn rule_items(table: &DerivedTable) -> String {
    let mut out = String::new();
    for (d, form) in partition(table) {
        // Every alternative, as the rule holds them all.
        let texts: Vec<&str> = d.formulas().map(|f| f.text.as_str()).collect();
        let what = format!("derived metric `{}`: {}", d.name, texts.join("; or "));
        match form {
            Form::Rule(q) => {
                match &d.help {
                    Some(h) => comment(&mut out, &format!("{h} ({what})")),
                    None => comment(&mut out, &format!("({what})")),
                }
                let _ = writeln!(out, "{INDENT}- record: {}", record(d));
                let _ = writeln!(out, "{INDENT}  expr: |");
                for line in q.lines() {
                    let _ = writeln!(out, "{INDENT}    {line}");
                }
            }
            Form::Gauge(why) => comment(
                &mut out,
                &format!(
                    "No rule for the {what}\n  {why}: the exporter evaluates it (stat, the live view, OTLP; /metrics as the gauge {}).",
                    gauge_name(d)
                ),
            ),
        }
    }
    out
}

/// A rules file of one group with `table`'s rules.
pub(super) fn rules_file(table: &DerivedTable) -> String {
    let items = rule_items(table);
    let body = if items.contains("- record:") {
        items
    } else {
        format!("{INDENT}[]\n{items}")
    };
    format!(
        "# Prometheus recording rules of perf-exporter's derived metrics\n\
         # (perf-exporter rules). Ratios are of the node's summed rates.\n\
         groups:\n  - name: perf-exporter.derived.rules\n    rules:\n{body}"
    )
}

/// `text` with the lines between [`BEGIN`] and [`END`] replaced by
/// `items`.
pub(super) fn splice(text: &str, items: &str) -> Result<String, String> {
    let begin = text
        .find(BEGIN)
        .ok_or_else(|| format!("no `{BEGIN}` line"))?;
    let from = text[begin..]
        .find('\n')
        .map_or(text.len(), |i| begin + i + 1);
    let end = text[from..]
        .find(END)
        .map(|i| from + i)
        .ok_or_else(|| format!("no `{END}` line after `{BEGIN}`"))?;
    // The END marker's own indentation stays.
    let end = text[..end].rfind('\n').map_or(end, |i| i + 1);
    Ok(format!("{}{items}{}", &text[..from], &text[end..]))
}

/// Runs `rules`: the rules file on standard output, or spliced into
/// `splice_into`.
pub(super) fn run(table: &DerivedTable, splice_into: Option<&Path>) -> Result<Output, AppError> {
    let Some(path) = splice_into else {
        return Ok(Output::ok(rules_file(table)));
    };
    let shown = escape(&path.display().to_string()).into_owned();
    let text = crate::bounded::read_string(path, MAX_FILE)
        .map_err(|e| AppError::Rules(format!("{shown}: {e}")))?;
    let new =
        splice(&text, &rule_items(table)).map_err(|e| AppError::Rules(format!("{shown}: {e}")))?;
    std::fs::write(path, new).map_err(|e| AppError::Rules(format!("{shown}: {e}")))?;
    Ok(Output::ok(format!("{shown}: rules written\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// The shipped rules file holds the default config's rules: after a
    /// change of the table, `perf-exporter rules --splice
    /// grafana/rules/perf-exporter.rules.yml` (then
    /// `scripts/gen-deploy-assets.py` for the chart's copy).
    #[test]
    fn the_shipped_rules_are_the_default_configs() {
        let shipped = include_str!("../../grafana/rules/perf-exporter.rules.yml");
        let table = Config::default_config().derived;
        let want = splice(shipped, &rule_items(&table)).unwrap();
        assert!(
            shipped == want,
            "grafana/rules/perf-exporter.rules.yml drifted from the default config's derived: table; run `cargo run -- rules --splice grafana/rules/perf-exporter.rules.yml && python3 scripts/gen-deploy-assets.py`"
        );
    }

    #[test]
    fn a_rule_per_expressible_entry_a_comment_for_the_others() {
        let yaml = "sets:\n  - name: s\n    events:\n      - metric: perf_a_total\n        event: instructions\n      - metric: perf_b_total\n        event: cycles\nderived:\n  - name: ab\n    help: A per B.\n    expr: perf_a_total / perf_b_total\n  - name: twice\n    record: instance:perf_twice:ratio_rate5m\n    expr: 2 * ab\n  - name: smt\n    expr: \"ab if #smt_on else 0\"\n";
        let cfg = Config::parse(yaml, "t.yaml").unwrap();
        let file = rules_file(&cfg.derived);
        let a = "sum by (job, instance) (rate(perf_a_total{job=\"perf-exporter\"}[5m]))";
        let b = "sum by (job, instance) (rate(perf_b_total{job=\"perf-exporter\"}[5m]))";
        let want = format!(
            "# Prometheus recording rules of perf-exporter's derived metrics\n\
             # (perf-exporter rules). Ratios are of the node's summed rates.\n\
             groups:\n  - name: perf-exporter.derived.rules\n    rules:\n\
             \x20     # A per B. (derived metric `ab`: perf_a_total / perf_b_total)\n\
             \x20     - record: instance:perf_ab:rate5m\n\
             \x20       expr: |\n\
             \x20         {a}\n\
             \x20         /\n\
             \x20         {b}\n\
             \x20     # (derived metric `twice`: 2 * ab)\n\
             \x20     - record: instance:perf_twice:ratio_rate5m\n\
             \x20       expr: |\n\
             \x20         2 * {a}\n\
             \x20         /\n\
             \x20         {b}\n\
             \x20     # No rule for the derived metric `smt`: ab if #smt_on else 0\n\
             \x20     #   `if else` has no rate form here: the exporter evaluates it (stat, the live view, OTLP; /metrics as the gauge perf_derived_smt).\n"
        );
        assert_eq!(file, want);
    }

    #[test]
    fn splicing_replaces_the_marked_lines_only() {
        let text = "a\n  # BEGIN perf-exporter rules\n  old\n  # END perf-exporter rules\nb\n";
        assert_eq!(
            splice(text, "  new\n").unwrap(),
            "a\n  # BEGIN perf-exporter rules\n  new\n  # END perf-exporter rules\nb\n"
        );
        assert!(splice("a\n", "x").unwrap_err().contains("BEGIN"));
        assert!(splice("# BEGIN perf-exporter rules\n", "x")
            .unwrap_err()
            .contains("END"));
    }
}
