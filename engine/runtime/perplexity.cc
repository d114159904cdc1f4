// ComputePerplexity (see perplexity.h).
#include "engine/runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {

double PerplexityResult::MeanNll() const {
  return scored_tokens > 0 ? nll_sum / static_cast<double>(scored_tokens) : 0.0;
}

double PerplexityResult::Perplexity() const { return std::exp(MeanNll()); }

absl::Status ValidatePerplexityOptions(const PerplexityOptions& options,
                                       const ModelRunner& runner) {
  if (options.window < 2) {
    return absl::InvalidArgumentError(absl::StrCat("window: ", options.window, " < 2"));
  }
  if (options.stride < 1 || options.stride > options.window) {
    return absl::InvalidArgumentError(
        absl::StrCat("stride: ", options.stride, " is not in [1, window = ", options.window, "]"));
  }
  const int64_t context = runner.config().max_position_embeddings;
  if (options.window > context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "window: ", options.window, " tokens is over the model's context of ", context));
  }
  const KvLayout& kv = runner.kv_layout();
  const int64_t blocks = (options.window + kv.block_size - 1) / kv.block_size;
  if (blocks > kv.num_blocks) {
    return absl::InvalidArgumentError(absl::StrCat("window: ", options.window, " tokens need ",
                                                   blocks, " KV blocks; the runner has ",
                                                   kv.num_blocks));
  }
  return absl::OkStatus();
}

std::vector<PerplexityWindow> PerplexityWindows(int64_t num_tokens,
                                                const PerplexityOptions& options) {
  std::vector<PerplexityWindow> windows;
  int64_t previous_end = 0;
  for (int64_t begin = 0; begin < num_tokens; begin += options.stride) {
    const int64_t end = std::min<int64_t>(begin + options.window, num_tokens);
    windows.push_back({begin, end, std::max(previous_end, begin + 1)});
    previous_end = end;
    if (end == num_tokens) break;
  }
  return windows;
}

absl::StatusOr<PerplexityResult> ComputePerplexity(
    ModelRunner& runner, std::span<const int32_t> tokens, const PerplexityOptions& options,
    const std::function<void(int32_t done, int32_t total)>& on_window) {
  RETURN_IF_ERROR(ValidatePerplexityOptions(options, runner));
  if (tokens.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("the text has ", tokens.size(), " tokens; perplexity needs at least 2"));
  }
  const int64_t vocab = runner.config().vocab_size;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", i, ": id ", tokens[i], " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  const std::vector<PerplexityWindow> windows = PerplexityWindows(tokens.size(), options);
  const int32_t block_size = runner.kv_layout().block_size;
  std::vector<int32_t> block_table((options.window + block_size - 1) / block_size);
  std::iota(block_table.begin(), block_table.end(), 0);
  PerplexityResult result;
  result.num_tokens = static_cast<int64_t>(tokens.size());
  std::vector<float> logits;
  for (const PerplexityWindow& w : windows) {
    const int64_t n = w.end - w.begin;
    BatchInput batch;
    batch.all_logits = true;
    batch.chunks.push_back(
        {.seq_id = 0,
         .token_ids = tokens.subspan(w.begin, n),
         .start_pos = 0,
         .block_table =
             std::span<const int32_t>(block_table).first((n + block_size - 1) / block_size)});
    RETURN_IF_ERROR(runner.Forward(batch, &logits));
    if (static_cast<int64_t>(logits.size()) != n * vocab) {
      return absl::InternalError(absl::StrCat(runner.name(), " runner returned ", logits.size(),
                                              " logits for ", n, " tokens of vocabulary ", vocab));
    }
    // The token at position p is predicted by the row of position p - 1.
    for (int64_t p = w.score_from; p < w.end; ++p) {
      const float* row = logits.data() + (p - 1 - w.begin) * vocab;
      const double max = *std::max_element(row, row + vocab);
      double sum = 0.0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
      const double nll = std::log(sum) + max - static_cast<double>(row[tokens[p]]);
      if (!std::isfinite(nll)) {
        return absl::InternalError(
            absl::StrCat(runner.name(), " runner: logits of position ", p - 1, " are not finite"));
      }
      result.nll_sum += nll;
      ++result.scored_tokens;
    }
    ++result.windows;
    if (on_window) on_window(result.windows, static_cast<int32_t>(windows.size()));
  }
  return result;
}

}  // namespace onecard::engine
