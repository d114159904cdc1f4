// The `perplexity` subcommand of the onecard CLI: a model's perplexity over a
// text file (engine/runtime/perplexity.h: Hugging Face's sliding-window
// method), on the cpu or cuda backend. The text is encoded as it is, with no
// special tokens added (as `tokenizer(text, add_special_tokens=False)`);
// --text-tokens keeps its first N tokens. A progress bar (or log lines) on
// stderr while the windows run; one JSON object on stdout at the end:
//   {"model", "backend", "kv_cache_dtype", "cpu_weights", "fp8_compute", "text",
//    "text_bytes", "tokens", "window", "stride", "windows", "scored_tokens",
//    "nll_mean", "perplexity", "seconds", "tokens_per_second", "load_seconds"}
// Tested by tests/tools/onecard/perplexity_command_test.cc.
#ifndef ONECARD_TOOLS_ONECARD_PERPLEXITY_COMMAND_H_
#define ONECARD_TOOLS_ONECARD_PERPLEXITY_COMMAND_H_

#include <cstdint>
#include <iosfwd>
#include <string>

#include "absl/status/status.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/perplexity.h"

namespace onecard::tools {

struct PerplexityCommandOptions {
  std::string model_path;
  std::string text_path;
  std::string backend = "cpu";
  int32_t num_threads = 0;  // cpu backend; 0 = all cores
  engine::PerplexityOptions windows;
  int64_t text_tokens = 0;              // score the text's first N tokens; 0 = all
  std::string kv_cache_dtype = "auto";  // engine::ParseKvCacheDtype
  std::string cpu_weights = "native";   // engine::ParseCpuWeightFormat
  std::string fp8_compute = "w8a8";     // engine::ParseFp8Compute
};

// What can be wrong before anything loads: InvalidArgument naming the flag.
absl::Status CheckPerplexityOptions(const PerplexityCommandOptions& options);

// Opens the model and the text, runs the windows and prints the summary.
absl::Status RunPerplexity(const PerplexityCommandOptions& options, std::ostream& out);

// The same over a tokenizer and runner the caller made (tests).
absl::Status RunPerplexityWith(const PerplexityCommandOptions& options,
                               const engine::Tokenizer& tokenizer, engine::ModelRunner& runner,
                               double load_seconds, std::ostream& out);

}  // namespace onecard::tools

#endif  // ONECARD_TOOLS_ONECARD_PERPLEXITY_COMMAND_H_
