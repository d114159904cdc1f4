// A step's projections (see cuda_runner_impl.h, Project): one switch on the
// weight's format, then the row count picks the kernel.
//   BF16: up to 4 rows Gemv (norm prologue, SiLU·mul and residual epilogues
//         fused); more rows cuBLAS (RmsNorm first, SiluMul after, the
//         residual add as beta = 1 or split-K partials the next norm folds).
//   FP8:  up to 4 rows Gemv reading the codes (its fusions as for BF16);
//         more rows Fp8Gemm: per-token E4M3 activations (of the RMSNorm,
//         or for down of SiLU·mul, computed in the same pass) with the
//         SiLU·mul and residual epilogues fused (W8A8, row scales,
//         kFp8GemmChunkRows rows a call),
//         or with fp8_compute kW8A16 and for
//         block scales the weight dequantized to BF16 for the cuBLAS path.
//   int4: up to kInt4GemmMaxRows (256) rows RmsNorm, then Int4Gemm with the
//         SiLU·mul and residual epilogues fused (up to kInt4GemmFoldMaxRows
//         rows, with LaunchSettings::int4_fold_norm, the RMSNorm folded into
//         the residual product before and the normed one: FoldsNorms,
//         Int4NormFold); more rows dequantize the
//         weight to BF16 (Int4DequantizeBf16) and take the cuBLAS path.
//         Act order: Int4Gemm reads the input gathered by the weight's
//         column map (GatherColumns); the dequantization puts each column
//         back in its place, so cuBLAS reads the input as it is.
// Tested by tests/gpu/cuda_model_runner_test.cc, cuda_model_runner_int4_test.cc and
// cuda_model_runner_fp8_test.cc.
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/fp8_dequant.h"
#include "engine/kernels/fp8_gemm.h"
#include "engine/kernels/gather_columns.h"
#include "engine/kernels/gemv.h"
#include "engine/kernels/int4_dequant.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/launch_settings.h"
#include "engine/kernels/silu_mul.h"
#include "engine/runtime/cuda/cuda_runner_impl.h"

namespace onecard::engine {
namespace {

CudaRunnerImpl::Product ProductOf(Projection p) {
  switch (p) {
    case Projection::kQkv:
      return CudaRunnerImpl::Product::kQkv;
    case Projection::kO:
      return CudaRunnerImpl::Product::kO;
    case Projection::kGateUp:
      return CudaRunnerImpl::Product::kGateUp;
    case Projection::kDown:
      return CudaRunnerImpl::Product::kDown;
  }
  return CudaRunnerImpl::Product::kQkv;
}

bool NormedInput(Projection p) { return p == Projection::kQkv || p == Projection::kGateUp; }

}  // namespace

const void* CudaRunnerImpl::NormWeight(Projection p, int layer) const {
  const CudaLayerWeights& l = weights_.layers[layer];
  return p == Projection::kQkv ? l.attn_norm : l.ffn_norm;
}

L2Prefetch CudaRunnerImpl::OWeightsForL2(int layer) const {
  if (!GetLaunchSettings().prefetch_o_in_attention || weight_stream_ != nullptr) return {};
  const CudaWeight& w = weights_.layers[layer][Projection::kO];
  L2Prefetch p;
  switch (w.spec.format) {
    case WeightFormat::kBf16:
      p.range[0] = {w.data, w.n * w.k * 2};
      break;
    case WeightFormat::kInt4:
      p.range[0] = {w.data, Int4CodeBytes(w.n, w.k)};
      p.range[1] = {w.scales, Int4ScaleBytes(w.n, w.k, w.spec.group)};
      p.range[2] = {w.offsets, Int4OffsetBytes(w.n, w.k, w.spec.group, w.spec.offsets)};
      break;
    case WeightFormat::kFp8:
      p.range[0] = {w.data, w.n * w.k};  // the codes (the scales are a row's few bytes)
      break;
  }
  return 4 * p.Bytes() <= 3 * ctx_->l2_bytes() ? p : L2Prefetch{};
}

bool CudaRunnerImpl::ProjectsByLibrary(Projection p, int layer, int32_t t) const {
  const CudaWeight& w = weights_.layers[layer][p];
  return w.spec.format == WeightFormat::kInt4 ? t > kInt4GemmMaxRows : !UseGemv(t);
}

bool CudaRunnerImpl::FoldsNorms(int layer, const StepShape& shape) const {
  if (!GetLaunchSettings().int4_fold_norm || buf_.norm_sum_sq == nullptr ||
      shape.tokens > kInt4GemmFoldMaxRows || layer < 0 || layer >= config_.num_layers) {
    return false;
  }
  if (cpu_layers_ != nullptr && cpu_layers_->Holds(layer) && CpuComputes(shape)) return false;
  for (int p = 0; p < kNumProjections; ++p) {
    if (weights_.layers[layer][static_cast<Projection>(p)].spec.format != WeightFormat::kInt4) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<int32_t> CudaRunnerImpl::Project(Projection p, int layer, int32_t t,
                                                int32_t in_partials, const NormFold& fold) {
  const CudaWeight& w = weights_.layers[layer][p];
  switch (w.spec.format) {
    case WeightFormat::kBf16:
      return ProjectBf16(p, layer, t, in_partials, w.data, /*allow_splits=*/true);
    case WeightFormat::kInt4:
      return ProjectInt4(p, layer, t, in_partials, w, fold);
    case WeightFormat::kFp8:
      return ProjectFp8(p, layer, t, in_partials, w);
  }
  return absl::UnimplementedError(absl::StrCat("layer ", layer, ": weight format ", w.spec.Name(),
                                               " has no projection kernel"));
}

GemvParams CudaRunnerImpl::GemvFor(Projection p, int layer, int32_t t) const {
  const BlasGemmParams g = ProductParams(ProductOf(p), t);
  GemvParams v{.x = g.x, .x_row_stride = g.k, .y = g.y, .num_rows = t, .n = g.n, .k = g.k};
  if (NormedInput(p)) {
    v.prologue = GemvPrologue::kRmsNorm;
    v.x = buf_.residual;
    v.norm_weight = NormWeight(p, layer);
    v.eps = config_.rms_norm_eps;
  }
  if (p == Projection::kGateUp) {  // the activation straight out of the GEMV
    v.y = buf_.act;
    v.silu_mul_y = true;
    v.n = config_.intermediate_size;
  }
  v.add_to_y = p == Projection::kO || p == Projection::kDown;
  return v;
}

absl::StatusOr<int32_t> CudaRunnerImpl::ProjectBf16(Projection p, int layer, int32_t t,
                                                    int32_t in_partials, const void* weight,
                                                    bool allow_splits) {
  cudaStream_t stream = ctx_->stream();
  const Product product = ProductOf(p);
  const BlasGemmParams g = ProductParams(product, t);
  if (UseGemv(t)) {
    GemvParams v = GemvFor(p, layer, t);
    v.w = weight;
    RETURN_IF_ERROR(Gemv(v, stream));
    return 1;
  }
  if (NormedInput(p)) {
    RETURN_IF_ERROR(NormResidual(NormWeight(p, layer), t, in_partials));
    BlasGemmParams b = g;
    b.w = weight;
    RETURN_IF_ERROR(BlasGemm(ctx_->cublas(), b, stream, tuner_.get()));
    if (p == Projection::kQkv) return 1;
    RETURN_IF_ERROR(SiluMul({.dtype = DType::kBF16,
                             .gate_up = buf_.gate_up,
                             .out = buf_.act,
                             .num_tokens = t,
                             .inter = config_.intermediate_size},
                            stream));
    return 1;
  }
  // o and down add into the residual stream, whole or as split-K partials;
  // the last layer's down stays whole (the logits read the stream as it is).
  const bool last_down = p == Projection::kDown && layer + 1 >= config_.num_layers;
  const int32_t splits = allow_splits && !last_down ? GemmSplits(product, t) : 1;
  BlasGemmParams b = ResidualProductParams(product, t, splits);
  b.w = weight;
  RETURN_IF_ERROR(BlasGemm(ctx_->cublas(), b, stream, tuner_.get()));
  return splits;
}

absl::StatusOr<int32_t> CudaRunnerImpl::ProjectInt4(Projection p, int layer, int32_t t,
                                                    int32_t in_partials, const CudaWeight& w,
                                                    const NormFold& fold) {
  cudaStream_t stream = ctx_->stream();
  if (t > kInt4GemmMaxRows) {  // prefill-sized: BF16 for cuBLAS
    RETURN_IF_ERROR(Int4DequantizeBf16({.w = w.Int4(),
                                        .out = buf_.dequant,
                                        .gate_up = p == Projection::kGateUp,
                                        .columns = w.columns},
                                       stream));
    return ProjectBf16(p, layer, t, in_partials, buf_.dequant, /*allow_splits=*/false);
  }
  const BlasGemmParams g = ProductParams(ProductOf(p), t);
  Int4GemmParams q{.w = w.Int4(),
                   .x = g.x,
                   .x_row_stride = g.k,
                   .y = g.y,
                   .rows = t,
                   .workspace = buf_.int4_gemm,
                   .workspace_bytes = plan_.workspace.int4_gemm};
  // Up to LaunchSettings::int4_norm_in_gemm_max_rows rows the norm runs in
  // Int4Gemm's prologue (kGemv normalizing the rows of x it stages), beyond
  // them as its own kernel.
  const bool norm_in_gemm = NormedInput(p) && in_partials == 1 && w.columns == nullptr &&
                            !fold.input && t <= GetLaunchSettings().int4_norm_in_gemm_max_rows;
  if (fold.input) {  // buf_.normed holds g . h: r applied in the epilogue
    q.x_sum_sq = buf_.norm_sum_sq;
  } else if (norm_in_gemm) {
    q.prologue = GemvPrologue::kRmsNorm;
    q.x = buf_.residual;
    q.norm_weight = NormWeight(p, layer);
    q.eps = config_.rms_norm_eps;
  } else if (NormedInput(p)) {
    RETURN_IF_ERROR(NormResidual(NormWeight(p, layer), t, in_partials));
  }
  if (w.columns != nullptr) {  // act order: the input in the weight's column order
    RETURN_IF_ERROR(GatherColumns({.x = g.x,
                                   .x_row_stride = g.k,
                                   .columns = w.columns,
                                   .y = buf_.int4_gather,
                                   .rows = t,
                                   .k = g.k},
                                  stream));
    q.x = buf_.int4_gather;
  }
  if (p == Projection::kGateUp) {
    q.y = buf_.act;
    q.silu_mul_y = true;
  }
  q.add_to_y = p == Projection::kO || p == Projection::kDown;
  if (fold.next_norm != nullptr) {
    q.fold_norm = {.weight = fold.next_norm, .x = buf_.normed, .sum_sq = buf_.norm_sum_sq};
  }
  RETURN_IF_ERROR(Int4Gemm(q, stream));
  return 1;
}

absl::StatusOr<int32_t> CudaRunnerImpl::ProjectFp8(Projection p, int layer, int32_t t,
                                                   int32_t in_partials, const CudaWeight& w) {
  cudaStream_t stream = ctx_->stream();
  if (UseGemv(t)) {
    GemvParams v = GemvFor(p, layer, t);
    v.w = w.data;
    v.w_dtype = DType::kF8E4M3;
    v.w_scales = static_cast<const float*>(w.scales);
    v.w_scales_kind = w.spec.fp8_scales;
    RETURN_IF_ERROR(Gemv(v, stream));
    return 1;
  }
  if (options_.fp8_compute == Fp8Compute::kW8A16 || w.spec.fp8_scales != Fp8Scales::kRow) {
    RETURN_IF_ERROR(Fp8DequantizeBf16({.w = w.Fp8(), .out = buf_.dequant}, stream));
    return ProjectBf16(p, layer, t, in_partials, buf_.dequant, /*allow_splits=*/false);
  }
  // W8A8: Fp8Gemm with the norm in its activations' pass (apart when the
  // previous product left split-K partials to fold in), the SiLU·mul
  // epilogue (or, where gate_up takes cuBLASLt's scaled form, SiLU·mul in
  // down's activations' pass: Fp8SiluInDown) and the residual epilogue,
  // kFp8GemmChunkRows rows a call.
  const BlasGemmParams g = ProductParams(ProductOf(p), t);
  const bool norm_inside = NormedInput(p) && in_partials == 1;
  if (NormedInput(p) && !norm_inside) {
    RETURN_IF_ERROR(NormResidual(NormWeight(p, layer), t, in_partials));
  }
  const bool gate_up = p == Projection::kGateUp, down = p == Projection::kDown;
  bool silu_in_down = false;
  if (gate_up || down) {
    ASSIGN_OR_RETURN(silu_in_down, Fp8SiluInDown(layer, t));
  }
  const bool silu_x = down && silu_in_down;
  const void* x = norm_inside ? buf_.residual : silu_x ? buf_.gate_up : g.x;
  const int64_t x_cols = silu_x ? 2 * g.k : g.k;
  const int64_t inter = config_.intermediate_size;
  void* y = gate_up ? (silu_in_down ? buf_.gate_up : buf_.act) : g.y;
  const int64_t y_cols = gate_up ? (silu_in_down ? 2 * inter : inter) : g.n;
  for (int64_t row = 0; row < t; row += kFp8GemmChunkRows) {
    const int32_t rows = static_cast<int32_t>(std::min<int64_t>(kFp8GemmChunkRows, t - row));
    RETURN_IF_ERROR(Fp8Gemm(*fp8_matmul_,
                            {.w = w.Fp8(),
                             .x = static_cast<const char*>(x) + row * x_cols * 2,
                             .x_row_stride = x_cols,
                             .y = static_cast<char*>(y) + row * y_cols * 2,
                             .add_to_y = p == Projection::kO || down,
                             .silu_mul_y = gate_up && !silu_in_down,
                             .rows = rows,
                             .norm_weight = norm_inside ? NormWeight(p, layer) : nullptr,
                             .eps = config_.rms_norm_eps,
                             .silu_mul_x = silu_x,
                             .workspace = buf_.fp8_gemm,
                             .workspace_bytes = plan_.workspace.fp8_gemm},
                            stream));
  }
  return 1;
}

absl::StatusOr<bool> CudaRunnerImpl::Fp8SiluInDown(int layer, int32_t t) {
  const CudaWeight& gate_up = weights_.layers[layer][Projection::kGateUp];
  const CudaWeight& down = weights_.layers[layer][Projection::kDown];
  const auto w8a8 = [&](const CudaWeight& w) {
    return w.spec.format == WeightFormat::kFp8 && w.spec.fp8_scales == Fp8Scales::kRow;
  };
  if (UseGemv(t) || options_.fp8_compute == Fp8Compute::kW8A16 || !w8a8(gate_up) || !w8a8(down)) {
    return false;
  }
  for (int64_t row = 0; row < t; row += kFp8GemmChunkRows) {
    const int32_t rows = static_cast<int32_t>(std::min<int64_t>(kFp8GemmChunkRows, t - row));
    ASSIGN_OR_RETURN(const bool scaled,
                     Fp8GemmUsesCublasScales(*fp8_matmul_, {.w = gate_up.Fp8(),
                                                            .x = buf_.residual,
                                                            .x_row_stride = gate_up.k,
                                                            .y = buf_.gate_up,
                                                            .rows = rows}));
    if (!scaled) return false;
  }
  return true;
}

}  // namespace onecard::engine
