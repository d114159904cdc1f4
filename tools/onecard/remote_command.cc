// generate and chat against a remote worker or router (see remote_command.h).
// Tested by tests/tools/onecard/remote_command_test.cc.
#include "tools/onecard/remote_command.h"

#include <istream>
#include <ostream>

#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "nlohmann/json.hpp"

namespace onecard::tools {
namespace {

RemoteGenerateOptions MakeOptions(const RemoteTarget& target, const GenerateOptions& options) {
  RemoteGenerateOptions r;
  r.target = target.address;
  r.api_key = target.api_key;
  r.priority = target.priority;
  r.prompt = options.prompt;
  r.max_tokens = options.max_tokens;
  r.temperature = options.sampling.temperature;
  r.top_k = options.sampling.top_k;
  r.top_p = options.sampling.top_p;
  r.min_p = options.sampling.min_p;
  if (!target.random_seed) r.seed = options.sampling.seed;
  return r;
}

double DecodeRate(const RemoteCompletion& c) {
  const double seconds = absl::ToDoubleSeconds(c.client_total_time - c.client_time_to_first_token);
  return c.completion_tokens >= 2 && seconds > 0 ? (c.completion_tokens - 1) / seconds : 0.0;
}

absl::StatusOr<RemoteCompletion> Stream(const RemoteGenerateOptions& request, bool json,
                                        std::ostream& out) {
  return RemoteGenerate(request, [&](absl::string_view text) {
    if (!json) out << text << std::flush;
  });
}

void Report(const RemoteCompletion& c, bool json, std::ostream& out, std::ostream& err) {
  if (json) {
    out << RemoteCompletionJson(c) << "\n";
    return;
  }
  out << "\n";
  err << absl::StrFormat("[%d tokens, %s, TTFT %.0f ms, %.1f tok/s decode]\n", c.completion_tokens,
                         c.finish_reason, absl::ToDoubleMilliseconds(c.client_time_to_first_token),
                         DecodeRate(c));
}

}  // namespace

std::string RemoteCompletionJson(const RemoteCompletion& c) {
  nlohmann::json j;
  j["text"] = c.text;
  j["token_ids"] = c.token_ids;
  j["finish_reason"] = c.finish_reason;
  j["request_id"] = c.request_id;
  j["usage"] = {{"prompt_tokens", c.prompt_tokens},
                {"completion_tokens", c.completion_tokens},
                {"cached_tokens", c.cached_tokens}};
  j["timings"] = {{"queue_ms", absl::ToDoubleMilliseconds(c.queue_time)},
                  {"ttft_ms", absl::ToDoubleMilliseconds(c.time_to_first_token)},
                  {"total_ms", absl::ToDoubleMilliseconds(c.server_total_time)},
                  {"client_ttft_ms", absl::ToDoubleMilliseconds(c.client_time_to_first_token)},
                  {"client_total_ms", absl::ToDoubleMilliseconds(c.client_total_time)},
                  {"decode_tokens_per_second", DecodeRate(c)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::Status RunRemoteGenerate(const RemoteTarget& target, const GenerateOptions& options,
                               std::ostream& out, std::ostream& err) {
  if (options.prompt.empty()) return absl::InvalidArgumentError("--prompt: empty");
  ASSIGN_OR_RETURN(RemoteCompletion c, Stream(MakeOptions(target, options), options.json, out));
  Report(c, options.json, out, err);
  return absl::OkStatus();
}

absl::Status RunRemoteChat(const RemoteTarget& target, const GenerateOptions& options,
                           std::istream& in, std::ostream& out, std::ostream& err) {
  RemoteGenerateOptions request = MakeOptions(target, options);
  return RunChatLoop(
      options, in, err,
      [&](const std::vector<engine::ChatMessage>& history) -> absl::StatusOr<std::string> {
        request.messages.clear();
        for (const engine::ChatMessage& m : history) {
          request.messages.push_back({m.role, m.content});
        }
        ASSIGN_OR_RETURN(RemoteCompletion c, Stream(request, options.json, out));
        Report(c, options.json, out, err);
        return c.text;
      });
}

}  // namespace onecard::tools
