# Scenario 3 (tests/arm64_guest.rs): multiplexing on the real driver.
# 100 million iterations (0.8 s of guest time): 200 turns of the 4 ms
# rotation, so that every set has many turns and the fixed kernel time
# around the loop weighs 0.1%.
N=100000000
# around_workload CONFIG LOG HAS READY BEFORE WORKLOAD AFTER: serves CONFIG
# (its log in LOG), waits until HAS in section READY, scrapes in sections
# BEFORE and AFTER around the workload (section WORKLOAD) and stops.
around_workload() {
  perf-exporter --config.file "$1" serve --web.listen-address 127.0.0.1:9659 >"$2" 2>&1 &
  pid=$!
  section "$4" poll 300 "$3"
  section "$5" wget -q -O - $URL
  section "$6" workload $N /sys/fs/cgroup/wl cycles-only
  section "$7" wget -q -O - $URL
  kill $pid
  wait $pid
}
has_series() { wget -q -O - $URL | grep -q '^perf_cgroup_mux_a_instructions_total{.*cgroup="wl"'; }
echo +pids >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/wl
around_workload mux.yaml /tmp/exp.log has_series ready metrics-before workload metrics-after
section log cat /tmp/exp.log

# The eight single-event sets alone, node-wide: each runs about 6/8 of
# the time.
has_mux8() { wget -q -O - $URL | grep -q '^perf_mux_a_instructions_total'; }
around_workload mux8.yaml /tmp/exp8.log has_mux8 ready8 mux8-before workload8 mux8-after
