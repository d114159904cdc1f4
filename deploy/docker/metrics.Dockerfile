# onecard-metrics image: the control plane (worker/router registry, the
# worker table that routers watch, aggregated Prometheus gauges).
#   docker build -f deploy/docker/metrics.Dockerfile -t onecard-metrics .
# (from the repository root; context filtered by metrics.Dockerfile.dockerignore).
# Ports: 50060 gRPC, 9402 /metrics.

ARG DEBIAN_IMAGE=debian:12

FROM ${DEBIAN_IMAGE} AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config git ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev \
      nlohmann-json3-dev libyaml-cpp-dev libpcre2-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DONECARD_CUDA=OFF \
    && cmake --build /build --target onecard-metrics onecard-health-probe \
    && install -D /build/services/metrics/onecard-metrics /out/usr/local/bin/onecard-metrics \
    && install -D /build/services/metrics/onecard-health-probe /out/usr/local/bin/onecard-health-probe \
    && bash deploy/docker/copy-runtime-libs.sh /out /out/usr/local/bin/*

FROM ${DEBIAN_IMAGE}-slim
RUN groupadd --gid 10001 onecard && useradd --uid 10001 --gid onecard --no-create-home onecard
COPY --from=build /out/ /
RUN ldconfig
USER 10001:10001
EXPOSE 50060 9402
ENTRYPOINT ["/usr/local/bin/onecard-metrics"]
CMD ["--config=/etc/onecard/onecard.yaml"]
