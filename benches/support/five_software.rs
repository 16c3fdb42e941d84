//! The one-set config of node_exporter 1.9's perf collector's software
//! profilers, per CPU: what `vs_node_exporter` runs ours with, and the
//! smaller body `gzip` compresses. One copy, in `tests/configs/` (the
//! end-to-end `derived_check` tests read the same file).

/// The config's YAML.
pub(crate) const CONFIG: &str = include_str!("../../tests/configs/five_software.yaml");
