#!/usr/bin/env bash
# The cost per context switch of per-cgroup counting (README "BPF backend"):
# two processes in different cgroups ping-pong over a pipe on one CPU
# (scripts/pingpong.py), while the exporter counts nothing per cgroup, or
# watches N cgroups (the two plus N-2 idle ones) with the perf or the bpf
# backend, counting the default config's `cgroups.sets` (core, cache, software:
# what the host has of them). Prints the ns per switch (best of REPS runs) and what counting
# adds, and the exporter's open fds. For the bpf backend it also prints the
# program's own mean run time per switch, from the kernel's BPF statistics
# (kernel.bpf_stats_enabled=1 while it runs, restored after; run_time_ns /
# run_cnt of the program's fdinfo): a figure the noise of a shared machine
# does not blur.
#
#   sudo scripts/bench-ctx-switch.sh [BINARY] [COUNTS] [ROUND_TRIPS] [REPS]
#   # defaults: target/debug/perf-exporter, "10 100 200 500", 200000, 5
#
# Root on cgroup v2 (the v2 mount from /proc/self/mounts). The kernel does
# the counting: the exporter's own build profile does not matter.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/perf-exporter}
counts=${2:-10 100 200 500}
trips=${3:-200000}
reps=${4:-5}
root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
[[ -n $root ]] || { echo "no cgroup2 mount" >&2; exit 1; }
top=pe-bpf-bench-$$
dir=$root/$top
tmp=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  for d in "$dir"/*/; do [[ -d $d ]] && rmdir "$d" 2>/dev/null; done
  rmdir "$dir" 2>/dev/null || true
  rm -rf "$tmp"
}
stats0=$(cat /proc/sys/kernel/bpf_stats_enabled)
trap 'cleanup; echo "$stats0" >/proc/sys/kernel/bpf_stats_enabled' EXIT
mkdir "$dir" "$dir/a" "$dir/b"

# Best of $reps runs, ns per switch.
measure() {
  local best=
  for _ in $(seq "$reps"); do
    local v
    v=$(python3 scripts/pingpong.py "$dir/a" "$dir/b" "$trips")
    v=${v%.*}
    if [[ -z $best ]] || ((v < best)); then best=$v; fi
  done
  echo "$best"
}

# Starts the exporter watching $dir/* with backend $1; waits until every
# cgroup is counted.
serve() {
  local backend=$1 n=$2
  # The default config's sets, counted per cgroup with its default
  # `cgroups.sets` (core, cache, software: what this host has of them).
  { cat config/default.yaml
    printf 'cgroups:\n  backend: %s\n  preset: none\n  paths: ["%s/*"]\n  max_cgroups: 1000\n' "$backend" "$top"
  } >"$tmp/c.yaml"
  rm -f "$tmp/log"
  "$bin" serve --config.file "$tmp/c.yaml" --web.listen-address 127.0.0.1:0 \
    --path.cgroupfs "$root" --log.level info 2>"$tmp/log" &
  pid=$!
  local deadline=$((SECONDS + 60))
  until grep -q "cgroups counted" "$tmp/log" 2>/dev/null; do
    if ((SECONDS > deadline)) || ! kill -0 "$pid" 2>/dev/null; then
      echo "the exporter did not start counting:" >&2
      cat "$tmp/log" >&2
      exit 1
    fi
    sleep 0.2
  done
  fds=$(ls /proc/"$pid"/fd | wc -l)
}

stop() {
  kill "$pid" && wait "$pid" 2>/dev/null || true
  pid=
}

base=$(measure)
echo "cpus=$(nproc) kernel=$(uname -r) round_trips=$trips reps=$reps"
echo "no per-cgroup counting: ${base} ns/switch"
made=2
for n in $counts; do
  while ((made < n)); do mkdir "$dir/idle$made"; made=$((made + 1)); done
  for backend in perf bpf; do
    serve "$backend" "$n"
    [[ $backend == bpf ]] && echo 1 >/proc/sys/kernel/bpf_stats_enabled
    v=$(measure)
    prog=
    if [[ $backend == bpf ]]; then
      prog=$(awk '/^run_time_ns/ { t = $2 } /^run_cnt/ { c = $2 } END { if (c) printf ", program %d ns per run (%d runs)", t / c, c }' \
        $(grep -l '^prog_type' /proc/"$pid"/fdinfo/* 2>/dev/null))
      echo "$stats0" >/proc/sys/kernel/bpf_stats_enabled
    fi
    echo "$backend backend, $n cgroups: ${v} ns/switch (+$((v - base))), exporter fds $fds$prog"
    stop
  done
done
echo "no per-cgroup counting (again): $(measure) ns/switch"
