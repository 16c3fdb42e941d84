//! The command line's page (`cli.md`): every subcommand and flag, from
//! clap's command.

use super::{cell, sentence, GENERATED};
use std::fmt::Write as _;

/// One flag as a table row.
fn flag_row(a: &clap::Arg) -> String {
    let mut name = String::new();
    if let Some(s) = a.get_short() {
        let _ = write!(name, "`-{s}`, ");
    }
    let long = a.get_long().unwrap_or(a.get_id().as_str());
    let _ = write!(name, "`--{long}");
    if a.get_action().takes_values() {
        let values = a
            .get_value_names()
            .map(|v| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
        let _ = write!(name, " <{values}>");
    }
    name.push('`');
    let default = a
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(", ");
    let help = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let mut help = sentence(&help);
    let values: Vec<String> = if a.get_action().takes_values() {
        a.get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| format!("`{}`", v.get_name()))
            .collect()
    } else {
        Vec::new()
    };
    if !values.is_empty() {
        let _ = write!(help, " One of {}.", values.join(", "));
    }
    format!("| {} | {} | {} |\n", cell(&name), default, help)
}

/// The flags of `args` in a table (hidden ones left out).
fn flag_table<'a>(args: impl Iterator<Item = &'a clap::Arg>) -> String {
    let mut out = String::from("| flag | default | what |\n|---|---|---|\n");
    for a in args.filter(|a| !a.is_hide_set() && !a.is_positional()) {
        out.push_str(&flag_row(a));
    }
    out
}

/// Every subcommand and flag, from clap's command.
pub(super) fn cli_page(cmd: &clap::Command) -> String {
    let mut out = String::from(GENERATED);
    out.push_str("# Command line\n\n");
    if let Some(about) = cmd.get_about() {
        let _ = writeln!(out, "{}\n", sentence(&about.to_string()));
    }
    out.push_str(
        "Every duration takes Prometheus's syntax with a unit (`500ms`, `10s`, `1m30s`; \
         units `ms s m h d w`), at most a year. `-h`/`--help` and `--version` are \
         accepted everywhere.\n\n",
    );
    out.push_str("## Commands\n\n| command | what |\n|---|---|\n");
    out.push_str("| `perf-exporter` | the same as `perf-exporter serve` |\n");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        let _ = writeln!(
            out,
            "| [`{0}`](#{0}) | {1} |",
            sub.get_name(),
            sentence(&about)
        );
    }
    out.push_str("\n## Global flags\n\nEvery command takes these, before or after its name.\n\n");
    out.push_str(&flag_table(
        cmd.get_arguments().filter(|a| a.is_global_set()),
    ));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let _ = write!(out, "\n## {}\n\n", sub.get_name());
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            let _ = write!(out, "{}\n\n", sentence(&about.to_string()));
        }
        if sub.get_name() == "serve" {
            out.push_str("The bare command takes these flags too; no other command does.\n\n");
        }
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            out.push_str(&flag_table(sub.get_arguments()));
        } else {
            out.push_str("Only the global flags.\n");
        }
    }
    out
}
