# Scenario 4 (tests/arm64_guest.rs): sampling on cycles (under icount
# equal to instructions; sampling on instructions is broken in this QEMU).
N=5000000
poll() {
  limit=$1
  shift
  i=0
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -gt "$limit" ] && { echo "poll: gave up on $*"; return 1; }
    sleep 0.1
  done
}
perf-exporter top -e cycles -c 100000 -I 1s --json >/tmp/top.json 2>/tmp/top.log &
pid=$!
section top-ready poll 300 grep -q . /tmp/top.json
section workload workload $N
kill -INT $pid
wait $pid
section top tail -n 1 /tmp/top.json
section top-log cat /tmp/top.log
