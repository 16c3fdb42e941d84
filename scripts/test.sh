#!/usr/bin/env bash
# Runs every test, including the end-to-end ones against real Prometheus and
# VictoriaMetrics, and the deploy tests (Helm chart, Grafana dashboards,
# Prometheus rules: tests/deploy, pytest). Run as root on Linux: the live
# tests count system-wide (perf_event_open with pid=-1), mount tracefs if
# needed, and hotplug cpu1.
#
#   scripts/test.sh            # fetch servers (.cache/servers) and tools (.cache/tools), cargo test,
#                              # the arm64 guest (scripts/arm64-guest.sh prepare: .cache/arm64),
#                              # pytest, then the benchmarks' smoke test (scripts/bench.sh --short)
#   scripts/test.sh -- FILTER  # extra arguments go to cargo test
#
# Side effects (README.md, "Two commands"): five tests take cpu1 offline and
# back (PERF_EXPORTER_TEST_NO_HOTPLUG=1 opts out: they then touch no CPU,
# print "HOTPLUG TEST NOT RUN" and are counted as skipped below; CI does not
# set it); apt-get installs Debian packages (below, scripts/images.sh, and
# scripts/fetch-tools.sh on a host without python3-venv/npm); tracefs is
# mounted if it is not.
set -euo pipefail
cd "$(dirname "$0")/.."

# Wall time of each phase (bash's $SECONDS), printed as one line at the end
# ("tests: timing: setup 40 s, ..., total 900 s"), also when a phase fails
# and the script stops early.
timing=()
mark=$SECONDS
phase() { # phase NAME: the time since the previous mark is NAME's
  timing+=("$1 $((SECONDS - mark)) s")
  mark=$SECONDS
}
print_timing() {
  local IFS=,
  local line="${timing[*]}"
  echo "tests: timing: ${line//,/, }${line:+, }total $SECONDS s"
}
trap print_timing EXIT
if [[ -n ${PERF_EXPORTER_TEST_NO_HOTPLUG:-} && ${PERF_EXPORTER_TEST_NO_HOTPLUG} != 0 ]]; then
  echo "test.sh: PERF_EXPORTER_TEST_NO_HOTPLUG=${PERF_EXPORTER_TEST_NO_HOTPLUG}: the CPU hotplug tests will NOT run (they are counted as skipped)" >&2
fi

# Real servers for the end-to-end tests (Debian packages, unpacked, not installed).
servers=$(scripts/fetch-servers.sh)
while IFS='=' read -r k v; do
  [[ -n $k ]] && export "PERF_EXPORTER_TEST_${k}=${v}"
done <<<"$servers"

# Tools of the deploy tests (helm-python-sdk, kubernetes-validate, pytest from
# PyPI; @grafana/schema, typescript, @kubernetes-models/prometheus-operator
# from npm), installed into .cache/tools.
tools=$(scripts/fetch-tools.sh)
while IFS='=' read -r k v; do
  [[ -n $k ]] && export "PERF_EXPORTER_TEST_${k}=${v}"
done <<<"$tools"

scripts/images.sh # container runtimes and stand-in base images (tests/deploy/test_container.py)

# Debian's tools the tests drive: chromium (the live page, headless), tmux
# (stat's Ctrl-C), perf (agreement with `perf stat`), strace (bench smoke),
# fuse-overlayfs (a hung mount: tests/live/read_timeout.rs), clang and llvm (the
# BPF object's rebuild check below), the aarch64 cross linker and C library
# (the arm64 build: its clippy check below and the emulated-PMU tests),
# iproute2 (`ss -tm`: the live streams' socket send buffers, tests/e2e/live_stream.rs),
# golang-go (`go tool pprof` reads the profiles: tests/live/profile.rs) and
# binutils (strip, nm, readelf: the stripped-binary profile test).
need=()
for p in chromium tmux linux-perf strace fuse-overlayfs clang llvm gcc-aarch64-linux-gnu libc6-dev-arm64-cross iproute2 golang-go binutils curl; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if ((${#need[@]})); then
  echo "test.sh: installing ${need[*]} (apt-get)" >&2
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >&2
fi

# The committed BPF object (bpf/cgroup_counter.bpf.o, embedded in the binary)
# must be what bpf/cgroup_counter.bpf.c compiles to.
phase setup
scripts/build-bpf.sh --check
phase bpf

# The book (docs/, mdBook): mdbook from crates.io, installed once into
# .cache/tools/mdbook, builds it into docs/book/; `cargo test` checks its
# links and that the generated reference pages match the code
# (src/app/reference.rs).
MDBOOK_VERSION=0.5.4
mdbook=.cache/tools/mdbook/bin/mdbook
if ! "$mdbook" --version 2>/dev/null | grep -qx "mdbook v$MDBOOK_VERSION"; then
  echo "test.sh: installing mdbook $MDBOOK_VERSION into .cache/tools/mdbook (cargo install, a few minutes)" >&2
  cargo install --locked --root .cache/tools/mdbook --version "$MDBOOK_VERSION" \
    --no-default-features --features search mdbook >&2 ||
    { echo "test.sh: FAILED: cannot install mdbook $MDBOOK_VERSION from crates.io, so the book cannot be built" >&2; exit 1; }
fi
# A warning (an unclosed HTML tag in a table, say) fails the run: the page
# renders wrong.
book_log=$("$mdbook" build docs 2>&1) || { echo "$book_log" >&2; exit 1; }
echo "$book_log" >&2
if grep -q ' WARN ' <<<"$book_log"; then
  echo "test.sh: FAILED: mdbook warned about the book (above): fix those pages" >&2
  exit 1
fi
phase book

# Tracepoint tests read ids from tracefs.
if [[ ! -e /sys/kernel/tracing/events ]] && [[ $(id -u) == 0 ]]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi

# Screenshots of the live page's browser tests land here (kept by CI as the
# run's artifacts).
export PERF_EXPORTER_TEST_ARTIFACTS=${PERF_EXPORTER_TEST_ARTIFACTS:-$PWD/artifacts}
mkdir -p "$PERF_EXPORTER_TEST_ARTIFACTS"

cargo fmt --all -- --check
phase fmt
cargo clippy --all-targets --locked -- -D warnings
phase clippy
# Arm servers: the crate must build for aarch64 too (.cargo/config.toml names
# the cross linker).
rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu >&2
cargo clippy --all-targets --locked --target aarch64-unknown-linux-gnu -- -D warnings
phase clippy-arm64
# The emulated arm64 guest of tests/arm64_guest.rs (a real kernel PMU
# driver, armv8_pmuv3, under QEMU): QEMU, Debian's arm64 kernel and
# busybox into .cache/arm64, the exporter cross-built for aarch64 and the
# workload. The tests fail (never skip) when this has not run.
arm64=$(scripts/arm64-guest.sh prepare)
while IFS='=' read -r k v; do
  [[ -n $k ]] && export "PERF_EXPORTER_TEST_${k}=${v}"
done <<<"$arm64"
phase arm64-prepare
out=$(mktemp)
trap 'rm -f "$out"; print_timing' EXIT
# Every test binary built first, so that its time is told from the run's.
cargo test --locked --no-run "$@"
phase build
set +e
cargo test --locked --no-fail-fast "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
phase test
# The deploy tests (tests/deploy: Helm chart, dashboards, rules), with the
# exporter binary cargo test just built.
target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
PERF_EXPORTER_BIN=$target_dir/debug/perf-exporter PYTHONDONTWRITEBYTECODE=1 \
  "$PERF_EXPORTER_TEST_PYTEST" -q -c tests/deploy/pytest.ini tests/deploy 2>&1 | tee -a "$out"
prc=${PIPESTATUS[0]}
phase deploy
((rc == 0)) && rc=$prc
set -e
# The benchmarks in short mode, as a smoke test: fails only if they cannot
# run (the numbers are printed, never enforced).
echo "--- bench smoke: scripts/bench.sh --short"
bench_rc=0
scripts/bench.sh --short || bench_rc=$?
if [[ $bench_rc != 0 ]]; then
  echo "bench smoke: FAILED (scripts/bench.sh --short could not run, exit $bench_rc)"
else
  echo "bench smoke: ok"
fi
phase bench
# One closing line over every test binary (cargo prints one per binary) and pytest;
# a hotplug test opted out of (tests/common: NO_HOTPLUG_NOTICE) passed as a skip.
awk '/^HOTPLUG TEST NOT RUN: / { h++ }
     /^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
     /^(=+ )?[0-9]+ (passed|failed|skipped|errors?)(, [0-9]+ [a-z]+)* in [0-9.]+s/ {
       for (i = 1; i <= NF; i++) { w = $(i+1); sub(/,$/, "", w)
         if (w == "passed") p += $i; if (w == "failed" || w == "error" || w == "errors") f += $i; if (w == "skipped") s += $i } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p - h, f, s + h }' "$out"
if [[ $rc == 0 ]]; then rc=$bench_rc; fi
exit "$rc"
