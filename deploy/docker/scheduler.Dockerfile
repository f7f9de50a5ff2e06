# The scheduler image: ripplekv-scheduler, and the ripplekv CLI for `ripplekv health` (the
# HEALTHCHECK, Kubernetes probes) and `ripplekv admin checkpoint` (deploy/docker/README.md).
#
#   docker build -f deploy/docker/scheduler.Dockerfile -t ripplekv/scheduler:0.1.0 .
#
# Build context: the repository root (.dockerignore keeps build trees and .git out). The image runs
# as ripplekv (10001:10001); its state is the volume /var/lib/ripplekv (database
# /var/lib/ripplekv/db). It has no default command: the daemon refuses to start without TLS
# (--tls-cert/--tls-key) or --insecure on loopback, so the flags are the deployment's choice.

# One Debian 12 snapshot for both stages, so the runtime libraries are the ones linked against.
ARG DEBIAN_TAG=bookworm-20250520

FROM debian:${DEBIAN_TAG} AS build
# scripts/deps is the project's one list of Debian build dependencies (developers, CI, images);
# copied alone first so that the layer is rebuilt only when the list changes.
COPY scripts/deps /src/scripts/deps
RUN /src/scripts/deps && rm -rf /var/lib/apt/lists/*
COPY . /src
WORKDIR /src
# No MPI: the CLI here only talks to the scheduler, and libmpi stays out of the image.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRIPPLEKV_NATIVE=OFF \
        -DRIPPLEKV_BUILD_TESTS=OFF -DRIPPLEKV_BUILD_BENCH=OFF -DRIPPLEKV_CUDA=OFF \
        -DRIPPLEKV_MPI=OFF \
    && cmake --build /build --target ripplekv-scheduler ripplekv \
    && install -D -m 0755 -t /out/usr/local/bin \
        /build/scheduler/service/ripplekv-scheduler /build/cli/ripplekv \
    && strip --strip-unneeded /out/usr/local/bin/*

FROM debian:${DEBIAN_TAG}-slim
ARG DEBIAN_TAG
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="ripplekv-scheduler" \
      org.opencontainers.image.description="RippleKV calibration scheduler and the ripplekv CLI" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="debian:${DEBIAN_TAG}-slim"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The shared libraries the two binaries link (gRPC, protobuf, Abseil, spdlog/fmt, OpenSSL, RocksDB,
# cpp-httplib; the CLI also OpenBLAS/OpenMP and PCRE2), by their Debian 12 package names.
# DL3008 (unpinned apt packages): the pinned base tag fixes the release; exact package revisions
# leave the archive with each security update, and a pin would then break the build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libabsl20220623 libatomic1 libcpp-httplib0.11 libfmt9 libgomp1 libgrpc++1.51 \
        libopenblas0-openmp libpcre2-8-0 libprotobuf32 librocksdb7.8 libspdlog1.10 libssl3 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 ripplekv \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/ripplekv --create-home \
        --shell /usr/sbin/nologin ripplekv \
    && install -d -o ripplekv -g ripplekv -m 0750 /var/lib/ripplekv \
    && install -d -m 0755 /etc/ripplekv /etc/ripplekv/tls /etc/ripplekv/tokens
COPY --from=build /out/ /
# A library missing from the list above fails the build here, not the container at start.
RUN missing="$(ldd /usr/local/bin/ripplekv-scheduler /usr/local/bin/ripplekv \
        | grep 'not found' || true)" \
    && if [ -n "$missing" ]; then echo "missing shared libraries: $missing" >&2; exit 1; fi

VOLUME ["/var/lib/ripplekv"]
# gRPC (TLS), the plaintext health port (--health-listen), Prometheus metrics (--metrics-listen).
EXPOSE 50051 8081 9090
USER 10001:10001
WORKDIR /home/ripplekv
# Healthy only while the health service answers SERVING: start the scheduler with
# --health-listen 0.0.0.0:8081 (or 127.0.0.1:8081). `ripplekv health` exits 1 when not serving and
# 3 when unreachable; Docker reads any non-zero status as a failed check, `|| exit 1` keeps it 1.
HEALTHCHECK --interval=15s --timeout=10s --start-period=60s --retries=3 \
    CMD ["/bin/sh", "-c", "ripplekv health --scheduler 127.0.0.1:8081 --timeout-ms 5000 || exit 1"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["ripplekv-scheduler"]
