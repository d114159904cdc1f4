// scripts/run.sh --once, the README's main command, against this build:
// it runs the set-up steps (scripts/setup.sh and scripts/fetch-model.sh find
// everything present), builds its targets (up to date), starts the local
// cluster, streams a chat answer through the router's gRPC API, asks the same
// through its OpenAI-compatible HTTP API with curl, prints the endpoints (the
// /metrics ones and the HTTP API too) and stops every process it started.
#include <filesystem>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_testing.h"

namespace onecard::testing {
namespace {

using ::testing::HasSubstr;

TEST(OpsRunScriptTest, OnceStreamsAnAnswerPrintsEndpointsAndStops) {
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("ops-run-" + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  absl::StatusOr<CommandResult> run = RunCommand(absl::StrCat(
      "TMPDIR=", tmp.string(), " BUILD_DIR=", ONECARD_BINARY_DIR, " ONECARD_JOBS=2",
      " ONECARD_HTTP_PORT=0", " timeout 900 bash scripts/run.sh --once --max-tokens 12",
      " --prompt 'What is the capital of France?'"));
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->exit_code, 0) << run->output << run->errors;
  const std::string& out = run->output;
  EXPECT_THAT(out, HasSubstr("> What is the capital of France?"));
  // The streamed answer lies between the question and the endpoints.
  const size_t question = out.find("> What is the capital of France?");
  const size_t endpoints = out.find("onecard is serving on 127.0.0.1");
  ASSERT_NE(question, std::string::npos);
  ASSERT_NE(endpoints, std::string::npos);
  const size_t http = out.find("the same through the OpenAI-compatible HTTP API", question);
  ASSERT_NE(http, std::string::npos) << out;
  EXPECT_THAT(out.substr(question, http - question),
              HasSubstr("Paris"));  // SmolLM2's greedy answer
  EXPECT_THAT(out.substr(http, endpoints - http), HasSubstr("Paris"));
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(\(OpenAI-compatible API\) +http://127\.0\.0\.1:\d+/v1)")))
      << out;
  std::smatch router;
  ASSERT_TRUE(std::regex_search(
      out, router,
      std::regex(R"(router .* grpc (127\.0\.0\.1:\d+) +/metrics http://127\.0\.0\.1:\d+/metrics)")))
      << out;
  for (const char* line : {"worker ", "metrics service (control plane) grpc 127.0.0.1:"}) {
    EXPECT_THAT(out, HasSubstr(line));
  }

  // Everything it started is gone: nothing answers on the router's port.
  absl::StatusOr<CommandResult> probe = RunCommand(
      absl::StrCat(ONECARD_PROBE_FILE, " --target=", std::string(router[1]), " --wait=0"));
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(probe->exit_code, 1) << probe->errors;
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace onecard::testing
