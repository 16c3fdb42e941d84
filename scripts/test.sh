#!/usr/bin/env bash
# Runs every test, including the end-to-end ones against real Prometheus and
# VictoriaMetrics. Run as root on Linux: the live tests count system-wide
# (perf_event_open with pid=-1), mount tracefs if needed, and hotplug cpu1.
#
#   scripts/test.sh            # fetch servers (cached in .cache/servers), then cargo test,
#                              # then the benchmarks' smoke test (scripts/bench.sh --short)
#   scripts/test.sh -- FILTER  # extra arguments go to cargo test
set -euo pipefail
cd "$(dirname "$0")/.."

# Real servers for the end-to-end tests (Debian packages, unpacked, not installed).
servers=$(scripts/fetch-servers.sh)
while IFS='=' read -r k v; do
  [[ -n $k ]] && export "PERF_EXPORTER_TEST_${k}=${v}"
done <<<"$servers"

# Tracepoint tests read ids from tracefs.
if [[ ! -e /sys/kernel/tracing/events ]] && [[ $(id -u) == 0 ]]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
cargo test --locked "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e
# The benchmarks in short mode, as a smoke test: fails only if they cannot
# run (the numbers are printed, never enforced).
echo "--- bench smoke: scripts/bench.sh --short"
bench_rc=0
scripts/bench.sh --short || bench_rc=$?
if [[ $bench_rc != 0 ]]; then
  echo "bench smoke: FAILED (scripts/bench.sh --short could not run, exit $bench_rc)"
else
  echo "bench smoke: ok"
fi
# One closing line over every test binary (cargo prints one per binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$out"
if [[ $rc == 0 ]]; then rc=$bench_rc; fi
exit "$rc"
