#!/usr/bin/env bash
# Compiles the BPF program of the `bpf` cgroup backend:
#   bpf/cgroup_counter.bpf.c -> bpf/cgroup_counter.bpf.o (committed, embedded
#   with include_bytes!, so building the exporter needs no BPF toolchain).
#
#   scripts/build-bpf.sh           # rebuild the committed object
#   scripts/build-bpf.sh --check   # rebuild into a temporary file and fail if
#                                  # it differs from the committed object (CI)
#
# Needs clang (Debian: clang, llvm). The output is deterministic for one clang
# version: no debug paths (-g is BTF only, with the source directory relative),
# no timestamps. bpf/CLANG_VERSION records the version the object was built
# with; --check with another clang rebuilds and compares only the source hash.
set -euo pipefail
cd "$(dirname "$0")/.."
src=bpf/cgroup_counter.bpf.c
obj=bpf/cgroup_counter.bpf.o
arch=$(uname -m)
build() {
  clang -target bpf -O2 -g -Wall -Werror \
    -fdebug-prefix-map="$PWD"=. -fno-ident \
    -I/usr/include/"$arch"-linux-gnu \
    -c "$src" -o "$1"
  # BTF is kept (aya needs it for the .maps section); the DWARF line info is not.
  llvm-strip -g "$1"
}
version=$(clang --version | head -1)
hash=$(sha256sum "$src" | cut -d' ' -f1)
if [[ ${1:-} == --check ]]; then
  recorded=$(cat bpf/SOURCE_SHA256)
  if [[ $hash != "$recorded" ]]; then
    echo "build-bpf: $src changed (sha256 $hash, recorded $recorded): run scripts/build-bpf.sh and commit" >&2
    exit 1
  fi
  if [[ $version != "$(cat bpf/CLANG_VERSION)" ]]; then
    echo "build-bpf: clang is '$version', the object was built with '$(cat bpf/CLANG_VERSION)': source hash checked only" >&2
    exit 0
  fi
  tmp=$(mktemp)
  trap 'rm -f "$tmp"' EXIT
  build "$tmp"
  if ! cmp -s "$tmp" "$obj"; then
    echo "build-bpf: $obj is not what $src compiles to: run scripts/build-bpf.sh and commit" >&2
    exit 1
  fi
  echo "build-bpf: $obj is up to date" >&2
  exit 0
fi
build "$obj"
echo "$version" >bpf/CLANG_VERSION
echo "$hash" >bpf/SOURCE_SHA256
echo "build-bpf: wrote $obj ($(stat -c %s "$obj") bytes)" >&2
