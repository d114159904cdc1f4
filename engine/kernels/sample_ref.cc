// SampleRef: the plain reference of GPU sampling (see sample.h): std::sort
// for top-k / top-p, sums of probabilities in double (fp32 sums over 1e5
// terms are off by whole tokens), in vocabulary order for the draw.
// Tested by tests/gpu/sample_test.cc (as the spec of the CUDA kernel).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/ref_util.h"
#include "engine/kernels/sample.h"

namespace onecard::engine {
namespace {

constexpr char kOp[] = "SampleRef";

void ApplyPenalties(const SampleParams& p, int32_t r, const SampleRowParams& sp,
                    std::vector<float>& l) {
  if (p.cu_history == nullptr) return;
  std::map<int32_t, int32_t> counts;
  for (int32_t j = p.cu_history[r]; j < p.cu_history[r + 1]; ++j) {
    const int32_t t = p.history[j];
    if (t >= 0 && t < p.vocab_size) ++counts[t];
  }
  for (const auto& [t, c] : counts) {
    float v = l[t];
    v = v > 0.0f ? v / sp.repetition_penalty : v * sp.repetition_penalty;
    l[t] = v - (sp.frequency_penalty * static_cast<float>(c) + sp.presence_penalty);
  }
}

// The threshold below which tokens are dropped (steps 4-6 of sample.h).
float KeepThreshold(const SampleRowParams& sp, const std::vector<float>& prob) {
  const int64_t vocab = static_cast<int64_t>(prob.size());
  std::vector<float> sorted = prob;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  float thr = 0.0f;
  int64_t kept = vocab;
  if (sp.top_k > 0 && sp.top_k < vocab) {
    thr = sorted[sp.top_k - 1];
    kept =
        std::upper_bound(sorted.begin(), sorted.end(), thr, std::greater<float>()) - sorted.begin();
  }
  if (sp.top_p < 1.0f) {
    const double mass = std::accumulate(sorted.begin(), sorted.begin() + kept, 0.0);
    double cum = 0.0;
    for (int64_t i = 0; i < kept; ++i) {
      cum += sorted[i];
      if (cum >= static_cast<double>(sp.top_p) * mass) {
        thr = std::max(thr, sorted[i]);
        break;
      }
    }
  }
  if (sp.min_p > 0.0f) thr = std::max(thr, sp.min_p);
  return thr;
}

int32_t SampleRow(const SampleParams& p, int32_t r) {
  const SampleRowParams& sp = p.rows[r];
  const int64_t vocab = p.vocab_size;
  std::vector<float> l(p.logits + r * vocab, p.logits + (r + 1) * vocab);
  ApplyPenalties(p, r, sp, l);
  if (sp.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  }
  for (float& v : l) v = v / sp.temperature;
  const float mx = *std::max_element(l.begin(), l.end());
  for (float& v : l) v = std::exp(v - mx);
  const float thr = KeepThreshold(sp, l);
  double mass = 0.0;
  int32_t last = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (l[i] >= thr) {
      mass += l[i];
      last = static_cast<int32_t>(i);
    }
  }
  const double target = static_cast<double>(sp.uniform) * mass;
  double cum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (l[i] < thr) continue;
    cum += l[i];
    if (cum > target) return static_cast<int32_t>(i);
  }
  return last;
}

}  // namespace

absl::Status SampleRef(const SampleParams& p) {
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "vocab_size", p.vocab_size));
  if (p.num_rows < 0) return ref::ArgError(kOp, "num_rows is negative");
  if (p.num_rows == 0) return absl::OkStatus();
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "logits", p.logits));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "rows", p.rows));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "out_tokens", p.out_tokens));
  if (p.cu_history != nullptr) RETURN_IF_ERROR(ref::CheckNotNull(kOp, "history", p.history));
  for (int32_t r = 0; r < p.num_rows; ++r) {
    const SampleRowParams& sp = p.rows[r];
    if (sp.temperature < 0.0f || !(sp.top_p > 0.0f && sp.top_p <= 1.0f) || sp.min_p < 0.0f ||
        sp.min_p > 1.0f || sp.repetition_penalty <= 0.0f || sp.top_k < 0 || sp.uniform < 0.0f ||
        sp.uniform >= 1.0f) {
      return ref::ArgError(kOp, absl::StrCat("rows[", r, "] has a parameter out of range"));
    }
    p.out_tokens[r] = SampleRow(p, r);
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
