// The worker tests' fake engine and tokenizer. See fake_engine.h.
#include "tests/services/worker/fake_engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/runtime/request_validation.h"

namespace onecard::testing {
namespace {

constexpr std::string_view kImStartText = "<|im_start|>";
constexpr std::string_view kImEndText = "<|im_end|>";

}  // namespace

std::vector<int32_t> FakeTokenizer::Encode(std::string_view text, bool /*add_special*/) const {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kImStartText.size()) == kImStartText) {
      ids.push_back(kImStart);
      i += kImStartText.size();
    } else if (text.substr(i, kImEndText.size()) == kImEndText) {
      ids.push_back(kImEnd);
      i += kImEndText.size();
    } else {
      ids.push_back(static_cast<unsigned char>(text[i++]));
    }
  }
  return ids;
}

std::string FakeTokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (!(skip_special && IsSpecial(id))) out += TokenBytes(id);
  }
  return out;
}

std::string FakeTokenizer::TokenBytes(int32_t id) const {
  if (id >= 0 && id < 256) return std::string(1, static_cast<char>(id));
  if (id == kImStart) return std::string(kImStartText);
  if (id == kImEnd) return std::string(kImEndText);
  return "";
}

int32_t FakeTokenizer::TokenId(std::string_view token) const {
  if (token == kImStartText) return kImStart;
  if (token == kImEndText) return kImEnd;
  if (token.size() == 1) return static_cast<unsigned char>(token[0]);
  return -1;
}

FakeEngine::FakeEngine(int32_t max_context, int64_t kv_blocks_total, int32_t max_waiting)
    : max_context_(max_context), max_waiting_(max_waiting) {
  config_.name = "fake";
  config_.vocab_size = 300;
  config_.max_position_embeddings = max_context;
  stats_.kv_blocks_total = kv_blocks_total;
}

absl::StatusOr<uint64_t> FakeEngine::Submit(engine::GenerationRequest request) {
  // As Engine::Submit: the fields are checked by the shared function.
  absl::Status valid = engine::ValidateRequest(
      request, {.max_context = max_context_, .vocab_size = tokenizer_.vocab_size()});
  if (!valid.ok()) return valid;
  absl::MutexLock lock(&mu_);
  if (draining_) return absl::UnavailableError("draining");
  if (max_waiting_ > 0 && stats_.num_waiting >= max_waiting_) {
    return absl::ResourceExhaustedError(absl::StrCat(stats_.num_waiting, " requests waiting"));
  }
  const uint64_t id = next_id_++;
  entries_[id].request = std::move(request);
  order_.push_back(id);
  ++stats_.num_waiting;
  return id;
}

void FakeEngine::Cancel(uint64_t id) {
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(id);
  if (it != entries_.end() && !it->second.finished) it->second.cancel_requested = true;
}

engine::EngineStats FakeEngine::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status FakeEngine::Drain(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    stats_.draining = true;
    const auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stats_.num_waiting + stats_.num_running == 0;
    };
    if (mu_.AwaitWithTimeout(absl::Condition(&idle), timeout)) return absl::OkStatus();
    for (auto& [id, entry] : entries_) entry.cancel_requested = !entry.finished;
  }
  ProcessCancels();
  return absl::DeadlineExceededError("cancelled what was left at the end of the drain");
}

bool FakeEngine::WaitForSubmitted(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(order_.size()) >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

bool FakeEngine::WaitForCancel(uint64_t id, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto cancelled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return entries_.count(id) > 0 && entries_[id].cancel_requested;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&cancelled), timeout);
}

std::vector<uint64_t> FakeEngine::ids() const {
  absl::MutexLock lock(&mu_);
  return order_;
}

engine::GenerationRequest FakeEngine::request(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  engine::GenerationRequest copy = entries_.at(id).request;
  copy.on_output = nullptr;
  return copy;
}

bool FakeEngine::finished(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  return entries_.at(id).finished;
}

void FakeEngine::SetKvBlocksUsed(int64_t used) {
  absl::MutexLock lock(&mu_);
  stats_.kv_blocks_used = used;
}

void FakeEngine::Emit(uint64_t id, std::vector<int32_t> tokens, std::string text) {
  engine::StreamOutput out;
  out.token_ids = std::move(tokens);
  out.text_delta = std::move(text);
  Deliver(id, std::move(out));
}

void FakeEngine::Finish(uint64_t id, engine::FinishReason reason) {
  engine::StreamOutput out;
  out.finished = true;
  out.finish_reason = reason;
  if (reason == engine::FinishReason::kError) out.error = absl::InternalError("fake failure");
  Deliver(id, std::move(out));
}

void FakeEngine::ProcessCancels() {
  std::vector<uint64_t> cancelled;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : entries_) {
      if (entry.cancel_requested && !entry.finished) cancelled.push_back(id);
    }
  }
  for (uint64_t id : cancelled) Finish(id, engine::FinishReason::kCancelled);
}

// Keeps the stats, then calls the callback without the lock (as the real
// engine does: callbacks may call Cancel).
void FakeEngine::Deliver(uint64_t id, engine::StreamOutput output) {
  engine::StreamCallback callback;
  {
    absl::MutexLock lock(&mu_);
    Entry& entry = entries_.at(id);
    if (entry.finished) return;
    if (entry.tokens == 0 && (!output.token_ids.empty() || output.finished)) {
      --stats_.num_waiting;
      if (!output.finished) ++stats_.num_running;
    } else if (output.finished) {
      --stats_.num_running;
    }
    entry.tokens += static_cast<int32_t>(output.token_ids.size());
    stats_.generation_tokens_total += static_cast<int64_t>(output.token_ids.size());
    output.usage.prompt_tokens = static_cast<int32_t>(entry.request.prompt_token_ids.size());
    output.usage.completion_tokens = entry.tokens;
    entry.finished = output.finished;
    callback = entry.request.on_output;
  }
  callback(output);
}

}  // namespace onecard::testing
