// ModelRunner: the backend interface. A backend (cpu, cuda) owns the weights
// and the paged KV pools and runs one forward pass over a batch of sequence
// chunks (continuous batching with chunked prefill: a chunk is any run of a
// sequence's tokens, a whole prompt, part of one, or one decode token).
// The scheduler decides which chunks run and which blocks are swapped;
// BlockManager and SwapSpace own the block ids.
#ifndef ONECARD_ENGINE_RUNTIME_MODEL_RUNNER_H_
#define ONECARD_ENGINE_RUNTIME_MODEL_RUNNER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/common/pending_token.h"
#include "engine/kernels/sample.h"
#include "engine/kv_cache/kv_layout.h"
#include "engine/kv_cache/swap_space.h"
#include "engine/model/model_config.h"

namespace onecard::engine {

struct KvScales;  // engine/runtime/kv_scales.h

// How a backend stores the KV cache. kAuto: its own (cpu fp32, cuda BF16).
// kBf16 and kFp8E4m3: values rounded to BF16, or to FP8 E4M3 as they are
// written, E4M3 with a scale a layer and kv head for K and for V
// (engine/runtime/kv_scales.h: the checkpoint's k_scale / v_scale, else
// calibrated when the runner is created; engine/common/fp8.h: round to
// nearest even, saturating at +-448 * scale); the cpu backend keeps them in
// fp32 storage (the reference for the accuracy of those formats).
enum class KvCacheDtype : uint8_t { kAuto, kBf16, kFp8E4m3 };

inline const char* KvCacheDtypeName(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kAuto:
      return "auto";
    case KvCacheDtype::kBf16:
      return "bf16";
    case KvCacheDtype::kFp8E4m3:
      return "fp8";
  }
  return "?";
}

// "auto", "bf16", "fp8" (InvalidArgument naming `field` otherwise).
inline absl::StatusOr<KvCacheDtype> ParseKvCacheDtype(absl::string_view text,
                                                      absl::string_view field) {
  for (KvCacheDtype d : {KvCacheDtype::kAuto, KvCacheDtype::kBf16, KvCacheDtype::kFp8E4m3}) {
    if (text == KvCacheDtypeName(d)) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": unknown KV cache dtype \"", text, "\"; supported: auto, bf16, fp8"));
}

// How the cpu backend holds a model's weights. kNative: each linear's
// weights as the file stores them when the cpu kernels multiply that format
// (GGUF Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K blocks, with 8-bit activations:
// engine/runtime/cpu/cpu_linear.h), in fp32 otherwise, so that a quantized
// file is held at its own size. kF32: every weight dequantized to fp32 (the
// correctness oracle, compared with Hugging Face's fp32 runs).
enum class CpuWeightFormat : uint8_t { kNative, kF32 };

inline const char* CpuWeightFormatName(CpuWeightFormat format) {
  switch (format) {
    case CpuWeightFormat::kNative:
      return "native";
    case CpuWeightFormat::kF32:
      return "f32";
  }
  return "?";
}

// "native", "f32" (InvalidArgument naming `field` otherwise).
inline absl::StatusOr<CpuWeightFormat> ParseCpuWeightFormat(absl::string_view text,
                                                            absl::string_view field) {
  for (CpuWeightFormat f : {CpuWeightFormat::kNative, CpuWeightFormat::kF32}) {
    if (text == CpuWeightFormatName(f)) return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": unknown cpu weight format \"", text, "\"; supported: native, f32"));
}

// How the cuda backend multiplies FP8 weights in steps of more rows than its
// GEMV takes (decode at batch 1-4 always reads the codes against BF16
// activations). kW8A8: the activations are quantized per token to E4M3
// (scale amax / 448) for the FP8 tensor cores (engine/kernels/fp8_gemm.h);
// kW8A16: the weight is dequantized to BF16 for cuBLAS (the weights' exact
// values against BF16 activations, at the cost of writing and reading the
// BF16 copy). Weights with 128 x 128 block scales take kW8A16 either way.
enum class Fp8Compute : uint8_t { kW8A8, kW8A16 };

inline const char* Fp8ComputeName(Fp8Compute compute) {
  return compute == Fp8Compute::kW8A8 ? "w8a8" : "w8a16";
}

// "w8a8", "w8a16" (InvalidArgument naming `field` otherwise).
inline absl::StatusOr<Fp8Compute> ParseFp8Compute(absl::string_view text, absl::string_view field) {
  for (Fp8Compute c : {Fp8Compute::kW8A8, Fp8Compute::kW8A16}) {
    if (text == Fp8ComputeName(c)) return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": unknown fp8 compute \"", text, "\"; supported: w8a8, w8a16"));
}

struct SequenceChunk {
  int64_t seq_id = 0;
  std::span<const int32_t> token_ids;    // [num_chunk_tokens]
  int32_t start_pos = 0;                 // position of token_ids[0]
  std::span<const int32_t> block_table;  // [ceil((start_pos+n)/block_size)]
  // Logits are produced for the chunk's last token when true (a prefill chunk
  // that does not end the prompt needs none).
  bool want_logits = true;
};

struct BatchInput {
  std::vector<SequenceChunk> chunks;
  // When true, logits for every token of every chunk (golden tests);
  // otherwise one row per chunk with want_logits, in chunk order.
  bool all_logits = false;
};

// The host memory a runner holds for KV swap (AllocateSwapSpace).
struct KvSwapSpace {
  int32_t num_blocks = 0;   // host blocks, each the shape of a device block
  int64_t block_bytes = 0;  // bytes a block moves: every layer's K and V
};

// What a runner tells apart in its last Forward or ForwardSample call
// (ModelRunner::last_step_times).
struct RunnerStepTimes {
  // The call's host work outside its wait for the device: checks, packing,
  // copies and launches enqueued, the results read back.
  absl::Duration host;
  // The device's idle time from the end of the previous call's work to the
  // start of this call's (device events); absent for a call with no
  // previous one.
  std::optional<absl::Duration> device_gap;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelConfig& config() const = 0;
  virtual const KvLayout& kv_layout() const = 0;  // num_blocks is the pool size
  // Writes the chunks' K/V into their blocks and returns logits
  // [num_rows, vocab_size] row-major in *logits (resized).
  virtual absl::Status Forward(const BatchInput& batch, std::vector<float>* logits) = 0;
  virtual std::string name() const = 0;  // "cpu", "cuda"
  // The FP8 KV cache's scales (kv_scales.h) with kv_cache_dtype fp8, owned
  // by the runner; null otherwise.
  virtual const KvScales* kv_scales() const { return nullptr; }
  // The host's and the device's shares of the last Forward or ForwardSample
  // call, where the runner can tell them apart (the CUDA runner); nullopt
  // where the whole call is the model's work (the cpu runner).
  virtual std::optional<RunnerStepTimes> last_step_times() const { return std::nullopt; }

  // Runners that sample on the device (the CUDA runner) return true and
  // implement ForwardSample: Forward, then one token per logits row, chosen
  // by the rules of engine/kernels/sample.h with rows[i] and the penalty
  // history histories[i] (histories empty: no penalties), so that a step
  // moves token ids instead of [rows, vocab] logits to the host.
  virtual bool SamplesOnDevice() const { return false; }
  virtual absl::Status ForwardSample(const BatchInput& batch, std::span<const SampleRowParams> rows,
                                     std::span<const std::span<const int32_t>> histories,
                                     std::vector<int32_t>* tokens) {
    (void)batch, (void)rows, (void)histories, (void)tokens;
    return absl::UnimplementedError(name() + " runner does not sample on the device");
  }

  // Look-ahead (EngineOptions::async_scheduling). LaunchSample starts a
  // ForwardSample step without penalty histories and may return before its
  // tokens are known; WaitSample answers the tokens of the oldest launched
  // step not waited for yet (one a logits row, in chunk order), or that
  // step's error. An error from LaunchSample launched nothing. The engine launches step N+1 and
  // then waits for step N, so at most two launched steps are unwaited; Forward and ForwardSample
  // are called only with none. A chunk's last token may be kPendingToken
  // (engine/common/pending_token.h) when the previous launched step had a
  // logits row for the same sequence: it stands for the token that row
  // samples. Swaps between launches keep the order of the calls (SwapOut's
  // copies read what the launched steps wrote). Launching a step whose
  // pending token has no such row is InvalidArgument naming the sequence.
  // The default, for runners whose calls block anyway: LaunchSample runs
  // ForwardSample at once with the pending tokens filled in from the
  // previous launch's result, and WaitSample hands its result over.
  virtual absl::Status LaunchSample(const BatchInput& batch,
                                    std::span<const SampleRowParams> rows) {
    if (launches_.size() >= 2) {
      return absl::FailedPreconditionError("LaunchSample: two launched steps are not waited for");
    }
    absl::StatusOr<std::vector<int32_t>> pending = PendingRows(
        batch, launches_.empty() ? std::span<const int64_t>() : launches_.back().seq_ids);
    if (!pending.ok()) return pending.status();
    // The chunks with a pending token, copied with the token filled in.
    BatchInput resolved = batch;
    std::vector<std::vector<int32_t>> storage;
    for (size_t i = 0; i < resolved.chunks.size(); ++i) {
      if ((*pending)[i] < 0) continue;
      SequenceChunk& chunk = resolved.chunks[i];
      storage.emplace_back(chunk.token_ids.begin(), chunk.token_ids.end());
      storage.back().back() = launches_.back().tokens[static_cast<size_t>((*pending)[i])];
      chunk.token_ids = storage.back();
    }
    Launch launch;
    const absl::Status run = ForwardSample(resolved, rows, {}, &launch.tokens);
    if (!run.ok()) return run;  // nothing launched
    for (const SequenceChunk& chunk : batch.chunks) {
      if (chunk.want_logits) launch.seq_ids.push_back(chunk.seq_id);
    }
    launches_.push_back(std::move(launch));
    return absl::OkStatus();
  }
  virtual absl::Status WaitSample(std::vector<int32_t>* tokens) {
    if (launches_.empty()) return absl::FailedPreconditionError("WaitSample: no launched step");
    *tokens = std::move(launches_.front().tokens);
    launches_.pop_front();
    return absl::OkStatus();
  }

  // For each chunk of `batch`: the index in previous_seqs (the logits rows'
  // sequences of the previous launched step) of the chunk's sequence where
  // its last token is kPendingToken, else -1. InvalidArgument naming the
  // sequence when a pending token is not its chunk's last or its sequence
  // had no row.
  static absl::StatusOr<std::vector<int32_t>> PendingRows(const BatchInput& batch,
                                                          std::span<const int64_t> previous_seqs) {
    std::vector<int32_t> rows(batch.chunks.size(), -1);
    std::vector<std::pair<int64_t, int32_t>> row_of;  // (sequence, row), sorted at first use
    for (size_t i = 0; i < batch.chunks.size(); ++i) {
      const SequenceChunk& chunk = batch.chunks[i];
      const auto pending = std::find(chunk.token_ids.begin(), chunk.token_ids.end(), kPendingToken);
      if (pending == chunk.token_ids.end()) continue;
      if (pending + 1 != chunk.token_ids.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", chunk.seq_id, ": a pending token that is not its chunk's last"));
      }
      if (row_of.empty()) {
        for (size_t r = 0; r < previous_seqs.size(); ++r) {
          row_of.emplace_back(previous_seqs[r], static_cast<int32_t>(r));
        }
        std::sort(row_of.begin(), row_of.end());
      }
      const auto row =
          std::lower_bound(row_of.begin(), row_of.end(), std::make_pair(chunk.seq_id, int32_t{0}));
      if (row == row_of.end() || row->first != chunk.seq_id) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", chunk.seq_id,
                         ": a pending token without a row in the previous launched step"));
      }
      rows[i] = row->second;
    }
    return rows;
  }

  // KV swap (engine/scheduler/scheduler.h: "Preemption", "Swap ordering").
  // AllocateSwapSpace, called at most once, holds as many host blocks as
  // `bytes` (> 0) has room for (pinned memory on cuda), or ResourceExhausted
  // when the host has not that much memory available. SwapOut copies each
  // pair's device block to its host block, SwapIn each host block to its
  // device block; the copies of one call are independent. Whatever the
  // runner overlaps, it keeps the contract's order: the copies of a SwapOut
  // complete before those of a later SwapIn write, and both before a later
  // Forward touches any block. Runners without swap: Unimplemented.
  virtual absl::StatusOr<KvSwapSpace> AllocateSwapSpace(int64_t bytes) {
    (void)bytes;
    return absl::UnimplementedError(name() + " runner does not swap KV blocks");
  }
  virtual absl::Status SwapOut(std::span<const KvBlockCopy> copies) {
    (void)copies;
    return absl::UnimplementedError(name() + " runner does not swap KV blocks");
  }
  virtual absl::Status SwapIn(std::span<const KvBlockCopy> copies) {
    (void)copies;
    return absl::UnimplementedError(name() + " runner does not swap KV blocks");
  }

 private:
  // The default LaunchSample's results, oldest first.
  struct Launch {
    std::vector<int32_t> tokens;
    std::vector<int64_t> seq_ids;  // of the logits rows, in order
  };
  std::deque<Launch> launches_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_MODEL_RUNNER_H_
