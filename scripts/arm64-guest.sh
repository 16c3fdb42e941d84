#!/usr/bin/env bash
# An arm64 guest under QEMU (software emulation) with a real kernel PMU
# driver (armv8_pmuv3), for the emulated-PMU tests (tests/arm64_guest.rs).
#
#   scripts/arm64-guest.sh prepare
#       Installs what it needs (Debian's qemu-system-arm without recommends,
#       cpio, the aarch64 cross compiler), downloads Debian's arm64 kernel
#       (linux-image-6.1.0-NN-arm64, the newest NN apt knows) and
#       busybox-static:arm64 into .cache/arm64, cross-builds the exporter
#       (cargo build --target aarch64-unknown-linux-gnu, debug) and the
#       workload (tests/arm64/workload.c). stdout: only KEY=/abs/path lines
#       (ARM64_QEMU, ARM64_KERNEL, ARM64_BUSYBOX, ARM64_EXPORTER,
#       ARM64_WORKLOAD), as scripts/fetch-servers.sh prints them.
#
#   scripts/arm64-guest.sh boot CPU SMP SCENARIO [FILE...]
#       Packs a busybox initramfs (/init from tests/arm64/init.sh, the
#       exporter, the workload, SCENARIO as /scenario.sh, each FILE under
#       /files/) and boots it: -M virt -cpu CPU -smp SMP -icount shift=0,
#       serial console on stdout. /init prints ARM64-GUEST-UP when booted and
#       ARM64-GUEST-DONE rc=N when the scenario ends, then powers off. A
#       kernel panic also ends QEMU with status 0 (panic=-1 -no-reboot), so
#       callers must require the DONE line.
#
# Environment: ARM64_CACHE (default <repo>/.cache/arm64), ARM64_MEM (MiB,
# default 1024), ARM64_BUILD=0 (prepare: do not rebuild the exporter).
set -euo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
CACHE=${ARM64_CACHE:-$REPO/.cache/arm64}
log() { printf 'arm64-guest: %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

target_dir() {
  cargo metadata --format-version 1 --no-deps --locked --manifest-path "$REPO/Cargo.toml" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}

prepare() {
  exec 3>&1 1>&2 # fd 3: the KEY= lines only
  mkdir -p "$CACHE"
  local need=() p
  for p in qemu-system-arm cpio gcc-aarch64-linux-gnu libc6-dev-arm64-cross; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
  done
  if ((${#need[@]})); then
    log "installing ${need[*]} (apt-get, no recommends)"
    apt-get -o DPkg::Lock::Timeout=600 update -q
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
      --no-install-recommends "${need[@]}"
  fi
  command -v qemu-system-aarch64 >/dev/null || die "qemu-system-aarch64 missing after installing qemu-system-arm"

  # The arm64 kernel and busybox: .debs downloaded (not installed) and unpacked.
  if [[ ! -s $CACHE/vmlinuz || ! -s $CACHE/busybox ]]; then
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
      log "dpkg --add-architecture arm64"
      dpkg --add-architecture arm64
      apt-get -o DPkg::Lock::Timeout=600 update -q
    fi
    local kpkg
    kpkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-arm64$' | cut -d' ' -f1 | sort -V | tail -1)
    [[ -n $kpkg ]] || kpkg=$(apt-cache search --names-only '^linux-image-[0-9.]+-[0-9]+-arm64$' | cut -d' ' -f1 | sort -V | tail -1)
    [[ -n $kpkg ]] || die "no linux-image-*-arm64 package known to apt (is the arm64 architecture added and apt updated?)"
    log "downloading $kpkg and busybox-static:arm64"
    local tmp
    tmp=$(mktemp -d "$CACHE/dl.XXXXXX")
    (cd "$tmp" && apt-get download "$kpkg" busybox-static:arm64) 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true
    ls "$tmp"/linux-image-*.deb "$tmp"/busybox-static_*.deb >/dev/null || die "apt-get download failed"
    dpkg-deb --fsys-tarfile "$tmp"/linux-image-*.deb | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
    dpkg-deb --fsys-tarfile "$tmp"/busybox-static_*.deb | tar -x -C "$tmp" ./bin/busybox
    mv "$tmp"/boot/vmlinuz-* "$CACHE/vmlinuz"
    mv "$tmp"/bin/busybox "$CACHE/busybox"
    echo "$kpkg" >"$CACHE/kernel-package"
    rm -rf "$tmp"
  fi

  # The workload: freestanding and static.
  aarch64-linux-gnu-gcc -static -nostdlib -ffreestanding -fno-stack-protector -O2 -Wall -Wextra -Werror \
    -o "$CACHE/workload" "$REPO/tests/arm64/workload.c"

  # The exporter, for aarch64 (static: .cargo/config.toml), stripped for the initramfs.
  local exe
  exe=$(target_dir)/aarch64-unknown-linux-gnu/debug/perf-exporter
  if [[ ${ARM64_BUILD:-1} != 0 ]]; then
    rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
    log "cargo build --target aarch64-unknown-linux-gnu --bin perf-exporter"
    (cd "$REPO" && cargo build --locked --target aarch64-unknown-linux-gnu --bin perf-exporter)
  fi
  [[ -x $exe ]] || die "$exe not built"
  if [[ ! -e $CACHE/perf-exporter || $exe -nt $CACHE/perf-exporter ]]; then
    aarch64-linux-gnu-strip -o "$CACHE/perf-exporter" "$exe"
  fi

  printf '%s\n' "ARM64_QEMU=$(command -v qemu-system-aarch64)" "ARM64_KERNEL=$CACHE/vmlinuz" \
    "ARM64_BUSYBOX=$CACHE/busybox" "ARM64_EXPORTER=$CACHE/perf-exporter" \
    "ARM64_WORKLOAD=$CACHE/workload" >&3
}

boot() {
  [[ $# -ge 3 ]] || die "usage: $0 boot CPU SMP SCENARIO [FILE...]"
  local cpu=$1 smp=$2 scenario=$3
  shift 3
  local f
  for f in "$CACHE/vmlinuz" "$CACHE/busybox" "$CACHE/perf-exporter" "$CACHE/workload" "$scenario" "$@"; do
    [[ -f $f ]] || die "$f missing (run: $0 prepare)"
  done
  command -v qemu-system-aarch64 >/dev/null || die "qemu-system-aarch64 missing (run: $0 prepare)"
  ROOT=$(mktemp -d "${TMPDIR:-/tmp}/arm64-initrd.XXXXXX")
  trap 'rm -rf "$ROOT" "$ROOT.cpio.gz"' EXIT
  local root=$ROOT
  mkdir -p "$root"/{bin,proc,sys,dev,tmp,files}
  cp "$CACHE/busybox" "$root/bin/busybox"
  cp "$CACHE/perf-exporter" "$CACHE/workload" "$root/bin/"
  cp "$REPO/tests/arm64/init.sh" "$root/init"
  cp "$scenario" "$root/scenario.sh"
  for f in "$@"; do cp "$f" "$root/files/"; done
  chmod 755 "$root/init" "$root/bin/"*
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$root.cpio.gz"
  qemu-system-aarch64 -M virt -cpu "$cpu" -smp "$smp" -m "${ARM64_MEM:-1024}" \
    -icount shift=0 -nographic -nic none -no-reboot -monitor none -serial stdio \
    -kernel "$CACHE/vmlinuz" -initrd "$root.cpio.gz" \
    -append "console=ttyAMA0 panic=-1 quiet loglevel=1 rdinit=/init"
}

case "${1:-}" in
prepare) prepare ;;
boot)
  shift
  boot "$@"
  ;;
*) die "usage: $0 prepare | boot CPU SMP SCENARIO [FILE...]" ;;
esac
