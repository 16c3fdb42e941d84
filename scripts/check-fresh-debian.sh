#!/usr/bin/env bash
# Tries the test command's tool installation on a stock Debian 12 (bookworm):
# debootstraps a minimal root (--variant=minbase: no python3, no node, no npm),
# copies this work tree into it, and runs there, chrooted, as a new user on a
# fresh Debian 12 would:
#   1. scripts/fetch-tools.sh   (installs python3-venv, nodejs and npm with
#      apt-get, Node.js >= 20 from the npm registry, the venv and node_modules)
#   2. scripts/fetch-servers.sh (promtool for the rules tests)
#   3. the deploy tests: pytest tests/deploy, with the exporter binary built on
#      this host (copied in), except tests/deploy/test_container.py (it needs
#      the container runtimes of scripts/images.sh).
# Slow (about 10 minutes, ~2 GB under ROOT) and needs root: not part of CI.
#
# Usage: scripts/check-fresh-debian.sh [ROOT]   (default ROOT: /tmp/perf-exporter-debian12)
#
# Environment:
#   BIN=path         the exporter binary for the deploy tests
#                    (default: $CARGO_TARGET_DIR or target/, debug/perf-exporter)
#   DEPLOY_TESTS=0   stop after scripts/fetch-tools.sh
#   KEEP=1           keep ROOT afterwards (it is deleted by default); a kept
#                    ROOT is debootstrapped anew on the next run unless REUSE=1
#   MIRROR=url       Debian mirror (default: the one this machine's apt uses)
# Exit status: 0 if every step passed. The last line says what ran and how it ended.
set -euo pipefail

log() { printf 'check-fresh-debian: %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
case "${1:-}" in
-h | --help)
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
  exit 0
  ;;
esac

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
ROOT=$(realpath -m -- "${1:-/tmp/perf-exporter-debian12}")
[[ $ROOT != / && $ROOT != "$REPO"* ]] || die "ROOT must be a scratch folder, not / or inside the repository"
[[ $(id -u) == 0 ]] || die "needs root (debootstrap, chroot, mounts)"

if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap (apt-get)"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2
fi

# The Debian mirrors this machine's apt is configured with (as scripts/fetch-servers.sh finds them).
find_mirror() { # $1: awk condition on the URL ($1)
  local probe
  probe=$(mktemp -d)
  apt-get -o Dir::State::Lists="$probe" -o Dir::Cache="$probe" update --print-uris </dev/null 2>/dev/null |
    sed -n "s|^'\(.*\)/dists/\([^/]*\)/InRelease' .*|\1 \2|p" |
    awk "\$2 ~ /^(bookworm|bullseye|trixie|stable|oldstable)(-updates|-security)?\$/ && $1 { print \$1; exit }" || true
  rm -rf -- "$probe"
}
MIRROR=${MIRROR:-$(find_mirror '$1 !~ /security/')}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${SECURITY:-$(find_mirror '$1 ~ /security/')}
SECURITY=${SECURITY:-http://deb.debian.org/debian-security}

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -l -- "${mounted[i]}" 2>/dev/null || true
  done
  if [[ ${KEEP:-0} != 1 && -n $ROOT && -d $ROOT ]]; then
    log "removing $ROOT (KEEP=1 keeps it)"
    rm -rf --one-file-system -- "$ROOT"
  fi
}
trap cleanup EXIT

if [[ ${REUSE:-0} == 1 && -f $ROOT/etc/debian_version ]]; then
  log "reusing $ROOT (Debian $(cat "$ROOT/etc/debian_version"))"
else
  if [[ -e $ROOT ]]; then
    grep -q " $ROOT/" /proc/mounts && die "something is mounted under $ROOT: unmount it first"
    rm -rf --one-file-system -- "$ROOT"
  fi
  log "debootstrap --variant=minbase bookworm $ROOT $MIRROR"
  debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >"$ROOT.debootstrap.log" 2>&1 ||
    die "debootstrap failed: see $ROOT.debootstrap.log"
  rm -f -- "$ROOT.debootstrap.log"
fi
# A stock Debian 12's sources: the release, its updates and security.
cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY bookworm-security main
EOF
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
# This host's trusted CAs, given to pip and node in the root as this host's
# network may need them (a TLS-inspecting proxy: its CA is in the host's
# bundle, not in Debian's ca-certificates). Like resolv.conf, this is the
# network's setting, not the test command's: a fresh Debian on an open
# network needs neither.
ca_env=""
if [[ -r /etc/ssl/certs/ca-certificates.crt ]]; then
  cp -L /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/host-ca-bundle.crt"
  ca_env="NODE_EXTRA_CA_CERTS=/etc/host-ca-bundle.crt PIP_CERT=/etc/host-ca-bundle.crt"
fi

for m in proc dev dev/pts sys; do
  mkdir -p -- "$ROOT/$m"
  case $m in
  proc) mount -t proc proc "$ROOT/proc" ;;
  *) mount --bind "/$m" "$ROOT/$m" ;;
  esac
  mounted+=("$ROOT/$m")
done

# This work tree as it is (tracked and new files, not ignored ones such as .cache and target).
log "copying $REPO into $ROOT/root/perf-exporter"
rm -rf -- "$ROOT/root/perf-exporter"
mkdir -p -- "$ROOT/root/perf-exporter"
git -C "$REPO" ls-files -z --cached --others --exclude-standard >"$ROOT/tmp/files"
tar -C "$REPO" --null --no-recursion --ignore-failed-read -T "$ROOT/tmp/files" -cf "$ROOT/tmp/tree.tar" 2>/dev/null
tar -xf "$ROOT/tmp/tree.tar" -C "$ROOT/root/perf-exporter"
rm -f -- "$ROOT/tmp/files" "$ROOT/tmp/tree.tar"

in_root() {
  # shellcheck disable=SC2086 # ca_env is words
  chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb $ca_env \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/perf-exporter && $1"
}

log "in the new root: $(in_root 'cat /etc/debian_version; command -v python3 node npm || true' | tr '\n' ' ')"
log "step 1: scripts/fetch-tools.sh"
tools=$(in_root 'scripts/fetch-tools.sh') || die "scripts/fetch-tools.sh failed on a fresh Debian 12"
printf '%s\n' "$tools" >&2
log "in the new root now: python $(in_root 'python3 --version'), system node $(in_root 'node --version'), tests' node $(in_root '.cache/tools/bin/node --version')"

if [[ ${DEPLOY_TESTS:-1} == 0 ]]; then
  echo "check-fresh-debian: fetch-tools ok (deploy tests not run: DEPLOY_TESTS=0)"
  exit 0
fi

log "step 2: scripts/fetch-servers.sh"
servers=$(in_root 'scripts/fetch-servers.sh') || die "scripts/fetch-servers.sh failed on a fresh Debian 12"

BIN=${BIN:-${CARGO_TARGET_DIR:-$REPO/target}/debug/perf-exporter}
[[ -x $BIN ]] || die "no exporter binary at $BIN (cargo build first, or set BIN)"
cp -- "$BIN" "$ROOT/root/perf-exporter-bin"

log "step 3: pytest tests/deploy (without test_container.py)"
envs=""
while IFS='=' read -r k v; do
  [[ -n $k ]] && envs+="PERF_EXPORTER_TEST_${k}=${v} "
done <<<"$tools"$'\n'"$servers"
set +e
in_root "env ${envs}PERF_EXPORTER_BIN=/root/perf-exporter-bin PYTHONDONTWRITEBYTECODE=1 \
  .cache/tools/venv/bin/pytest -q -p no:cacheprovider -c tests/deploy/pytest.ini tests/deploy \
  --ignore=tests/deploy/test_container.py"
rc=$?
set -e
if ((rc == 0)); then
  echo "check-fresh-debian: fetch-tools, fetch-servers and the deploy tests passed on a fresh Debian 12"
else
  echo "check-fresh-debian: the deploy tests FAILED on a fresh Debian 12 (pytest exit $rc)"
fi
exit "$rc"
