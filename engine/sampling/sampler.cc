// Sampler implementation (contract in sampler.h).
// Tested by tests/engine/sampling/sampler_test.cc.
#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace onecard::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Below this temperature sampling is greedy (dividing by it would overflow).
constexpr float kGreedyTemperature = 1e-5f;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Calls fn(id, count) for each distinct id of tokens inside [0, vocab).
template <typename Fn>
void ForEachCount(std::span<const int32_t> tokens, size_t vocab, Fn fn) {
  std::vector<int32_t> sorted(tokens.begin(), tokens.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    if (sorted[i] >= 0 && static_cast<size_t>(sorted[i]) < vocab) {
      fn(sorted[i], static_cast<int32_t>(j - i));
    }
    i = j;
  }
}

// Most likely first, lower id first on ties.
bool MoreLikely(const std::pair<double, int32_t>& a, const std::pair<double, int32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

}  // namespace

void ApplyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> prompt_token_ids,
                            std::span<const int32_t> output_token_ids, float penalty) {
  if (penalty == 1.0f) return;
  std::vector<int32_t> seen(prompt_token_ids.begin(), prompt_token_ids.end());
  seen.insert(seen.end(), output_token_ids.begin(), output_token_ids.end());
  ForEachCount(seen, logits.size(), [&](int32_t id, int32_t) {
    float& x = logits[id];
    x = x > 0 ? x / penalty : x * penalty;
  });
}

void ApplyPresenceFrequencyPenalties(std::span<float> logits,
                                     std::span<const int32_t> output_token_ids,
                                     float presence_penalty, float frequency_penalty) {
  if (presence_penalty == 0.0f && frequency_penalty == 0.0f) return;
  ForEachCount(output_token_ids, logits.size(), [&](int32_t id, int32_t count) {
    logits[id] -= frequency_penalty * static_cast<float>(count) + presence_penalty;
  });
}

int32_t Argmax(std::span<const float> logits) {
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best < 0 ? 0 : best;
}

void LogSoftmax(std::span<const float> logits, std::vector<float>* out) {
  out->resize(logits.size());
  float max = kNegInf;
  for (float x : logits) max = std::max(max, x);
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_sum = std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) {
    (*out)[i] = static_cast<float>(static_cast<double>(logits[i]) - max - log_sum);
  }
}

double UniformDraw(uint64_t seed, uint64_t step) {
  const uint64_t bits = SplitMix64(SplitMix64(seed) ^ SplitMix64(step + 0x5eedull));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

SampleResult Sampler::Sample(const SampleRequest& request) {
  const SamplingParams& params = *request.params;
  logits_.assign(request.logits.begin(), request.logits.end());
  for (float& x : logits_) {
    if (std::isnan(x)) x = kNegInf;
  }
  for (int32_t id : request.masked_token_ids) {
    if (id >= 0 && static_cast<size_t>(id) < logits_.size()) logits_[id] = kNegInf;
  }
  ApplyRepetitionPenalty(logits_, request.prompt_token_ids, request.output_token_ids,
                         params.repetition_penalty);
  ApplyPresenceFrequencyPenalties(logits_, request.output_token_ids, params.presence_penalty,
                                  params.frequency_penalty);
  SampleResult result;
  if (params.temperature < kGreedyTemperature) {
    result.token_id = Argmax(logits_);
  } else {
    for (float& x : logits_) x /= params.temperature;
    const double u = UniformDraw(params.seed, request.output_token_ids.size());
    result.token_id = Draw(params, u);
  }
  if (!request.want_logprobs && request.num_top_logprobs <= 0) return result;
  LogSoftmax(logits_, &logprobs_);
  result.logprob = logprobs_[result.token_id];
  const size_t n = std::min<size_t>(std::max(request.num_top_logprobs, 0), logprobs_.size());
  order_.clear();
  for (size_t i = 0; i < logprobs_.size(); ++i) {
    order_.emplace_back(logprobs_[i], static_cast<int32_t>(i));
  }
  std::partial_sort(order_.begin(), order_.begin() + n, order_.end(), MoreLikely);
  for (size_t i = 0; i < n; ++i) {
    result.top.emplace_back(order_[i].second, static_cast<float>(order_[i].first));
  }
  return result;
}

int32_t Sampler::Draw(const SamplingParams& params, double u) {
  const float max = *std::max_element(logits_.begin(), logits_.end());
  if (max == kNegInf) return Argmax(logits_);
  order_.clear();  // (weight, id), weights relative to the most likely (= 1)
  for (size_t i = 0; i < logits_.size(); ++i) {
    if (logits_[i] == kNegInf) continue;
    order_.emplace_back(std::exp(static_cast<double>(logits_[i]) - max), static_cast<int32_t>(i));
  }
  size_t keep = order_.size();
  bool sorted = false;
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < keep) {
    keep = params.top_k;
    std::partial_sort(order_.begin(), order_.begin() + keep, order_.end(), MoreLikely);
    sorted = true;
  }
  if (params.top_p < 1.0f) {
    if (!sorted) std::sort(order_.begin(), order_.end(), MoreLikely);
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) mass += order_[i].first;
    double cum = 0;
    size_t n = 0;
    while (n < keep && cum < params.top_p * mass) cum += order_[n++].first;
    keep = std::max<size_t>(n, 1);
  }
  order_.resize(keep);
  if (params.min_p > 0.0f) {
    // The most likely token has weight 1, so this keeps at least it.
    std::erase_if(order_, [&](const auto& c) { return c.first < params.min_p; });
  }
  double mass = 0;
  for (const auto& c : order_) mass += c.first;
  const double target = u * mass;
  double cum = 0;
  for (const auto& c : order_) {
    cum += c.first;
    if (target < cum) return c.second;
  }
  return order_.back().second;
}

}  // namespace onecard::engine
