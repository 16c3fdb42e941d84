#!/usr/bin/env bash
# Measurements under hostile load, for docs/src/performance.md
# (reports, never assertions; speed and memory are not asserted in tests):
#   1. a storm of 100 SIGHUPs (10 ms apart) on a simulated 512-CPU node
#      while /metrics is scraped back to back: the worst scrape delay;
#   2. a flood of 2,000 connections asking for /metrics at once: the RSS
#      before, at the peak and after.
#
#   scripts/sighup-storm.sh                  # release binary (built if missing)
#   EXPORTER=target/debug/perf-exporter scripts/sighup-storm.sh
#   scripts/sighup-storm.sh --sighups 500 --connections 5000
set -euo pipefail
cd "$(dirname "$0")/.."

sighups=100
connections=2000
while [[ $# -gt 0 ]]; do
  case $1 in
    --sighups) sighups=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    *) echo "usage: $0 [--sighups N] [--connections N]" >&2; exit 2 ;;
  esac
done

exe=${EXPORTER:-target/release/perf-exporter}
if [[ -z ${EXPORTER:-} && ! -x $exe ]]; then
  cargo build --locked --release --bin perf-exporter
fi
[[ -x $exe ]] || { echo "$exe: no such executable" >&2; exit 1; }

date -u +"%Y-%m-%d %H:%M UTC"
python3 scripts/hostile-load.py storm "$exe" --sighups "$sighups"
python3 scripts/hostile-load.py flood "$exe" --connections "$connections"
