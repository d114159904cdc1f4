// Helpers of the CUDA runner tests (see runner_test_util.h).
#include "tests/gpu/runner_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "engine/common/status_macros.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "engine/sampling/sampler.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/runtime/cpu/golden_logits.h"

namespace onecard::engine {

using onecard::testing::SourcePath;
using onecard::testing::Tolerance;

namespace {

// The tolerance's terms (cuda_model_runner_test.cc's header says why).
constexpr double kNmsePerLayer = 2e-4;
constexpr double kSigmas = 5.0;
constexpr int kGreedySteps = 16;

}  // namespace

std::vector<Prompt> GoldenPrompts(const std::string& dir) {
  std::ifstream in(SourcePath(dir + "/logits.json"));
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  std::vector<Prompt> out;
  if (j.is_discarded() || !j.contains("prompts")) return out;
  for (const auto& p : j["prompts"]) {
    Prompt prompt;
    prompt.name = p.value("name", "");
    for (const auto& id : p["input_ids"]) prompt.ids.push_back(id.get<int32_t>());
    out.push_back(prompt);
  }
  return out;
}

absl::StatusOr<std::vector<float>> OneSequence::Run(const std::vector<int32_t>& ids,
                                                    bool all_logits) {
  const int32_t end = pos_ + static_cast<int32_t>(ids.size());
  while (static_cast<int32_t>(table_.size()) * bs_ < end) {
    table_.push_back(static_cast<int32_t>(table_.size()));
  }
  BatchInput batch;
  batch.all_logits = all_logits;
  batch.chunks.push_back({.seq_id = 0, .token_ids = ids, .start_pos = pos_, .block_table = table_});
  std::vector<float> logits;
  RETURN_IF_ERROR(runner_->Forward(batch, &logits));
  pos_ = end;
  return logits;
}

double Rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s / std::max<size_t>(v.size(), 1));
}

ModelConfig SmallLlamaConfig(const std::string& name, int64_t num_layers) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.name = name;
  c.vocab_size = 1000;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = num_layers;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 512;
  return c;
}

CudaRunnerOptions TestOptions() {
  CudaRunnerOptions o;
  o.gpu_memory_budget = 3 * kGiB;
  o.max_num_seqs = 8;
  o.max_batched_tokens = 1024;
  o.print_plan = false;
  return o;
}

absl::StatusOr<Reference> OpenReference(const std::string& path) {
  Reference r;
  ASSIGN_OR_RETURN(Checkpoint ckpt, OpenCheckpoint(SourcePath(path)));
  r.ckpt = std::make_unique<Checkpoint>(std::move(ckpt));
  // The fp32 oracle: every weight dequantized.
  ASSIGN_OR_RETURN(r.cpu, CreateCpuModelRunner(
                              *r.ckpt, CpuRunnerOptions{.weight_format = CpuWeightFormat::kF32}));
  return r;
}

Tolerance LogitTolerance(const ModelConfig& c, double rms, double nmse_scale) {
  const double max_nmse = nmse_scale * kNmsePerLayer * std::max<int64_t>(c.num_layers, 4);
  return Tolerance{kSigmas * std::sqrt(max_nmse) * rms, 0.0, max_nmse};
}

void CompareRunners(ModelRunner& cpu, ModelRunner& gpu, const ModelConfig& config,
                    const std::string& golden_dir, const std::string& label, double nmse_scale) {
  const int64_t vocab = config.vocab_size;
  const std::vector<Prompt> prompts = GoldenPrompts(golden_dir);
  ASSERT_FALSE(prompts.empty()) << golden_dir;
  for (const Prompt& p : prompts) {
    OneSequence cpu_seq(&cpu, cpu.kv_layout().block_size);
    OneSequence gpu_seq(&gpu, gpu.kv_layout().block_size);
    auto want = cpu_seq.Run(p.ids, true);
    auto got = gpu_seq.Run(p.ids, true);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    const double rms = Rms(*want);
    const Tolerance tol = LogitTolerance(config, rms, nmse_scale);
    const auto report = onecard::testing::CompareAll(*got, *want, tol);
    std::printf("[%s/%s] %zu tokens: logit rms %.3f, max abs err %.4f (%.2f%% of rms), NMSE %.2e\n",
                label.c_str(), p.name.c_str(), p.ids.size(), rms, report.max_abs_err,
                100.0 * report.max_abs_err / rms, report.nmse);
    EXPECT_ALL_CLOSE(*got, *want, tol) << p.name;
    // Greedy: each side continues with its own argmax.
    std::vector<float> cpu_last(want->end() - vocab, want->end());
    std::vector<float> gpu_last(got->end() - vocab, got->end());
    for (int step = 0; step < kGreedySteps; ++step) {
      const int32_t a = Argmax(cpu_last), b = Argmax(gpu_last);
      if (a != b) {
        const double gap = cpu_last[a] - cpu_last[b];
        const double tie = 2.0 * report.max_abs_err;
        std::printf("[%s/%s] step %d: cpu %d, cuda %d; cpu logit gap %.4f (near tie below %.4f)\n",
                    label.c_str(), p.name.c_str(), step, a, b, gap, tie);
        EXPECT_LE(gap, tie) << p.name << " step " << step << ": not a near tie";
        break;
      }
      auto c = cpu_seq.Run({a}, false);
      auto g = gpu_seq.Run({b}, false);
      ASSERT_TRUE(c.ok() && g.ok()) << c.status() << g.status();
      cpu_last = *c;
      gpu_last = *g;
    }
  }
}

void MatchesHfGolden(ModelRunner& runner, const ModelConfig& config, const std::string& golden_dir,
                     const std::string& label) {
  Golden golden;
  ASSERT_TRUE(LoadGolden(golden_dir, &golden))
      << golden_dir << " has no golden (tests/golden/README.md says which script makes it)";
  const int64_t vocab = config.vocab_size;
  for (const GoldenPrompt& p : golden.prompts) {
    SCOPED_TRACE(p.name);
    OneSequence seq(&runner, runner.kv_layout().block_size);
    absl::StatusOr<std::vector<float>> logits = seq.Run(p.input_ids, true);
    ASSERT_TRUE(logits.ok()) << logits.status();
    ASSERT_EQ(logits->size(), p.input_ids.size() * vocab);
    ASSERT_EQ(p.last_logits.size(), static_cast<size_t>(vocab));
    // HF's values and ours at them: every position's sampled ids and top 5,
    // and the whole last row.
    std::vector<float> want, got;
    for (size_t pos = 0; pos < p.input_ids.size(); ++pos) {
      for (int32_t id : golden.sample_ids) got.push_back((*logits)[pos * vocab + id]);
      for (int32_t id : p.top5_ids[pos]) got.push_back((*logits)[pos * vocab + id]);
      want.insert(want.end(), p.sample_logits[pos].begin(), p.sample_logits[pos].end());
      want.insert(want.end(), p.top5_logits[pos].begin(), p.top5_logits[pos].end());
    }
    want.insert(want.end(), p.last_logits.begin(), p.last_logits.end());
    got.insert(got.end(), logits->end() - vocab, logits->end());
    const double rms = Rms(p.last_logits);
    const Tolerance tol = LogitTolerance(config, rms);
    const auto report = onecard::testing::CompareAll(got, want, tol);
    std::printf(
        "[%s/%s vs HF] %zu tokens: logit rms %.3f, max abs err %.4f (%.2f%% of rms), "
        "NMSE %.2e\n",
        label.c_str(), p.name.c_str(), p.input_ids.size(), rms, report.max_abs_err,
        100.0 * report.max_abs_err / rms, report.nmse);
    EXPECT_ALL_CLOSE(got, want, tol);
    // Greedy: the runner continues with its own argmax.
    std::vector<float> row(logits->end() - vocab, logits->end());
    int matched = 0;
    for (int step = 0; step < kGreedySteps; ++step, ++matched) {
      const int32_t token = Argmax(row);
      if (token != p.greedy_ids[step]) {
        const double gap = p.greedy_top2_logits[step][0] - p.greedy_top2_logits[step][1];
        const double tie = 2.0 * report.max_abs_err;
        std::printf(
            "[%s/%s vs HF] step %d: ours %d, HF %d; HF's top-2 gap %.4f (near tie "
            "below %.4f)\n",
            label.c_str(), p.name.c_str(), step, token, p.greedy_ids[step], gap, tie);
        EXPECT_LE(gap, tie) << p.name << " step " << step << ": not a near tie";
        break;
      }
      absl::StatusOr<std::vector<float>> next = seq.Run({token}, false);
      ASSERT_TRUE(next.ok()) << next.status();
      row = *std::move(next);
    }
    std::printf("[%s/%s vs HF] greedy: %d of %d tokens as HF's\n", label.c_str(), p.name.c_str(),
                matched, kGreedySteps);
  }
}

void DecodeStepsMatch(ModelRunner& cpu, ModelRunner& gpu, const ModelConfig& config,
                      const std::string& label, double nmse_scale) {
  {
    constexpr int32_t kSeqs = 8, kSteps = 5;
    const int32_t block_size = gpu.kv_layout().block_size;
    ASSERT_EQ(block_size, cpu.kv_layout().block_size);
    const int32_t blocks = (60 + kSeqs + kSteps + block_size - 1) / block_size;  // a sequence
    ASSERT_GE(cpu.kv_layout().num_blocks, kSeqs * blocks);
    ASSERT_GE(gpu.kv_layout().num_blocks, kSeqs * blocks);
    // The chunks' spans point into these.
    std::vector<std::vector<int32_t>> tables(kSeqs), ids(kSeqs), next(kSeqs, {0});
    std::vector<int32_t> length(kSeqs);
    const int32_t id_range = static_cast<int32_t>(std::min<int64_t>(1000, config.vocab_size));
    auto table = [&](int32_t s, int32_t tokens) {
      return std::span<const int32_t>(tables[s]).first((tokens + block_size - 1) / block_size);
    };
    BatchInput prefill;
    for (int32_t s = 0; s < kSeqs; ++s) {
      for (int32_t b = 0; b < blocks; ++b) tables[s].push_back(s * blocks + b);
      for (int32_t i = 0; i < 60 + s; ++i) ids[s].push_back((s * 29 + i * 7) % id_range);
      length[s] = static_cast<int32_t>(ids[s].size());
      prefill.chunks.push_back(
          {.seq_id = s, .token_ids = ids[s], .block_table = table(s, length[s])});
    }
    std::vector<float> want, got;
    ASSERT_TRUE(cpu.Forward(prefill, &want).ok());
    ASSERT_TRUE(gpu.Forward(prefill, &got).ok());
    for (int32_t step = 0; step < kSteps; ++step) {
      BatchInput decode;
      for (int32_t s = 0; s < kSeqs; ++s) {
        next[s][0] = (s * 13 + step * 101 + 5) % id_range;
        decode.chunks.push_back({.seq_id = s,
                                 .token_ids = next[s],
                                 .start_pos = length[s],
                                 .block_table = table(s, length[s] + 1)});
        ++length[s];
      }
      ASSERT_TRUE(cpu.Forward(decode, &want).ok());
      ASSERT_TRUE(gpu.Forward(decode, &got).ok());
      EXPECT_ALL_CLOSE(got, want, LogitTolerance(config, Rms(want), nmse_scale))
          << label << ", step " << step;
    }
  }
}

}  // namespace onecard::engine
