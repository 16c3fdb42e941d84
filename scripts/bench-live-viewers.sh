#!/usr/bin/env bash
# What 50 live-view viewers at 1 s cost the exporter, for
# docs/src/performance.md, "Live view" (a report, never an assertion): the release binary on this
# host's live kernel (root), idle for 30 s, then 30 s with 50 WebSocket
# clients on /api/v1/stream?interval=1s; the exporter's utime+stime from
# /proc/<pid>/stat as a share of one core (benches/live_viewers.rs).
#
#   scripts/bench-live-viewers.sh                      # 50 viewers, 30 s
#   scripts/bench-live-viewers.sh --seconds 10 --viewers 100 --no-per-cpu
#   scripts/bench-live-viewers.sh --per-cpu all     # every per-CPU counter
#   EXPORTER=target/debug/perf-exporter scripts/bench-live-viewers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

exe=${EXPORTER:-target/release/perf-exporter}
if [[ -z ${EXPORTER:-} ]]; then
  cargo build --locked --release --bin perf-exporter
fi
[[ -x $exe ]] || { echo "$exe: no such executable" >&2; exit 1; }
cargo bench --locked --bench live_viewers -- --exporter "$exe" "$@"
