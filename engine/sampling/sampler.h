// Sampler: picks the next token from one row of logits on the CPU.
// Tested by tests/engine/sampling/sampler_test.cc against hand-computed
// distributions and penalties, and a seeded frequency test.
//
// The processing of a row, in order:
//   0. the masked token ids (min_tokens: stop and end-of-sequence ids) get
//      logit -infinity;
//   1. repetition penalty (HF semantics): for every token id seen in the
//      prompt or the output, a logit > 0 is divided by the penalty, a logit
//      < 0 is multiplied by it (1 = off);
//   2. presence and frequency penalties (OpenAI semantics) on output tokens:
//      logit -= frequency_penalty * count + presence_penalty * (count > 0);
//   3. temperature 0: greedy, the highest logit (the lowest id on ties);
//      otherwise the logits are divided by the temperature, and
//   4. the softmax distribution is truncated: top-k (the k most likely), then
//      top-p (the shortest most-likely-first prefix whose renormalized mass
//      reaches top_p), then min-p (tokens with probability >= min_p times the
//      most likely one's); at least one token always remains;
//   5. one uniform draw picks a token from what remains (inverse CDF).
// Logprobs are the log-softmax of the logits after steps 1-3 (penalties and
// temperature, before truncation), so the alternatives of top_logprobs are
// meaningful; for greedy, of the penalized logits.
//
// Determinism: the draw for output token number `step` of a sequence is a
// counter-based hash of (seed, step), so a sequence's tokens depend only on
// its own logits, seed and position, never on the batch it ran in or on how
// often it was preempted. NaN logits count as -infinity.
#ifndef ONECARD_ENGINE_SAMPLING_SAMPLER_H_
#define ONECARD_ENGINE_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/runtime/engine.h"

namespace onecard::engine {

struct SampleRequest {
  std::span<const float> logits;  // [vocab_size]
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt_token_ids;  // for the repetition penalty
  std::span<const int32_t> output_token_ids;  // generated so far; size = step
  std::span<const int32_t> masked_token_ids;  // may not be sampled (step 0)
  bool want_logprobs = false;
  int32_t num_top_logprobs = 0;  // 0..20
};

struct SampleResult {
  int32_t token_id = 0;
  float logprob = 0.0f;                        // when want_logprobs
  std::vector<std::pair<int32_t, float>> top;  // num_top_logprobs, most likely first
};

class Sampler {
 public:
  // Samples one token. Not thread-safe (reuses scratch buffers); one sampler
  // per step loop.
  SampleResult Sample(const SampleRequest& request);

 private:
  std::vector<float> logits_;                            // [vocab_size] processed
  std::vector<float> logprobs_;                          // [vocab_size]
  std::vector<std::pair<double, int32_t>> order_;        // (weight, id) candidates
  int32_t Draw(const SamplingParams& params, double u);  // steps 4-5 on logits_
};

// The steps above, exposed for tests.
void ApplyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> prompt_token_ids,
                            std::span<const int32_t> output_token_ids, float penalty);
void ApplyPresenceFrequencyPenalties(std::span<float> logits,
                                     std::span<const int32_t> output_token_ids,
                                     float presence_penalty, float frequency_penalty);
// Highest logit, lowest id on ties; NaN counts as -infinity.
int32_t Argmax(std::span<const float> logits);
// log-softmax over the row into *out ([vocab_size]).
void LogSoftmax(std::span<const float> logits, std::vector<float>* out);
// A uniform double in [0, 1) from (seed, step).
double UniformDraw(uint64_t seed, uint64_t step);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_SAMPLING_SAMPLER_H_
