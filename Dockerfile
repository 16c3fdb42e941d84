# syntax=docker/dockerfile:1
#
# perf-exporter: a glibc binary on a minimal, non-root base (distroless cc:
# glibc and libgcc only; no shell, no package manager, uid 65532).
#
#   docker build -t perf-exporter .                         # BuildKit (Docker >= 23, buildx)
#   podman build -t perf-exporter .                         # or buildah bud (no SHELL needed)
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/perf-exporter .
#   buildah bud --platform linux/arm64 -t perf-exporter:arm64 .
#
# MULTI-ARCH. The build stage runs on the build host's platform and
# cross-compiles for the target's (Debian's cross gcc links it), so an arm64
# image builds on an amd64 host without emulation, and the other way round.
# Only the final stage is of the target platform, and it runs nothing.
#
# BASE IMAGES are build arguments with fully qualified defaults (podman and
# buildah refuse short names); point them at a mirror or a local copy with
#   --build-arg RUST_IMAGE=... --build-arg RUNTIME_IMAGE=...
# The two must be of the same Debian release (the binary links to its glibc).
#
# PRIVILEGE. System-wide counting (perf_event_open with pid = -1 on every CPU)
# needs CAP_PERFMON (Linux >= 5.8; CAP_SYS_ADMIN before that) or
# kernel.perf_event_paranoid <= 0 on the host. The exporter logs at start which
# privilege it found. Two ways to hold CAP_PERFMON and nothing else:
#
# 1. Root in the container, holding only CAP_PERFMON (simplest; what the Helm
#    chart does by default, privilege.mode=root):
#
#      docker run --user 0 --cap-drop ALL --cap-add PERFMON \
#        --security-opt no-new-privileges --read-only \
#        -v /sys:/host/sys:ro -p 9659:9659 perf-exporter --path.sysfs=/host/sys
#
#    Works with every runtime and filesystem. Uid 0 is still root for files
#    the container can reach, but with every other capability dropped, a
#    read-only filesystem and no_new_privs it can neither override file
#    permissions nor gain anything at exec.
#
# 2. Non-root (the image's default user 65532) with the file capability set
#    on the binary below (cap_perfmon+ep; chart: privilege.mode=fileCapabilities):
#
#      docker run --cap-drop ALL --cap-add PERFMON --read-only \
#        --security-opt no-new-privileges \
#        -v /sys:/host/sys:ro -p 9659:9659 perf-exporter --path.sysfs=/host/sys
#
#    The kernel grants a file capability at exec only if it is in the bounding
#    set (--cap-add PERFMON); under no_new_privs only if it is also in the
#    permitted set before exec, which containerd (1.6, 1.7, 2.1) and podman
#    (4.3) fill with the added capabilities even for a non-root user (measured
#    by tests/deploy/test_container.py). And only if the image kept the
#    binary's security.capability xattr: buildah, podman and BuildKit keep it
#    through COPY --from; the legacy builder, kaniko and some
#    registries/filesystems drop it, and the exporter then holds nothing, says
#    so and exits. Trade-off: no root at all, but the capability can be lost
#    by the image pipeline.
#
# Runtimes too old to know CAP_PERFMON (Docker 20.10: "unknown capability")
# or seccomp profiles that allow perf_event_open only with CAP_SYS_ADMIN
# (podman's default, 4.3 measured) need --cap-add SYS_ADMIN as well, which
# grants far more than counting.

ARG RUST_IMAGE=docker.io/library/rust:1-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot
# Set by BuildKit and newer buildah; buildah 1.28 (Debian 12) leaves it to
# --build-arg BUILDPLATFORM=linux/ARCH when --platform names another one.
ARG BUILDPLATFORM
ARG TARGETPLATFORM

FROM --platform=$BUILDPLATFORM ${RUST_IMAGE} AS build
# Set by BuildKit and buildah from --platform; where a builder leaves them
# empty, the build host's architecture (dpkg's) stands for both.
ARG TARGETARCH
ARG BUILDARCH
# Build-stage tools from the base image's Debian release: setcap, and the
# cross compiler and C library when the target is not the build host's. Not
# pinned, as Debian drops superseded versions (nothing of them ships).
# hadolint ignore=DL3008,SC2086
RUN host="$(dpkg --print-architecture)" \
    && case "${TARGETARCH:-$host}" in \
      "${BUILDARCH:-$host}") cross= ;; \
      arm64) cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;; \
      amd64) cross="gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;; \
      *) echo "TARGETARCH $TARGETARCH: only amd64 and arm64 are built" >&2; exit 1 ;; \
    esac \
    && apt-get update \
    && apt-get install -y --no-install-recommends libcap2-bin $cross \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Cargo reads every target the manifest declares, the benchmarks included.
COPY Cargo.toml Cargo.lock build.rs ./
# The source revision for --version and perf_exporter_build_info (the
# context has no .git): `--build-arg REVISION=$(git rev-parse --short HEAD)`.
ARG REVISION=unknown
ENV PERF_EXPORTER_REVISION=${REVISION}
# Linkers and C compilers (ring's build script) per target; on the build
# host's own architecture these names are its native gcc.
ENV CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=x86_64-linux-gnu-gcc \
    CC_x86_64_unknown_linux_gnu=x86_64-linux-gnu-gcc
COPY src src
COPY config config
COPY benches benches
COPY bpf/cgroup_counter.bpf.o bpf/cgroup_counter.bpf.o
# Build (release profile: stripped) for the target; check that the binary
# runs where it can (same architecture); give it the file capability (see
# PRIVILEGE above) and check that it holds it. No pipes: podman's default
# (OCI) image format ignores SHELL, so none is set.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    host="$(dpkg --print-architecture)" \
    && case "${TARGETARCH:-$host}" in \
      amd64) t=x86_64-unknown-linux-gnu ;; \
      arm64) t=aarch64-unknown-linux-gnu ;; \
    esac \
    && { [ -d "$(rustc --print sysroot)/lib/rustlib/$t/lib" ] || rustup target add "$t"; } \
    && cargo build --release --locked --bin perf-exporter --target "$t" \
    && cp "target/$t/release/perf-exporter" /perf-exporter \
    && { [ "${TARGETARCH:-$host}" != "${BUILDARCH:-$host}" ] || /perf-exporter --version; } \
    && setcap cap_perfmon+ep /perf-exporter \
    && test "$(getcap /perf-exporter)" = "/perf-exporter cap_perfmon=ep"

# The target platform said again: buildah 1.28 otherwise looks the base up
# for the previous stage's (the build host's) platform.
# hadolint ignore=DL3065
FROM --platform=$TARGETPLATFORM ${RUNTIME_IMAGE}
LABEL org.opencontainers.image.title="perf-exporter" \
      org.opencontainers.image.description="Linux perf_events counters (IPC, cache misses, DRAM bandwidth) for Prometheus" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /perf-exporter /bin/perf-exporter
USER 65532:65532
EXPOSE 9659
ENTRYPOINT ["/bin/perf-exporter"]
