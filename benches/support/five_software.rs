//! The one-set config of node_exporter 1.9's perf collector's software
//! profilers, per CPU: what `vs_node_exporter` runs ours with, and the
//! smaller body `gzip` compresses.

/// The config's YAML.
pub(crate) const CONFIG: &str = "\
# node_exporter 1.9's software profilers, per CPU.
sets:
  - name: software
    events:
      - metric: perf_context_switches_total
        event: context-switches
      - metric: perf_cpu_migrations_total
        event: cpu-migrations
      - metric: perf_page_faults_total
        event: page-faults
      - metric: perf_minor_faults_total
        event: minor-faults
      - metric: perf_major_faults_total
        event: major-faults
";
