# Scenario 4 (tests/arm64_guest.rs): sampling, -smp 2. `top` samples
# user-mode cycles on CPU 1 only, where the workload is pinned (the
# exporter runs on CPU 0). Sampling is on cycles, whose overflow QEMU
# delivers promptly on the cycle counter (on instructions, or on cycles on
# a programmable counter, about one sample per 4 ms tick): the workload
# therefore counts instructions only and leaves the cycle counter free.
N=10000000
PERIOD=100000
echo "period=$PERIOD"
taskset 1 perf-exporter top -e cycles:u -C 1 -c $PERIOD -I 1s --json >/tmp/top.json 2>/tmp/top.log &
pid=$!
section top-ready poll 300 grep -q . /tmp/top.json
section workload taskset 2 workload $N - instructions-only
kill -INT $pid
wait $pid
section top tail -n 1 /tmp/top.json
section top-log cat /tmp/top.log
