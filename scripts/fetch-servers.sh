#!/usr/bin/env bash
# Fetch real Prometheus + promtool, node_exporter and VictoriaMetrics binaries from Debian's
# package archive into DEST, for integration tests. Nothing is installed system-wide: apt runs
# against a private sources list / lists dir / dpkg status under DEST ("apt-get download"), and
# the .debs are unpacked with "dpkg -x" into DEST/root.
#
# Usage: scripts/fetch-servers.sh [DEST]          (default DEST: <repo>/.cache/servers)
#
# stdout: only KEY=/abs/path lines (PROMETHEUS, PROMTOOL, NODE_EXPORTER, VICTORIA_METRICS), so
#         callers can do e.g.  eval "$(scripts/fetch-servers.sh)"  or read them line by line.
# stderr: all progress, the versions obtained, and errors.
#
# Idempotent: a stamp file (DEST/.stamp) marks a complete fetch; later runs only print the paths.
#
# Environment:
#   FORCE=1        refetch (refresh apt lists, re-download if the archive changed, re-extract)
#   SUITE=name     Debian suite to take the packages from (default: trixie, which carries
#                  prometheus 2.53.x, node_exporter 1.9.x, victoria-metrics 1.112.x)
#   MIRROR=url     Debian mirror; default: the Debian mirror already configured in this machine's
#                  apt sources (never hard-coded)
#   KEYRING=path   archive keyring (default /usr/share/keyrings/debian-archive-keyring.gpg)
#   ALLOW_VERSION_MISMATCH=1   proceed (with a warning) if SUITE carries other upstream versions
#                  than the required ones; by default that is an error.
set -euo pipefail

exec 3>&1 1>&2 # fd 3 = real stdout (KEY= lines only); everything else goes to stderr

log() { printf 'fetch-servers: %s\n' "$*" >&2; }
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
[[ $# -le 1 ]] || die "usage: $0 [DEST]"

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(dirname -- "$SCRIPT_DIR")
DEST=$(realpath -m -- "${1:-$REPO/.cache/servers}")
SUITE=${SUITE:-trixie}
KEYRING=${KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
FORCE=${FORCE:-0}

# What we want: output key, Debian binary package, binary in /usr/bin, required upstream version.
KEYS=(PROMETHEUS PROMTOOL NODE_EXPORTER VICTORIA_METRICS)
PKGS=(prometheus promtool prometheus-node-exporter victoria-metrics)
BINS=(prometheus promtool prometheus-node-exporter victoria-metrics)
WANT=(2.53 2.53 1.9 1.112)

STAMP=$DEST/.stamp
ROOT=$DEST/root

for c in apt-get apt-cache dpkg dpkg-deb ldd sha256sum realpath timeout; do
  command -v "$c" >/dev/null || die "required command '$c' not found (this script needs a Debian-based host)"
done
ARCH=$(dpkg --print-architecture)
STAMP_HEAD="fetch-servers v1 suite=$SUITE arch=$ARCH"

print_paths() {
  local i
  for i in "${!KEYS[@]}"; do
    printf '%s=%s\n' "${KEYS[$i]}" "$ROOT/usr/bin/${BINS[$i]}" >&3
  done
}

# "1:2.53.3+ds1-2" -> "2.53.3"  (drop epoch, Debian revision, +dfsg/+ds/~ suffixes)
upstream_version() {
  local v=${1#*:}
  [[ $v == *-* ]] && v=${v%-*}
  printf '%s\n' "${v%%[+~]*}"
}

# Complete already? Stamp matches this suite/arch and lists every package, binaries present.
is_complete() {
  [[ -f $STAMP ]] || return 1
  [[ "$(head -n1 "$STAMP")" == "$STAMP_HEAD" ]] || return 1
  local i
  for i in "${!PKGS[@]}"; do
    grep -q "^${PKGS[$i]}=" "$STAMP" || return 1
    [[ -x $ROOT/usr/bin/${BINS[$i]} ]] || return 1
  done
}

mkdir -p -- "$DEST"
# Serialise concurrent runs (e.g. parallel test jobs) on the same DEST.
if command -v flock >/dev/null; then
  exec 9>"$DEST/.lock"
  flock -w 900 9 || die "timed out waiting for the lock on $DEST/.lock"
fi

if [[ $FORCE != 1 ]] && is_complete; then
  log "already complete in $DEST ($(tail -n +2 "$STAMP" | tr '\n' ' ')); FORCE=1 to refresh"
  print_paths
  exit 0
fi
rm -f -- "$STAMP"

[[ -r $KEYRING ]] || die "Debian archive keyring $KEYRING not found (apt-get install debian-archive-keyring, or set KEYRING)"

# ---- Debian mirror: the one this machine's apt is configured with (any sources format). ----
# "apt-get update --print-uris" parses sources.list, *.list and deb822 *.sources for us (honouring
# Enabled: no etc.) without touching the network or the system's lists.
find_mirror() {
  local probe
  probe=$(mktemp -d)
  apt-get -o Dir::State::Lists="$probe" -o Dir::Cache="$probe" update --print-uris </dev/null 2>/dev/null |
    sed -n "s|^'\(.*\)/dists/\([^/]*\)/InRelease' .*|\1 \2|p" |
    awk '$2 ~ /^(buster|bullseye|bookworm|trixie|forky|duke|sid|oldoldstable|oldstable|stable|testing|unstable)(-updates|-backports|-proposed-updates)?$/ &&
         $1 !~ /security/ { print $1; exit }' || true
  rm -rf -- "$probe"
}
MIRROR=${MIRROR:-$(find_mirror)}
[[ -n $MIRROR ]] || die "no Debian archive mirror found in this machine's apt sources (/etc/apt/sources.list{,.d}); set MIRROR=<url>"
log "mirror: $MIRROR  suite: $SUITE  arch: $ARCH  dest: $DEST"

# ---- private apt state: own sources, lists, cache and an empty dpkg status (host packages ignored) ----
APTDIR=$DEST/apt
mkdir -p -- "$APTDIR"/lists/partial "$APTDIR"/cache/archives/partial "$APTDIR"/etc "$DEST/debs"
printf 'deb [signed-by=%s arch=%s lang=none target=Packages] %s %s main\n' \
  "$KEYRING" "$ARCH" "$MIRROR" "$SUITE" >"$APTDIR/etc/sources.list"
: >"$APTDIR/etc/status"
APT=(-q
  -o Dir::Etc::SourceList="$APTDIR/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
  -o Dir::State::Lists="$APTDIR/lists" -o Dir::State::status="$APTDIR/etc/status"
  -o Dir::Cache="$APTDIR/cache" -o Acquire::Languages=none -o Acquire::Retries=3
  -o APT::Architecture="$ARCH" -o APT::Architectures="$ARCH"
  -o APT::Sandbox::User="$(id -un)") # as root: no _apt sandbox (it could not write into DEST)
export DEBIAN_FRONTEND=noninteractive

log "apt-get update (private lists in $APTDIR/lists)"
apt-get "${APT[@]}" update </dev/null || die "apt-get update failed for '$MIRROR $SUITE main'"

# ---- resolve versions and check them against what we need ----
declare -A VER SHA
mismatch=0
for i in "${!PKGS[@]}"; do
  p=${PKGS[$i]}
  rec=$(apt-cache "${APT[@]}" show --no-all-versions "$p" 2>/dev/null </dev/null) ||
    die "package '$p' is not available in Debian '$SUITE' ($MIRROR)"
  VER[$p]=$(awk '/^Version:/ {print $2; exit}' <<<"$rec")
  SHA[$p]=$(awk '/^SHA256:/ {print $2; exit}' <<<"$rec")
  [[ -n ${VER[$p]} && -n ${SHA[$p]} ]] || die "could not parse the apt record of '$p'"
  up=$(upstream_version "${VER[$p]}")
  if [[ $up == "${WANT[$i]}" || $up == "${WANT[$i]}".* ]]; then
    log "  $p: ${VER[$p]} (upstream $up; required ${WANT[$i]}.x) ok"
  else
    log "  $p: Debian '$SUITE' carries ${VER[$p]} (upstream $up), but ${WANT[$i]}.x is required"
    mismatch=1
  fi
done
if [[ $mismatch == 1 ]]; then
  [[ ${ALLOW_VERSION_MISMATCH:-0} == 1 ]] ||
    die "suite '$SUITE' does not carry the required versions (see above); pick another SUITE, or ALLOW_VERSION_MISMATCH=1 to take them anyway"
  log "WARNING: continuing with the versions above (ALLOW_VERSION_MISMATCH=1)"
fi

# ---- download (reuse cached .debs whose checksum matches the archive's) ----
declare -A DEB
cd -- "$DEST/debs"
for p in "${PKGS[@]}"; do
  for f in "${p}"_*.deb; do
    [[ -e $f ]] || continue
    if [[ -z ${DEB[$p]:-} && "$(sha256sum <"$f" | cut -d' ' -f1)" == "${SHA[$p]}" ]]; then
      DEB[$p]=$f
    else
      rm -f -- "$f" # stale version / partial download
    fi
  done
  if [[ -z ${DEB[$p]:-} ]]; then
    log "downloading $p ${VER[$p]}"
    apt-get "${APT[@]}" download "$p=${VER[$p]}" </dev/null || die "apt-get download $p=${VER[$p]} failed"
    for f in "${p}"_*.deb; do
      [[ -e $f && "$(sha256sum <"$f" | cut -d' ' -f1)" == "${SHA[$p]}" ]] && DEB[$p]=$f
    done
    [[ -n ${DEB[$p]:-} ]] || die "downloaded $p but no .deb with the expected SHA256 ${SHA[$p]} is in $DEST/debs"
  else
    log "cached: ${DEB[$p]}"
  fi
done

# ---- extract into a fresh tree, then swap it in ----
tmp=$(mktemp -d "$DEST/root.new.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
for p in "${PKGS[@]}"; do
  dpkg -x "$DEST/debs/${DEB[$p]}" "$tmp" || die "dpkg -x ${DEB[$p]} failed"
done
chmod 755 "$tmp"
rm -rf -- "$ROOT"
mv -- "$tmp" "$ROOT"
trap - EXIT

# ---- verify: every binary exists, resolves all shared libs/symbols, and runs ----
summary=()
for i in "${!PKGS[@]}"; do
  p=${PKGS[$i]} b=$ROOT/usr/bin/${BINS[$i]}
  [[ -x $b ]] || die "$p ${VER[$p]} did not provide an executable $b"
  # ldd -r also reports missing symbols / symbol versions (e.g. a too-old glibc or libzstd).
  libs=$(ldd -r "$b" 2>&1 || true)
  if [[ $libs != *"not a dynamic executable"* ]] && bad=$(grep -E 'not found|undefined symbol' <<<"$libs"); then
    die "$b has unresolved shared libraries/symbols on this host:
$bad"
  fi
  if ! out=$(timeout 30 "$b" --version </dev/null 2>&1); then
    die "$b --version failed:
$out"
  fi
  first=$(head -n1 <<<"$out")
  up=$(upstream_version "${VER[$p]}")
  if [[ -z $first ]]; then
    # Debian's victoria-metrics build embeds no version string: '--version' exits 0 but prints "".
    log "  ${BINS[$i]} --version: exit 0, no version string embedded in the binary; package ${VER[$p]}"
  elif [[ $first != *"$up"* ]]; then
    log "  WARNING: ${BINS[$i]} --version says '$first', package version is ${VER[$p]}"
  else
    log "  ${BINS[$i]} --version: $first"
  fi
  summary+=("$p=${VER[$p]}")
done

{
  printf '%s\n' "$STAMP_HEAD"
  printf '%s\n' "${summary[@]}"
} >"$STAMP.tmp"
mv -- "$STAMP.tmp" "$STAMP"
log "done: ${summary[*]} (from Debian $SUITE, $MIRROR)"
print_paths
