// Test doubles for the worker's unit tests: FakeTokenizer (byte-level: ids
// 0..255 are bytes, 256 <|im_start|>, 257 <|im_end|> = eos) and FakeEngine,
// an Engine the test drives by hand (Submit checks requests as the real one
// does: engine::ValidateRequest). Submit, Cancel and Stats are
// thread-safe (gRPC threads call them); Emit, Finish and ProcessCancels run
// the callbacks on the calling thread, which plays the engine thread.
// Deterministic: nothing happens unless the test makes it happen.
#ifndef ONECARD_TESTS_SERVICES_WORKER_FAKE_ENGINE_H_
#define ONECARD_TESTS_SERVICES_WORKER_FAKE_ENGINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/runtime/engine.h"

namespace onecard::testing {

class FakeTokenizer : public engine::Tokenizer {
 public:
  static constexpr int32_t kImStart = 256;
  static constexpr int32_t kImEnd = 257;

  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const override;
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  std::string TokenBytes(int32_t id) const override;
  int32_t TokenId(std::string_view token) const override;
  bool IsSpecial(int32_t id) const override { return id >= 256; }
  int32_t vocab_size() const override { return 300; }
  int32_t bos_id() const override { return -1; }
  int32_t eos_id() const override { return kImEnd; }
  const std::vector<int32_t>& stop_ids() const override { return stop_ids_; }
  const std::string& chat_template() const override { return chat_template_; }

 private:
  std::vector<int32_t> stop_ids_{kImEnd};
  std::string chat_template_;
};

class FakeEngine : public engine::Engine {
 public:
  FakeEngine(int32_t max_context, int64_t kv_blocks_total, int32_t max_waiting);

  absl::StatusOr<uint64_t> Submit(engine::GenerationRequest request) override;
  void Cancel(uint64_t id) override;
  engine::EngineStats Stats() const override;
  absl::Status Drain(absl::Duration timeout) override;
  absl::StatusOr<bool> Step() override { return false; }
  const engine::ModelConfig& config() const override { return config_; }
  const engine::Tokenizer& tokenizer() const override { return tokenizer_; }
  int32_t max_context() const override { return max_context_; }

  // --- test controls ---
  // Blocks until `n` requests have been submitted in all (true) or timeout.
  bool WaitForSubmitted(int n, absl::Duration timeout = absl::Seconds(30));
  // Blocks until Cancel(id) was called (true) or timeout.
  bool WaitForCancel(uint64_t id, absl::Duration timeout = absl::Seconds(30));
  std::vector<uint64_t> ids() const;                     // submission order
  engine::GenerationRequest request(uint64_t id) const;  // without its callback
  void Emit(uint64_t id, std::vector<int32_t> tokens, std::string text);
  void Finish(uint64_t id, engine::FinishReason reason);
  // Ends every cancelled, unfinished request with kCancelled (one "step").
  void ProcessCancels();
  void SetKvBlocksUsed(int64_t used);
  bool finished(uint64_t id) const;

 private:
  struct Entry {
    engine::GenerationRequest request;
    bool finished = false;
    bool cancel_requested = false;
    int32_t tokens = 0;
  };
  void Deliver(uint64_t id, engine::StreamOutput output);

  const int32_t max_context_;
  const int32_t max_waiting_;
  engine::ModelConfig config_;
  FakeTokenizer tokenizer_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> order_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  engine::EngineStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_SERVICES_WORKER_FAKE_ENGINE_H_
