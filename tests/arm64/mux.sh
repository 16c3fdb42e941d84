# Scenario 3 (tests/arm64_guest.rs): multiplexing on the real driver.
# 100 million iterations (0.8 s of guest time): 200 turns of the 4 ms
# rotation, so that every set has many turns and the fixed kernel time
# around the loop weighs 0.1%.
N=100000000
has_series() { wget -q -O - $URL | grep -q '^perf_cgroup_mux_a_instructions_total{.*cgroup="wl"'; }
echo +pids >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/wl
perf-exporter --config.file mux.yaml serve --web.listen-address 127.0.0.1:9659 >/tmp/exp.log 2>&1 &
pid=$!
section ready poll 300 has_series
section metrics-before wget -q -O - $URL
section workload workload $N /sys/fs/cgroup/wl cycles-only
section metrics-after wget -q -O - $URL
kill $pid
wait $pid
section log cat /tmp/exp.log

# The eight single-event sets alone, node-wide: each runs about 6/8 of
# the time.
has_mux8() { wget -q -O - $URL | grep -q '^perf_mux_a_instructions_total'; }
perf-exporter --config.file mux8.yaml serve --web.listen-address 127.0.0.1:9659 >/tmp/exp8.log 2>&1 &
pid=$!
section ready8 poll 300 has_mux8
section mux8-before wget -q -O - $URL
section workload8 workload $N /sys/fs/cgroup/wl cycles-only
section mux8-after wget -q -O - $URL
kill $pid
wait $pid
