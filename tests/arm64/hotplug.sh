# Scenario 6 (tests/arm64_guest.rs): CPU hotplug with the real driver
# (-smp 2, counts not exact). Scrapes between offlining and onlining CPU 1,
# with the workload running on each CPU in between.
ready() { wget -q -O - http://127.0.0.1:9659/-/ready; }
perf-exporter --config.file hotplug.yaml serve --web.listen-address 127.0.0.1:9659 >/tmp/exp.log 2>&1 &
pid=$!
section ready poll 300 ready
load() { taskset 1 workload 1000000 >/dev/null; taskset 2 workload 1000000 >/dev/null 2>&1; true; }
load
section scrape-1 wget -q -O - $URL
section offline sh -c 'echo 0 >/sys/devices/system/cpu/cpu1/online'
load
section scrape-2 wget -q -O - $URL
load
section scrape-3 wget -q -O - $URL
section online sh -c 'echo 1 >/sys/devices/system/cpu/cpu1/online'
load
section scrape-4 wget -q -O - $URL
load
section scrape-5 wget -q -O - $URL
kill $pid
wait $pid
section log cat /tmp/exp.log
