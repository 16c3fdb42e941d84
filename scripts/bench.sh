#!/usr/bin/env bash
# Every performance benchmark (docs/src/performance.md):
#   1. scripts/bench-vs-node-exporter.sh: ours vs node_exporter 1.9's perf
#      collector on this machine (CPU, latency, RSS, syscalls per scrape);
#   2. benches/scale.rs: a generated 512-CPU, 2-socket node on the simulated
#      PMU, per CPU and with --config.aggregate-cpus, and this host's live
#      kernel (CPU per scrape, response size, RSS);
#   3. benches/cgroup_scale.rs: 200 cgroups x 512 simulated CPUs and x this
#      host's CPUs live (docs/src/performance.md, "Per-workload counting");
#   4. benches/hot_path.rs (criterion): parsing a group read, scaling and
#      accumulating, encoding 10,000 series, a whole collection.
#   5. benches/live_frame.rs (criterion): a live-view frame at 512 CPUs,
#      with and without the per-CPU detail (docs/src/performance.md, "Live view"; the cost of
#      50 viewers is scripts/bench-live-viewers.sh, live kernel, root).
#   6. benches/ring.rs (criterion): drain + decode + aggregate per sample,
#      ring memory at 512 CPUs; scripts/bench-sampling-cpu.sh: the
#      exporter's CPU sampling at 999 Hz (docs/src/performance.md, "Sampling"; root).
#
#   scripts/bench.sh           # full run (several minutes)
#   scripts/bench.sh --short   # smoke test (scripts/test.sh, CI): few scrapes,
#                              # criterion benches run once each
#
# Exits non-zero only when a benchmark cannot run; the numbers and whether
# the targets are met are printed, never enforced (speed and memory are not
# asserted in tests).
set -euo pipefail
cd "$(dirname "$0")/.."

short=0
for a in "$@"; do [[ $a == --short ]] && short=1; done

scripts/bench-vs-node-exporter.sh "$@"
cargo bench --locked --bench scale -- "$@"
if [[ $short == 1 ]]; then
  cargo bench --locked --bench hot_path -- --test
  cargo bench --locked --bench live_frame -- --test
  cargo bench --locked --bench ring -- --test
  scripts/bench-sampling-cpu.sh --seconds 3
else
  cargo bench --locked --bench hot_path
  cargo bench --locked --bench live_frame
  cargo bench --locked --bench ring
  scripts/bench-sampling-cpu.sh
fi
cargo bench --locked --bench cgroup_scale -- "$@"
