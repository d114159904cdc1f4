// EngineImpl: construction, the caller-facing API and the thread loop (the
// step itself is in engine_step.cc). Contract in engine.h and engine_impl.h.
// Tested by tests/engine/runtime/engine_impl_test.cc.
#include "engine/runtime/engine_impl.h"

#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/request_validation.h"

namespace onecard::engine {
namespace {

SchedulerOptions MakeSchedulerOptions(const EngineOptions& options, const KvLayout& layout,
                                      int32_t max_context, int32_t num_swap_blocks) {
  return {.max_num_seqs = options.max_num_seqs,
          .max_batched_tokens = options.max_batched_tokens,
          .max_context = max_context,
          .blocks = {.num_blocks = layout.num_blocks,
                     .block_size = layout.block_size,
                     .enable_prefix_caching = options.enable_prefix_caching},
          .num_swap_blocks = num_swap_blocks,
          .aging_interval = options.aging_interval,
          .long_prefill_token_threshold = options.long_prefill_token_threshold,
          .fifo = options.fifo_scheduling,
          .clock = options.clock};
}

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("EngineOptions.", field, ": ", why));
}

// The context served: the option (0 = the model's), capped by the KV pool.
absl::StatusOr<int32_t> ResolveMaxContext(const EngineOptions& options, const ModelConfig& config,
                                          const KvLayout& layout) {
  if (options.max_context < 0) return Invalid("max_context", "negative");
  const int64_t model_max = config.max_position_embeddings;
  if (options.max_context > model_max) {
    return Invalid("max_context", absl::StrCat(options.max_context, " exceeds the model's ",
                                               model_max, " positions"));
  }
  const int64_t wanted = options.max_context > 0 ? options.max_context : model_max;
  const int64_t pool = static_cast<int64_t>(layout.num_blocks) * layout.block_size;
  const int64_t max_context = std::min(wanted, pool);
  if (max_context < 2) {
    return Invalid("max_context", absl::StrCat("the context (", max_context,
                                               " tokens, KV pool included) is under 2"));
  }
  if (pool < wanted) {
    Log(LogLevel::kInfo, "engine", "context capped at %d tokens by the KV pool (%d blocks of %d)",
        max_context, layout.num_blocks, layout.block_size);
  }
  return static_cast<int32_t>(max_context);
}

// The runner's swap space of options.swap_space_bytes (none for 0).
absl::StatusOr<KvSwapSpace> MakeSwapSpace(const EngineOptions& options, ModelRunner& runner) {
  if (options.swap_space_bytes < 0) return Invalid("swap_space_bytes", "negative");
  if (options.swap_space_bytes == 0) return KvSwapSpace{};
  absl::StatusOr<KvSwapSpace> swap = runner.AllocateSwapSpace(options.swap_space_bytes);
  if (!swap.ok()) {
    return absl::Status(swap.status().code(),
                        absl::StrCat("EngineOptions.swap_space_bytes: ", swap.status().message()));
  }
  if (swap->num_blocks < 1) {
    return Invalid("swap_space_bytes",
                   absl::StrCat(options.swap_space_bytes, " bytes hold no KV block of ",
                                swap->block_bytes, " bytes (runner ", runner.name(), ")"));
  }
  Log(LogLevel::kInfo, "engine", "KV swap space: %d blocks of %d bytes (%.1f MiB)",
      swap->num_blocks, swap->block_bytes,
      static_cast<double>(swap->num_blocks) * swap->block_bytes / (1 << 20));
  return swap;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(EngineParts parts,
                                                     const EngineOptions& options) {
  if (parts.runner == nullptr) return absl::InvalidArgumentError("CreateEngine: no runner");
  if (parts.tokenizer == nullptr) return absl::InvalidArgumentError("CreateEngine: no tokenizer");
  if (options.max_num_seqs < 1) return Invalid("max_num_seqs", "must be >= 1");
  if (options.max_batched_tokens < 1) return Invalid("max_batched_tokens", "must be >= 1");
  if (options.aging_interval < absl::ZeroDuration()) return Invalid("aging_interval", "negative");
  if (options.long_prefill_token_threshold < 0) {
    return Invalid("long_prefill_token_threshold", "negative");
  }
  if (options.max_waiting < 0) return Invalid("max_waiting", "negative");
  const KvLayout& layout = parts.runner->kv_layout();
  if (layout.num_blocks < 1 || layout.block_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("runner ", parts.runner->name(), ": KV pool of ",
                                                   layout.num_blocks, " blocks of ",
                                                   layout.block_size, " tokens"));
  }
  ASSIGN_OR_RETURN(int32_t max_context, ResolveMaxContext(options, parts.runner->config(), layout));
  ASSIGN_OR_RETURN(const KvSwapSpace swap, MakeSwapSpace(options, *parts.runner));
  auto engine = std::make_unique<EngineImpl>(std::move(parts), options, max_context, swap);
  if (options.start_thread) engine->StartThread();
  return std::unique_ptr<Engine>(std::move(engine));
}

EngineImpl::EngineImpl(EngineParts parts, const EngineOptions& options, int32_t max_context,
                       KvSwapSpace swap_space)
    : options_(options),
      parts_(std::move(parts)),
      clock_(options.clock != nullptr ? options.clock : RealClock::Get()),
      max_context_(max_context),
      vocab_size_(parts_.runner->config().vocab_size),
      start_time_(clock_->Now()),
      swap_space_(swap_space),
      scheduler_(MakeSchedulerOptions(options, parts_.runner->kv_layout(), max_context,
                                      swap_space.num_blocks)) {
  absl::MutexLock lock(&mu_);
  stats_.kv_blocks_total = parts_.runner->kv_layout().num_blocks;
  stats_.kv_swap_blocks_total = swap_space.num_blocks;
}

EngineImpl::~EngineImpl() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  CancelEverything();
}

void EngineImpl::StartThread() {
  thread_ = std::thread([this] { Loop(); });
}

absl::StatusOr<uint64_t> EngineImpl::Submit(GenerationRequest request) {
  RETURN_IF_ERROR(
      ValidateRequest(request, {.max_context = max_context_, .vocab_size = vocab_size_}));
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  if (draining_ || stop_) {
    return absl::UnavailableError("the engine is draining and accepts no new requests");
  }
  const int64_t waiting = stats_.num_waiting + static_cast<int64_t>(incoming_.size());
  if (options_.max_waiting > 0 && waiting >= options_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat(waiting, " requests are waiting (max_waiting ", options_.max_waiting, ")"));
  }
  const uint64_t id = next_id_++;
  incoming_.push_back(
      std::make_unique<RequestState>(id, std::move(request), parts_.tokenizer.get(), now));
  ++num_active_;
  return id;
}

void EngineImpl::Cancel(uint64_t id) {
  absl::MutexLock lock(&mu_);
  cancels_.push_back(id);
}

EngineStats EngineImpl::Stats() const {
  absl::MutexLock lock(&mu_);
  EngineStats stats = stats_;
  stats.num_waiting += static_cast<int64_t>(incoming_.size());
  for (const auto& state : incoming_) ++stats.num_waiting_by_priority[state->request().priority];
  stats.draining = draining_;
  return stats;
}

absl::StatusOr<bool> EngineImpl::Step() {
  if (options_.start_thread) {
    return absl::FailedPreconditionError("Step(): the engine's own thread runs the steps");
  }
  return RunStep();
}

absl::Status EngineImpl::Drain(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
  }
  bool done;
  if (options_.start_thread) {
    absl::MutexLock lock(&mu_);
    done = mu_.AwaitWithTimeout(absl::Condition(this, &EngineImpl::Idle), timeout);
  } else {
    done = StepUntilIdle(timeout);
  }
  if (done) return absl::OkStatus();
  int64_t left;
  {
    absl::MutexLock lock(&mu_);
    left = num_active_;
    cancel_all_ = true;
  }
  if (options_.start_thread) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &EngineImpl::Idle));
  } else {
    RunStep();
  }
  return absl::DeadlineExceededError(
      absl::StrCat("drain: ", left, " requests were still running after ",
                   absl::FormatDuration(timeout), " and were cancelled"));
}

bool EngineImpl::StepUntilIdle(absl::Duration timeout) {
  const absl::Time deadline = clock_->Now() + timeout;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (num_active_ == 0) return true;
    }
    if (clock_->Now() >= deadline) return false;
    if (!RunStep()) {
      absl::MutexLock lock(&mu_);
      return num_active_ == 0;
    }
  }
}

// Cancels matter only while requests are active, so they need no wake-up.
bool EngineImpl::HasWorkOrStop() const { return stop_ || num_active_ > 0; }

void EngineImpl::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &EngineImpl::HasWorkOrStop));
      if (stop_) return;
    }
    if (!RunStep()) {
      // Requests exist but none could run: wait for news rather than spin.
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(2));
    }
  }
}

void EngineImpl::CancelEverything() {
  absl::MutexLock step_lock(&step_mu_);
  AdmitIncoming();
  std::vector<uint64_t> ids;
  for (const auto& [id, state] : requests_) ids.push_back(id);
  for (uint64_t id : ids) {
    FinishRequest(id, requests_.at(id)->Finish(FinishReason::kCancelled, absl::OkStatus()));
  }
  if (in_flight_.has_value()) CompleteInFlight();  // its rows are dropped; the runner idles
}

}  // namespace onecard::engine
