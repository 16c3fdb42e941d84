# perf-exporter: a static (musl) binary on a minimal, non-root base.
#
#   docker build -t perf-exporter .
#
# Running it. System-wide counting (perf_event_open with pid=-1) needs
# CAP_PERFMON (Linux >= 5.8; CAP_SYS_ADMIN before that) or
# kernel.perf_event_paranoid <= 0 on the host:
#
#   # Root in the container, holding only CAP_PERFMON (simplest):
#   docker run --user 0 --cap-drop ALL --cap-add PERFMON \
#     -v /sys:/host/sys:ro -p 9659:9659 perf-exporter --path.sysfs=/host/sys
#
#   # Non-root (the image default, uid 65532) with the file capability
#   # below: the kernel grants CAP_PERFMON at exec only if the runtime
#   # leaves it in the bounding set (--cap-add PERFMON) and the filesystem
#   # keeps xattrs. Trade-off: no root at all, but it silently loses the
#   # capability on runtimes or filesystems that drop file capabilities.
#   docker run --cap-drop ALL --cap-add PERFMON -v /sys:/host/sys:ro \
#     -p 9659:9659 perf-exporter --path.sysfs=/host/sys
FROM rust:1-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl && apt-get update \
    && apt-get install -y --no-install-recommends musl-tools libcap2-bin && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY config config
RUN cargo build --release --locked --target x86_64-unknown-linux-musl \
    && cp target/x86_64-unknown-linux-musl/release/perf-exporter /perf-exporter \
    && setcap cap_perfmon+ep /perf-exporter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /perf-exporter /bin/perf-exporter
USER 65532:65532
EXPOSE 9659
ENTRYPOINT ["/bin/perf-exporter"]
