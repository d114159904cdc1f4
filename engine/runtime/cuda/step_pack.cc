// The host side of a CUDA step (see cuda_runner_impl.h): checks a batch
// against the plan, decides its shape (graph bucket, rows, splits) and packs
// its metadata into the pinned buffer at the StepLayout offsets.
// Tested by tests/gpu/cuda_model_runner_test.cc.
#include <algorithm>
#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/common/pending_token.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/gemv.h"
#include "engine/kernels/kv_cache_write.h"
#include "engine/kernels/paged_attention_split.h"
#include "engine/runtime/cuda/cuda_runner_impl.h"

namespace onecard::engine {
namespace {

absl::Status CheckChunk(const SequenceChunk& c, int32_t index, const MemoryPlan& plan,
                        const KvLayout& kv, int64_t vocab, bool pending_allowed) {
  const int64_t n = static_cast<int64_t>(c.token_ids.size());
  // Built only for an error: a 128-sequence step checks 128 chunks.
  auto where = [&] { return absl::StrCat("cuda runner: chunk ", index, " (seq ", c.seq_id, ")"); };
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(where(), " has no tokens"));
  if (c.start_pos < 0 || c.start_pos + n > plan.max_context) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": positions ", c.start_pos, "..",
                                                   c.start_pos + n - 1, " are outside the ",
                                                   plan.max_context, "-token context"));
  }
  const int64_t blocks = (c.start_pos + n + kv.block_size - 1) / kv.block_size;
  if (static_cast<int64_t>(c.block_table.size()) < blocks ||
      static_cast<int64_t>(c.block_table.size()) > plan.max_blocks_per_seq) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": block_table has ",
                                                   c.block_table.size(), " blocks; needs ", blocks,
                                                   " to ", plan.max_blocks_per_seq));
  }
  for (size_t b = 0; b < c.block_table.size(); ++b) {
    if (c.block_table[b] < 0 || c.block_table[b] >= kv.num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": block_table[", b,
                                                     "] = ", c.block_table[b], " is outside [0, ",
                                                     kv.num_blocks, ")"));
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    // LaunchSample has matched a pending last token with its row already.
    if (pending_allowed && i == n - 1 && c.token_ids[i] == kPendingToken) continue;
    if (c.token_ids[i] < 0 || c.token_ids[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": token_ids[", i, "] = ", c.token_ids[i], " is outside [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSampleRows(const SampleInputs& s, int64_t rows, int32_t max_context) {
  if (static_cast<int64_t>(s.rows.size()) != rows ||
      (!s.histories.empty() && static_cast<int64_t>(s.histories.size()) != rows)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda runner: ", rows, " rows want tokens; ",
                                                   s.rows.size(), " sampling rows and ",
                                                   s.histories.size(), " histories given"));
  }
  for (size_t r = 0; r < s.histories.size(); ++r) {
    if (static_cast<int64_t>(s.histories[r].size()) > max_context) {
      return absl::InvalidArgumentError(absl::StrCat("cuda runner: history ", r, " has ",
                                                     s.histories[r].size(),
                                                     " ids, more than the context ", max_context));
    }
  }
  for (const SampleRowParams& p : s.rows) {
    // The rows' parameters are requests' (checked once, at Engine::Submit:
    // request_validation.h) and draws of UniformDraw, in [0, 1).
    assert(p.temperature >= 0.0f && p.top_p > 0.0f && p.top_p <= 1.0f && p.min_p >= 0.0f &&
           p.min_p <= 1.0f && p.repetition_penalty > 0.0f && p.top_k >= 0 && p.uniform >= 0.0f &&
           p.uniform < 1.0f && "sampling rows come from validated requests");
    static_cast<void>(p);
  }
  return absl::OkStatus();
}

int64_t RowsWantingLogits(const BatchInput& batch) {
  return std::count_if(batch.chunks.begin(), batch.chunks.end(),
                       [](const SequenceChunk& c) { return c.want_logits; });
}

}  // namespace

absl::Status CudaRunnerImpl::CheckBatch(const BatchInput& batch, const SampleInputs* sample,
                                        bool pending_allowed) const {
  const int64_t s = static_cast<int64_t>(batch.chunks.size());
  if (s == 0 || s > plan_.max_num_seqs) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda runner: ", s, " chunks; the plan takes 1 to ", plan_.max_num_seqs));
  }
  int64_t tokens = 0;
  for (int32_t i = 0; i < s; ++i) {
    RETURN_IF_ERROR(
        CheckChunk(batch.chunks[i], i, plan_, kv_layout_, config_.vocab_size, pending_allowed));
    tokens += static_cast<int64_t>(batch.chunks[i].token_ids.size());
  }
  if (tokens > plan_.max_batched_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda runner: ", tokens, " tokens in a step; the plan takes ", plan_.max_batched_tokens));
  }
  if (sample != nullptr) {
    if (batch.all_logits) {
      return absl::InvalidArgumentError("cuda runner: ForwardSample with all_logits");
    }
    RETURN_IF_ERROR(CheckSampleRows(*sample, RowsWantingLogits(batch), plan_.max_context));
  }
  return absl::OkStatus();
}

StepShape CudaRunnerImpl::ShapeStep(const BatchInput& batch, const SampleInputs* sample) const {
  StepShape shape;
  shape.seqs = static_cast<int32_t>(batch.chunks.size());
  bool decode = true;
  for (const SequenceChunk& c : batch.chunks) {
    shape.tokens += static_cast<int32_t>(c.token_ids.size());
    decode = decode && c.token_ids.size() == 1;
  }
  shape.decode = decode;
  shape.all_logits = batch.all_logits;
  shape.rows = batch.all_logits ? 0 : static_cast<int32_t>(RowsWantingLogits(batch));
  shape.rows_are_tokens = batch.all_logits || (decode && shape.rows == shape.seqs);
  shape.sample = sample != nullptr;
  shape.has_history = sample != nullptr && !sample->histories.empty();
  shape.graph = options_.use_cuda_graphs && decode && !batch.all_logits &&
                shape.rows == shape.seqs && shape.seqs <= buckets_.back();
  int64_t history = 0;
  if (shape.has_history) {
    for (const auto& h : sample->histories) history += static_cast<int64_t>(h.size());
  }
  if (shape.graph) {
    const int32_t bucket = *std::lower_bound(buckets_.begin(), buckets_.end(), shape.seqs);
    shape.tokens = shape.seqs = shape.rows = bucket;
    history = static_cast<int64_t>(bucket) * plan_.max_context;  // fixed layout per bucket
  }
  shape.splits =
      decode ? PagedAttentionDecodeSplits(shape.seqs, static_cast<int32_t>(config_.num_kv_heads),
                                          plan_.max_context, ctx_->num_sms())
             : 1;
  shape.layout = MakeStepLayout(shape.tokens, shape.seqs, std::max(shape.rows, 1),
                                plan_.max_blocks_per_seq, history);
  return shape;
}

int64_t CudaRunnerImpl::PackStep(const BatchInput& batch, const SampleInputs* sample,
                                 const StepShape& shape, char* base,
                                 std::span<const int32_t> pending_rows) const {
  const StepLayout& l = shape.layout;
  auto at = [base](int64_t offset) { return reinterpret_cast<int32_t*>(base + offset); };
  int32_t* tokens = at(l.token_ids);
  int32_t* positions = at(l.positions);
  int32_t* slots = at(l.slots);
  int32_t* cu = at(l.cu_query_lens);
  int32_t* start = at(l.start_pos);
  int32_t* rows = at(l.logit_rows);
  const int32_t real_seqs = static_cast<int32_t>(batch.chunks.size());
  int32_t t = 0, r = 0;
  for (int32_t s = 0; s < real_seqs; ++s) {
    const SequenceChunk& c = batch.chunks[s];
    int32_t* table = at(l.block_tables) + static_cast<int64_t>(s) * l.max_blocks_per_seq;
    std::copy(c.block_table.begin(), c.block_table.end(), table);
    cu[s] = t;
    start[s] = c.start_pos;
    for (size_t i = 0; i < c.token_ids.size(); ++i, ++t) {
      tokens[t] = c.token_ids[i];
      positions[t] = c.start_pos + static_cast<int32_t>(i);
      slots[t] = KvSlot(kv_layout_, table, positions[t]);
    }
    // A pending last token: -(the previous step's row + 1) (runner_kernels.h).
    if (!pending_rows.empty() && pending_rows[s] >= 0) tokens[t - 1] = -pending_rows[s] - 1;
    if (c.want_logits && !batch.all_logits) rows[r++] = t - 1;
  }
  for (int32_t s = real_seqs; s < shape.seqs; ++s, ++t) {  // graph padding: no KV writes
    at(l.block_tables)[static_cast<int64_t>(s) * l.max_blocks_per_seq] = 0;
    cu[s] = t;
    start[s] = 0;
    tokens[t] = 0;
    positions[t] = 0;
    slots[t] = -1;
    rows[r++] = t;
  }
  cu[shape.seqs] = t;
  if (shape.rows_are_tokens) {
    for (int32_t i = 0; i < shape.rows; ++i) rows[i] = i;
  }
  if (!shape.sample) return l.UsedBytes(0);
  auto* params = reinterpret_cast<SampleRowParams*>(base + l.sample_rows);
  std::copy(sample->rows.begin(), sample->rows.end(), params);
  std::fill(params + sample->rows.size(), params + shape.rows, SampleRowParams{});
  int64_t used = 0;
  if (shape.has_history) {
    int32_t* cu_hist = at(l.cu_history);
    cu_hist[0] = 0;
    for (int32_t i = 0; i < shape.rows; ++i) {
      if (i < static_cast<int32_t>(sample->histories.size())) {
        const auto& h = sample->histories[i];
        std::copy(h.begin(), h.end(), at(l.history) + used);
        used += static_cast<int64_t>(h.size());
      }
      cu_hist[i + 1] = static_cast<int32_t>(used);
    }
  }
  return l.UsedBytes(used);
}

}  // namespace onecard::engine
