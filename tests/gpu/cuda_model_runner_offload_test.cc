// Layers streamed from pinned host memory (weight_stream.h) against the same
// model held on the card: the same weights and kernels, so the logits must
// be equal bit for bit (cuBLAS untuned on both sides: the tuner's timing may
// pick other algorithms), through a one-chunk prefill (eager), single
// decode steps (the second of a bucket captured as a CUDA graph, its copies
// graph nodes) and a batch of three sequences. Cases: a 6-layer random
// model (BF16 and 4-bit g128 weights) with one layer on the card and a ring
// of two slots (the ring wraps twice a step), every layer streamed through
// one slot, and the tiny_qwen2 checkpoint (biases, loaded from its file)
// with every layer streamed. The random model's untied token embeddings
// then live in host memory too (the card gathers their rows over the link);
// tiny_qwen2's tied ones stay on the card. Also: the placement is exposed with measured
// rates and the memory plan counts the card's part; gpu_layers without a
// cpu_memory_budget is refused naming it. And layers computed by the CPU
// (CpuLayersGiveTheCardsTokens, below), and the copies' times a timed step
// reports.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "engine/runtime/cuda/weight_spec.h"
#include "gtest/gtest.h"
#include "tests/gpu/runner_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::SourcePath;

ModelConfig SixLayers() { return SmallLlamaConfig("offload-6l", 6); }

CudaRunnerOptions Base() {
  CudaRunnerOptions o = TestOptions();
  o.tune_gemms = false;
  o.max_context = 256;
  return o;
}

// Offloaded layers all streamed (the CPU computes none).
CudaRunnerOptions Streamed(CudaRunnerOptions o, int32_t gpu_layers, int32_t ring) {
  o.cpu_memory_budget = kGiB;
  o.gpu_layers = gpu_layers;
  o.offload_ring_layers = ring;
  o.offload_cpu_threads = -1;
  return o;
}

// cpu_layers of the offloaded layers on the CPU, the rest streamed.
CudaRunnerOptions Split(CudaRunnerOptions o, int32_t gpu_layers, int32_t cpu_layers) {
  o.cpu_memory_budget = kGiB;
  o.gpu_layers = gpu_layers;
  o.offload_ring_layers = 2;
  o.offload_cpu_threads = 4;
  o.offload_cpu_layers = cpu_layers;
  return o;
}

int32_t Argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// Drives both runners with the same batches (the card's greedy tokens) and
// expects the same logits: bit for bit when `tolerance` is 0, else each
// step's largest difference within tolerance times its largest |logit|
// (with the same greedy token) . `tail`: then a 10-token chunk of sequence 0
// (a step past the CPU's rows, reading what the decode steps cached).
void ExpectSameLogits(ModelRunner& card, ModelRunner& streamed, const std::string& label,
                      double tolerance = 0, bool tail = false) {
  const int64_t vocab = card.config().vocab_size;
  const int32_t bs = card.kv_layout().block_size;
  auto same = [&](const BatchInput& batch, const std::string& what) -> std::vector<float> {
    std::vector<float> a, b;
    const absl::Status sa = card.Forward(batch, &a);
    const absl::Status sb = streamed.Forward(batch, &b);
    EXPECT_TRUE(sa.ok()) << label << " " << what << ": " << sa;
    EXPECT_TRUE(sb.ok()) << label << " " << what << ": " << sb;
    EXPECT_EQ(a.size(), b.size()) << label << " " << what;
    if (a.size() == b.size() && !a.empty() && tolerance == 0) {
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << label << " " << what << ": logits differ";
    }
    if (a.size() == b.size() && !a.empty() && tolerance > 0) {
      double worst = 0, scale = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
        scale = std::max(scale, static_cast<double>(std::abs(a[i])));
      }
      EXPECT_LE(worst, tolerance * scale) << label << " " << what << ": logits up to " << scale;
      for (size_t r = 0; r < a.size() / vocab; ++r) {
        EXPECT_EQ(Argmax(a.data() + r * vocab, vocab), Argmax(b.data() + r * vocab, vocab))
            << label << " " << what << ": row " << r;
      }
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
  if (!tail) return;
  std::vector<int32_t> chunk(10);
  for (int i = 0; i < 10; ++i) chunk[i] = (next[0] + 31 * i) % 1000;
  BatchInput batch;
  batch.all_logits = true;
  batch.chunks.push_back(
      {.seq_id = 0, .token_ids = chunk, .start_pos = pos[0], .block_table = tables[0]});
  same(batch, "a 10-token chunk after the decode steps");
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
    // Untied: the token embeddings in host memory too, read by the card.
    EXPECT_EQ(place->host_embedding_bytes, EmbeddingTableBytes(c)) << label;
    EXPECT_EQ(plan.offloaded_bytes, place->streamed_bytes + place->host_embedding_bytes)
        << label;  // no CPU layers
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
  EXPECT_EQ((*streamed)->placement()->host_embedding_bytes, 0);  // tied: the LM head's table
  ExpectSameLogits(**card, **streamed, "tiny_qwen2");
}

// The CPU's layers (cpu_span.h): not the card's kernels, so the logits agree
// to BF16-sized differences with the same greedy tokens: prefills (past the
// CPU's rows: every offloaded layer streamed, the CPU layers' K/V copied to
// the host), decode steps at batch 1 and 3 (the CPU computes its layers in a
// host node of the captured graph, its K/V written back to the card), and a
// 10-token chunk on the card reading the K/V the CPU wrote.
TEST(CudaModelRunnerOffloadTest, CpuLayersGiveTheCardsTokens) {
  const ModelConfig c = SixLayers();
  for (const char* weights : {"bf16", "int4"}) {
    CudaRunnerOptions o = Base();
    o.synthetic_weights = *ParseProjectionSpec(weights);
    o.synthetic_seed = 5;
    auto card = CreateRandomCudaModelRunner(c, o);
    ASSERT_TRUE(card.ok()) << weights << ": " << card.status();
    auto split = CreateRandomCudaModelRunner(c, Split(o, 2, 2));
    ASSERT_TRUE(split.ok()) << weights << ": " << split.status();
    const PlacementPlan* place = (*split)->placement();
    ASSERT_NE(place, nullptr);
    EXPECT_EQ(place->device_layers, 2);
    EXPECT_EQ(place->streamed_layers, 2);
    EXPECT_EQ(place->cpu_layers, 2);
    EXPECT_EQ(place->cpu_max_rows, kCpuMaxRows);
    EXPECT_GT(place->rates.host_read_bytes_per_s, 1e9);
    EXPECT_GT(place->rates.span_s, 0);
    EXPECT_EQ((*split)->memory_plan().offloaded_bytes,
              place->streamed_bytes + place->cpu_bytes + place->host_embedding_bytes);
    ExpectSameLogits(**card, **split, absl::StrCat(weights, " with 2 CPU layers"), 0.05,
                     /*tail=*/true);
  }
  auto ckpt = OpenCheckpoint(SourcePath("tests/golden/tiny_qwen2"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto card = CreateCudaModelRunner(*ckpt, Base());
  ASSERT_TRUE(card.ok()) << card.status();
  auto split = CreateCudaModelRunner(*ckpt, Split(Base(), 0, ckpt->config.num_layers / 2));
  ASSERT_TRUE(split.ok()) << split.status();
  ExpectSameLogits(**card, **split, "tiny_qwen2 with half its layers on the CPU", 0.05,
                   /*tail=*/true);
}

// With time_steps, a step not run as a graph reports its streamed copies
// (CudaStepTiming::stream_*): a prefill past the CPU's rows copies every
// offloaded layer, an eager decode step of the CPU's rows the streamed ones
// alone, a step replayed as a graph none (untimed). The copies run one after
// another on one stream, so first start to last end spans their summed time.
TEST(CudaModelRunnerOffloadTest, TimedStepsReportTheStreamedCopies) {
  CudaRunnerOptions o = Base();
  o.synthetic_weights = *ParseProjectionSpec("int4");
  o.synthetic_seed = 3;
  o.time_steps = true;
  auto split = CreateRandomCudaModelRunner(SixLayers(), Split(o, 2, 2));
  ASSERT_TRUE(split.ok()) << split.status();
  const PlacementPlan* place = (*split)->placement();
  ASSERT_NE(place, nullptr);
  ASSERT_GT(place->streamed_bytes, 0);
  ASSERT_GT(place->cpu_bytes, 0);
  std::vector<int32_t> table(16), prompt(29);
  for (int i = 0; i < 16; ++i) table[i] = i;
  for (int i = 0; i < 29; ++i) prompt[i] = (11 * i + 2) % 1000;
  std::vector<int32_t> tokens;
  const std::vector<SampleRowParams> one(1);
  BatchInput prefill;
  prefill.chunks.push_back(
      {.seq_id = 0, .token_ids = prompt, .start_pos = 0, .block_table = table});
  ASSERT_TRUE((*split)->ForwardSample(prefill, one, {}, &tokens).ok());
  CudaStepTiming t = (*split)->last_step_timing();
  EXPECT_EQ(t.stream_bytes, place->streamed_bytes + place->cpu_bytes);
  EXPECT_GT(t.stream_busy_us, 0);
  EXPECT_GE(t.stream_span_us + 1.0, t.stream_busy_us);
  auto decode = [&](int32_t pos) {
    const int32_t next = tokens.at(0);
    BatchInput b;
    b.chunks.push_back({.seq_id = 0,
                        .token_ids = std::span<const int32_t>(&next, 1),
                        .start_pos = pos,
                        .block_table = table});
    const absl::Status s = (*split)->ForwardSample(b, one, {}, &tokens);
    EXPECT_TRUE(s.ok()) << "position " << pos << ": " << s;
    return (*split)->last_step_timing();
  };
  (*split)->set_use_cuda_graphs(false);
  t = decode(29);
  EXPECT_FALSE(t.graph);
  EXPECT_EQ(t.stream_bytes, place->streamed_bytes);
  EXPECT_GT(t.stream_busy_us, 0);
  (*split)->set_use_cuda_graphs(true);
  for (int32_t pos = 30; pos < 34; ++pos) t = decode(pos);
  EXPECT_TRUE(t.graph);
  EXPECT_EQ(t.stream_bytes, 0);
  EXPECT_EQ(t.stream_busy_us, 0);
}

TEST(CudaModelRunnerOffloadTest, CpuLayersNeedACpuThatComputes) {
  CudaRunnerOptions o = Split(Base(), 2, 2);
  o.offload_cpu_threads = -1;
  auto runner = CreateRandomCudaModelRunner(SixLayers(), o);
  ASSERT_FALSE(runner.ok());
  EXPECT_NE(runner.status().message().find("offload_cpu_layers"), std::string::npos)
      << runner.status();
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
