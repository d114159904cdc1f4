// Helpers of the CUDA runner tests (cuda_model_runner_test.cc,
// cuda_model_runner_int4_test.cc, cuda_model_runner_fp8_test.cc): a weight
// source of fp32 tensors with some parts quantized, the golden prompts, one sequence driven
// through a runner, the logit tolerance (cuda_model_runner_test.cc's header
// says why), and the two comparisons against the CPU runner every weight
// format goes through: the golden prompts' logits and 16 greedy tokens, and
// eight sequences decoding five steps. Tested by its users.
#ifndef ONECARD_TESTS_GPU_RUNNER_TEST_UTIL_H_
#define ONECARD_TESTS_GPU_RUNNER_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kernels/fp8_weight.h"
#include "engine/kernels/int4_matrix.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_weights.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "engine/runtime/model_runner.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {

// A checkpoint's fp32 weights, with the parts a test quantized as 4-bit or
// FP8 matrices (NotFound for a part it did not).
using Int4Parts = std::map<std::pair<TensorPart, int64_t>, Int4Matrix>;
using Fp8Parts = std::map<std::pair<TensorPart, int64_t>, Fp8Matrix>;
class QuantizedSource : public HostTensorSource {
 public:
  QuantizedSource(ModelWeightsF32 f32, Int4Parts int4, Fp8Parts fp8 = {})
      : f32_(std::move(f32)), int4_(std::move(int4)), fp8_(std::move(fp8)) {}
  absl::StatusOr<std::vector<float>> F32(TensorPart part, int64_t layer) override {
    return *PartWeights(f32_, part, layer);
  }
  absl::StatusOr<Int4Matrix> Int4(TensorPart part, int64_t layer) override {
    return Find(int4_, part, layer);
  }
  absl::StatusOr<Fp8Matrix> Fp8(TensorPart part, int64_t layer) override {
    return Find(fp8_, part, layer);
  }

 private:
  template <typename M>
  static absl::StatusOr<typename M::mapped_type> Find(const M& parts, TensorPart part,
                                                      int64_t layer) {
    auto it = parts.find({part, layer});
    if (it == parts.end()) return absl::NotFoundError("not quantized");
    return it->second;
  }
  ModelWeightsF32 f32_;
  Int4Parts int4_;
  Fp8Parts fp8_;
};

struct Prompt {
  std::string name;
  std::vector<int32_t> ids;
};

std::vector<Prompt> GoldenPrompts(const std::string& dir);

// Runs chunks of one sequence (seq 0, blocks 0..) through a runner.
class OneSequence {
 public:
  OneSequence(ModelRunner* runner, int32_t block_size) : runner_(runner), bs_(block_size) {}
  absl::StatusOr<std::vector<float>> Run(const std::vector<int32_t>& ids, bool all_logits);

 private:
  ModelRunner* runner_;
  int32_t bs_;
  int32_t pos_ = 0;
  std::vector<int32_t> table_;
};

double Rms(const std::vector<float>& v);
CudaRunnerOptions TestOptions();
// A small Llama-shaped model for random-weight runner tests: vocab 1000,
// hidden 256, intermediate 512, 4 heads of 64, 2 KV heads, 512 positions.
ModelConfig SmallLlamaConfig(const std::string& name, int64_t num_layers);

// A golden checkpoint and its CPU runner, the reference (the checkpoint on
// the heap: the runner may keep pointers into it).
struct Reference {
  std::unique_ptr<Checkpoint> ckpt;
  std::unique_ptr<ModelRunner> cpu;
};
absl::StatusOr<Reference> OpenReference(const std::string& path);

// The logits' tolerance for a model of `c`'s depth whose reference logits
// have RMS `rms`; nmse_scale widens the NMSE allowed a layer (and the
// per-element bound by its square root) for formats that round more than BF16.
onecard::testing::Tolerance LogitTolerance(const ModelConfig& c, double rms,
                                           double nmse_scale = 1.0);

// For every golden prompt of golden_dir: the logits of every position of a
// one-chunk prefill within LogitTolerance, then 16 greedy tokens identical,
// or where they part a near tie on the CPU (gap below twice the largest
// logit error of the prefill). `label` names the case in the messages.
void CompareRunners(ModelRunner& cpu, ModelRunner& gpu, const ModelConfig& config,
                    const std::string& golden_dir, const std::string& label,
                    double nmse_scale = 1.0);

// Eight sequences decoding five steps from prompts of 60-67 tokens (ids below
// min(1000, vocab); keys of one step read by the next, across the 64-key
// rounds); each step's logits
// against the CPU runner's, fed the same tokens.
// A runner against Hugging Face's own logits of a checkpoint (a golden
// folder of tests/golden/make_goldens.py's format, LoadGolden): every
// position's sampled ids and top 5 and the whole last row (LogitTolerance:
// HF runs fp32, as the CPU runner does), then 16 greedy steps: the runner's
// argmax must be HF's, or HF's own top two a near tie (gap within twice the
// largest logit error), where the comparison stops.
void MatchesHfGolden(ModelRunner& runner, const ModelConfig& config, const std::string& golden_dir,
                     const std::string& label);

void DecodeStepsMatch(ModelRunner& cpu, ModelRunner& gpu, const ModelConfig& config,
                      const std::string& label, double nmse_scale = 1.0);

}  // namespace onecard::engine

#endif  // ONECARD_TESTS_GPU_RUNNER_TEST_UTIL_H_
