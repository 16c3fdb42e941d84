#!/usr/bin/env bash
# The cost per context switch of per-cgroup counting (docs/src/performance.md, "Per-workload counting"):
# two processes in different cgroups ping-pong over a pipe, both pinned to one
# fixed CPU (scripts/pingpong.c, built here with cc; CPU 0 unless
# PINGPONG_CPU says otherwise),
# while the exporter counts nothing per cgroup, or watches N cgroups (the two
# plus N-2 idle ones) with the perf or the bpf backend, counting the default
# config's `cgroups.sets` (core, cache, software: what the host has of them).
#
# A shared machine's noise is larger than the effect, so the rounds are
# interleaved and paired: each round measures the baseline (no exporter,
# or a node-level one: PINGPONG_BASELINE below) and
# then the backend (a fresh exporter), and the figure is the median over
# ROUNDS of (backend - baseline), with the spread (min..max and the middle
# half) printed next to it. Each measurement is the lowest of RUNS
# (PINGPONG_RUNS, 15) ping-pong runs of ROUND_TRIPS round trips, by the
# CPU time of the two processes (what the switches cost them, without the
# time other processes took from that CPU meanwhile) and by the wall
# clock. The lowest, not the median: a VM's host slows it down in phases
# of a second or so (here a switch costs about 1.5 or about 2.3 us,
# in turn), which only ever add; the lowest of several short runs is the
# quiet phase's in both halves of a round.
#
# PINGPONG_SAME=1 puts both processes in the one cgroup a: every switch is
# then within one cgroup (one css_set), which the bpf program does not
# charge (the interval stays that cgroup's until a switch to or from
# another css_set, a read or a move); without it every switch crosses two
# cgroups, the program's worst case (it reads every counter at each).
#
# PINGPONG_UNSELECTED=1 selects only the N-2 idle cgroups: a and b are
# then cgroups nobody selected, and a switch between them (or to or from
# another unselected one, as the idle task's) is not charged by the bpf
# program once it knows both have no selected owners (from its per-CPU
# cache of owners).
#
# PINGPONG_BASELINE=node measures the baseline with the exporter running
# (the first BINARY) on the default config without `cgroups:`: its
# node-level counters only. The default config's node-level `software`
# set opens `context-switches` and `cpu-migrations` on every CPU, which
# the kernel raises at every switch whatever the backend: that baseline
# gives the cost of per-cgroup counting alone, on top of a node-level
# exporter; the default (`none`, no exporter) gives it with the
# node-level counters' cost included.
#
# kernel.bpf_stats_enabled is OFF (0) during these rounds: the statistics add
# two clock reads to every run of the program. The program's own mean run
# time comes from separate rounds with it ON (run_time_ns / run_cnt of the
# program's fdinfo); the previous setting is restored at exit.
#
#   sudo scripts/bench-ctx-switch.sh [BINARY] [COUNTS] [ROUND_TRIPS] [ROUNDS] [BACKENDS]
#   # defaults: target/debug/perf-exporter, "10 100 200 500", 10000, 16, "bpf perf"
#
# BINARY may name several binaries, space-separated (an A/B comparison of
# two builds): each round then measures the baseline and each binary in
# turn, and for the bpf backend each binary's program run time once more,
# interleaved, so the machine's load changes both alike; the figures are
# printed per binary.
#
# Root on cgroup v2 (the v2 mount from /proc/self/mounts). The kernel does
# the counting: the exporter's own build profile does not matter. Give the
# load (uptime) next to the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a bins <<<"${1:-target/debug/perf-exporter}"
counts=${2:-10 100 200 500}
trips=${3:-10000}
rounds=${4:-16}
runs=${PINGPONG_RUNS:-15}
backends=${5:-bpf perf}
cpu=${PINGPONG_CPU:-0}
same=${PINGPONG_SAME:-0}
unselected=${PINGPONG_UNSELECTED:-0}
baseline=${PINGPONG_BASELINE:-none}
[[ $baseline == none || $baseline == node ]] || { echo "PINGPONG_BASELINE: none or node, not $baseline" >&2; exit 1; }
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
echo 0 >/proc/sys/kernel/bpf_stats_enabled
cc -O2 -Wall -o "$tmp/pingpong" scripts/pingpong.c
mkdir "$dir" "$dir/a" "$dir/b"
other=$dir/b
[[ $same == 1 ]] && other=$dir/a

# ns per switch, "CPU-time wall-clock": the lowest of $runs runs each.
measure() {
  local out=()
  for _ in $(seq "$runs"); do
    out+=("$(taskset -c "$cpu" "$tmp/pingpong" "$dir/a" "$other" "$trips")")
  done
  local cpu_ns wall_ns
  cpu_ns=$(printf '%s\n' "${out[@]}" | cut -d' ' -f2 | sort -g | head -1)
  wall_ns=$(printf '%s\n' "${out[@]}" | cut -d' ' -f1 | sort -g | head -1)
  echo "$cpu_ns $wall_ns"
}

# Median, quartiles and range of the numbers on stdin, rounded to ns.
summary() {
  python3 -c '
import statistics, sys
v = sorted(float(x) for x in sys.stdin.read().split())
q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
print(f"median {statistics.median(v):+.0f} (middle half {q[0]:+.0f}..{q[2]:+.0f}, range {v[0]:+.0f}..{v[-1]:+.0f}, n={len(v)})")'
}

# Starts the exporter binary $2 watching $dir/* with backend $1 (or
# none: node-level counters only); waits until every cgroup is counted
# (its counters are open).
serve() {
  local backend=$1 bin=$2 ready="cgroups counted"
  # The default config's sets, counted per cgroup with its default
  # `cgroups.sets` (core, cache, software: what this host has of them).
  { cat config/default.yaml
    local glob='*'
    [[ $unselected == 1 ]] && glob='idle*'
    if [[ $backend == none ]]; then
      ready="counters open"
    else
      printf 'cgroups:\n  backend: %s\n  preset: none\n  paths: ["%s/%s"]\n  max_cgroups: 1000\n' "$backend" "$top" "$glob"
    fi
  } >"$tmp/c.yaml"
  rm -f "$tmp/log"
  "$bin" serve --config.file "$tmp/c.yaml" --web.listen-address 127.0.0.1:0 \
    --path.cgroupfs "$root" --log.level info 2>"$tmp/log" &
  pid=$!
  local deadline=$((SECONDS + 60))
  until grep -q "$ready" "$tmp/log" 2>/dev/null; do
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

echo "cpus=$(nproc) kernel=$(uname -r) cpu=$cpu round_trips=$trips runs=$runs rounds=$rounds same_cgroup=$same unselected=$unselected baseline=$baseline"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
made=2
for n in $counts; do
  while ((made < n)); do mkdir "$dir/idle$made"; made=$((made + 1)); done
  for backend in $backends; do
    : >"$tmp/base"
    for i in "${!bins[@]}"; do : >"$tmp/cpu$i"; : >"$tmp/wall$i"; : >"$tmp/prog$i"; done
    for _ in $(seq "$rounds"); do
      [[ $baseline == node ]] && serve none "${bins[0]}"
      read -r bc bw <<<"$(measure)"
      [[ $baseline == node ]] && stop
      echo "$bc" >>"$tmp/base"
      for i in "${!bins[@]}"; do
        serve "$backend" "${bins[$i]}"
        read -r vc vw <<<"$(measure)"
        stop
        fdsv[i]=$fds
        echo $((vc - bc)) >>"$tmp/cpu$i"
        echo $((vw - bw)) >>"$tmp/wall$i"
      done
      [[ $backend == bpf ]] || continue
      for i in "${!bins[@]}"; do
        # With the statistics on: the program's own run time.
        serve bpf "${bins[$i]}"
        echo 1 >/proc/sys/kernel/bpf_stats_enabled
        measure >/dev/null
        # Summed over the exporter's programs (on_switch; on_attach runs
        # only when a task moves itself to another cgroup).
        awk '/^run_time_ns/ { t += $2 } /^run_cnt/ { c += $2 } END { if (c) printf "%d\n", t / c }' \
          $(grep -l '^prog_type' /proc/"$pid"/fdinfo/* 2>/dev/null) >>"$tmp/prog$i"
        echo 0 >/proc/sys/kernel/bpf_stats_enabled
        stop
      done
    done
    for i in "${!bins[@]}"; do
      label="$backend backend, $n cgroups"
      ((${#bins[@]} > 1)) && label="$label, ${bins[$i]}"
      echo "$label: exporter fds ${fdsv[$i]}"
      if [[ -s $tmp/prog$i ]]; then
        echo "  program ns per run (stats on): $(summary <"$tmp/prog$i" | tr -d +)"
      fi
      echo "  ns added/switch by CPU time: $(summary <"$tmp/cpu$i")"
      echo "  ns added/switch by wall clock: $(summary <"$tmp/wall$i")"
    done
    if ((${#bins[@]} == 2)); then
      # Paired per round: the second binary minus the first.
      if [[ -s $tmp/prog0 ]]; then
        echo "  second - first, program ns per run: $(paste "$tmp/prog0" "$tmp/prog1" | awk '{ print $2 - $1 }' | summary)"
      fi
      echo "  second - first, ns added/switch by CPU time: $(paste "$tmp/cpu0" "$tmp/cpu1" | awk '{ print $2 - $1 }' | summary)"
    fi
    echo "  baseline by CPU time: $(summary <"$tmp/base" | tr -d +)"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
