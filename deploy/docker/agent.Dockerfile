# The serving-node agent image: ripplekv-agent (docs/ROLLOUTS.md, "The agent";
# deploy/docker/README.md).
#
#   docker build -f deploy/docker/agent.Dockerfile -t ripplekv/agent:0.1.0 .
#
# Build context: the repository root. Runs as ripplekv (10001:10001), usually as a sidecar of the
# serving engine: both mount the volume that holds the budget-map file (--out), by default
# /var/lib/ripplekv-agent. The agent has no port; its flags (--scheduler, --node-id, --model-hash,
# --out, TLS, token) are the deployment's.

ARG DEBIAN_TAG=bookworm-20250520

FROM debian:${DEBIAN_TAG} AS build
COPY scripts/deps /src/scripts/deps
RUN /src/scripts/deps && rm -rf /var/lib/apt/lists/*
COPY . /src
WORKDIR /src
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRIPPLEKV_NATIVE=OFF \
        -DRIPPLEKV_BUILD_TESTS=OFF -DRIPPLEKV_BUILD_BENCH=OFF -DRIPPLEKV_CUDA=OFF \
        -DRIPPLEKV_MPI=OFF \
    && cmake --build /build --target ripplekv-agent \
    && install -D -m 0755 -t /out/usr/local/bin /build/agent/ripplekv-agent \
    && strip --strip-unneeded /out/usr/local/bin/ripplekv-agent

FROM debian:${DEBIAN_TAG}-slim
ARG DEBIAN_TAG
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="ripplekv-agent" \
      org.opencontainers.image.description="RippleKV serving-node agent (the node's budget map)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="debian:${DEBIAN_TAG}-slim"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The shared libraries ripplekv-agent links: gRPC, protobuf, Abseil, spdlog/fmt, OpenSSL.
# --apply-cmd hooks run with /bin/sh; a hook needing more tools (curl, ...) needs an image built on
# this one.
# DL3008 (unpinned apt packages): the pinned base tag fixes the release; exact package revisions
# leave the archive with each security update, and a pin would then break the build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libabsl20220623 libatomic1 libfmt9 libgrpc++1.51 libprotobuf32 libspdlog1.10 libssl3 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 ripplekv \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/ripplekv --create-home \
        --shell /usr/sbin/nologin ripplekv \
    && install -d -o ripplekv -g ripplekv -m 0755 /var/lib/ripplekv-agent \
    && install -d -m 0755 /etc/ripplekv /etc/ripplekv/tls /etc/ripplekv/tokens
COPY --from=build /out/ /
RUN missing="$(ldd /usr/local/bin/ripplekv-agent | grep 'not found' || true)" \
    && if [ -n "$missing" ]; then echo "missing shared libraries: $missing" >&2; exit 1; fi

USER 10001:10001
WORKDIR /home/ripplekv
# No port to probe: the agent exits (1 bad start, 2 refused by the scheduler) rather than run
# broken, so the container's restart policy is its health check.
HEALTHCHECK NONE
STOPSIGNAL SIGTERM
ENTRYPOINT ["ripplekv-agent"]
