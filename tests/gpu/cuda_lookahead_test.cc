// The CUDA runner's look-ahead (LaunchSample / WaitSample, step_ahead.cc)
// against its one-step-at-a-time ForwardSample on tiny_llama: a batch of
// sequences prefilled, then decoded greedily with each step launched before
// the previous one is read back, its inputs pending tokens filled in on the
// device, must give the same tokens as ForwardSample steps fed on the host
// (graph buckets and eager steps both); misuse is refused with the reason.
// The Engine on tiny_llama with async_scheduling streams what it streams
// without (greedy, eos, stop strings, lengths), having launched ahead.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/pending_token.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "engine/runtime/engine.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/engine_test_util.h"
#include "tests/gpu/runner_test_util.h"

namespace onecard::engine {
namespace {

using onecard::testing::SourcePath;

constexpr int32_t kBlocksPerSeq = 4;  // tiny_llama's blocks of 16: 64 positions

struct Seqs {
  std::vector<std::vector<int32_t>> tables, tokens;
};

// n sequences with prompts of different lengths, their tables from block `first_block`.
Seqs MakeSeqs(int32_t n, int32_t first_block) {
  Seqs s;
  for (int32_t i = 0; i < n; ++i) {
    s.tables.emplace_back();
    for (int32_t b = 0; b < kBlocksPerSeq; ++b) {
      s.tables.back().push_back(first_block + i * kBlocksPerSeq + b);
    }
    s.tokens.emplace_back();
    for (int32_t t = 0; t < 5 + 3 * i; ++t) s.tokens.back().push_back((i * 37 + t * 11) % 900);
  }
  return s;
}

// The prefill of every sequence or a decode of each one's last token.
BatchInput Step(const Seqs& s, bool prefill) {
  BatchInput batch;
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    const std::vector<int32_t>& t = s.tokens[i];
    const int32_t start = prefill ? 0 : static_cast<int32_t>(t.size()) - 1;
    batch.chunks.push_back({.seq_id = static_cast<int64_t>(i),
                            .token_ids = std::span<const int32_t>(t).subspan(start),
                            .start_pos = start,
                            .block_table = s.tables[i]});
  }
  return batch;
}

TEST(CudaLookaheadTest, LaunchedStepsGiveTheTokensOfForwardSample) {
  absl::StatusOr<Checkpoint> ckpt = OpenCheckpoint(SourcePath("tests/golden/tiny_llama"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto gpu = CreateCudaModelRunner(*ckpt, TestOptions());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ModelRunner& r = **gpu;
  constexpr int kDecodes = 12;
  for (const bool graphs : {true, false}) {
    SCOPED_TRACE(graphs ? "graphs" : "eager");
    (*gpu)->set_use_cuda_graphs(graphs);
    for (const int32_t n : {1, 5}) {
      SCOPED_TRACE(n);
      const std::vector<SampleRowParams> greedy(n);
      // One step at a time: each token appended on the host.
      Seqs sync = MakeSeqs(n, 0);
      std::vector<int32_t> out;
      ASSERT_TRUE(r.ForwardSample(Step(sync, true), greedy, {}, &out).ok());
      for (int d = 0; d <= kDecodes; ++d) {
        for (int32_t i = 0; i < n; ++i) sync.tokens[i].push_back(out[i]);
        if (d == kDecodes) break;
        ASSERT_TRUE(r.ForwardSample(Step(sync, false), greedy, {}, &out).ok());
      }
      // Look-ahead: step d+1 launched with pending inputs before step d is read.
      Seqs ahead = MakeSeqs(n, n * kBlocksPerSeq);
      auto resolve_oldest = [&](const std::vector<int32_t>& got) {
        ASSERT_EQ(got.size(), static_cast<size_t>(n));
        for (int32_t i = 0; i < n; ++i) {
          std::vector<int32_t>& t = ahead.tokens[i];
          auto oldest = std::find(t.begin(), t.end(), kPendingToken);
          ASSERT_NE(oldest, t.end());
          *oldest = got[i];
        }
      };
      ASSERT_TRUE(r.LaunchSample(Step(ahead, true), greedy).ok());
      for (int32_t i = 0; i < n; ++i) ahead.tokens[i].push_back(kPendingToken);
      for (int d = 0; d < kDecodes; ++d) {
        ASSERT_TRUE(r.LaunchSample(Step(ahead, false), greedy).ok()) << d;
        for (int32_t i = 0; i < n; ++i) ahead.tokens[i].push_back(kPendingToken);
        ASSERT_TRUE(r.WaitSample(&out).ok());
        resolve_oldest(out);
      }
      ASSERT_TRUE(r.WaitSample(&out).ok());
      resolve_oldest(out);
      for (int32_t i = 0; i < n; ++i) {
        // The last launched decode's output is the final token of both runs.
        EXPECT_EQ(ahead.tokens[i], sync.tokens[i]) << "sequence " << i;
      }
      std::optional<RunnerStepTimes> times = r.last_step_times();
      ASSERT_TRUE(times.has_value());
      EXPECT_TRUE(times->device_gap.has_value());
    }
  }
}

TEST(CudaLookaheadTest, MisuseIsRefused) {
  absl::StatusOr<Checkpoint> ckpt = OpenCheckpoint(SourcePath("tests/golden/tiny_llama"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto gpu = CreateCudaModelRunner(*ckpt, TestOptions());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ModelRunner& r = **gpu;
  const std::vector<SampleRowParams> greedy(1);
  std::vector<int32_t> out;
  EXPECT_EQ(r.WaitSample(&out).code(), absl::StatusCode::kFailedPrecondition);
  Seqs s = MakeSeqs(1, 0);
  s.tokens[0].push_back(kPendingToken);  // no launched step sampled it
  absl::Status no_row = r.LaunchSample(Step(s, false), greedy);
  EXPECT_EQ(no_row.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_row.message().find("sequence 0"), std::string::npos) << no_row;
  s.tokens[0].pop_back();
  ASSERT_TRUE(r.LaunchSample(Step(s, true), greedy).ok());
  std::vector<float> logits;
  EXPECT_EQ(r.Forward(Step(s, true), &logits).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(r.LaunchSample(Step(s, true), greedy).ok());
  EXPECT_EQ(r.LaunchSample(Step(s, true), greedy).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(r.WaitSample(&out).ok());
  ASSERT_TRUE(r.WaitSample(&out).ok());
  EXPECT_TRUE(r.Forward(Step(s, true), &logits).ok());  // nothing in flight any more
}

struct EngineRun {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<FinishReason> reasons;
  int64_t steps = 0;
};

EngineRun RunEngine(bool ahead) {
  EngineOptions options;
  options.model_path = SourcePath("tests/golden/tiny_llama");
  options.backend = "cuda";
  options.gpu_memory_budget = 1ll << 30;
  options.max_context = 256;
  options.max_num_seqs = 8;
  options.max_batched_tokens = 128;
  options.start_thread = false;
  options.tune_gemms = false;  // the same products in both engines
  options.async_scheduling = ahead;
  EngineRun run;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  testing::Recorder rec;
  constexpr int kRequests = 12;
  for (int i = 0; i < kRequests; ++i) {
    GenerationRequest r;
    for (int t = 0; t < 4 + (i * 7) % 19; ++t)
      r.prompt_token_ids.push_back((i * 53 + t * 17) % 900);
    r.sampling.temperature = 0.0f;
    r.stopping.max_tokens = 6 + (i * 5) % 30;
    r.stopping.ignore_eos = i % 3 != 0;
    if (i % 4 == 1) r.stopping.stop_strings = {"e"};
    r.on_output = rec.Callback(absl::StrCat(i));
    EXPECT_TRUE((*engine)->Submit(std::move(r)).ok());
  }
  testing::RunUntilIdle(**engine);
  for (int i = 0; i < kRequests; ++i) {
    run.tokens.push_back(rec.Tokens(absl::StrCat(i)));
    run.reasons.push_back(rec.Final(absl::StrCat(i)).finish_reason);
  }
  EXPECT_TRUE(rec.Violations().empty());
  run.steps = (*engine)->Stats().steps_total;
  return run;
}

TEST(CudaLookaheadTest, TheEngineStreamsTheSameWithLookahead) {
  const EngineRun sync = RunEngine(false);
  const EngineRun ahead = RunEngine(true);
  ASSERT_EQ(sync.tokens.size(), 12u);
  EXPECT_EQ(ahead.tokens, sync.tokens);
  EXPECT_EQ(ahead.reasons, sync.reasons);
  EXPECT_GT(ahead.steps, 0);
}

}  // namespace
}  // namespace onecard::engine
