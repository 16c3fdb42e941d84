# Scenario 1 (tests/arm64_guest.rs): discovery on the real armv8_pmuv3
# driver. Dumps the guest's PMU and CPU sysfs and /proc/cpuinfo (the
# qemu-neoverse-n1 fixture), then `list --json` and `check --json` with
# the default config and with discovery.yaml.
dump() {
  for f in "$@"; do
    [ -f "$f" ] || continue
    echo "==== FILE $f"
    cat "$f" 2>/dev/null
    echo "==== EOF"
  done
}
for d in /sys/bus/event_source/devices/*; do
  dump $(find "$d/" -type f ! -path '*/power/*' | sort)
done
dump /sys/devices/system/cpu/online /sys/devices/system/cpu/possible /sys/devices/system/cpu/present /sys/devices/system/cpu/offline /sys/devices/system/cpu/kernel_max
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  dump $(find "$c/topology" "$c/regs" -type f | sort) "$c/online"
done
dump /proc/cpuinfo /proc/sys/kernel/perf_event_paranoid /proc/sys/kernel/perf_event_max_sample_rate
section list perf-exporter list --json
section check-default perf-exporter check --json
section check perf-exporter --config.file discovery.yaml check --json
