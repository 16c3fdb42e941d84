# Scenario 7 (tests/arm64_guest.rs): PMU health on the real driver.
# `check` measures the counter budget with the PMU free, then while another
# process holds one programmable counter (pinned, CPU-wide); `serve` plans a
# group of 6 while all 6 are free, then the other user takes one: the
# group never runs again, and the exporter says so instead of exporting
# zeros. First, the start-up self-test on the real driver: the calibrated
# loop is counted exactly (instructions under -icount are exact).
N=20000000
has_series() { wget -q -O - $URL | grep -q '^perf_six_0_instructions_total{'; }
holding() { grep -q '^holding' /tmp/hold.out; }
echo +pids >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/wl
section self-test perf-exporter --config.file health.yaml check --json --collector.self-test
section check-free perf-exporter --config.file health.yaml check --json
perf-exporter --config.file health.yaml serve --web.listen-address 127.0.0.1:9659 >/tmp/exp.log 2>&1 &
pid=$!
section ready poll 300 has_series
section metrics-free wget -q -O - $URL
workload hold 1 600 >/tmp/hold.out 2>&1 &
holder=$!
section holding poll 100 holding
section check-held perf-exporter --config.file health.yaml check --json
section metrics-before wget -q -O - $URL
section workload workload $N /sys/fs/cgroup/wl cycles-only
section metrics-after wget -q -O - $URL
kill $pid $holder
wait $pid
section log cat /tmp/exp.log
