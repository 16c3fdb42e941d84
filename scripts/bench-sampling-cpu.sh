#!/usr/bin/env bash
# The exporter's CPU while sampling every online CPU at 999 Hz (docs/src/
# performance.md, "Sampling"; goal: under 1% of one core): `perf-exporter top -F 999 -d N
# --json` with its output thrown away, timed by /usr/bin/time (user + sys
# seconds over wall seconds). The samplers drain on the kernel's wakeup
# watermark (half the ring), so the process sleeps between batches.
# With call stacks (a profile): scripts/bench-profile-cpu.sh.
#
#   scripts/bench-sampling-cpu.sh [--bin PATH] [--seconds N] [--event E]
#
# Default binary: target/release/perf-exporter (built with
# `cargo build --release` when missing). Needs root (system-wide sampling).
# Prints the figure; exits non-zero only when it cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=target/release/perf-exporter
secs=30
event=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --event) event=(-e "$2"); shift 2 ;;
    *) echo "usage: $0 [--bin PATH] [--seconds N] [--event E]" >&2; exit 2 ;;
  esac
done
if [[ ! -x $bin ]]; then
  cargo build --release --locked
fi
[[ -x /usr/bin/time ]] || { echo "bench-sampling-cpu.sh: needs /usr/bin/time (Debian package time)" >&2; exit 1; }

cpus=$(nproc)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
/usr/bin/time -f '%U %S %e' -o "$out" \
  "$bin" --log.level=warn top -F 999 -d "${secs}s" -I 1s --json "${event[@]}" >/dev/null
read -r user sys wall <"$out"
awk -v u="$user" -v s="$sys" -v w="$wall" -v c="$cpus" -v b="$bin" 'BEGIN {
  pct = 100 * (u + s) / w
  printf "top -F 999 on %d CPUs for %.1f s (%s): user %.2f s + sys %.2f s = %.3f%% of one core (goal < 1%%): %s\n",
    c, w, b, u, s, pct, (pct < 1 ? "met" : "NOT met")
}'
