#!/bin/busybox sh
# /init of the emulated arm64 guest (scripts/arm64-guest.sh boot): mounts
# what the exporter reads, defines the helpers the scenarios share
# (section, poll, URL), runs /scenario.sh as root and powers off. The
# markers let the host tell a finished scenario from a kernel panic (which
# also ends QEMU with status 0).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
ip link set lo up 2>/dev/null
echo "ARM64-GUEST-UP kernel=$(uname -r) cpus=$(cat /sys/devices/system/cpu/online)"
# section NAME CMD...: CMD's output between markers the host parses.
section() {
  name=$1
  shift
  echo "==== BEGIN $name"
  "$@"
  rc=$?
  echo
  echo "==== END $name rc=$rc"
}
# poll LIMIT CMD...: runs CMD until it succeeds, at most LIMIT tries 0.1 s
# apart (a wait for an event against a deadline, never a fixed sleep);
# says so and fails when it never does.
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
# The scenarios' exporter serves on this address.
URL=http://127.0.0.1:9659/metrics
cd /files
. /scenario.sh
echo "ARM64-GUEST-DONE rc=$?"
poweroff -f
