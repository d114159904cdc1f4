// Hugging Face golden logits (tests/golden/README.md's logits.json) and the
// checks of a ModelRunner against them that the cpu backend's golden tests
// share (cpu_model_runner_golden_test.cc, cpu_model_runner_qwen_test.cc):
// the prefill's logits at every position and greedy decoding through the
// paged cache. Tested by its users.
#ifndef ONECARD_TESTS_ENGINE_RUNTIME_CPU_GOLDEN_LOGITS_H_
#define ONECARD_TESTS_ENGINE_RUNTIME_CPU_GOLDEN_LOGITS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/runtime/model_runner.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {

struct GoldenPrompt {
  std::string name;
  std::string text;  // "" where the golden has none
  std::vector<int32_t> input_ids;
  std::vector<std::vector<int32_t>> top5_ids;          // [position][5]
  std::vector<std::vector<float>> top5_logits;         // [position][5]
  std::vector<std::vector<float>> sample_logits;       // [position][num sample ids]
  std::vector<int32_t> greedy_ids;                     // [num_greedy]
  std::vector<std::vector<int32_t>> greedy_top2_ids;   // [step][2]
  std::vector<std::vector<float>> greedy_top2_logits;  // [step][2]
  std::vector<float> last_logits;                      // [vocab]
};

struct Golden {
  std::vector<int32_t> sample_ids;
  std::vector<GoldenPrompt> prompts;
};

// Reads dir/logits.json (dir relative to the source root) and each prompt's
// .last.f32; false, with a test failure naming the field, when it is missing
// or malformed.
bool LoadGolden(const std::string& dir, Golden* golden);

// Two disjoint block tables of `needed` blocks each: shuffled, non-contiguous
// ids of the pool.
std::pair<std::vector<int32_t>, std::vector<int32_t>> TwoBlockTables(int32_t num_blocks,
                                                                     int32_t needed, uint32_t seed);

// Logits of every token of `tokens`, prefilled in chunks of the given sizes
// (the last chunk takes the rest).
std::vector<float> Prefill(ModelRunner& runner, int64_t seq_id, const std::vector<int32_t>& tokens,
                           const std::vector<int32_t>& table, const std::vector<int32_t>& sizes);

// Per position: the sampled ids and HF's top 5 within `tol`, the same top-1;
// the full last row within `tol`.
void ExpectPrefillMatches(const Golden& golden, const GoldenPrompt& p,
                          const std::vector<float>& got, int64_t vocab,
                          const onecard::testing::Tolerance& tol);

// Greedy decoding from the prefill's last row, one token per Forward, for the
// first `steps` of HF's greedy tokens (all of them when steps < 0): each
// step's logits at HF's top 2 within `tol`, and the same token. With
// allow_near_tie, a step whose token differs where HF's own top-2 gap is
// within twice `tol` (the order of the two is not fixed by the reference)
// ends the comparison there, printed, instead of failing.
void ExpectGreedyMatches(ModelRunner& runner, int64_t seq_id, const GoldenPrompt& p,
                         const std::vector<float>& prefill, const std::vector<int32_t>& table,
                         const onecard::testing::Tolerance& tol, int steps = -1,
                         bool allow_near_tie = false);

}  // namespace onecard::engine

#endif  // ONECARD_TESTS_ENGINE_RUNTIME_CPU_GOLDEN_LOGITS_H_
