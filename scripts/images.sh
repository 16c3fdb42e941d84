#!/usr/bin/env bash
# Sets up what the container tests (tests/deploy/test_container.py) need:
#   1. the runtimes, from Debian's packages (apt-get install, if missing):
#      buildah, podman, containerd, runc, debootstrap;
#   2. containerd 1.7 (trixie) and 2.x (sid) besides the system's (bookworm:
#      1.6), unpacked from Debian's packages into .cache/deploy/containerd/SUITE
#      (apt-get download against a private sources list; nothing installed);
#   3. local stand-ins for the Dockerfile's base images, which cannot be pulled
#      here, built from Debian packages (debootstrap) into a private image
#      store under .cache/deploy/storage (containers-storage, buildah --root):
#        localhost/standin/rust:1-bookworm    for docker.io/library/rust:1-bookworm
#          (Debian bookworm + gcc + the host's Rust toolchain, laid out as the
#          official image lays it out: RUSTUP_HOME=/usr/local/rustup,
#          CARGO_HOME=/usr/local/cargo)
#        localhost/standin/distroless-cc:nonroot  for gcr.io/distroless/cc-debian12:nonroot
#          (no shell: glibc, libgcc, CA certificates, /etc/passwd with
#          nonroot = 65532, user 65532:65532)
#        localhost/standin/distroless-cc:nonroot-arm64  the same for linux/arm64
#          (libc6:arm64 and libgcc-s1:arm64 unpacked, nothing run), the
#          final stage of the multi-arch build test; the rust stand-in
#          carries the aarch64-unknown-linux-gnu target for it
#
# Usage: scripts/images.sh          (idempotent: a stamp marks a complete run;
#                                    FORCE=1 rebuilds the stand-ins)
# stdout: nothing; stderr: progress. Exits non-zero on any failure.
# Every path the tests use is fixed: .cache/deploy/{storage,stamp,containerd}.
set -euo pipefail

log() { printf 'images: %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
DEST=$REPO/.cache/deploy
STORAGE=$DEST/storage
STAMP=$DEST/stamp
# The rust stand-in carries the host's toolchain with the aarch64 target (the
# multi-arch build cross-compiles from it).
ARM64_TARGET=aarch64-unknown-linux-gnu
rustup target list --installed | grep -qx $ARM64_TARGET || rustup target add $ARM64_TARGET >&2
STAMP_TEXT="images v2 $(dpkg --print-architecture) $(rustc --version) +$ARM64_TARGET"
[[ $(id -u) == 0 ]] || die "run as root (debootstrap, buildah and containerd need it)"

# 1. Runtimes, and libcap2-bin (setcap/getcap) and binutils (readelf) for the tests.
need=()
for p in buildah podman containerd runc debootstrap libcap2-bin binutils; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if ((${#need[@]})); then
  log "installing ${need[*]} (apt-get)"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >&2
fi

# 2. Other containerd releases, each with its ctr and shim.
mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' 2>/dev/null |
  grep -m1 -v security || true)
[[ -n $mirror ]] || die "no Debian mirror found in this machine's apt sources"
for suite in trixie sid; do
  out=$DEST/containerd/$suite
  [[ ${FORCE:-0} != 1 && -x $out/usr/bin/containerd ]] && continue
  log "containerd from Debian $suite (apt-get download, unpacked into $out)"
  apt=$(mktemp -d)
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
  printf 'deb %s %s main\n' "$mirror" "$suite" >"$apt/sources.list"
  o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Dir::State::Status=/dev/null
    -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  apt-get "${o[@]}" update -q >&2
  (cd "$apt" && apt-get "${o[@]}" download containerd >&2)
  rm -rf "$out" && mkdir -p "$out"
  dpkg -x "$apt"/containerd_*.deb "$out"
  rm -rf "$apt"
  "$out/usr/bin/containerd" --version >&2
done

if [[ ${FORCE:-0} != 1 && -f $STAMP && $(cat "$STAMP") == "$STAMP_TEXT" ]]; then
  log "stand-in base images up to date ($STORAGE)"
  exit 0
fi

# 3. Stand-in base images.
mkdir -p "$DEST"
rm -f "$STAMP"
work=$(mktemp -d "$DEST/work.XXXXXX")
runroot=$(mktemp -d /tmp/perf-exporter-images.XXXXXX)
cleanup() {
  buildah --root "$STORAGE" --runroot "$runroot" rm --all >/dev/null 2>&1 || true
  rm -rf "$work" "$runroot"
}
trap cleanup EXIT
bah() { buildah --root "$STORAGE" --runroot "$runroot" --storage-driver overlay "$@"; }

rootfs=$work/rootfs
log "debootstrap bookworm from $mirror (a few minutes, once)"
debootstrap --variant=minbase --include=gcc,libc6-dev,ca-certificates \
  bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  die "debootstrap failed: $(tail -5 "$work/debootstrap.log")"
# Apt inside the build stage uses the same mirror.
printf 'deb %s bookworm main\n' "$mirror" >"$rootfs/etc/apt/sources.list"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*

# The rust stand-in: bookworm + the host's toolchain (no docs) at the official image's paths.
toolchain=$(rustc --print sysroot)
name=$(basename "$toolchain")
mkdir -p "$rootfs/usr/local/rustup/toolchains" "$rootfs/usr/local/cargo/bin"
tar -C "$(dirname "$toolchain")" --exclude="$name/share/doc" -cf - "$name" |
  tar -C "$rootfs/usr/local/rustup/toolchains" -xf -
channel=${name%%-*}
printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "minimal"\n' "$channel" \
  >"$rootfs/usr/local/rustup/settings.toml"
cp "$(command -v rustup)" "$rootfs/usr/local/cargo/bin/rustup"
for t in cargo rustc rustdoc; do ln -f "$rootfs/usr/local/cargo/bin/rustup" "$rootfs/usr/local/cargo/bin/$t"; done
log "committing localhost/standin/rust:1-bookworm"
c=$(bah from scratch)
tar -C "$rootfs" -cf "$work/rust.tar" .
bah add "$c" "$work/rust.tar" / >/dev/null
bah config --env RUSTUP_HOME=/usr/local/rustup --env CARGO_HOME=/usr/local/cargo \
  --env PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env RUSTUP_AUTO_INSTALL=0 --cmd /bin/bash "$c"
bah rmi localhost/standin/rust:1-bookworm >/dev/null 2>&1 || true # the previous stand-in
bah commit --quiet --rm "$c" localhost/standin/rust:1-bookworm >/dev/null
rm -f "$work/rust.tar"

# The distroless stand-in: the files of libc6, libgcc-s1 and ca-certificates only.
base=$work/base
mkdir -p "$base/etc" "$base/tmp" "$base/home/nonroot" "$base/usr/lib" "$base/usr/lib64" "$base/usr/bin" "$base/usr/sbin"
chmod 1777 "$base/tmp"
# Merged /usr: the top-level links first, so that files land beneath them.
for l in lib lib64 bin sbin; do [[ -L $rootfs/$l ]] && cp -a "$rootfs/$l" "$base/$l"; done
chroot "$rootfs" dpkg-query -L libc6 libgcc-s1 ca-certificates |
  while read -r f; do
    [[ -e $rootfs$f && ! -d $rootfs$f ]] || continue
    mkdir -p "$base$(dirname "$f")"
    cp -a "$rootfs$f" "$base$f"
  done
cp -a "$rootfs/etc/ssl" "$base/etc/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$base/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$base/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$base/etc/nsswitch.conf"
chown 65532:65532 "$base/home/nonroot"
log "committing localhost/standin/distroless-cc:nonroot"
c=$(bah from scratch)
tar -C "$base" -cf "$work/base.tar" .
bah add "$c" "$work/base.tar" / >/dev/null
bah config --user 65532:65532 --workingdir /home/nonroot \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
bah rmi localhost/standin/distroless-cc:nonroot >/dev/null 2>&1 || true # the previous stand-in
bah commit --quiet --rm "$c" localhost/standin/distroless-cc:nonroot >/dev/null

# The arm64 distroless stand-in: the same files from Debian's arm64 packages
# (apt-get download against a private configuration; unpacked, never run).
apt=$work/apt-arm64
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
printf 'deb %s bookworm main\n' "$mirror" >"$apt/sources.list"
o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Dir::State::Status=/dev/null
  -o Debug::NoLocking=1 -o APT::Sandbox::User=root -o APT::Architecture=arm64 -o APT::Architectures=arm64)
apt-get "${o[@]}" update -q >&2
(cd "$apt" && apt-get "${o[@]}" download libc6:arm64 libgcc-s1:arm64 >&2)
base64=$work/base-arm64
mkdir -p "$base64"
for d in "$apt"/*.deb; do dpkg -x "$d" "$base64"; done
cp -a "$base/etc" "$base/tmp" "$base/home" "$base64/"
[[ -e $base64/lib/ld-linux-aarch64.so.1 ]] || die "arm64 stand-in: no lib/ld-linux-aarch64.so.1 in libc6:arm64"
log "committing localhost/standin/distroless-cc:nonroot-arm64"
c=$(bah from --arch arm64 scratch)
tar -C "$base64" -cf "$work/base-arm64.tar" .
bah add "$c" "$work/base-arm64.tar" / >/dev/null
bah config --arch arm64 --os linux --user 65532:65532 --workingdir /home/nonroot \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
bah rmi localhost/standin/distroless-cc:nonroot-arm64 >/dev/null 2>&1 || true
bah commit --quiet --rm "$c" localhost/standin/distroless-cc:nonroot-arm64 >/dev/null

printf '%s\n' "$STAMP_TEXT" >"$STAMP"
log "stand-in base images ready in $STORAGE"
