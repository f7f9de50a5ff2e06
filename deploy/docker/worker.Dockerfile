# The GPU worker image: ripplekv-worker built with CUDA, NCCL and Open MPI on NVIDIA's CUDA 13
# images (Ubuntu 24.04), with sshd and ssh for Kubeflow's mpi-operator v2 (MPIJob v2beta1): the
# same image is the launcher (mpirun) and the workers (sshd) (deploy/docker/README.md).
#
#   docker build -f deploy/docker/worker.Dockerfile -t ripplekv/worker:0.1.0 .
#   docker build ... --build-arg CUDA_TAG=13.0.2 --build-arg CUDA_ARCHITECTURES="90a;100a" .
#
# Build context: the repository root. Runs as ripplekv (10001:10001, home /home/ripplekv).
# Workers: `/usr/sbin/sshd -De -f /home/ripplekv/.sshd_config` (port 2222; the operator mounts the
# job's key pair at /home/ripplekv/.ssh, which is also sshd's host key). Launcher:
# `mpirun -np N ripplekv-worker --tp T --device cuda:0 ...`. Alone: `docker run --gpus all IMAGE
# --scheduler ADDR --model PATH --device cuda:0 --metrics-listen 0.0.0.0:9100 ...`.

# NVIDIA's CUDA image tag (devel to build, runtime to run); 13.0.2 is the CUDA 13 release this
# file was written against.
ARG CUDA_TAG=13.0.2
ARG UBUNTU_TAG=ubuntu24.04
# The Debian 12 snapshot whose packages hold the built-in calibration texts (see "corpora").
ARG DEBIAN_TAG=bookworm-20250520

FROM nvidia/cuda:${CUDA_TAG}-devel-${UBUNTU_TAG} AS build
# The project's default (A100, H100/H200); add 100a/120 for Blackwell.
ARG CUDA_ARCHITECTURES="80;90a"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# scripts/deps's build dependencies by their Ubuntu 24.04 names (it targets Debian 12). The devel
# image brings nvcc, the CUDA runtime, cuBLAS and NCCL's headers (libnccl-dev).
# DL3008 (unpinned apt packages): the pinned base tag fixes the release; exact package revisions
# leave the archive with each security update, and a pin would then break the build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        build-essential cmake ninja-build pkg-config \
        libabsl-dev libcli11-dev libcpp-httplib-dev libfmt-dev libgrpc++-dev \
        libopenblas-openmp-dev libopenmpi-dev libpcre2-dev libprotobuf-dev librocksdb-dev \
        libspdlog-dev libssl-dev nlohmann-json3-dev openmpi-bin protobuf-compiler \
        protobuf-compiler-grpc \
    && rm -rf /var/lib/apt/lists/*
COPY . /src
WORKDIR /src
# Fails unless the CUDA backend and the NCCL communicator were built: a worker without them would
# build and then refuse --device cuda or --tp at run time.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRIPPLEKV_NATIVE=OFF \
        -DRIPPLEKV_BUILD_TESTS=OFF -DRIPPLEKV_BUILD_BENCH=OFF -DRIPPLEKV_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}" \
    && cmake --build /build --target ripplekv-worker \
    && { test -f /build/kernels/ops/libripplekv_kernels_cuda.a \
         || { echo "the CUDA backend was not built (no nvcc?)" >&2; exit 1; }; } \
    && { test -f /build/kernels/comm/libripplekv_comm_nccl.a \
         || { echo "no NCCL communicator built (nccl.h missing: libnccl-dev)" >&2; exit 1; }; } \
    && install -D -m 0755 -t /out/usr/local/bin /build/worker/service/ripplekv-worker \
    && strip --strip-unneeded /out/usr/local/bin/ripplekv-worker

# The built-in calibration texts (docs/DATA.md, worker/data/corpora.h) are files of Debian 12
# packages. Ubuntu 24.04 has other versions (lz4 4.x moved the books, Python 3.12, CMake 3.28),
# which would change the texts and so every profile's data fingerprint; the image carries
# Debian 12's files, at Debian 12's paths, so its workers calibrate on the same bytes as a Debian
# worker. The lists follow corpora.h: change both together.
FROM debian:${DEBIAN_TAG}-slim AS corpora
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# DL3008 (unpinned apt packages): the pinned base tag fixes the release; exact package revisions
# leave the archive with each security update, and a pin would then break the build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        cmake-data golang-github-pierrec-lz4-dev libpython3.11-stdlib \
    && rm -rf /var/lib/apt/lists/*
RUN lz4=/usr/share/gocode/src/github.com/pierrec/lz4/testdata \
    && python=/usr/lib/python3.11 \
    && cmake=$(echo /usr/share/cmake-3.*) \
    && files=( \
        "$lz4/pg1661.txt" "$lz4/Mark.Twain-Tom.Sawyer.txt" \
        /usr/share/doc/golang-github-pierrec-lz4-dev/copyright \
        "$python"/{argparse,configparser,dataclasses,difflib,enum,fractions,functools,heapq}.py \
        "$python"/{shutil,statistics,textwrap}.py \
        "$python"/collections/__init__.py "$python"/json/{decoder,encoder}.py \
        /usr/share/doc/libpython3.11-stdlib/copyright \
        "$cmake"/Help/manual/cmake-{buildsystem,compile-features,developer,file-api}.7.rst \
        "$cmake"/Help/manual/cmake-{generator-expressions,language,packages,presets}.7.rst \
        "$cmake"/Help/manual/cmake-{qt,toolchains}.7.rst \
        "$cmake"/Help/manual/{cmake,ctest}.1.rst \
        /usr/share/doc/cmake-data/copyright ) \
    && mkdir /corpora-root \
    && for f in "${files[@]}"; do \
        [[ -s "$f" ]] || { echo "corpora: $f missing" >&2; exit 1; }; \
        cp --parents "$f" /corpora-root; \
    done

FROM nvidia/cuda:${CUDA_TAG}-runtime-${UBUNTU_TAG}
ARG CUDA_TAG
ARG UBUNTU_TAG
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="ripplekv-worker" \
      org.opencontainers.image.description="RippleKV calibration worker (CUDA 13, NCCL, MPI)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="nvidia/cuda:${CUDA_TAG}-runtime-${UBUNTU_TAG}"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The shared libraries ripplekv-worker links (gRPC, protobuf, Abseil, spdlog/fmt, OpenSSL, OpenBLAS
# with OpenMP, PCRE2, cpp-httplib, Open MPI), mpirun for the launcher, sshd and ssh for mpirun's
# rsh launch. The CUDA runtime, cuBLAS (libcublas.so.13) and NCCL (libnccl.so.2) come with the
# runtime image (the worker opens cuBLAS and NCCL with dlopen; checked below).
# DL3008 (unpinned apt packages): the pinned base tag fixes the release; exact package revisions
# leave the archive with each security update, and a pin would then break the build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libabsl20220623t64 libatomic1 libcpp-httplib0.14t64 libfmt9 libgomp1 libgrpc++1.51t64 \
        libopenblas0-openmp libopenmpi3t64 libpcre2-8-0 libprotobuf32t64 libspdlog1.12 libssl3t64 \
        openmpi-bin openssh-client openssh-server \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /
COPY --from=corpora /corpora-root/ /
COPY deploy/docker/worker-healthcheck.sh /usr/local/bin/ripplekv-worker-healthcheck
# Checks: every linked library present; cuBLAS and NCCL in the linker cache (processes that mpirun
# starts over ssh get no LD_LIBRARY_PATH from the image); the only Python library and CMake
# manuals are Debian 12's, so the worker's version-picking cannot choose another text.
RUN chmod 0755 /usr/local/bin/ripplekv-worker-healthcheck \
    && missing="$(ldd /usr/local/bin/ripplekv-worker | grep 'not found' || true)" \
    && if [ -n "$missing" ]; then echo "missing shared libraries: $missing" >&2; exit 1; fi \
    && cache="$(ldconfig -p)" \
    && for lib in libcudart.so.13 libcublas.so.13 libnccl.so.2; do \
        [[ "$cache" == *"$lib "* ]] || { echo "$lib is not in the linker cache" >&2; exit 1; }; \
    done \
    && for d in /usr/lib/python3.* /usr/share/cmake-*; do \
        case "$d" in /usr/lib/python3.11|/usr/share/cmake-3.25) ;; \
        *) if [[ -e "$d/argparse.py" || -e "$d/Help/manual/cmake.1.rst" ]]; then \
               echo "$d would replace Debian 12's built-in calibration text" >&2; exit 1; fi ;; \
        esac; \
    done

# The non-root sshd of mpi-operator v2: port 2222, config in the home directory, host key = the
# job's key (mounted at ~/.ssh/id_rsa with mode 0600), pid file in the home directory. The host keys
# openssh-server's install generated are deleted: no key is shared by every container of the image.
# Clients (mpirun's ssh) use port 2222 and skip host-key checks (pod names and keys change every
# job). Open MPI: no CMA single-copy, which containers without CAP_SYS_PTRACE refuse.
RUN groupadd --gid 10001 ripplekv \
    && useradd --uid 10001 --gid 10001 --home-dir /home/ripplekv --create-home --shell /bin/bash \
        ripplekv \
    && rm -f /etc/ssh/ssh_host_* \
    && install -d -m 0755 /run/sshd \
    && printf '%s\n' \
        '# ripplekv-worker image: every ssh connection (mpirun to the MPIJob workers).' \
        'Host *' \
        '    Port 2222' \
        '    StrictHostKeyChecking no' \
        '    UserKnownHostsFile /dev/null' \
        '    LogLevel ERROR' \
        > /etc/ssh/ssh_config.d/ripplekv.conf \
    && printf '%s\n' \
        '# sshd of the ripplekv-worker image, run as ripplekv:' \
        '#   /usr/sbin/sshd -De -f /home/ripplekv/.sshd_config' \
        'Port 2222' \
        'HostKey /home/ripplekv/.ssh/id_rsa' \
        'PidFile /home/ripplekv/sshd.pid' \
        'AuthorizedKeysFile /home/ripplekv/.ssh/authorized_keys' \
        'StrictModes no' \
        'PubkeyAuthentication yes' \
        'PasswordAuthentication no' \
        'KbdInteractiveAuthentication no' \
        'UsePAM no' \
        'PermitRootLogin no' \
        'AllowUsers ripplekv' \
        'AllowAgentForwarding no' \
        'AllowTcpForwarding no' \
        'X11Forwarding no' \
        'PrintMotd no' \
        > /home/ripplekv/.sshd_config \
    && chown ripplekv:ripplekv /home/ripplekv/.sshd_config \
    && echo 'btl_vader_single_copy_mechanism = none' >> /etc/openmpi/openmpi-mca-params.conf

# Metrics (--metrics-listen 0.0.0.0:9100) and sshd.
EXPOSE 9100 2222
USER 10001:10001
WORKDIR /home/ripplekv
# For `docker run` only (Kubernetes ignores HEALTHCHECK; MPIJob pods run sshd or mpirun): healthy
# while the worker holds a stream to the scheduler. The model loads before the metrics endpoint
# starts, hence the long start period.
HEALTHCHECK --interval=30s --timeout=10s --start-period=15m --retries=3 \
    CMD ["/usr/local/bin/ripplekv-worker-healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["ripplekv-worker"]
