// Tests of the --target subcommands that need no server: the JSON report of
// a remote completion, prompt validation, and an unreachable target coming
// back as an error (the streaming path against a real worker is tested in
// tests/services/worker/remote_generate_test.cc).
#include "tools/onecard/remote_command.h"

#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace onecard::tools {
namespace {

TEST(RemoteCommandTest, JsonReport) {
  RemoteCompletion c;
  c.request_id = "r1";
  c.text = "Paris";
  c.token_ids = {7, 8, 9};
  c.finish_reason = "length";
  c.prompt_tokens = 5;
  c.completion_tokens = 3;
  c.client_time_to_first_token = absl::Milliseconds(100);
  c.client_total_time = absl::Milliseconds(300);
  nlohmann::json j = nlohmann::json::parse(RemoteCompletionJson(c));
  EXPECT_EQ(j["text"], "Paris");
  EXPECT_EQ(j["token_ids"].get<std::vector<int32_t>>(), (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_DOUBLE_EQ(j["timings"]["client_ttft_ms"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(j["timings"]["decode_tokens_per_second"].get<double>(), 10.0);  // 2 / 0.2 s
}

TEST(RemoteCommandTest, ErrorsComeBackAsStatus) {
  std::ostringstream out, err;
  const RemoteTarget target{.address = "127.0.0.1:1"};  // nothing listens on port 1
  EXPECT_EQ(RunRemoteGenerate(target, {}, out, err).code(), absl::StatusCode::kInvalidArgument);
  GenerateOptions options{.prompt = "hi", .max_tokens = 4};
  EXPECT_FALSE(RunRemoteGenerate(target, options, out, err).ok());
  std::istringstream in;
  EXPECT_FALSE(RunRemoteChat(target, options, in, out, err).ok());
}

}  // namespace
}  // namespace onecard::tools
