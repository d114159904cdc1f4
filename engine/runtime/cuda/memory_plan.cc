// PlanMemory and the step layout (see memory_plan.h, step_layout.h).
// Tested by tests/gpu/memory_plan_test.cc.
#include "engine/runtime/cuda/memory_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/fp8_gemm.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/paged_attention_split.h"
#include "engine/kernels/sample.h"

namespace onecard::engine {
namespace {

int64_t Align(int64_t bytes, int64_t to) { return (bytes + to - 1) / to * to; }

double GiB(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kGiB); }

WorkspaceSizes Workspace(const MemoryPlanInput& in, int32_t max_context, const StepLayout& layout) {
  const ModelConfig& c = in.config;
  const int64_t t = in.max_batched_tokens;
  const int64_t s = in.max_num_seqs;
  WorkspaceSizes w;
  w.residual = Align(t * c.hidden_size * 2, 256);
  w.normed = w.residual;
  w.qkv = Align(t * (c.num_heads + 2 * c.num_kv_heads) * c.head_dim * 2, 256);
  w.attn_out = Align(t * c.num_heads * c.head_dim * 2, 256);
  w.gate_up = Align(t * 2 * c.intermediate_size * 2, 256);
  w.act = Align(t * c.intermediate_size * 2, 256);
  w.rows = Align(s * c.hidden_size * 2, 256);
  w.logits = Align(s * c.vocab_size * 4, 256);
  for (int32_t b = 1; b <= s; ++b) {  // every decode batch size the runner may see
    const int32_t splits = PagedAttentionDecodeSplits(b, static_cast<int32_t>(c.num_kv_heads),
                                                      max_context, in.num_sms);
    w.attn_split = std::max(w.attn_split,
                            PagedAttentionWorkspaceBytes(b, static_cast<int32_t>(c.num_heads),
                                                         static_cast<int32_t>(c.head_dim), splits));
  }
  w.attn_split = Align(w.attn_split, 256);
  w.gemm_partials = Align(kMaxGemmSplits * s * c.hidden_size * 4, 256);
  w.sample =
      Align(SampleWorkspaceBytes(static_cast<int32_t>(s), static_cast<int32_t>(c.vocab_size)), 256);
  w.out_tokens = Align(s * 4, 256);
  w.meta = Align(layout.size_bytes, 256);
  w.rope = Align(c.head_dim / 2 * 4, 256);
  w.cublas = in.cublas_workspace_bytes;
  if (in.kv_cache_dtype == KvCacheDtype::kFp8E4m3) {
    w.kv_scales = Align((2 * c.num_layers + 2) * c.num_kv_heads * 4, 256);
  }
  int64_t widest_int4 = 0, largest_quantized = 0, widest_act_order = 0;
  int64_t fp8_n = 0, fp8_k = 0;  // the widest row-scaled FP8 projection's
  for (const auto& layer : in.weights.layers) {
    for (int p = 0; p < kNumProjections; ++p) {
      if (layer[p].format == WeightFormat::kBf16) continue;
      const auto [n, k] = ProjectionShape(c, static_cast<Projection>(p));
      largest_quantized = std::max(largest_quantized, n * k);
      if (layer[p].format == WeightFormat::kFp8) {
        if (layer[p].fp8_scales == Fp8Scales::kRow) {
          fp8_n = std::max(fp8_n, n);
          fp8_k = std::max(fp8_k, k);
        }
        continue;
      }
      widest_int4 = std::max(widest_int4, n);
      if (layer[p].act_order) widest_act_order = std::max(widest_act_order, k);
    }
  }
  w.dequant = Align(largest_quantized * 2, 256);
  if (widest_int4 > 0) {
    w.int4_gemm = Align(Int4GemmWorkspaceBytes(widest_int4, in.num_sms), 256);
    w.int4_norm_fold = Align(int64_t{kInt4GemmFoldMaxRows} * c.hidden_size / 16 * 4, 256);
    w.int4_gather = Align(int64_t{kInt4GemmMaxRows} * widest_act_order * 2, 256);
  }
  if (fp8_n > 0) {
    w.fp8_gemm =
        Align(Fp8GemmWorkspaceBytes(std::min<int64_t>(t, kFp8GemmChunkRows), fp8_n, fp8_k), 256);
  }
  return w;
}

absl::Status CheckInput(const MemoryPlanInput& in) {
  RETURN_IF_ERROR(in.config.Validate());
  if (in.max_num_seqs < 1 || in.max_batched_tokens < in.max_num_seqs || in.kv_block_size < 1 ||
      in.budget_bytes <= 0 || in.max_context < 0 || in.num_kv_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory plan: need max_num_seqs >= 1 (", in.max_num_seqs,
        "), max_batched_tokens >= max_num_seqs (", in.max_batched_tokens, "), kv_block_size >= 1 (",
        in.kv_block_size, "), a positive budget (", in.budget_bytes, "), max_context >= 0 (",
        in.max_context, "), num_kv_blocks >= 0 (", in.num_kv_blocks, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

StepLayout MakeStepLayout(int32_t max_tokens, int32_t max_seqs, int32_t max_rows,
                          int32_t max_blocks_per_seq, int64_t max_history) {
  StepLayout l;
  l.max_tokens = max_tokens;
  l.max_seqs = max_seqs;
  l.max_rows = max_rows;
  l.max_blocks_per_seq = max_blocks_per_seq;
  l.max_history = max_history;
  int64_t at = 0;
  auto take = [&](int64_t bytes) {
    const int64_t offset = at;
    at = Align(at + bytes, 16);
    return offset;
  };
  l.token_ids = take(4LL * max_tokens);
  l.positions = take(4LL * max_tokens);
  l.slots = take(4LL * max_tokens);
  l.logit_rows = take(4LL * max_rows);
  l.cu_query_lens = take(4LL * (max_seqs + 1));
  l.start_pos = take(4LL * max_seqs);
  l.sample_rows = take(static_cast<int64_t>(sizeof(SampleRowParams)) * max_rows);
  l.cu_history = take(4LL * (max_rows + 1));
  l.block_tables = take(4LL * max_seqs * max_blocks_per_seq);
  l.history = take(4LL * max_history);
  l.size_bytes = at;
  return l;
}

int64_t WorkspaceSizes::Total() const {
  return residual + normed + qkv + attn_out + gate_up + act + rows + logits + attn_split +
         gemm_partials + sample + out_tokens + meta + rope + cublas + int4_gemm + int4_norm_fold +
         int4_gather + dequant + fp8_gemm + kv_scales;
}

int64_t MemoryPlan::total_bytes() const {
  return weight_bytes + workspace.Total() + reserve_bytes + kv_bytes();
}

namespace {

// Everything but the KV blocks and the checks.
absl::StatusOr<MemoryPlan> PlanParts(const MemoryPlanInput& input) {
  RETURN_IF_ERROR(CheckInput(input));
  MemoryPlanInput in = input;
  if (in.weights.layers.empty()) in.weights = ModelWeightsSpec::Uniform(in.config, {});
  const ModelConfig& c = in.config;
  MemoryPlan p;
  p.model = c.name;
  p.budget_bytes = in.budget_bytes;
  p.max_context =
      in.max_context > 0 ? in.max_context : static_cast<int32_t>(c.max_position_embeddings);
  p.kv_block_size = in.kv_block_size;
  p.max_blocks_per_seq = (p.max_context + in.kv_block_size - 1) / in.kv_block_size;
  p.max_num_seqs = in.max_num_seqs;
  p.max_batched_tokens = in.max_batched_tokens;
  p.step_layout =
      MakeStepLayout(in.max_batched_tokens, in.max_num_seqs, std::max(in.max_num_seqs, 1),
                     p.max_blocks_per_seq, static_cast<int64_t>(in.max_num_seqs) * p.max_context);
  ASSIGN_OR_RETURN(p.weights, CountWeightBytes(c, in.weights));
  p.weight_bytes = p.weights.total;
  if (in.device_weight_bytes > 0) {
    p.weight_bytes = in.device_weight_bytes;
    p.offloaded_bytes = in.offloaded_weight_bytes;
  }
  p.workspace = Workspace(in, p.max_context, p.step_layout);
  p.reserve_bytes = in.reserve_bytes;
  p.kv_cache_dtype = in.kv_cache_dtype;
  const int64_t kv_element_bytes = in.kv_cache_dtype == KvCacheDtype::kFp8E4m3 ? 1 : 2;
  p.kv_bytes_per_token = c.num_layers * 2 * c.num_kv_heads * c.head_dim * kv_element_bytes;
  p.kv_block_bytes = p.kv_bytes_per_token * in.kv_block_size;
  p.kv_pool_padding = 2 * c.num_layers * 256;
  return p;
}

}  // namespace

absl::StatusOr<int64_t> DeviceBytesForWeights(const MemoryPlanInput& input) {
  ASSIGN_OR_RETURN(const MemoryPlan p, PlanParts(input));
  const int64_t kv_blocks = input.num_kv_blocks > 0 ? input.num_kv_blocks : p.max_blocks_per_seq;
  const int64_t others =
      p.workspace.Total() + p.reserve_bytes + p.kv_pool_padding + kv_blocks * p.kv_block_bytes;
  if (others >= input.budget_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: --gpu-memory-budget of %.2f GiB leaves nothing for weights (workspace %.2f + reserve "
        "%.2f + KV of %d blocks %.2f GiB)",
        p.model, GiB(input.budget_bytes), GiB(p.workspace.Total()), GiB(p.reserve_bytes), kv_blocks,
        GiB(kv_blocks * p.kv_block_bytes + p.kv_pool_padding)));
  }
  return input.budget_bytes - others;
}

absl::StatusOr<MemoryPlan> PlanMemory(const MemoryPlanInput& in) {
  ASSIGN_OR_RETURN(MemoryPlan p, PlanParts(in));
  const ModelConfig& c = in.config;
  const int64_t fixed = p.weight_bytes + p.workspace.Total() + p.reserve_bytes + p.kv_pool_padding;
  const int64_t one_seq = static_cast<int64_t>(p.max_blocks_per_seq) * p.kv_block_bytes;
  if (fixed + one_seq > in.budget_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s needs %.2f GiB, budget %.2f GiB (weights %.2f (%s) + workspace %.2f + reserve "
        "%.2f + KV of one %d-token sequence %.2f)",
        c.name, GiB(fixed + one_seq), GiB(in.budget_bytes), GiB(p.weight_bytes),
        p.weights.ToString(), GiB(p.workspace.Total()), GiB(p.reserve_bytes), p.max_context,
        GiB(one_seq)));
  }
  const int64_t fit = (in.budget_bytes - fixed) / p.kv_block_bytes;
  p.num_kv_blocks = in.num_kv_blocks > 0 ? in.num_kv_blocks : fit;
  if (p.num_kv_blocks > fit || p.num_kv_blocks < p.max_blocks_per_seq) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %d KV blocks asked; the budget of %.2f GiB holds %d, one sequence needs %d", c.name,
        in.num_kv_blocks, GiB(in.budget_bytes), fit, p.max_blocks_per_seq));
  }
  return p;
}

std::string MemoryPlan::ToString() const {
  std::string formats;
  for (const auto& [format, bytes] : weights.by_format) {
    absl::StrAppend(&formats, absl::StrFormat("    %-19s %8.2f GiB\n", format, GiB(bytes)));
  }
  return absl::StrFormat(
      "memory plan for %s (budget %.2f GiB):\n"
      "  weights               %8.2f GiB%s\n"
      "%s"
      "  workspace             %8.2f GiB  (%d tokens a step, %d sequences; logits %.2f, "
      "activations %.2f, 4-bit GEMM %.2f, FP8 GEMM %.2f, dequantized %.2f)\n"
      "  reserve               %8.2f GiB  (CUDA context, cuBLAS, graphs)\n"
      "  KV cache              %8.2f GiB  (%s; %d blocks of %d tokens, %.1f KiB a token; "
      "%d tokens = %.1f full %d-token sequences)\n"
      "  total                 %8.2f GiB",
      model, GiB(budget_bytes), GiB(weight_bytes),
      offloaded_bytes > 0
          ? absl::StrFormat("  on the card; %.2f GiB of the model's %.2f in host memory",
                            GiB(offloaded_bytes), GiB(weights.total))
          : "",
      formats, GiB(workspace.Total()), max_batched_tokens, max_num_seqs, GiB(workspace.logits),
      GiB(workspace.residual + workspace.normed + workspace.qkv + workspace.attn_out +
          workspace.gate_up + workspace.act),
      GiB(workspace.int4_gemm + workspace.int4_norm_fold + workspace.int4_gather),
      GiB(workspace.fp8_gemm), GiB(workspace.dequant), GiB(reserve_bytes), GiB(kv_bytes()),
      kv_cache_dtype == KvCacheDtype::kFp8E4m3 ? "fp8 e4m3" : "bf16", num_kv_blocks, kv_block_size,
      static_cast<double>(kv_bytes_per_token) / 1024.0, num_kv_blocks * kv_block_size,
      static_cast<double>(num_kv_blocks) / max_blocks_per_seq, max_context, GiB(total_bytes()));
}

}  // namespace onecard::engine
