#!/usr/bin/env bash
# Start-up and reload of a config with N sets (one cpu-clock event each)
# on the simulated vm-no-pmu host, for docs/src/performance.md (a report,
# never an assertion): the seconds until the first scrape answers, the
# seconds of one POST /-/reload, and the status of every scrape made
# (5 a second) while the reload ran.
#
#   scripts/reload-scale.sh                       # 2000 5000 10000 sets
#   EXPORTER=target/debug/perf-exporter scripts/reload-scale.sh 10000
set -euo pipefail
cd "$(dirname "$0")/.."
exporter=${EXPORTER:-target/release/perf-exporter}
[[ -x $exporter ]] || cargo build --release
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(2000 5000 10000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in "${sizes[@]}"; do
  cfg=$work/sets$n.yaml
  python3 -c "
print('sets:')
for i in range($n):
    print(f'  - name: s{i}\n    events:\n      - metric: perf_s{i}_clock_seconds_total\n        event: cpu-clock')
" >"$cfg"
  port=$((19000 + RANDOM % 1000))
  t0=$(date +%s.%N)
  "$exporter" --simulate --path.sysfs tests/fixtures/sysfs/vm-no-pmu --config.file "$cfg" \
    --web.listen-address "127.0.0.1:$port" --web.enable-lifecycle --config.read-timeout 300s \
    >"$work/log$n" 2>&1 &
  pid=$!
  until curl -sf -o /dev/null "http://127.0.0.1:$port/metrics"; do sleep 0.05; done
  t1=$(date +%s.%N)
  (while [[ ! -f $work/done$n ]]; do
    curl -s -o /dev/null -w '%{http_code}\n' --max-time 60 "http://127.0.0.1:$port/metrics"
    sleep 0.2
  done >"$work/scrapes$n") &
  scraper=$!
  status=$(curl -s -o /dev/null -w '%{http_code}' -X POST --max-time 900 "http://127.0.0.1:$port/-/reload")
  t2=$(date +%s.%N)
  touch "$work/done$n"
  wait "$scraper"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo "sets=$n start-up=$(echo "$t1 - $t0" | bc)s reload=$(echo "$t2 - $t1" | bc)s (HTTP $status)" \
    "scrapes during the reload: $(sort "$work/scrapes$n" | uniq -c | awk '{printf "%s x %s ", $1, $2}')"
done
