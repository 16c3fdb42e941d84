# Scenario 2 (tests/arm64_guest.rs): exact counts. The workload (20e6
# iterations of 8 instructions) moves itself into a cgroup and counts
# itself; the exporter counts that cgroup (perf and bpf backends) and,
# with `stat`, the whole CPU.
N=20000000
# poll CMD...: runs CMD until it succeeds, at most 60 s.
poll() {
  i=0
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -gt 600 ] && { echo "poll: gave up on $*"; return 1; }
    sleep 0.1
  done
}
has_series() { wget -q -O - http://127.0.0.1:9659/metrics | grep -q "^perf_cgroup_instructions_total{.*cgroup=\"$1\""; }
for backend in perf bpf; do
  mkdir -p /sys/fs/cgroup/wl-$backend
  perf-exporter --config.file counts-$backend.yaml serve --web.listen-address 127.0.0.1:9659 >/tmp/exp-$backend.log 2>&1 &
  pid=$!
  section ready-$backend poll has_series wl-$backend
  section workload-$backend workload $N /sys/fs/cgroup/wl-$backend
  section metrics-$backend wget -q -O - http://127.0.0.1:9659/metrics
  kill $pid
  wait $pid
  section log-$backend cat /tmp/exp-$backend.log
done
# stat: system-wide on the only CPU, from before the workload to after it.
perf-exporter --config.file counts-perf.yaml stat -I 1s --json >/tmp/stat.json 2>/tmp/stat.log &
pid=$!
section stat-ready poll grep -q . /tmp/stat.json
section workload-stat workload $N
kill -INT $pid
wait $pid
section stat cat /tmp/stat.json
section stat-log cat /tmp/stat.log
