// Engine test helpers (see engine_test_util.h).
#include "tests/engine/runtime/engine_test_util.h"

#include <algorithm>

#include "engine/sampling/sampler.h"
#include "gtest/gtest.h"

namespace onecard::engine::testing {

StreamCallback Recorder::Callback(const std::string& name) {
  {
    absl::MutexLock lock(&mu_);
    outputs_[name];
  }
  return [this, name](const StreamOutput& out) {
    absl::MutexLock lock(&mu_);
    outputs_[name].push_back(out);
  };
}

std::vector<StreamOutput> Recorder::Outputs(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = outputs_.find(name);
  return it == outputs_.end() ? std::vector<StreamOutput>{} : it->second;
}

std::vector<int32_t> Recorder::Tokens(const std::string& name) const {
  std::vector<int32_t> tokens;
  for (const StreamOutput& out : Outputs(name)) {
    tokens.insert(tokens.end(), out.token_ids.begin(), out.token_ids.end());
  }
  return tokens;
}

std::string Recorder::Text(const std::string& name) const {
  std::string text;
  for (const StreamOutput& out : Outputs(name)) text += out.text_delta;
  return text;
}

StreamOutput Recorder::Final(const std::string& name) const {
  std::vector<StreamOutput> outs = Outputs(name);
  const auto finals = std::count_if(outs.begin(), outs.end(), [](auto& o) { return o.finished; });
  EXPECT_EQ(finals, 1) << name;
  if (outs.empty() || !outs.back().finished) {
    ADD_FAILURE() << name << ": the last output is not final";
    return {};
  }
  return outs.back();
}

bool Recorder::Finished(const std::string& name) const {
  std::vector<StreamOutput> outs = Outputs(name);
  return !outs.empty() && outs.back().finished;
}

std::vector<std::string> Recorder::Violations() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> bad;
  for (const auto& [name, outs] : outputs_) {
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i].finished && i + 1 != outs.size()) bad.push_back(name);
    }
  }
  return bad;
}

std::unique_ptr<TestEngine> MakeTestEngine(FakeRunnerOptions runner_options, EngineOptions options,
                                           bool threaded) {
  auto t = std::make_unique<TestEngine>();
  options.start_thread = threaded;
  auto runner = std::make_unique<FakeModelRunner>(std::move(runner_options));
  t->runner = runner.get();
  if (options.clock == nullptr) options.clock = &t->clock;
  EngineParts parts{.runner = std::move(runner), .tokenizer = std::make_unique<FakeTokenizer>()};
  auto engine = CreateEngine(std::move(parts), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (engine.ok()) t->engine = std::move(engine).value();
  return t;
}

GenerationRequest Request(std::vector<int32_t> prompt, int32_t max_tokens,
                          SamplingParams sampling) {
  GenerationRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.stopping.max_tokens = max_tokens;
  r.sampling = sampling;
  r.stopping.ignore_eos = true;
  return r;
}

std::vector<int32_t> ReferenceTokens(const GenerationRequest& request, const LogitsFn& logits_fn) {
  Sampler sampler;
  std::vector<int32_t> context = request.prompt_token_ids;
  std::vector<int32_t> out;
  const auto& stops = request.stopping.stop_token_ids;
  while (static_cast<int32_t>(out.size()) < request.stopping.max_tokens) {
    const std::vector<float> logits =
        logits_fn ? logits_fn(context) : HashedLogits(context, FakeTokenizer::kVocabSize);
    const int32_t token = sampler
                              .Sample({.logits = logits,
                                       .params = &request.sampling,
                                       .prompt_token_ids = request.prompt_token_ids,
                                       .output_token_ids = out})
                              .token_id;
    out.push_back(token);
    context.push_back(token);
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) break;
    if (!request.stopping.ignore_eos && token == FakeTokenizer::kEos) break;
  }
  return out;
}

int RunUntilIdle(Engine& engine, int max_steps) {
  int steps = 0;
  while (steps < max_steps) {
    absl::StatusOr<bool> ran = engine.Step();
    EXPECT_TRUE(ran.ok()) << ran.status();
    if (!ran.ok() || !*ran) break;
    ++steps;
  }
  return steps;
}

}  // namespace onecard::engine::testing
