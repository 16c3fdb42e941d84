#!/usr/bin/env bash
# perf-exporter against node_exporter 1.9's perf collector, side by side on
# this machine, for the same events (node_exporter's software profilers:
# context-switches, cpu-migrations, page-faults, minor-faults, major-faults)
# on the same CPUs. Both are scraped the same number of times, interleaved;
# the report gives CPU time per scrape (ours/theirs), median and p99 scrape
# latency, peak RSS, and syscalls per scrape by class (strace). See
# benches/vs_node_exporter.rs.
#
#   scripts/bench-vs-node-exporter.sh [--short] [--scrapes N] [--gzip] [--also PATH]...
#
# --gzip: every scrape asks for gzip (Accept-Encoding: gzip), as Prometheus
# does. --also PATH (repeatable): another perf-exporter build, scraped in
# the same interleaving and reported in a column of its own (an A/B).
#
# Needs root (system-wide perf counting, strace attaching) and strace
# (installed with apt-get when missing and possible). node_exporter comes
# from scripts/fetch-servers.sh (into .cache/servers, or $SERVERS_DIR).
# Exits non-zero only when the benchmark cannot run; whether the targets
# are met is printed.
set -euo pipefail
cd "$(dirname "$0")/.."

node_exporter=$(scripts/fetch-servers.sh ${SERVERS_DIR:+"$SERVERS_DIR"} | sed -n 's/^NODE_EXPORTER=//p')
[[ -x $node_exporter ]] || {
  echo "bench: node_exporter not found after scripts/fetch-servers.sh" >&2
  exit 1
}
if ! command -v strace >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "bench: installing strace" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >&2 || true
  fi
  command -v strace >/dev/null || {
    echo "bench: strace is required (apt-get install strace)" >&2
    exit 1
  }
fi
exec cargo bench --locked --bench vs_node_exporter -- --node-exporter "$node_exporter" --strace "$(command -v strace)" "$@"
