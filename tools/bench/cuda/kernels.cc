// Scenario "kernels-8b": where a llama3-8b step's time goes, kernel by
// kernel, against this run's ceilings (the evidence behind the decode and
// prefill notes). Weights rotate over copies totalling >= 1.5 GB so that L2
// (50 MB) never holds them; 20 back-to-back launches per timing, median of 5;
// attention and the small kernels as a captured CUDA graph, as the step runs
// them (their GPU time, not the host's launch rate).
// - Gemv (ours, fused prologue/epilogue, as the runner calls it: gate_up
//   with the SiLU·mul epilogue, down on its output) and cuBLAS (m = 1, plain)
//   on the five decode projections: GB/s of weight bytes vs the copy rate.
// - Paged attention decode (split-K as the runner picks): batch 1/32/128 at
//   384 and 4096 keys: GB/s of K/V bytes; and at batch 1 and 128, 384 keys,
//   with the step's RoPE + KV write fused in (time, against RoPE + KV write
//   and attention apart); and over an FP8 cache (attn_decode_fp8_*: batch
//   1 and 32, 384 to 8192 keys, GB/s of its bytes, a byte an element).
// - The small kernels of a batch-128 layer (RmsNorm, SiLU·mul, RoPE + KV
//   write): time and GB/s of the bytes they must move.
// - Flash attention prefill of 2048 and 8192 tokens (one layer, causal),
//   over BF16 and FP8 caches, the wgmma kernel and the mma.sync one
//   (`_mma`): TFLOP/s vs the GEMM rate; cuBLAS on the four projections at m = 8,
//   32, 128 (weight GB/s: batched decode) and 2048 (TFLOP/s: prefill).
#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/blas_gemm.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/gemv.h"
#include "engine/kernels/paged_attention_split.h"
#include "engine/kernels/rms_norm.h"
#include "engine/kernels/rope.h"
#include "engine/kernels/rope_kv_write.h"
#include "engine/kernels/silu_mul.h"
#include "engine/model/synthetic_shapes.h"
#include "engine/runtime/cuda/cuda_weights.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

namespace onecard::bench {
namespace {

constexpr char kScenario[] = "kernels-8b";
constexpr int kLaunches = 20;

struct Proj {
  const char* name;
  int64_t n, k;
  engine::GemvPrologue prologue;
  bool f32;
  bool add;
  bool silu;  // silu_mul_y: n / 2 outputs, silu(gate) * up (the runner's gate/up)
};

absl::Status GemvCases(const Ceilings& ceil, cudaStream_t stream, cublasHandle_t blas,
                       BenchReporter& reporter) {
  const engine::ModelConfig c = *engine::SyntheticModelConfig("llama3-8b");
  const Proj projs[] = {
      {"qkv", 6144, 4096, engine::GemvPrologue::kRmsNorm, false, false, false},
      {"o", 4096, 4096, engine::GemvPrologue::kNone, false, true, false},
      {"gate_up", 28672, 4096, engine::GemvPrologue::kRmsNorm, false, false, true},
      {"down", 4096, 14336, engine::GemvPrologue::kNone, false, true, false},
      {"lm_head", c.vocab_size, 4096, engine::GemvPrologue::kRmsNorm, true, false, false}};
  ASSIGN_OR_RETURN(DeviceMem x, DeviceMem::Random(4 * 2 * 14336 * 2, 3, stream));
  ASSIGN_OR_RETURN(DeviceMem norm, DeviceMem::Random(14336 * 2, 4, stream));
  ASSIGN_OR_RETURN(DeviceMem y, DeviceMem::Random(4LL * c.vocab_size * 4, 5, stream));
  for (const Proj& p : projs) {
    const int64_t bytes = p.n * p.k * 2;
    const int copies = static_cast<int>(std::max<int64_t>(2, (1536LL << 20) / bytes + 1));
    ASSIGN_OR_RETURN(DeviceMem w, DeviceMem::Random(bytes * copies, 6, stream));
    int next = 0;
    const int64_t x_stride = p.prologue == engine::GemvPrologue::kSiluMul ? 2 * p.k : p.k;
    ASSIGN_OR_RETURN(const double ours_ms, MedianMs(stream, 1, 5, [&]() -> absl::Status {
                       for (int i = 0; i < kLaunches; ++i) {
                         RETURN_IF_ERROR(engine::Gemv(
                             {.prologue = p.prologue,
                              .x = x.get(),
                              .x_row_stride = x_stride,
                              .norm_weight = norm.get(),
                              .w = w.get() + (next++ % copies) * bytes,
                              .y = y.get(),
                              .y_dtype = p.f32 ? engine::DType::kF32 : engine::DType::kBF16,
                              .add_to_y = p.add,
                              .silu_mul_y = p.silu,
                              .num_rows = 1,
                              .n = p.silu ? p.n / 2 : p.n,
                              .k = p.k},
                             stream));
                       }
                       return absl::OkStatus();
                     }));
    ASSIGN_OR_RETURN(const double blas_ms, MedianMs(stream, 1, 5, [&]() -> absl::Status {
                       for (int i = 0; i < kLaunches; ++i) {
                         RETURN_IF_ERROR(engine::BlasGemm(
                             blas,
                             {.y_dtype = p.f32 ? engine::DType::kF32 : engine::DType::kBF16,
                              .x = x.get(),
                              .w = w.get() + (next++ % copies) * bytes,
                              .y = y.get(),
                              .m = 1,
                              .n = p.n,
                              .k = p.k,
                              .beta = p.add ? 1.0f : 0.0f},
                             stream));
                       }
                       return absl::OkStatus();
                     }));
    const double floor = ceil.copy_bytes_per_s / 1e9;
    reporter.Add({kScenario, absl::StrCat("gemv_", p.name), "ours_bandwidth",
                  bytes / (ours_ms / kLaunches * 1e-3) / 1e9, "GB/s", floor});
    reporter.Add({kScenario, absl::StrCat("gemv_", p.name), "cublas_bandwidth",
                  bytes / (blas_ms / kLaunches * 1e-3) / 1e9, "GB/s", floor});
    reporter.Add(
        {kScenario, absl::StrCat("gemv_", p.name), "ours_us", ours_ms / kLaunches * 1e3, "us", {}});
  }
  return absl::OkStatus();
}

// One layer's paged attention: `seqs` chunks of `len` query tokens each at
// the end of `context` keys, contiguous block tables; `rope` (decode): with
// the step's RopeKvWrite fused in (PagedAttentionSplitOptions::rope);
// `fp8`: an FP8 E4M3 cache (every code 0x30, scales 1: a byte an element);
// `kernel`: which attention kernels (paged_attention_split.h).
absl::StatusOr<double> TimeAttention(
    cudaStream_t stream, int32_t seqs, int32_t context, int32_t len, int32_t splits,
    bool rope = false, bool fp8 = false,
    engine::AttentionKernel kernel = engine::AttentionKernel::kAuto) {
  const engine::ModelConfig c = *engine::SyntheticModelConfig("llama3-8b");
  const int32_t bs = 16, blocks_each = (context + bs - 1) / bs;
  const engine::KvLayout layout{
      .num_blocks = seqs * blocks_each, .block_size = bs, .num_kv_heads = 8, .head_dim = 128};
  const int64_t q_width = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  ASSIGN_OR_RETURN(DeviceMem kv, DeviceMem::Random(layout.PoolElements() * 4, 9, stream));
  ASSIGN_OR_RETURN(DeviceMem q, DeviceMem::Random(int64_t{seqs} * len * q_width * 2, 10, stream));
  ASSIGN_OR_RETURN(DeviceMem out, DeviceMem::Random(int64_t{seqs} * len * 4096 * 2, 11, stream));
  std::vector<int32_t> meta;  // cu | start | tables | slots (rope)
  for (int32_t s = 0; s <= seqs; ++s) meta.push_back(s * len);
  for (int32_t s = 0; s < seqs; ++s) meta.push_back(context - len);
  for (int32_t b = 0; b < seqs * blocks_each; ++b) meta.push_back(b);
  for (int32_t s = 0; s < seqs; ++s) meta.push_back(s * blocks_each * bs + context - 1);
  const std::vector<float> inv_freq =
      engine::RopeInvFreq(static_cast<int32_t>(c.head_dim), c.rope_theta, c.rope_scaling);
  ASSIGN_OR_RETURN(DeviceMem freq, DeviceMem::Random(int64_t{4} * inv_freq.size(), 14, stream));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(freq.get(), inv_freq.data(), inv_freq.size() * 4, cudaMemcpyHostToDevice));
  int32_t* d_meta = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMalloc(&d_meta, meta.size() * 4));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(d_meta, meta.data(), meta.size() * 4, cudaMemcpyHostToDevice));
  ASSIGN_OR_RETURN(DeviceMem scales, DeviceMem::Random(64, 16, stream));
  if (fp8) {
    const std::vector<float> ones(8, 1.0f);
    CUDA_RETURN_IF_ERROR(cudaMemset(kv.get(), 0x30, layout.PoolElements() * 2));
    CUDA_RETURN_IF_ERROR(cudaMemcpy(scales.get(), ones.data(), 32, cudaMemcpyHostToDevice));
  }
  const int64_t pool_bytes = layout.PoolElements() * (fp8 ? 1 : 2);
  const engine::KvFp8Scales kv_fp8 =
      fp8 ? engine::KvFp8Scales{reinterpret_cast<const float*>(scales.get()),
                                reinterpret_cast<const float*>(scales.get())}
          : engine::KvFp8Scales{};
  const int64_t ws_bytes = engine::PagedAttentionWorkspaceBytes(seqs * len, 32, 128, splits);
  ASSIGN_OR_RETURN(DeviceMem ws, DeviceMem::Random(std::max<int64_t>(ws_bytes, 256), 12, stream));
  engine::PagedAttentionParams p{.dtype = engine::DType::kBF16,
                                 .q = q.get(),
                                 .q_token_stride = q_width,
                                 .k_cache = kv.get(),
                                 .v_cache = kv.get() + pool_bytes,
                                 .out = out.get(),
                                 .layout = layout,
                                 .num_heads = 32,
                                 .num_tokens = seqs * len,
                                 .num_seqs = seqs,
                                 .cu_query_lens = d_meta,
                                 .start_pos = d_meta + seqs + 1,
                                 .block_tables = d_meta + 2 * seqs + 1,
                                 .max_blocks_per_seq = blocks_each,
                                 .scale = 0.0884f,
                                 .kv_fp8 = kv_fp8};
  const engine::RopeKvWriteParams fused{.dtype = engine::DType::kBF16,
                                        .qkv = q.get(),
                                        .k_cache = kv.get(),
                                        .v_cache = kv.get() + pool_bytes,
                                        .layout = layout,
                                        .num_heads = 32,
                                        .positions = d_meta + seqs + 1,
                                        .slot_mapping = d_meta + 2 * seqs + 1 + seqs * blocks_each,
                                        .inv_freq = reinterpret_cast<const float*>(freq.get()),
                                        .num_tokens = seqs * len,
                                        .fp8 = kv_fp8};
  auto ms = GraphMedianMs(stream, 1, 5, [&]() -> absl::Status {
    for (int i = 0; i < kLaunches; ++i) {
      RETURN_IF_ERROR(engine::PagedAttentionSplit(p,
                                                  {.num_splits = splits,
                                                   .workspace = ws.get(),
                                                   .workspace_bytes = ws_bytes,
                                                   .kernel = kernel,
                                                   .rope = rope ? &fused : nullptr},
                                                  stream));
    }
    return absl::OkStatus();
  });
  cudaFree(d_meta);
  RETURN_IF_ERROR(ms.status());
  return *ms / kLaunches;
}

absl::Status AttentionCases(const Ceilings& ceil, cudaStream_t stream, int num_sms,
                            BenchReporter& reporter) {
  for (auto [seqs, context] : {std::pair{1, 384}, {1, 4096}, {32, 384}, {128, 384}, {32, 4096}}) {
    const int32_t splits = engine::PagedAttentionDecodeSplits(seqs, 8, 8192, num_sms);
    ASSIGN_OR_RETURN(const double ms, TimeAttention(stream, seqs, context, 1, splits));
    const double bytes = double(seqs) * context * 8 * 128 * 2 * 2;
    reporter.Add({kScenario, absl::StrCat("attn_decode_b", seqs, "_ctx", context), "bandwidth",
                  bytes / (ms * 1e-3) / 1e9, "GB/s", ceil.copy_bytes_per_s / 1e9});
    reporter.Add({kScenario,
                  absl::StrCat("attn_decode_b", seqs, "_ctx", context),
                  "time",
                  ms * 1e3,
                  "us",
                  {}});
  }
  // With the step's RoPE and cache write fused in: against rope_kv_write_b*
  // plus attn_decode_b*_ctx384 (SmallKernelCases).
  for (int32_t seqs : {1, 128}) {
    const int32_t splits = engine::PagedAttentionDecodeSplits(seqs, 8, 8192, num_sms);
    ASSIGN_OR_RETURN(const double ms, TimeAttention(stream, seqs, 384, 1, splits, true));
    reporter.Add({kScenario,
                  absl::StrCat("attn_decode_rope_b", seqs, "_ctx384"),
                  "time",
                  ms * 1e3,
                  "us",
                  {}});
  }
  // The prefill kernel the runner takes (wgmma on sm_90a builds) and the
  // mma.sync one (`_mma`), BF16 and FP8 caches.
  for (const bool fp8 : {false, true}) {
    for (const bool mma : {false, true}) {
      for (int32_t tokens : {2048, 8192}) {
        ASSIGN_OR_RETURN(const double ms, TimeAttention(stream, 1, tokens, tokens, 1, false, fp8,
                                                        mma ? engine::AttentionKernel::kFlashMma
                                                            : engine::AttentionKernel::kAuto));
        const double flops = 2.0 * tokens * (tokens + 1.0) * 128 * 32;
        reporter.Add({kScenario,
                      absl::StrCat("attn_flash_prefill", fp8 ? "_fp8" : "", mma ? "_mma" : "",
                                   fp8 || mma ? "_" : "", tokens),
                      "rate", flops / (ms * 1e-3) / 1e12, "TFLOP/s", ceil.gemm_flops_per_s / 1e12});
      }
    }
  }
  // An FP8 cache: decode at a byte an element (bandwidth of those bytes).
  for (auto [seqs, context] : {std::pair{1, 4096}, {32, 384}, {32, 4096}, {32, 8192}}) {
    const int32_t splits = engine::PagedAttentionDecodeSplits(seqs, 8, 8192, num_sms);
    ASSIGN_OR_RETURN(const double ms,
                     TimeAttention(stream, seqs, context, 1, splits, false, /*fp8=*/true));
    const std::string name = absl::StrCat("attn_decode_fp8_b", seqs, "_ctx", context);
    const double bytes = double(seqs) * context * 8 * 128 * 2;
    reporter.Add({kScenario, name, "bandwidth", bytes / (ms * 1e-3) / 1e9, "GB/s",
                  ceil.copy_bytes_per_s / 1e9});
    reporter.Add({kScenario, name, "time", ms * 1e3, "us", {}});
  }
  return absl::OkStatus();
}

// cuBLAS on the four projections at m tokens: TFLOP/s against the GEMM
// rate (prefill, m = 2048) or weight GB/s against the copy bandwidth
// (batched decode, m <= 128; weights rotate out of L2).
absl::Status GemmCases(const Ceilings& ceil, cudaStream_t stream, cublasHandle_t blas, int64_t m,
                       BenchReporter& reporter) {
  ASSIGN_OR_RETURN(DeviceMem x, DeviceMem::Random(m * 14336 * 2, 13, stream));
  ASSIGN_OR_RETURN(DeviceMem y, DeviceMem::Random(m * 28672 * 2, 14, stream));
  double layer_us = 0;
  for (auto [name, n, k] : {std::tuple{"qkv", 6144, 4096},
                            {"o", 4096, 4096},
                            {"gate_up", 28672, 4096},
                            {"down", 4096, 14336}}) {
    const int64_t bytes = int64_t{n} * k * 2;
    const int copies = m >= 2048 ? 1 : static_cast<int>((1536LL << 20) / bytes + 2);
    ASSIGN_OR_RETURN(DeviceMem w, DeviceMem::Random(bytes * copies, 15, stream));
    int next = 0;
    ASSIGN_OR_RETURN(const double ms, MedianMs(stream, 2, 5, [&]() -> absl::Status {
                       for (int i = 0; i < kLaunches; ++i) {
                         RETURN_IF_ERROR(engine::BlasGemm(blas,
                                                          {.x = x.get(),
                                                           .w = w.get() + (next++ % copies) * bytes,
                                                           .y = y.get(),
                                                           .m = m,
                                                           .n = n,
                                                           .k = k},
                                                          stream));
                       }
                       return absl::OkStatus();
                     }));
    const double s = ms / kLaunches * 1e-3;
    layer_us += s * 1e6;
    const std::string name_m = absl::StrCat("gemm_m", m, "_", name);
    if (m >= 2048) {
      reporter.Add({kScenario, name_m, "rate", 2.0 * m * n * k / s / 1e12, "TFLOP/s",
                    ceil.gemm_flops_per_s / 1e12});
    } else {
      reporter.Add({kScenario, name_m, "weight_bandwidth", bytes / s / 1e9, "GB/s",
                    ceil.copy_bytes_per_s / 1e9});
    }
  }
  reporter.Add({kScenario, absl::StrCat("gemm_m", m, "_layer"), "time", layer_us, "us", {}});
  return absl::OkStatus();
}

// The small kernels of a batch-128 decode layer, back to back as in the
// step's graph: RmsNorm (128 x 4096), SiluMul (128 x 14336, after the cuBLAS
// gate/up product), RopeKvWrite (128 tokens of llama3-8b's qkv, and 1): time and
// the bytes each must move against the copy bandwidth.
absl::Status SmallKernelCases(const Ceilings& ceil, cudaStream_t stream, BenchReporter& reporter) {
  constexpr int32_t kRows = 128;
  const engine::ModelConfig c = *engine::SyntheticModelConfig("llama3-8b");
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int64_t qkv_width = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  ASSIGN_OR_RETURN(DeviceMem x, DeviceMem::Random(kRows * 2 * inter * 2, 16, stream));
  ASSIGN_OR_RETURN(DeviceMem y, DeviceMem::Random(kRows * inter * 2, 17, stream));
  ASSIGN_OR_RETURN(DeviceMem w, DeviceMem::Random(hidden * 2, 18, stream));
  const engine::KvLayout layout{.num_blocks = kRows,
                                .block_size = 16,
                                .num_kv_heads = static_cast<int32_t>(c.num_kv_heads),
                                .head_dim = static_cast<int32_t>(c.head_dim)};
  ASSIGN_OR_RETURN(DeviceMem kv, DeviceMem::Random(layout.PoolElements() * 4, 19, stream));
  std::vector<int32_t> meta;  // positions | slots
  for (int32_t t = 0; t < kRows; ++t) meta.push_back(383);
  for (int32_t t = 0; t < kRows; ++t) meta.push_back(t * 16 + 15);
  const std::vector<float> inv_freq =
      engine::RopeInvFreq(static_cast<int32_t>(c.head_dim), c.rope_theta, c.rope_scaling);
  int32_t* d_meta = nullptr;
  float* d_freq = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMalloc(&d_meta, meta.size() * 4));
  CUDA_RETURN_IF_ERROR(cudaMalloc(&d_freq, inv_freq.size() * 4));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(d_meta, meta.data(), meta.size() * 4, cudaMemcpyHostToDevice));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(d_freq, inv_freq.data(), inv_freq.size() * 4, cudaMemcpyHostToDevice));
  auto rope = [&](int32_t tokens) {
    return engine::RopeKvWrite({.dtype = engine::DType::kBF16,
                                .qkv = y.get(),
                                .k_cache = kv.get(),
                                .v_cache = kv.get() + layout.PoolElements() * 2,
                                .layout = layout,
                                .num_heads = static_cast<int32_t>(c.num_heads),
                                .positions = d_meta,
                                .slot_mapping = d_meta + kRows,
                                .inv_freq = d_freq,
                                .num_tokens = tokens},
                               stream);
  };
  struct Case {
    const char* name;
    double bytes;
    std::function<absl::Status()> launch;
  };
  const std::vector<Case> cases = {
      {"rms_norm_b128", 3.0 * kRows * hidden * 2,
       [&] {
         return engine::RmsNorm({.dtype = engine::DType::kBF16,
                                 .x = x.get(),
                                 .weight = w.get(),
                                 .out = y.get(),
                                 .num_tokens = kRows,
                                 .hidden = hidden},
                                stream);
       }},
      {"silu_mul_b128", 3.0 * kRows * inter * 2,
       [&] {
         return engine::SiluMul({.dtype = engine::DType::kBF16,
                                 .gate_up = x.get(),
                                 .out = y.get(),
                                 .num_tokens = kRows,
                                 .inter = inter},
                                stream);
       }},
      {"rope_kv_write_b128", 2.0 * kRows * qkv_width * 2, [&] { return rope(kRows); }},
      {"rope_kv_write_b1", 2.0 * qkv_width * 2, [&] { return rope(1); }},
  };
  absl::Status st;
  for (const Case& k : cases) {
    auto ms = GraphMedianMs(stream, 1, 5, [&]() -> absl::Status {
      for (int i = 0; i < kLaunches; ++i) RETURN_IF_ERROR(k.launch());
      return absl::OkStatus();
    });
    if (!ms.ok()) {
      st = ms.status();
      break;
    }
    const double s = *ms / kLaunches * 1e-3;
    reporter.Add({kScenario, k.name, "time", s * 1e6, "us", {}});
    reporter.Add(
        {kScenario, k.name, "bandwidth", k.bytes / s / 1e9, "GB/s", ceil.copy_bytes_per_s / 1e9});
  }
  cudaFree(d_meta);
  cudaFree(d_freq);
  return st;
}

absl::Status RunKernels(const BenchOptions&, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(const Ceilings ceil, MeasureCeilings());
  cudaStream_t stream;
  CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  cublasHandle_t blas;
  CUDA_RETURN_IF_ERROR(cublasCreate(&blas));
  int device = 0, sms = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  absl::Status st = GemvCases(ceil, stream, blas, reporter);
  if (st.ok()) st = AttentionCases(ceil, stream, sms, reporter);
  if (st.ok()) st = SmallKernelCases(ceil, stream, reporter);
  for (int64_t m : {8, 32, 128, 2048}) {
    if (st.ok()) st = GemmCases(ceil, stream, blas, m, reporter);
  }
  cublasDestroy(blas);
  cudaStreamDestroy(stream);
  return st;
}

const bool kRegistered = RegisterScenario(
    {kScenario, "CUDA: llama3-8b kernels alone (GEMV vs cuBLAS, attention, GEMM) vs the ceilings",
     &RunKernels});

}  // namespace
}  // namespace onecard::bench
