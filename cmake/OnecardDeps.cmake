# Third-party packages, all from Debian (installed by scripts/setup.sh).
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(GTest CONFIG REQUIRED)
find_package(benchmark CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)  # sha256, constant-time compares (services/common/digest.h)
find_package(yaml-cpp CONFIG REQUIRED)
# Eigen (libeigen3-dev, headers only): GPTQ's solver (engine/model/gptq_solver.cc).
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# cpp-httplib (libcpp-httplib-dev): the router's OpenAI-compatible HTTP API.
# Its .pc file carries the defines the shared library was built with (TLS).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
