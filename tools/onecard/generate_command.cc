// The generate and chat subcommands (see generate_command.h).
// Tested by tests/tools/onecard/generate_command_test.cc.
#include "tools/onecard/generate_command.h"

#include <istream>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/common/status_macros.h"
#include "nlohmann/json.hpp"

namespace onecard::tools {
namespace {

using engine::ChatMessage;
using engine::ChatTemplate;
using engine::StreamOutput;

std::string CompletionJson(const Completion& c) {
  const StreamOutput& f = c.final_output;
  nlohmann::json j;
  j["text"] = c.text;
  j["token_ids"] = c.token_ids;
  j["finish_reason"] = engine::FinishReasonName(f.finish_reason);
  j["usage"] = {{"prompt_tokens", f.usage.prompt_tokens},
                {"completion_tokens", f.usage.completion_tokens},
                {"cached_tokens", f.usage.cached_tokens}};
  j["timings"] = {{"queue_ms", absl::ToDoubleMilliseconds(f.queue_time)},
                  {"ttft_ms", absl::ToDoubleMilliseconds(f.time_to_first_token)},
                  {"total_ms", absl::ToDoubleMilliseconds(c.total_time)},
                  {"decode_tokens_per_second", DecodeTokensPerSecond(c)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Prints the completion's summary: JSON on out, or a line on err.
void Report(const Completion& c, const GenerateOptions& options, std::ostream& out,
            std::ostream& err) {
  if (options.json) {
    out << CompletionJson(c) << "\n";
    return;
  }
  out << "\n";
  err << absl::StrFormat(
      "[%d tokens, %s, TTFT %.0f ms, %.1f tok/s decode]\n", c.final_output.usage.completion_tokens,
      engine::FinishReasonName(c.final_output.finish_reason),
      absl::ToDoubleMilliseconds(c.final_output.time_to_first_token), DecodeTokensPerSecond(c));
}

}  // namespace

absl::StatusOr<Completion> Complete(engine::Engine& engine, std::vector<int32_t> prompt_ids,
                                    const GenerateOptions& options, std::ostream* stream) {
  absl::Mutex mu;
  Completion completion;
  absl::Notification done;
  engine::GenerationRequest request;
  request.request_id = "cli";
  request.prompt_token_ids = std::move(prompt_ids);
  request.sampling = options.sampling;
  request.stopping.max_tokens = options.max_tokens;
  request.on_output = [&](const StreamOutput& out) {
    absl::MutexLock lock(&mu);
    completion.text += out.text_delta;
    completion.token_ids.insert(completion.token_ids.end(), out.token_ids.begin(),
                                out.token_ids.end());
    if (stream != nullptr && !out.text_delta.empty()) *stream << out.text_delta << std::flush;
    if (out.finished) {
      completion.final_output = out;
      done.Notify();
    }
  };
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(engine.Submit(std::move(request)).status());
  done.WaitForNotification();
  absl::MutexLock lock(&mu);
  completion.total_time = absl::Now() - start;
  if (completion.final_output.finish_reason == engine::FinishReason::kError) {
    const absl::Status& error = completion.final_output.error;
    return error.ok() ? absl::InternalError("generation failed") : error;
  }
  return completion;
}

double DecodeTokensPerSecond(const Completion& completion) {
  const StreamOutput& f = completion.final_output;
  const double seconds = absl::ToDoubleSeconds(completion.total_time - f.time_to_first_token);
  if (f.usage.completion_tokens < 2 || seconds <= 0) return 0.0;
  return (f.usage.completion_tokens - 1) / seconds;
}

absl::Status RunGenerate(engine::Engine& engine, const GenerateOptions& options, std::ostream& out,
                         std::ostream& err) {
  if (options.prompt.empty()) return absl::InvalidArgumentError("--prompt: empty");
  std::vector<int32_t> ids = engine.tokenizer().Encode(options.prompt, /*add_special_tokens=*/true);
  ASSIGN_OR_RETURN(Completion c,
                   Complete(engine, std::move(ids), options, options.json ? nullptr : &out));
  Report(c, options, out, err);
  return absl::OkStatus();
}

absl::Status RunChatLoop(const GenerateOptions& options, std::istream& in, std::ostream& err,
                         const ChatAnswerFn& answer) {
  std::vector<ChatMessage> history;
  if (!options.system.empty()) history.push_back({"system", options.system});
  const bool interactive = options.prompt.empty();
  std::string line;
  while (true) {
    if (interactive) {
      err << "> " << std::flush;
      if (!std::getline(in, line) || line == "/exit") return absl::OkStatus();
      if (line.empty()) continue;
    } else {
      line = options.prompt;
    }
    history.push_back({"user", line});
    absl::StatusOr<std::string> reply = answer(history);
    if (!reply.ok() && !interactive) return reply.status();
    if (!reply.ok()) {
      err << "error: " << reply.status() << "\n";  // e.g. the conversation outgrew the context
      history.pop_back();
      continue;
    }
    history.push_back({"assistant", *reply});
    if (!interactive) return absl::OkStatus();
  }
}

absl::Status RunChat(engine::Engine& engine, const GenerateOptions& options, std::istream& in,
                     std::ostream& out, std::ostream& err) {
  ASSIGN_OR_RETURN(ChatTemplate chat_template, ChatTemplate::ForTokenizer(engine.tokenizer()));
  return RunChatLoop(options, in, err,
                     [&](const std::vector<ChatMessage>& history) -> absl::StatusOr<std::string> {
                       ASSIGN_OR_RETURN(std::string rendered, chat_template.Render(history, true));
                       std::vector<int32_t> ids =
                           engine.tokenizer().Encode(rendered, /*add_special_tokens=*/false);
                       ASSIGN_OR_RETURN(Completion c, Complete(engine, std::move(ids), options,
                                                               options.json ? nullptr : &out));
                       Report(c, options, out, err);
                       return c.text;
                     });
}

}  // namespace onecard::tools
