// cuBLAS is opened on first use (engine/kernels/cublas_loader.h), so a process
// linked with the CUDA kernels still serves /metrics through prometheus-cpp:
// before, libcublasLt's static TLS filled civetweb's 100 KiB thread stacks and
// MetricsServer::Start failed. Runs without a GPU (cuBLAS loads without one).
#include "engine/kernels/cublas_loader.h"

#include <cublas_v2.h>
#include <link.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/metrics_server.h"
#include "tests/services/testing/http_get.h"

namespace onecard::engine::cuda {
namespace {

bool Mapped(const std::string& fragment) {
  struct Query {
    const std::string* fragment;
    bool found = false;
  } query{&fragment};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* q = static_cast<Query*>(data);
        if (info->dlpi_name != nullptr &&
            std::string(info->dlpi_name).find(*q->fragment) != std::string::npos) {
          q->found = true;
        }
        return 0;
      },
      &query);
  return query.found;
}

void ExpectServesMetrics() {
  absl::StatusOr<std::unique_ptr<services::MetricsServer>> server =
      services::MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<testing::HttpResponse> response =
      testing::HttpGet((*server)->address(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status_code, 200);
}

// One test: the process-wide load happens once, so the order is the test.
TEST(CublasLoaderTest, MetricsServerStartsBeforeAndAfterCublasLoads) {
  EXPECT_FALSE(Mapped("libcublasLt")) << "cuBLAS is linked, not loaded on first use";
  EXPECT_FALSE(Mapped("libcublas."));
  ExpectServesMetrics();

  // The first cuBLAS call loads the library (no GPU here: it then fails).
  cublasHandle_t handle = nullptr;
  const cublasStatus_t created = cublasCreate(&handle);
  ASSERT_TRUE(LoadCublas().ok()) << LoadCublas();
  EXPECT_TRUE(CublasLoaded());
  EXPECT_TRUE(Mapped("libcublasLt"));
  EXPECT_THAT(cublasGetStatusName(created), ::testing::StartsWith("CUBLAS_STATUS_"));
  if (created == CUBLAS_STATUS_SUCCESS) cublasDestroy(handle);

  ExpectServesMetrics();
}

TEST(CublasLoaderTest, LibraryNameIsTheBuildsMajorVersion) {
  EXPECT_EQ(CublasLibraryName(), "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
}

}  // namespace
}  // namespace onecard::engine::cuda
