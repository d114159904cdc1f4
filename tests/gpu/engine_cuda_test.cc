// The Engine on the CUDA backend with SmolLM2 (label gpu): steps sample on
// the GPU (ModelRunner::ForwardSample), so these check what a worker serves:
// - greedy tokens against Hugging Face's greedy ids (tests/golden/smollm2),
//   where a different token is allowed only at a near tie of HF's top two
//   logits (below kNearTie; the rest of that prompt is then not compared);
// - the same greedy tokens with device sampling off (the host sampler), two
//   untuned engines (the tuner picks GEMM forms by timing, so two tuned
//   engines may differ at a near tie);
// - seeded sampling (temperature, top-p, penalties) gives the same tokens
//   for the same batch, and for the same request alone.
// Skips, saying why, when models/ has no SmolLM2.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/runtime/engine_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using testing::Recorder;

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
// The CUDA runner's logits differ from fp32 ones by BF16 rounding (up to
// ~1.6 on SmolLM2's largest logits, tests/gpu/cuda_model_runner_test.cc);
// top-two gaps below this may flip.
constexpr float kNearTie = 0.5f;

// tune_gemms false: the same cuBLAS products in every engine, so two engines
// compute the same logits (the tuner picks by timing).
std::unique_ptr<Engine> MakeEngine(bool device_sampling, bool tune_gemms = true,
                                   bool prefix_caching = true) {
  EngineOptions options;
  options.model_path = onecard::testing::SourcePath(kModel);
  options.backend = "cuda";
  options.gpu_memory_budget = 4ll << 30;
  options.max_context = 2048;
  options.max_num_seqs = 8;
  options.max_batched_tokens = 256;
  options.start_thread = false;
  options.device_sampling = device_sampling;
  options.tune_gemms = tune_gemms;
  options.enable_prefix_caching = prefix_caching;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

std::vector<std::vector<int32_t>> RunAll(Engine& engine, std::vector<GenerationRequest> requests) {
  Recorder rec;
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].on_output = rec.Callback(absl::StrCat(i));
    absl::StatusOr<uint64_t> id = engine.Submit(std::move(requests[i]));
    EXPECT_TRUE(id.ok()) << id.status();
  }
  testing::RunUntilIdle(engine);
  std::vector<std::vector<int32_t>> tokens;
  for (size_t i = 0; i < requests.size(); ++i) tokens.push_back(rec.Tokens(absl::StrCat(i)));
  return tokens;
}

GenerationRequest Greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stopping.max_tokens = max_tokens;
  r.stopping.ignore_eos = true;
  return r;
}

class EngineCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(onecard::testing::SourcePath(kModel))) {
      GTEST_SKIP() << kModel << " is missing: carry it to the GPU machine (docs/cuda.md)";
    }
    std::ifstream in(onecard::testing::SourcePath("tests/golden/smollm2/logits.json"));
    goldens_ = nlohmann::json::parse(in);
  }
  nlohmann::json goldens_;
};

TEST_F(EngineCudaTest, GreedyTokensMatchHuggingFaceAndTheHostSampler) {
  std::unique_ptr<Engine> device = MakeEngine(true);
  ASSERT_NE(device, nullptr);
  std::vector<GenerationRequest> requests;
  for (const auto& prompt : goldens_["prompts"]) {
    requests.push_back(Greedy(prompt["input_ids"].get<std::vector<int32_t>>(), 16));
  }
  const std::vector<std::vector<int32_t>> got = RunAll(*device, requests);
  for (size_t p = 0; p < got.size(); ++p) {
    const auto& prompt = goldens_["prompts"][p];
    const auto want = prompt["greedy_ids"].get<std::vector<int32_t>>();
    const std::string name = prompt["name"].get<std::string>();
    ASSERT_EQ(got[p].size(), 16u) << name;
    for (size_t i = 0; i < 16; ++i) {
      if (got[p][i] == want[i]) continue;
      const auto top2 = prompt["greedy_top2_logits"][i].get<std::vector<float>>();
      const float gap = top2[0] - top2[1];
      EXPECT_LT(gap, kNearTie) << name << " step " << i << ": cuda " << got[p][i] << ", HF "
                               << want[i] << " with a top-2 gap of " << gap;
      std::printf("[%s] step %zu: cuda %d, HF %d at HF's top-2 gap %.4f (near tie)\n", name.c_str(),
                  i, got[p][i], want[i], gap);
      break;  // the continuations differ from here
    }
  }
  device.reset();  // one engine on the card at a time
  // Device and host sampling on the same logits: two engines with the same
  // (untuned) products, so only the sampler differs.
  std::unique_ptr<Engine> untuned = MakeEngine(true, false);
  ASSERT_NE(untuned, nullptr);
  const std::vector<std::vector<int32_t>> on_device = RunAll(*untuned, requests);
  untuned.reset();
  std::unique_ptr<Engine> host = MakeEngine(false, false);
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(RunAll(*host, requests), on_device) << "device and host sampling differ on greedy";
}

// Seeded draws are reproducible for the same batch. They are not batch
// invariant on this backend: SmolLM2's 4-bit projections run Int4Gemm in
// steps of up to 128 rows and BF16 weights dequantized for cuBLAS in larger
// ones, and their roundings differ, so a draw near a boundary of the kept
// mass can pick the neighbouring token (the CPU backend is batch invariant).
// The prefix cache is off: with it, the batch run again prefills only the
// prompts' uncached tails, a step of other rows. How far each request agrees
// alone and in the batch is printed, not asserted.
TEST_F(EngineCudaTest, SeededSamplingIsReproducible) {
  std::unique_ptr<Engine> engine = MakeEngine(true, true, /*prefix_caching=*/false);
  ASSERT_NE(engine, nullptr);
  auto sampled = [&](int64_t seed, float repetition, float presence) {
    GenerationRequest r =
        Greedy(goldens_["prompts"][0]["input_ids"].get<std::vector<int32_t>>(), 24);
    r.sampling = {.temperature = 0.9f,
                  .top_k = 50,
                  .top_p = 0.9f,
                  .min_p = 0.02f,
                  .repetition_penalty = repetition,
                  .presence_penalty = presence,
                  .seed = static_cast<uint64_t>(seed)};
    return r;
  };
  const std::vector<GenerationRequest> batch = {
      sampled(7, 1.0f, 0.0f), sampled(7, 1.3f, 0.0f), sampled(7, 1.0f, 0.6f),
      sampled(11, 1.0f, 0.0f),
      Greedy(goldens_["prompts"][1]["input_ids"].get<std::vector<int32_t>>(), 24)};
  const std::vector<std::vector<int32_t>> together = RunAll(*engine, batch);
  EXPECT_EQ(RunAll(*engine, batch), together) << "the same batch again";
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(together[i].size(), 24u);
    const std::vector<int32_t> alone = RunAll(*engine, {batch[i]})[0];
    EXPECT_EQ(RunAll(*engine, {batch[i]})[0], alone) << "request " << i << " alone, again";
    size_t same = 0;
    while (same < alone.size() && alone[same] == together[i][same]) ++same;
    std::printf("request %zu: alone and in the batch agree on the first %zu of 24 tokens\n", i,
                same);
  }
  EXPECT_NE(together[0], together[3]) << "seeds 7 and 11 drew the same 24 tokens";
}

}  // namespace
}  // namespace onecard::engine
