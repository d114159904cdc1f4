// Perplexity of a model over a token sequence, by the sliding-window method
// of Hugging Face's perplexity guide: windows of `window` tokens whose start
// moves by `stride`; each window scores only the tokens that the previous
// window did not (its last window_end - previous_end tokens), and never its
// own first token, which has no context in the window. With stride < window
// every token after the first is scored once, with up to window - 1 tokens
// of context; with stride = window a window's first token is not scored.
//   perplexity = exp(sum of -log p(token | context) / scored tokens)
// Log-softmax in double over the full vocabulary. Each window is one
// forward pass of one sequence with logits for every token (BatchInput::
// all_logits), its K/V in blocks 0..ceil(window / block_size) - 1 of the
// runner's pool, which nothing else may use meanwhile.
// Tested by tests/engine/runtime/perplexity_test.cc (a fake runner, hand-
// computed windows) and tests/golden/perplexity_golden_test.cc (SmolLM2
// against Hugging Face's perplexity of the same GGUF).
#ifndef ONECARD_ENGINE_RUNTIME_PERPLEXITY_H_
#define ONECARD_ENGINE_RUNTIME_PERPLEXITY_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/runtime/model_runner.h"

namespace onecard::engine {

struct PerplexityOptions {
  int32_t window = 1024;  // tokens a forward pass sees (HF's max_length); >= 2
  int32_t stride = 512;   // tokens the window moves; [1, window]
};

struct PerplexityResult {
  int64_t num_tokens = 0;     // tokens of the sequence
  int64_t scored_tokens = 0;  // tokens whose log-likelihood counts
  int32_t windows = 0;        // forward passes
  double nll_sum = 0.0;       // natural log

  double MeanNll() const;     // nll_sum / scored_tokens
  double Perplexity() const;  // exp(MeanNll())
};

// InvalidArgument naming the field when the options cannot run on `runner`
// (a window longer than its context or its KV pool).
absl::Status ValidatePerplexityOptions(const PerplexityOptions& options, const ModelRunner& runner);

// `tokens` needs at least 2 ids. on_window(done, total) after each window
// (progress); may be empty.
absl::StatusOr<PerplexityResult> ComputePerplexity(
    ModelRunner& runner, std::span<const int32_t> tokens, const PerplexityOptions& options,
    const std::function<void(int32_t done, int32_t total)>& on_window = {});

// The windows ComputePerplexity runs: [begin, end) and the first position
// whose token it scores (score_from >= begin + 1).
struct PerplexityWindow {
  int64_t begin = 0, end = 0, score_from = 0;
};
std::vector<PerplexityWindow> PerplexityWindows(int64_t num_tokens,
                                                const PerplexityOptions& options);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_PERPLEXITY_H_
