// The kernel sequence of one CUDA step (see cuda_model_runner.h): everything
// here only enqueues on the runner's stream, reading the step's metadata from
// fixed device addresses, so that a decode bucket can be captured as a graph.
// A layer's projections go through Project (cuda_projection.cc).
// Tested by tests/gpu/cuda_model_runner_test.cc.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/progress.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/blas_gemm.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/embedding.h"
#include "engine/kernels/gemv.h"
#include "engine/kernels/paged_attention_split.h"
#include "engine/kernels/rms_norm.h"
#include "engine/kernels/rope_kv_write.h"
#include "engine/kernels/sample.h"
#include "engine/runtime/cuda/cuda_runner_impl.h"
#include "engine/runtime/cuda/runner_kernels.h"

namespace onecard::engine {
namespace {

int32_t* MetaInts(char* meta, int64_t offset) { return reinterpret_cast<int32_t*>(meta + offset); }

}  // namespace

absl::Status CudaRunnerImpl::TuneGemms() {
  if (!options_.tune_gemms) return absl::OkStatus();
  ASSIGN_OR_RETURN(tuner_, BlasTuner::Create(buf_.cublas, plan_.workspace.cublas, options_.tuner));
  const std::string loaded = LoadTuningCache();
  // The BF16 weights of each product (4-bit ones run Int4Gemm at these
  // sizes); a product with none is not tuned.
  std::vector<const void*> qkv, o, gate_up, down;
  for (const CudaLayerWeights& w : weights_.layers) {
    const std::pair<Projection, std::vector<const void*>*> lists[] = {
        {Projection::kQkv, &qkv},
        {Projection::kO, &o},
        {Projection::kGateUp, &gate_up},
        {Projection::kDown, &down}};
    for (const auto& [p, list] : lists) {
      if (w[p].spec.format == WeightFormat::kBf16) list->push_back(w[p].data);
    }
  }
  const std::vector<const void*> lm_head = {weights_.lm_head};
  const std::pair<Product, const std::vector<const void*>*> products[] = {
      {Product::kQkv, &qkv},
      {Product::kO, &o},
      {Product::kGateUp, &gate_up},
      {Product::kDown, &down},
      {Product::kLmHead, &lm_head}};
  const auto start = std::chrono::steady_clock::now();
  // The products of the decode buckets that EnqueueLayer / EnqueueLogits run
  // through cuBLAS (inputs and outputs are the step buffers: garbage now,
  // rewritten by every step).
  std::string split_summary;
  const auto tuned = [&](int32_t m) { return !UseGemv(m) && m <= options_.max_batched_tokens; };
  Progress progress("tuning cuBLAS products", std::ranges::count_if(buckets_, tuned),
                    "batch sizes");
  for (const int32_t m : buckets_) {
    if (!tuned(m)) continue;
    absl::Cleanup counted = [&] { progress.Add(); };
    for (const auto& [product, weights] : products) {
      if (weights->empty()) continue;
      RETURN_IF_ERROR(
          tuner_->Tune(ctx_->cublas(), ProductParams(product, m), *weights, ctx_->stream()));
    }
    // The residual-stream products may instead write split-K partials that
    // the next RmsNorm folds in (more blocks for 4096-wide outputs, and no
    // reduction kernel): kept where the pair, timed over every layer, wins.
    const int32_t forced = options_.gemm_splits;
    if (forced == 1 || m > options_.max_num_seqs) continue;
    for (const auto& [product, weights] : {products[1], products[3]}) {
      if (weights->empty()) continue;
      const BlasGemmParams whole = ProductParams(product, m);
      const std::optional<int32_t> cached = forced == 0 ? tuner_->Note(whole) : std::nullopt;
      int32_t best = 1;
      std::string how;  // the summary's account of the choice
      if (cached.has_value() && *cached >= 1 && *cached <= kMaxGemmSplits &&
          BlasGemmSplitsFit(whole.k, *cached)) {
        best = *cached;
        how = "cached";
      } else {
        ASSIGN_OR_RETURN(double best_us, TimeResidualProduct(product, m, 1, *weights));
        const double whole_us = best_us;
        for (int32_t splits = 2; splits <= kMaxGemmSplits; ++splits) {
          if (!BlasGemmSplitsFit(whole.k, splits)) continue;
          if (forced > 1 && splits != forced) continue;
          RETURN_IF_ERROR(tuner_->Tune(ctx_->cublas(), ResidualProductParams(product, m, splits),
                                       *weights, ctx_->stream()));
          ASSIGN_OR_RETURN(const double us, TimeResidualProduct(product, m, splits, *weights));
          if (us >= best_us && forced == 0) break;  // more partials will not turn it round
          best_us = us, best = splits;
        }
        if (forced == 0) tuner_->SetNote(whole, best);
        how = absl::StrFormat("%.1f us with its norm; whole %.1f us", best_us, whole_us);
      }
      if (best > 1) {  // Tune does nothing for a form timed above or loaded from the cache
        RETURN_IF_ERROR(tuner_->Tune(ctx_->cublas(), ResidualProductParams(product, m, best),
                                     *weights, ctx_->stream()));
        gemm_splits_[{product, m}] = best;
      }
      absl::StrAppend(
          &split_summary,
          absl::StrFormat("  %s m=%d: %s (%s)\n", product == Product::kO ? "o" : "down", m,
                          best > 1 ? absl::StrCat(best, " partials") : "whole", how));
    }
  }
  progress.Done();
  SaveTuningCache();
  tuning_summary_ = absl::StrCat(
      loaded, tuner_->Summary(),
      split_summary.empty() ? "" : "o / down as split-K partials folded by the norm:\n",
      split_summary);
  if (options_.print_plan) {
    std::fprintf(stderr, "cuBLAS products tuned in %.2f s:\n%s",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                 tuning_summary_.c_str());
  }
  return absl::OkStatus();
}

absl::StatusOr<double> CudaRunnerImpl::TimeResidualProduct(Product product, int32_t m,
                                                           int32_t splits,
                                                           std::span<const void* const> weights) {
  cudaStream_t stream = ctx_->stream();
  auto pass = [&]() -> absl::Status {
    for (size_t i = 0; i < weights.size(); ++i) {
      BlasGemmParams p = ResidualProductParams(product, m, splits);
      p.w = weights[i];
      RETURN_IF_ERROR(BlasGemm(ctx_->cublas(), p, stream, tuner_.get()));
      RETURN_IF_ERROR(
          NormResidual(weights_.layers[i % weights_.layers.size()].ffn_norm, m, splits));
    }
    return absl::OkStatus();
  };
  constexpr int kPasses = 3;
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  absl::StatusOr<double> us = [&]() -> absl::StatusOr<double> {
    RETURN_IF_ERROR(pass());  // warm-up
    CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
    for (int i = 0; i < kPasses; ++i) RETURN_IF_ERROR(pass());
    CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
    return 1e3 * ms / (kPasses * static_cast<double>(weights.size()));
  }();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return us;
}

int32_t CudaRunnerImpl::GemmSplits(Product product, int32_t rows) const {
  const auto it = gemm_splits_.find({product, rows});
  return it == gemm_splits_.end() ? 1 : it->second;
}

BlasGemmParams CudaRunnerImpl::ResidualProductParams(Product product, int32_t rows,
                                                     int32_t splits) const {
  BlasGemmParams p = ProductParams(product, rows);
  if (splits > 1) {
    p.y = buf_.gemm_partials;
    p.y_dtype = DType::kF32;
    p.beta = 0.0f;
    p.splits = splits;
  }
  return p;
}

absl::Status CudaRunnerImpl::NormResidual(const void* weight, int32_t tokens, int32_t partials) {
  if (partials > 1) {
    return FusedAddRmsNorm({.dtype = DType::kBF16,
                            .residual = buf_.residual,
                            .weight = weight,
                            .out = buf_.normed,
                            .num_tokens = tokens,
                            .hidden = config_.hidden_size,
                            .eps = config_.rms_norm_eps,
                            .partials = buf_.gemm_partials,
                            .num_partials = partials},
                           ctx_->stream());
  }
  return RmsNorm({.dtype = DType::kBF16,
                  .x = buf_.residual,
                  .weight = weight,
                  .out = buf_.normed,
                  .num_tokens = tokens,
                  .hidden = config_.hidden_size,
                  .eps = config_.rms_norm_eps},
                 ctx_->stream());
}

BlasGemmParams CudaRunnerImpl::ProductParams(Product product, int32_t rows) const {
  const int64_t h = config_.hidden_size, inter = config_.intermediate_size;
  const int64_t q_width = config_.num_heads * config_.head_dim;
  const int64_t qkv_width = q_width + 2 * config_.num_kv_heads * config_.head_dim;
  switch (product) {
    case Product::kQkv:
      return {.x = buf_.normed, .y = buf_.qkv, .m = rows, .n = qkv_width, .k = h};
    case Product::kO:  // added to the residual stream
      return {.x = buf_.attn_out, .y = buf_.residual, .m = rows, .n = h, .k = q_width, .beta = 1};
    case Product::kGateUp:
      return {.x = buf_.normed, .y = buf_.gate_up, .m = rows, .n = 2 * inter, .k = h};
    case Product::kDown:  // added to the residual stream
      return {.x = buf_.act, .y = buf_.residual, .m = rows, .n = h, .k = inter, .beta = 1};
    case Product::kLmHead:
      return {.y_dtype = DType::kF32,
              .x = buf_.normed,
              .y = buf_.logits,
              .m = rows,
              .n = config_.vocab_size,
              .k = h};
  }
  return {};
}

bool CudaRunnerImpl::UseGemv(int32_t tokens) const {
  const int64_t limit = kGemvMaxRowValues;
  const int64_t widest = std::max(
      {config_.hidden_size, config_.intermediate_size, config_.num_heads * config_.head_dim});
  return options_.use_gemv && tokens <= kGemvMaxRows && tokens * widest <= limit;
}

absl::Status CudaRunnerImpl::EnqueueStep(const StepShape& shape) {
  cudaStream_t stream = ctx_->stream();
  EmbeddingParams embed;
  embed.dtype = DType::kBF16;
  embed.token_ids = MetaInts(buf_.meta, shape.layout.token_ids);
  embed.table = weights_.embedding;
  embed.out = buf_.residual;
  embed.num_tokens = shape.tokens;
  embed.vocab_size = config_.vocab_size;
  embed.hidden = config_.hidden_size;
  RETURN_IF_ERROR(Embedding(embed, stream));
  const bool cpu = CpuComputes(shape);
  if (weight_stream_ != nullptr) {
    RETURN_IF_ERROR(weight_stream_->BeginStep(stream, cpu, options_.time_steps && !shape.graph));
  }
  int32_t partials = 1;
  auto span = cpu_spans_.begin();
  for (int layer = 0; layer < config_.num_layers; ++layer) {
    const bool cpu_layer = cpu_layers_ != nullptr && cpu_layers_->Holds(layer);
    if (cpu_layer && cpu) {  // the span from this layer on, on the CPU
      while ((*span)->first != layer) ++span;
      RETURN_IF_ERROR(EnqueueCpuSpan(**span, shape, &partials));
      layer = static_cast<int>((*span)->last);
      continue;
    }
    if (weight_stream_ != nullptr) RETURN_IF_ERROR(weight_stream_->BeforeLayer(layer, stream));
    RETURN_IF_ERROR(EnqueueLayer(layer, shape, &partials));
    if (weight_stream_ != nullptr) RETURN_IF_ERROR(weight_stream_->AfterLayer(layer, stream));
    if (cpu_layer) RETURN_IF_ERROR(EnqueueKvMirror(layer, shape));
  }
  if (shape.all_logits || shape.rows == 0) return absl::OkStatus();
  const void* x = buf_.residual;
  if (!shape.rows_are_tokens) {
    RETURN_IF_ERROR(GatherRowsBf16(buf_.residual, MetaInts(buf_.meta, shape.layout.logit_rows),
                                   buf_.rows, shape.rows, config_.hidden_size, stream));
    x = buf_.rows;
  }
  RETURN_IF_ERROR(EnqueueLogits(shape, x, shape.rows));
  if (!shape.sample) return absl::OkStatus();
  SampleParams sp;
  sp.logits = buf_.logits;
  sp.rows = reinterpret_cast<const SampleRowParams*>(buf_.meta + shape.layout.sample_rows);
  if (shape.has_history) {
    sp.history = MetaInts(buf_.meta, shape.layout.history);
    sp.cu_history = MetaInts(buf_.meta, shape.layout.cu_history);
  }
  sp.out_tokens = buf_.out_tokens;
  sp.num_rows = shape.rows;
  sp.vocab_size = static_cast<int32_t>(config_.vocab_size);
  sp.workspace = buf_.sample;
  return Sample(sp, stream);
}

// Final norm and LM head of num_rows rows of x (BF16 [num_rows, hidden]) into
// buf_.logits (fp32).
absl::Status CudaRunnerImpl::EnqueueLogits(const StepShape& shape, const void* x,
                                           int32_t num_rows) {
  (void)shape;
  cudaStream_t stream = ctx_->stream();
  const int64_t h = config_.hidden_size;
  if (UseGemv(num_rows)) {
    GemvParams g;
    g.prologue = GemvPrologue::kRmsNorm;
    g.x = x;
    g.x_row_stride = h;
    g.norm_weight = weights_.final_norm;
    g.eps = config_.rms_norm_eps;
    g.w = weights_.lm_head;
    g.y = buf_.logits;
    g.y_dtype = DType::kF32;
    g.num_rows = num_rows;
    g.n = config_.vocab_size;
    g.k = h;
    return Gemv(g, stream);
  }
  RETURN_IF_ERROR(RmsNorm({.dtype = DType::kBF16,
                           .x = x,
                           .weight = weights_.final_norm,
                           .out = buf_.normed,
                           .num_tokens = num_rows,
                           .hidden = h,
                           .eps = config_.rms_norm_eps},
                          stream));
  BlasGemmParams logits = ProductParams(Product::kLmHead, num_rows);
  logits.w = weights_.lm_head;
  return BlasGemm(ctx_->cublas(), logits, stream, tuner_.get());
}

KvFp8Scales CudaRunnerImpl::LayerKvScales(int layer) const {
  if (kv_k_scale_ == nullptr || (!calibrating_ && kv_scales_.LayerBf16(layer))) return {};
  const int64_t at = int64_t{layer} * config_.num_kv_heads;
  return {kv_k_scale_ + at, kv_v_scale_ + at};
}

absl::Status CudaRunnerImpl::EnqueueLayer(int layer, const StepShape& shape, int32_t* partials) {
  cudaStream_t stream = ctx_->stream();
  const CudaLayerWeights& w = weights_.layers[layer];
  const int32_t t = shape.tokens;
  const int64_t qkv_width = ProjectionShape(config_, Projection::kQkv)[0];
  // The RMSNorms folded into the products (FoldsNorms): qkv's input from the
  // down before, gate_up's from o, and down's output for the next layer.
  const bool folds = FoldsNorms(layer, shape);
  const bool next_folds = folds && FoldsNorms(layer + 1, shape);
  RETURN_IF_ERROR(Project(Projection::kQkv, layer, t, *partials,
                          {.input = folds && FoldsNorms(layer - 1, shape)})
                      .status());
  RopeKvWriteParams rope;
  rope.qkv = buf_.qkv;
  rope.bias = w.bqkv;
  rope.k_cache = k_cache_[layer];
  rope.v_cache = v_cache_[layer];
  rope.layout = kv_layout_;
  rope.num_heads = static_cast<int32_t>(config_.num_heads);
  rope.positions = MetaInts(buf_.meta, shape.layout.positions);
  rope.slot_mapping = MetaInts(buf_.meta, shape.layout.slots);
  rope.inv_freq = buf_.inv_freq;
  rope.num_tokens = t;
  rope.fp8 = LayerKvScales(layer);
  // A decode step's RoPE and cache write run inside the attention kernel
  // (options_.fused_rope: after every projection, or for comparisons only
  // after a cuBLAS one, or never).
  const FusedRope mode = options_.fused_rope;
  const bool fuse_rope =
      shape.decode && (mode == FusedRope::kAll || (mode == FusedRope::kAfterCublas &&
                                                   ProjectsByLibrary(Projection::kQkv, layer, t)));
  if (!fuse_rope) RETURN_IF_ERROR(RopeKvWrite(rope, stream));
  if (calibrating_) RETURN_IF_ERROR(CalibrateLayer(layer, shape));
  PagedAttentionParams attn;
  attn.dtype = DType::kBF16;
  attn.q = buf_.qkv;
  attn.q_token_stride = qkv_width;
  attn.k_cache = k_cache_[layer];
  attn.v_cache = v_cache_[layer];
  attn.out = buf_.attn_out;
  attn.layout = kv_layout_;
  attn.num_heads = static_cast<int32_t>(config_.num_heads);
  attn.num_tokens = t;
  attn.num_seqs = shape.seqs;
  attn.cu_query_lens = MetaInts(buf_.meta, shape.layout.cu_query_lens);
  attn.start_pos = MetaInts(buf_.meta, shape.layout.start_pos);
  attn.block_tables = MetaInts(buf_.meta, shape.layout.block_tables);
  attn.max_blocks_per_seq = shape.layout.max_blocks_per_seq;
  attn.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  attn.kv_fp8 = rope.fp8;
  RETURN_IF_ERROR(
      PagedAttentionSplit(attn,
                          {.num_splits = shape.splits,
                           .workspace = buf_.attn_split,
                           .workspace_bytes = plan_.workspace.attn_split,
                           .rope = fuse_rope ? &rope : nullptr,
                           .prefetch = shape.decode ? OWeightsForL2(layer) : L2Prefetch{}},
                          stream));
  ASSIGN_OR_RETURN(const int32_t o_partials, Project(Projection::kO, layer, t, 1,
                                                     {.next_norm = folds ? w.ffn_norm : nullptr}));
  RETURN_IF_ERROR(Project(Projection::kGateUp, layer, t, o_partials, {.input = folds}).status());
  ASSIGN_OR_RETURN(
      *partials,
      Project(Projection::kDown, layer, t, 1,
              {.next_norm = next_folds ? weights_.layers[layer + 1].attn_norm : nullptr}));
  return absl::OkStatus();
}

}  // namespace onecard::engine
