#!/usr/bin/env bash
# The exporter's own CPU while it takes a profile WITH CALL STACKS at 99 Hz
# on every online CPU (docs/src/performance.md, "Profiles"; goal: under 1%
# of one core), with every CPU kept busy so that each sample carries a
# user stack (issue 31). scripts/bench-sampling-cpu.sh measures `top`
# without stacks.
#
#   scripts/bench-profile-cpu.sh [--bin PATH] [--seconds N] [--event E] [--hz N] [--port P]
#
# What it does:
#  1. builds tests/fixtures/profile/hot.c (frame pointers, main -> driver ->
#     hot_spin) with cc and runs one copy per online CPU (a shell busy
#     loop when there is no cc);
#  2. starts `perf-exporter serve` on 127.0.0.1:PORT and waits for
#     /-/ready;
#  3. reads the exporter's utime + stime from /proc/PID/stat, GETs
#     /api/v1/profile?seconds=N&hz=HZ&event=E (the whole machine, every
#     CPU; the exporter drains the rings, counts the stacks, then
#     symbolizes and writes the pprof), reads them again: the CPU time
#     the serving process spent, over the wall time of the request.
#
# The event: `cycles` where the machine has a hardware PMU, else
# `cpu-clock` (a software timer: no PMU in most VMs); printed with the
# figure. Default binary: target/release/perf-exporter (built with
# `cargo build --release` when missing). Needs root (system-wide
# sampling) and curl. Prints the figure; exits non-zero only when it
# cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=target/release/perf-exporter
secs=30
hz=99
port=19931
event=
while [[ $# -gt 0 ]]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --event) event=$2; shift 2 ;;
    --hz) hz=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    *) echo "usage: $0 [--bin PATH] [--seconds N] [--event E] [--hz N] [--port P]" >&2; exit 2 ;;
  esac
done
if [[ ! -x $bin ]]; then
  cargo build --release --locked
fi
command -v curl >/dev/null || { echo "bench-profile-cpu.sh: needs curl" >&2; exit 1; }
if [[ -z $event ]]; then
  if [[ -d /sys/bus/event_source/devices/cpu || -d /sys/bus/event_source/devices/cpu_core ]]; then
    event=cycles
  else
    event=cpu-clock
  fi
fi

cpus=$(nproc)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# 1. One busy process per CPU.
if command -v cc >/dev/null && cc -O1 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer \
  -o "$work/hot" tests/fixtures/profile/hot.c 2>/dev/null; then
  load="hot spin (frame pointers)"
  for _ in $(seq "$cpus"); do "$work/hot" spin & pids+=($!); done
else
  load="shell busy loops"
  for _ in $(seq "$cpus"); do sh -c 'while :; do :; done' & pids+=($!); done
fi

# 2. The exporter.
"$bin" --log.level=warn serve --web.listen-address "127.0.0.1:$port" 2>"$work/log" &
exporter=$!
pids+=("$exporter")
deadline=$((SECONDS + 30))
until curl -fsS -o /dev/null "http://127.0.0.1:$port/-/ready" 2>/dev/null; do
  if ! kill -0 "$exporter" 2>/dev/null || ((SECONDS > deadline)); then
    echo "bench-profile-cpu.sh: the exporter did not get ready:" >&2
    cat "$work/log" >&2
    exit 1
  fi
  sleep 0.2
done

# 3. Its CPU ticks (utime + stime: fields 14 and 15, counted after the
# command name, which may hold spaces) around one profile.
ticks() { sed 's/.*) //' "/proc/$exporter/stat" | awk '{ print $12 + $13 }'; }
hz_clk=$(getconf CLK_TCK)
t0=$(ticks)
s0=$(date +%s.%N)
code=$(curl -sS -o "$work/profile.pb.gz" -w '%{http_code}' \
  "http://127.0.0.1:$port/api/v1/profile?seconds=$secs&hz=$hz&event=$event")
s1=$(date +%s.%N)
t1=$(ticks)
if [[ $code != 200 ]]; then
  echo "bench-profile-cpu.sh: /api/v1/profile answered $code:" >&2
  cat "$work/profile.pb.gz" "$work/log" >&2
  exit 1
fi
bytes=$(stat -c %s "$work/profile.pb.gz")
awk -v t="$((t1 - t0))" -v k="$hz_clk" -v a="$s0" -v b="$s1" -v c="$cpus" -v e="$event" \
  -v h="$hz" -v n="$bytes" -v l="$load" -v bin="$bin" 'BEGIN {
  w = b - a
  pct = 100 * (t / k) / w
  printf "profile with call stacks, %s at %d Hz on %d CPUs (all busy: %s) for %.1f s (%s): exporter CPU %.2f s = %.3f%% of one core (goal < 1%%): %s; pprof %d bytes\n",
    e, h, c, l, w, bin, t / k, pct, (pct < 1 ? "met" : "NOT met"), n
}'
