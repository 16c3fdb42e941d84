# Scenario 2 (tests/arm64_guest.rs): exact counts. The workload (N
# iterations of 8 instructions) moves itself into a cgroup and counts
# itself; the exporter counts that cgroup (perf and bpf backends) and,
# with `stat`, the whole CPU; all in user mode (:u).
N=5000000
has_series() { wget -q -O - $URL | grep -q "^perf_cgroup_user_instructions_total{.*cgroup=\"$1\""; }

# 1. The hierarchy as a minimal init leaves it (no controller applied at
# the root): the perf backend must say the cgroup has no perf_event state.
mkdir -p /sys/fs/cgroup/wl-perf /sys/fs/cgroup/wl-bpf
section subtree-before cat /sys/fs/cgroup/cgroup.subtree_control
perf-exporter --config.file counts-perf.yaml serve --web.listen-address 127.0.0.1:9659 >/tmp/unapplied.log 2>&1 &
pid=$!
section unapplied-wait poll 300 grep -q 'perf_event controller state' /tmp/unapplied.log
kill $pid
wait $pid
section unapplied-log cat /tmp/unapplied.log

# 2. A controller applied, as systemd does at boot: both backends count.
echo +pids >/sys/fs/cgroup/cgroup.subtree_control
for backend in perf bpf; do
  perf-exporter --config.file counts-$backend.yaml serve --web.listen-address 127.0.0.1:9659 >/tmp/exp-$backend.log 2>&1 &
  pid=$!
  section ready-$backend poll 300 has_series wl-$backend
  section workload-$backend workload $N /sys/fs/cgroup/wl-$backend
  section metrics-$backend wget -q -O - $URL
  kill $pid
  wait $pid
  section log-$backend cat /tmp/exp-$backend.log
done

# 3. stat: system-wide on the only CPU, from before the workload to after.
perf-exporter --config.file counts-perf.yaml stat -I 1s --json >/tmp/stat.json 2>/tmp/stat.log &
pid=$!
section stat-ready poll 300 grep -q . /tmp/stat.json
section workload-stat workload $N
kill -INT $pid
wait $pid
section stat cat /tmp/stat.json
section stat-log cat /tmp/stat.log
