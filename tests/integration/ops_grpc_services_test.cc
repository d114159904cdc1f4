// What an operator's tools see of the real onecard-metrics, onecard-worker
// (CPU, SmolLM2) and onecard-router processes: grpc.health.v1 answers per
// service name (and NOT_FOUND for a name the server does not serve); server
// reflection lists each server's services to a real reflection client; the
// router writes one access line per request (request id, tenant, tokens,
// TTFT, status), and with the JSON log format (the metrics service's and the
// worker's config `log.format`, the router's --log-format) every log line is
// a JSON object. The expected service names are the ones in proto/onecard/v1.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/ops_cluster.h"
#include "tests/services/testing/reflection_client.h"

namespace onecard::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

class OpsGrpcServicesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_dir_ = new std::string(
        (std::filesystem::temp_directory_path() / ("ops-grpc-" + std::to_string(getpid())))
            .string());
    std::filesystem::create_directories(*work_dir_);
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
        LocalCluster::Start({.work_dir = *work_dir_, .json_logs = true});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    std::filesystem::remove_all(*work_dir_);
    delete work_dir_;
  }

  static std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  }

  // The health status of `service` at `address`: "SERVING", ..., or the
  // error code's name.
  static std::string Health(const std::string& address, const std::string& service) {
    auto stub = grpc::health::v1::Health::NewStub(Channel(address));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = stub->Check(&context, request, &response);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) return "NOT_FOUND";
    if (!status.ok()) return "error " + status.error_message();
    return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  }

  static std::string* work_dir_;
  static LocalCluster* cluster_;
};

std::string* OpsGrpcServicesTest::work_dir_ = nullptr;
LocalCluster* OpsGrpcServicesTest::cluster_ = nullptr;

TEST_F(OpsGrpcServicesTest, HealthAnswersPerServiceName) {
  ASSERT_NE(cluster_, nullptr);
  const std::string router = cluster_->router().grpc;
  const std::string worker = cluster_->worker().grpc;
  const std::string metrics = cluster_->metrics().grpc;
  for (const std::string& address : {router, worker, metrics}) {
    EXPECT_EQ(Health(address, ""), "SERVING") << address;
    EXPECT_EQ(Health(address, "no.such.Service"), "NOT_FOUND") << address;
  }
  EXPECT_EQ(Health(router, "onecard.v1.Generation"), "SERVING");
  EXPECT_EQ(Health(worker, "onecard.v1.Generation"), "SERVING");
  EXPECT_EQ(Health(worker, "onecard.v1.Worker"), "SERVING");
  EXPECT_EQ(Health(metrics, "onecard.v1.ControlPlane"), "SERVING");
  EXPECT_EQ(Health(router, "onecard.v1.Worker"), "NOT_FOUND");
}

TEST_F(OpsGrpcServicesTest, ReflectionListsEachServersServices) {
  ASSERT_NE(cluster_, nullptr);
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {cluster_->router().grpc, {"onecard.v1.Generation", "grpc.health.v1.Health"}},
      {cluster_->worker().grpc,
       {"onecard.v1.Generation", "onecard.v1.Worker", "grpc.health.v1.Health"}},
      {cluster_->metrics().grpc, {"onecard.v1.ControlPlane", "grpc.health.v1.Health"}},
  };
  for (const auto& [address, services] : expected) {
    absl::StatusOr<std::vector<std::string>> listed = ListServicesByReflection(Channel(address));
    ASSERT_TRUE(listed.ok()) << address << ": " << listed.status();
    EXPECT_THAT(*listed, IsSupersetOf(services)) << address;
    EXPECT_THAT(*listed, Contains("grpc.reflection.v1alpha.ServerReflection")) << address;
  }
}

// The metrics service and the worker take the format from their config's
// `log` section: every line they logged is a JSON object.
TEST_F(OpsGrpcServicesTest, ServicesLogJsonFromTheirConfig) {
  ASSERT_NE(cluster_, nullptr);
  for (const std::string name : {"metrics", "worker"}) {
    std::ifstream in(*work_dir_ + "/" + name + ".log");
    std::stringstream text;
    text << in.rdbuf();
    int lines = 0;
    for (absl::string_view line : absl::StrSplit(text.str(), '\n', absl::SkipEmpty())) {
      ++lines;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      ASSERT_TRUE(j.is_object()) << name << ": not a JSON line: " << line;
      EXPECT_TRUE(j.contains("ts") && j.contains("level") && j.contains("component")) << line;
    }
    EXPECT_GT(lines, 0) << name << " logged nothing";
  }
}

TEST_F(OpsGrpcServicesTest, RouterWritesOneJsonAccessLinePerRequest) {
  ASSERT_NE(cluster_, nullptr);
  auto stub = cluster_->RouterStub();
  const GenerateResult ok = Generate(*stub, kOpsApiKey, "Name a color.", 3, v1::PRIORITY_BATCH);
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  const GenerateResult refused = Generate(*stub, "wrong-key", "Hi.", 2, v1::PRIORITY_BATCH);
  ASSERT_EQ(refused.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // The router logs the access line before it finishes the call, so both
  // are in the file once the calls have returned.
  std::ifstream in(*work_dir_ + "/router.log");
  std::stringstream text;
  text << in.rdbuf();
  std::vector<nlohmann::json> access;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n', absl::SkipEmpty())) {
    ++lines;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "not a JSON line: " << line;
    EXPECT_TRUE(j.contains("ts") && j.contains("level") && j.contains("msg")) << line;
    if (j.value("component", "") == "access") access.push_back(j);
  }
  EXPECT_GT(lines, 2);
  ASSERT_EQ(access.size(), 2u) << text.str();
  const std::string first = access[0].value("msg", "");
  EXPECT_THAT(first, HasSubstr("request_id=rtr-"));
  EXPECT_THAT(first, HasSubstr(" tenant=ops priority=batch prompt_tokens="));
  EXPECT_THAT(first, HasSubstr(absl::StrCat(" completion_tokens=", ok.token_ids.size(), " ")));
  EXPECT_THAT(first, ::testing::ContainsRegex(" ttft_ms=[0-9]+\\.[0-9] total_ms="));
  EXPECT_THAT(first, HasSubstr(" status=OK"));
  const std::string second = access[1].value("msg", "");
  EXPECT_THAT(second, HasSubstr(" tenant=- "));
  EXPECT_THAT(second, HasSubstr(" ttft_ms=- "));
  EXPECT_THAT(second, HasSubstr(" status=UNAUTHENTICATED"));
}

}  // namespace
}  // namespace onecard::testing
