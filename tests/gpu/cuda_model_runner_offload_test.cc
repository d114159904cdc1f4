// Layers streamed from pinned host memory (weight_stream.h) against the same
// model held on the card: the same weights and kernels, so the logits must
// be equal bit for bit (cuBLAS untuned on both sides: the tuner's timing may
// pick other algorithms), through a one-chunk prefill (eager), single
// decode steps (the second of a bucket captured as a CUDA graph, its copies
// graph nodes) and a batch of three sequences. Cases: a 6-layer random
// model (BF16 and 4-bit g128 weights) with one layer on the card and a ring
// of two slots (the ring wraps twice a step), every layer streamed through
// one slot, and the tiny_qwen2 checkpoint (biases, loaded from its file)
// with every layer streamed. Also: the placement is exposed with measured
// rates and the memory plan counts the card's part; gpu_layers without a
// cpu_memory_budget is refused naming it.
#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "gtest/gtest.h"
#include "tests/gpu/runner_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::SourcePath;

ModelConfig SixLayers() {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.name = "offload-6l";
  c.vocab_size = 1000;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = 6;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 512;
  return c;
}

CudaRunnerOptions Base() {
  CudaRunnerOptions o = TestOptions();
  o.tune_gemms = false;
  o.max_context = 256;
  return o;
}

CudaRunnerOptions Streamed(CudaRunnerOptions o, int32_t gpu_layers, int32_t ring) {
  o.cpu_memory_budget = kGiB;
  o.gpu_layers = gpu_layers;
  o.offload_ring_layers = ring;
  return o;
}

int32_t Argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// Drives both runners with the same batches and expects the same logits.
void ExpectSameLogits(ModelRunner& card, ModelRunner& streamed, const std::string& label) {
  const int64_t vocab = card.config().vocab_size;
  const int32_t bs = card.kv_layout().block_size;
  auto same = [&](const BatchInput& batch, const std::string& what) -> std::vector<float> {
    std::vector<float> a, b;
    const absl::Status sa = card.Forward(batch, &a);
    const absl::Status sb = streamed.Forward(batch, &b);
    EXPECT_TRUE(sa.ok()) << label << " " << what << ": " << sa;
    EXPECT_TRUE(sb.ok()) << label << " " << what << ": " << sb;
    EXPECT_EQ(a.size(), b.size()) << label << " " << what;
    if (a.size() == b.size() && !a.empty()) {
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << label << " " << what << ": logits differ";
    }
    return a;
  };
  // Three sequences: seq s owns blocks [16 s, 16 s + 16).
  constexpr int kSeqs = 3;
  std::vector<std::vector<int32_t>> tables(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    for (int b = 0; b < 16; ++b) tables[s].push_back(16 * s + b);
  }
  std::vector<int32_t> pos(kSeqs, 0), next(kSeqs, 0);
  // Prefill of each sequence alone, every position's logits (eager).
  for (int s = 0; s < kSeqs; ++s) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 29 + 4 * s; ++i) prompt.push_back((7 * i + 13 * s + 1) % 1000);
    BatchInput batch;
    batch.all_logits = true;
    batch.chunks.push_back(
        {.seq_id = s, .token_ids = prompt, .start_pos = 0, .block_table = tables[s]});
    const std::vector<float> logits = same(batch, "prefill of sequence " + std::to_string(s));
    if (logits.empty()) return;
    next[s] = Argmax(logits.data() + (prompt.size() - 1) * vocab, vocab);
    pos[s] = static_cast<int32_t>(prompt.size());
  }
  ASSERT_LE(pos[kSeqs - 1] + 12, 16 * bs);
  // Sequence 0 alone (batch 1), then all three (bucket 3 or 4): the first
  // steps of each bucket run eagerly, the later ones replay a graph.
  for (int step = 0; step < 12; ++step) {
    const int n = step < 6 ? 1 : kSeqs;
    BatchInput batch;
    for (int s = 0; s < n; ++s) {
      batch.chunks.push_back({.seq_id = s,
                              .token_ids = std::span<const int32_t>(&next[s], 1),
                              .start_pos = pos[s],
                              .block_table = tables[s],
                              .want_logits = true});
    }
    const std::vector<float> logits = same(batch, "decode step " + std::to_string(step));
    if (logits.empty()) return;
    for (int s = 0; s < n; ++s) {
      next[s] = Argmax(logits.data() + s * vocab, vocab);
      ++pos[s];
    }
  }
}

struct RandomCase {
  const char* weights;
  int32_t gpu_layers;
  int32_t ring;
};

TEST(CudaModelRunnerOffloadTest, StreamedLayersGiveTheCardsLogitsBitForBit) {
  const ModelConfig c = SixLayers();
  for (const RandomCase& rc : {RandomCase{"bf16", 1, 2}, RandomCase{"int4", 1, 2},
                               RandomCase{"int4", 0, 1}, RandomCase{"bf16", 4, 3}}) {
    const std::string label =
        absl::StrCat(rc.weights, ", ", rc.gpu_layers, " layers on the card, ", rc.ring, " slots");
    CudaRunnerOptions o = Base();
    o.synthetic_weights = *ParseProjectionSpec(rc.weights);
    o.synthetic_seed = 11;
    auto card = CreateRandomCudaModelRunner(c, o);
    ASSERT_TRUE(card.ok()) << label << ": " << card.status();
    EXPECT_EQ((*card)->placement(), nullptr);
    auto streamed = CreateRandomCudaModelRunner(c, Streamed(o, rc.gpu_layers, rc.ring));
    ASSERT_TRUE(streamed.ok()) << label << ": " << streamed.status();
    const PlacementPlan* place = (*streamed)->placement();
    ASSERT_NE(place, nullptr) << label;
    EXPECT_EQ(place->device_layers, rc.gpu_layers) << label;
    EXPECT_EQ(place->streamed_layers, 6 - rc.gpu_layers) << label;
    EXPECT_EQ(place->cpu_layers, 0) << label;
    EXPECT_GT(place->rates.h2d_bytes_per_s, 1e9) << label;
    EXPECT_GT(place->rates.device_read_bytes_per_s, 1e11) << label;
    EXPECT_GT(place->rates.device_flops_per_s, 1e13) << label;
    EXPECT_GT(place->batch1.stream_s, 0) << label;
    const MemoryPlan& plan = (*streamed)->memory_plan();
    EXPECT_EQ(plan.weight_bytes, place->device_bytes + place->ring_bytes) << label;
    EXPECT_EQ(plan.offloaded_bytes, place->streamed_bytes) << label;
    EXPECT_NE(plan.ToString().find("in host memory"), std::string::npos) << plan.ToString();
    ExpectSameLogits(**card, **streamed, label);
  }
}

TEST(CudaModelRunnerOffloadTest, TinyQwen2StreamedFromItsFile) {
  auto ckpt = OpenCheckpoint(SourcePath("tests/golden/tiny_qwen2"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto card = CreateCudaModelRunner(*ckpt, Base());
  ASSERT_TRUE(card.ok()) << card.status();
  auto streamed = CreateCudaModelRunner(*ckpt, Streamed(Base(), 0, 2));
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  ASSERT_NE((*streamed)->placement(), nullptr);
  EXPECT_EQ((*streamed)->placement()->streamed_layers, ckpt->config.num_layers);
  ExpectSameLogits(**card, **streamed, "tiny_qwen2");
}

TEST(CudaModelRunnerOffloadTest, GpuLayersNeedAHostBudget) {
  CudaRunnerOptions o = Base();
  o.gpu_layers = 2;
  auto runner = CreateRandomCudaModelRunner(SixLayers(), o);
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(runner.status().message().find("cpu_memory_budget"), std::string::npos)
      << runner.status();
  // Every layer fits: gpu_layers at the depth or above offloads nothing.
  o.cpu_memory_budget = kGiB;
  o.gpu_layers = 6;
  auto all = CreateRandomCudaModelRunner(SixLayers(), o);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)->placement(), nullptr);
}

}  // namespace
}  // namespace onecard::engine
