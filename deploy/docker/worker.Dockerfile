# onecard-worker image: one engine on one GPU (CUDA backend; the CPU backend
# is built in too). Built on NVIDIA's CUDA images (Ubuntu 24.04, whose gRPC,
# protobuf and Abseil match Debian 12's); the driver comes from the host
# through the NVIDIA container toolkit.
#   docker build -f deploy/docker/worker.Dockerfile -t onecard-worker .
#   docker build ... --build-arg CUDA_GENCODE="-gencode=arch=compute_89,code=sm_89"
# (from the repository root; context filtered by worker.Dockerfile.dockerignore).
# The model is mounted at run time (the Helm chart's model volume).
# Ports: 50051 gRPC, 9400 /metrics.

ARG CUDA_VERSION=13.0.0
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
ARG CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a"
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config git ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev \
      nlohmann-json3-dev libyaml-cpp-dev libpcre2-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DONECARD_CUDA=ON \
      -DONECARD_CUDA_GENCODE="${CUDA_GENCODE}" \
    && cmake --build /build --target onecard-worker onecard onecard-health-probe \
    && install -D /build/services/worker/onecard-worker /out/usr/local/bin/onecard-worker \
    && install -D /build/services/metrics/onecard-health-probe /out/usr/local/bin/onecard-health-probe \
    && install -D /build/tools/onecard/onecard /out/usr/local/bin/onecard \
    && bash deploy/docker/copy-runtime-libs.sh /out /out/usr/local/bin/*

FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU}
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
RUN groupadd --gid 10001 onecard && useradd --uid 10001 --gid onecard --no-create-home onecard
COPY --from=build /out/ /
RUN ldconfig
USER 10001:10001
EXPOSE 50051 9400
ENTRYPOINT ["/usr/local/bin/onecard-worker"]
CMD ["--config=/etc/onecard/onecard.yaml"]
