#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets) for a bounded time each,
# starting from its checked-in corpus (fuzz/corpus/<target>). A crash or a
# broken invariant fails the run; libFuzzer leaves the input in
# fuzz/artifacts/<target>/. Add it to fuzz/corpus/<target>/ as
# crash-<what> with the fix: tests/sim/fuzz_corpus.rs then runs it on stable in
# every `cargo test`.
#
#   scripts/fuzz.sh                  # every target, FUZZ_SECONDS (default 60) each
#   FUZZ_SECONDS=600 scripts/fuzz.sh sysfs config
#
# Needs the nightly toolchain (libFuzzer's instrumentation), which this
# script cannot install; it installs cargo-fuzz into .cache/tools when it
# is not on PATH. New inputs libFuzzer finds go to a scratch directory, so
# the checked-in corpus only changes by hand (`cargo +nightly fuzz cmin`).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz.sh: the nightly Rust toolchain is missing (rustup toolchain install nightly); without it only the stable corpus tests (tests/sim/fuzz_corpus.rs) run" >&2
  exit 1
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  if [[ ! -x .cache/tools/bin/cargo-fuzz ]]; then
    echo "--- installing cargo-fuzz into .cache/tools" >&2
    cargo install cargo-fuzz --locked --root .cache/tools >&2
  fi
  export PATH="$PWD/.cache/tools/bin:$PATH"
fi

if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cargo +nightly fuzz build -O
for t in "${targets[@]}"; do
  echo "--- fuzz $t for ${secs}s"
  mkdir -p "$scratch/$t"
  cargo +nightly fuzz run -O "$t" "$scratch/$t" "fuzz/corpus/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1
done
echo "fuzz: ${#targets[@]} target(s), ${secs}s each, no crash"
