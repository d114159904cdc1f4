// FakeModelRunner (see fake_model_runner.h).
#include "tests/engine/runtime/fake_model_runner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace onecard::engine::testing {

std::vector<float> HashedLogits(std::span<const int32_t> context, int32_t vocab_size) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : context) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  std::vector<float> logits(vocab_size);
  for (int32_t v = 0; v < vocab_size; ++v) {
    uint64_t x = h ^ (static_cast<uint64_t>(v) * 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    logits[v] = static_cast<float>((x >> 40) * 0x1.0p-24 * 8.0 - 4.0);
  }
  return logits;
}

FakeModelRunner::FakeModelRunner(FakeRunnerOptions options) : options_(std::move(options)) {
  config_.name = "fake";
  config_.vocab_size = options_.vocab_size;
  config_.hidden_size = 8;
  config_.intermediate_size = 16;
  config_.num_layers = 1;
  config_.num_heads = 1;
  config_.num_kv_heads = 1;
  config_.head_dim = 8;
  config_.max_position_embeddings = 1 << 16;
  layout_ = {.num_blocks = options_.num_blocks,
             .block_size = options_.block_size,
             .num_kv_heads = 1,
             .head_dim = 1};
  pool_.assign(static_cast<size_t>(options_.num_blocks) * options_.block_size, -1);
}

absl::Status FakeModelRunner::WriteChunk(const SequenceChunk& chunk) {
  const int32_t bs = layout_.block_size;
  const size_t end = chunk.start_pos + chunk.token_ids.size();
  if (chunk.block_table.size() < (end + bs - 1) / bs) {
    return absl::InvalidArgumentError(absl::StrCat("seq ", chunk.seq_id, ": block table of ",
                                                   chunk.block_table.size(), " for ", end,
                                                   " tokens"));
  }
  for (size_t i = 0; i < chunk.token_ids.size(); ++i) {
    const size_t p = chunk.start_pos + i;
    const int32_t block = chunk.block_table[p / bs];
    if (block < 0 || block >= layout_.num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat("bad block id ", block));
    }
    pool_[static_cast<size_t>(block) * bs + p % bs] = chunk.token_ids[i];
  }
  return absl::OkStatus();
}

absl::Status FakeModelRunner::ReadContext(const SequenceChunk& chunk,
                                          std::vector<int32_t>* context) const {
  const int32_t bs = layout_.block_size;
  const size_t end = chunk.start_pos + chunk.token_ids.size();
  context->clear();
  for (size_t p = 0; p < end; ++p) {
    const int32_t token = pool_[static_cast<size_t>(chunk.block_table[p / bs]) * bs + p % bs];
    if (token < 0) {
      return absl::InternalError(absl::StrCat("seq ", chunk.seq_id, " reads unwritten KV at ", p));
    }
    context->push_back(token);
  }
  return absl::OkStatus();
}

absl::Status FakeModelRunner::Forward(const BatchInput& batch, std::vector<float>* logits) {
  ++num_forward_calls_;
  return ComputeLogits(batch, logits);
}

absl::Status FakeModelRunner::ComputeLogits(const BatchInput& batch, std::vector<float>* logits) {
  if (options_.on_forward) options_.on_forward(batch);
  max_chunks_ = std::max(max_chunks_, batch.chunks.size());
  for (const SequenceChunk& chunk : batch.chunks) {
    for (int32_t t : chunk.token_ids) {
      if (t == options_.fail_on_token) return absl::InternalError("injected runner failure");
    }
  }
  for (const SequenceChunk& chunk : batch.chunks) {
    RETURN_IF_ERROR(WriteChunk(chunk));
    num_tokens_computed_ += static_cast<int64_t>(chunk.token_ids.size());
  }
  logits->clear();
  std::vector<int32_t> context;
  for (const SequenceChunk& chunk : batch.chunks) {
    if (!chunk.want_logits && !batch.all_logits) continue;
    RETURN_IF_ERROR(ReadContext(chunk, &context));
    // all_logits: a row for every token of the chunk, each over the context
    // up to that token.
    const size_t first =
        batch.all_logits ? context.size() - chunk.token_ids.size() + 1 : context.size();
    for (size_t end = first; end <= context.size(); ++end) {
      const std::span<const int32_t> seen(context.data(), end);
      std::vector<float> row =
          options_.logits_fn ? options_.logits_fn(seen) : HashedLogits(seen, options_.vocab_size);
      logits->insert(logits->end(), row.begin(), row.end());
    }
  }
  return absl::OkStatus();
}

absl::Status FakeModelRunner::ForwardSample(const BatchInput& batch,
                                            std::span<const SampleRowParams> rows,
                                            std::span<const std::span<const int32_t>> histories,
                                            std::vector<int32_t>* tokens) {
  if (!options_.device_sampling) return ModelRunner::ForwardSample(batch, rows, histories, tokens);
  ++num_forward_sample_calls_;
  if (options_.on_forward_sample) options_.on_forward_sample(rows, histories);
  std::vector<float> logits;
  RETURN_IF_ERROR(ComputeLogits(batch, &logits));
  const size_t vocab = static_cast<size_t>(options_.vocab_size);
  if (logits.size() != rows.size() * vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat(rows.size(), " sample rows for ", logits.size() / vocab, " logits rows"));
  }
  tokens->clear();
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto begin = logits.begin() + static_cast<std::ptrdiff_t>(r * vocab);
    tokens->push_back(static_cast<int32_t>(std::max_element(begin, begin + vocab) - begin));
  }
  return absl::OkStatus();
}

absl::Status FakeModelRunner::LaunchSample(const BatchInput& batch,
                                           std::span<const SampleRowParams> rows) {
  int64_t pending = 0;
  for (const SequenceChunk& chunk : batch.chunks) {
    pending += std::count(chunk.token_ids.begin(), chunk.token_ids.end(), kPendingToken);
  }
  RETURN_IF_ERROR(ModelRunner::LaunchSample(batch, rows));
  ++num_launches_;
  num_pending_inputs_ += pending;
  max_unwaited_ = std::max(max_unwaited_, num_launches_ - num_waits_);
  return absl::OkStatus();
}

absl::Status FakeModelRunner::WaitSample(std::vector<int32_t>* tokens) {
  const int64_t index = num_waits_++;
  const absl::Status status = ModelRunner::WaitSample(tokens);
  if (status.ok() && index == options_.fail_wait_of_launch) {
    return absl::InternalError("injected device error");
  }
  return status;
}

absl::StatusOr<KvSwapSpace> FakeModelRunner::AllocateSwapSpace(int64_t bytes) {
  if (!options_.swap) return ModelRunner::AllocateSwapSpace(bytes);
  const int64_t block_bytes = int64_t{4} * layout_.block_size;
  host_pool_.assign(static_cast<size_t>(bytes / block_bytes) * layout_.block_size, -1);
  return KvSwapSpace{.num_blocks = static_cast<int32_t>(bytes / block_bytes),
                     .block_bytes = block_bytes};
}

absl::Status FakeModelRunner::SwapOut(std::span<const KvBlockCopy> copies) {
  if (!options_.swap) return ModelRunner::SwapOut(copies);
  if (options_.fail_swap) return absl::InternalError("injected swap failure");
  const size_t bs = static_cast<size_t>(layout_.block_size);
  for (const KvBlockCopy& c : copies) {
    std::copy_n(pool_.begin() + c.device_block * bs, bs, host_pool_.begin() + c.host_block * bs);
  }
  if (options_.poison_swapped_out) {
    for (const KvBlockCopy& c : copies) std::fill_n(pool_.begin() + c.device_block * bs, bs, -1);
  }
  return absl::OkStatus();
}

absl::Status FakeModelRunner::SwapIn(std::span<const KvBlockCopy> copies) {
  if (!options_.swap) return ModelRunner::SwapIn(copies);
  if (options_.fail_swap) return absl::InternalError("injected swap failure");
  const size_t bs = static_cast<size_t>(layout_.block_size);
  for (const KvBlockCopy& c : copies) {
    std::copy_n(host_pool_.begin() + c.host_block * bs, bs, pool_.begin() + c.device_block * bs);
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine::testing
