// Helpers for the engine tests: an engine over FakeModelRunner and
// FakeTokenizer driven by Step() with a FakeClock, an output recorder that
// checks the one-final-output rule, and the reference generation loop (the
// fake's logits and the sampler, one request alone, no engine).
#ifndef ONECARD_TESTS_ENGINE_RUNTIME_ENGINE_TEST_UTIL_H_
#define ONECARD_TESTS_ENGINE_RUNTIME_ENGINE_TEST_UTIL_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/runtime/engine_impl.h"
#include "tests/engine/runtime/fake_model_runner.h"
#include "tests/engine/runtime/fake_tokenizer.h"

namespace onecard::engine::testing {

// Everything one request streamed. Thread-safe.
class Recorder {
 public:
  StreamCallback Callback(const std::string& name);
  // Per name: all outputs, in order.
  std::vector<StreamOutput> Outputs(const std::string& name) const;
  std::vector<int32_t> Tokens(const std::string& name) const;
  std::string Text(const std::string& name) const;
  // The final output; fails the test unless there is exactly one, last.
  StreamOutput Final(const std::string& name) const;
  bool Finished(const std::string& name) const;
  // Names that received an output after their final one, or two finals.
  std::vector<std::string> Violations() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<StreamOutput>> outputs_ ABSL_GUARDED_BY(mu_);
};

struct TestEngine {
  FakeClock clock;
  FakeModelRunner* runner = nullptr;  // owned by engine
  std::unique_ptr<Engine> engine;
};

// An engine over a FakeModelRunner, driven by Step() unless threaded, with
// the TestEngine's FakeClock unless options.clock is set.
std::unique_ptr<TestEngine> MakeTestEngine(FakeRunnerOptions runner_options,
                                           EngineOptions options = {}, bool threaded = false);

// A request with ignore_eos set (so lengths are predictable; tests of eos
// clear it).
GenerationRequest Request(std::vector<int32_t> prompt, int32_t max_tokens,
                          SamplingParams sampling = {.temperature = 0.0f});

// The tokens the request generates alone: HashedLogits (or logits_fn) and
// the Sampler, stopping at eos (unless ignore_eos), stop ids or max_tokens.
std::vector<int32_t> ReferenceTokens(const GenerationRequest& request,
                                     const LogitsFn& logits_fn = {});

// Steps until idle (at most max_steps); returns the number of steps.
int RunUntilIdle(Engine& engine, int max_steps = 100000);

}  // namespace onecard::engine::testing

#endif  // ONECARD_TESTS_ENGINE_RUNTIME_ENGINE_TEST_UTIL_H_
