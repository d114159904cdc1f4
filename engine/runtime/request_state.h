// RequestState: what the engine keeps for one accepted request besides its
// scheduler sequence: the streaming detokenizer, the stop-string matcher,
// usage and timings. It turns each sampled token into the StreamOutput the
// request's callback receives and decides when the request is finished
// (stop token ids, eos unless ignore_eos, stop strings, max_tokens, the
// context end), and builds the final output of an ending from outside
// (cancellation, deadline, error).
// Tested by tests/engine/runtime/request_state_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_REQUEST_STATE_H_
#define ONECARD_ENGINE_RUNTIME_REQUEST_STATE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/stop_strings.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine {

class RequestState {
 public:
  // tokenizer must outlive this object.
  RequestState(uint64_t id, GenerationRequest request, const Tokenizer* tokenizer,
               absl::Time submit_time);

  uint64_t id() const { return id_; }
  const GenerationRequest& request() const { return request_; }
  int32_t num_generated() const { return usage_.completion_tokens; }
  // The ids the next token may not be (logits masked to -inf): while fewer
  // than stopping.min_tokens are generated, the stop token ids and, unless
  // ignore_eos, the model's end-of-sequence ids; otherwise none.
  std::span<const int32_t> MaskedTokenIds() const;
  bool finished() const { return finished_; }

  // The request ran for the first time (later calls are ignored).
  void OnFirstScheduled(absl::Time now, int32_t cached_tokens);
  // One sampled token, already appended to the sequence, which now holds
  // num_seq_tokens tokens. Returns the output to stream; finished is set
  // when the request ends with this token.
  StreamOutput OnToken(const SampleResult& sample, int32_t num_seq_tokens, int32_t max_context,
                       absl::Time now);
  // The final output when the request ends from outside (kCancelled,
  // kDeadline, kError with error set).
  StreamOutput Finish(FinishReason reason, absl::Status error);

 private:
  // Runs the token through the stop checks; appends streamable text to *text.
  FinishReason CheckStops(int32_t token, int32_t num_seq_tokens, int32_t max_context,
                          std::string* text);
  bool IsEos(int32_t token) const;
  StreamOutput NewOutput() const;

  uint64_t id_;
  GenerationRequest request_;
  const Tokenizer* tokenizer_;
  std::vector<int32_t> min_tokens_mask_;  // what MaskedTokenIds returns early on
  IncrementalDetokenizer detokenizer_;
  StopStringMatcher stop_matcher_;
  absl::Time submit_time_;
  std::optional<absl::Duration> queue_time_;
  std::optional<absl::Duration> time_to_first_token_;
  Usage usage_;
  bool finished_ = false;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_REQUEST_STATE_H_
