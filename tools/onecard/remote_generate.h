// RemoteGenerate: the client side of `onecard generate --target HOST:PORT`.
// Streams one generation from a worker or a router over the public
// onecard.v1.Generation API (both serve it), handing each text delta to a
// callback as it arrives, and returns the whole completion with the
// server's finish reason, usage and timings. No engine is needed.
// Tested by tests/services/worker/remote_generate_test.cc against a real
// worker.
#ifndef ONECARD_TOOLS_ONECARD_REMOTE_GENERATE_H_
#define ONECARD_TOOLS_ONECARD_REMOTE_GENERATE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace onecard::tools {

struct RemoteChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

struct RemoteGenerateOptions {
  std::string target;                       // host:port
  std::string model;                        // empty: the server's model
  std::string prompt;                       // raw text; ignored when messages is not empty
  std::vector<RemoteChatMessage> messages;  // rendered with the model's chat template
  int32_t max_tokens = 256;
  float temperature = 1.0f;  // 0 = greedy
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;  // unset: the server draws one
  std::vector<std::string> stop_strings;
  std::string priority;  // "", "interactive", "standard" or "batch"
  std::string api_key;   // sent as "authorization: Bearer <key>" when set
  std::string request_id;
  absl::Duration timeout = absl::InfiniteDuration();  // the call's deadline
};

struct RemoteCompletion {
  std::string request_id;
  std::string text;
  std::vector<int32_t> token_ids;
  std::string finish_reason;  // "stop", "length", "eos", "stop_string", ...
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;
  absl::Duration queue_time;           // server-side
  absl::Duration time_to_first_token;  // server-side
  absl::Duration server_total_time;
  absl::Duration client_time_to_first_token;  // measured here
  absl::Duration client_total_time;
  int64_t chunks = 0;  // stream messages received
};

// OK when `name` is a priority RemoteGenerateOptions takes; InvalidArgument
// listing them otherwise (the CLI checks its flag before it connects).
absl::Status CheckPriorityName(const std::string& name);

// Runs one Generate call. `on_text` (may be empty) gets each text delta.
// A stream that ends with a non-OK status returns that status (its message
// says how many tokens had arrived); a bad option is InvalidArgument.
absl::StatusOr<RemoteCompletion> RemoteGenerate(
    const RemoteGenerateOptions& options,
    const std::function<void(absl::string_view text)>& on_text);

}  // namespace onecard::tools

#endif  // ONECARD_TOOLS_ONECARD_REMOTE_GENERATE_H_
