# onecard-router image: the public onecard.v1.Generation gRPC API (admission,
# tenants' rate limits, priority queues, dispatch to workers).
#   docker build -f deploy/docker/router.Dockerfile -t onecard-router .
# (from the repository root; the build context is filtered by
# router.Dockerfile.dockerignore). The model (tokenizer and chat template) is
# mounted at run time, e.g. the Helm chart's model volume.
# Ports: 50050 gRPC, 9401 /metrics.

ARG DEBIAN_IMAGE=debian:12

FROM ${DEBIAN_IMAGE} AS build
# The packages of scripts/setup.sh that the build needs (plus OpenSSL for the
# router's key hashing).
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config git ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev \
      nlohmann-json3-dev libyaml-cpp-dev libpcre2-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DONECARD_CUDA=OFF \
    && cmake --build /build --target onecard-router onecard onecard-health-probe \
    && install -D /build/router/onecard-router /out/usr/local/bin/onecard-router \
    && install -D /build/services/metrics/onecard-health-probe /out/usr/local/bin/onecard-health-probe \
    && install -D /build/tools/onecard/onecard /out/usr/local/bin/onecard \
    && bash deploy/docker/copy-runtime-libs.sh /out /out/usr/local/bin/*

FROM ${DEBIAN_IMAGE}-slim
RUN groupadd --gid 10001 onecard && useradd --uid 10001 --gid onecard --no-create-home onecard
COPY --from=build /out/ /
RUN ldconfig
USER 10001:10001
EXPOSE 50050 9401
ENTRYPOINT ["/usr/local/bin/onecard-router"]
CMD ["--config=/etc/onecard-router/router.yaml"]
