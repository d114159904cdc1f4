// The `generate` and `chat` subcommands of the onecard CLI, over any Engine
// (the CLI's main opens one; tests pass one over a fake runner). Text streams
// to `out` as it is generated; with json, one JSON object is printed at the
// end instead: text, token ids, finish reason, usage and timings (queue,
// TTFT, total, decode tokens/s).
// Tested by tests/tools/onecard/generate_command_test.cc.
#ifndef ONECARD_TOOLS_ONECARD_GENERATE_COMMAND_H_
#define ONECARD_TOOLS_ONECARD_GENERATE_COMMAND_H_

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/runtime/engine.h"

namespace onecard::tools {

struct GenerateOptions {
  std::string prompt;  // generate: raw text; chat: the user's message (empty: interactive)
  std::string system;  // chat: an optional system message
  int32_t max_tokens = 256;
  engine::SamplingParams sampling;
  bool json = false;
};

// One finished generation.
struct Completion {
  std::string text;
  std::vector<int32_t> token_ids;
  engine::StreamOutput final_output;  // finish reason, usage, queue time, TTFT
  absl::Duration total_time;          // submit to the final output
};

// Runs prompt_ids through a threaded engine, streaming text deltas to
// *stream when it is not null, and waits for the final output. The error of
// a request that ends with kError is returned as the status.
absl::StatusOr<Completion> Complete(engine::Engine& engine, std::vector<int32_t> prompt_ids,
                                    const GenerateOptions& options, std::ostream* stream);

// Decode tokens per second: the tokens after the first over the time after it.
double DecodeTokensPerSecond(const Completion& completion);

// generate: completes options.prompt (tokenized with special tokens added).
absl::Status RunGenerate(engine::Engine& engine, const GenerateOptions& options, std::ostream& out,
                         std::ostream& err);

// The conversation loop of chat (local and remote). answer(history) streams
// and reports one assistant reply and returns its text. With options.prompt,
// one turn; otherwise one user message per line of `in` until end of input
// or "/exit" (a failed turn is reported on err and dropped).
using ChatAnswerFn =
    std::function<absl::StatusOr<std::string>(const std::vector<engine::ChatMessage>& history)>;
absl::Status RunChatLoop(const GenerateOptions& options, std::istream& in, std::ostream& err,
                         const ChatAnswerFn& answer);

// chat: renders the conversation with the model's chat template. With a
// prompt, answers it once; otherwise reads one user message per line from
// `in` until end of input or "/exit", keeping the conversation.
absl::Status RunChat(engine::Engine& engine, const GenerateOptions& options, std::istream& in,
                     std::ostream& out, std::ostream& err);

}  // namespace onecard::tools

#endif  // ONECARD_TOOLS_ONECARD_GENERATE_COMMAND_H_
