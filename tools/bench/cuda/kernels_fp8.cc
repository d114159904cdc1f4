// Scenario "kernels-fp8": the FP8 E4M3 projections alone on the llama3-8b,
// llama3-70b and mistral-large-123b shapes, as the runner calls them (qkv
// and gate_up with the RMSNorm prologue, gate_up with the SiLU·mul epilogue,
// o and down adding to the residual): Gemv with FP8 weights (a scale a row)
// at 1 to 4 rows, and Fp8Gemm (W8A8: per-token activation quantization,
// cuBLASLt's E4M3 product, the scales' epilogue) at 8 to 2048 rows, with
// its cuBLASLt product alone (Fp8Matmul) beside it: GB/s of the weight
// bytes (codes + scales) against this run's copy rate, TFLOP/s against its
// E4M3 matrix rate, and us a call. Weights rotate over copies totalling
// >= 1.5 GB (L2 never holds them); 20 back-to-back launches per timing
// (5 at 2048 rows), median of 5.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/fp8_gemm.h"
#include "engine/kernels/fp8_matmul.h"
#include "engine/kernels/gemv.h"
#include "engine/runtime/cuda/cuda_weights.h"
#include "engine/runtime/cuda/weight_spec.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

namespace onecard::bench {
namespace {

constexpr char kScenario[] = "kernels-fp8";
constexpr int kLaunches = 20;

using Shape = ProjectionCase;

// Copies of one FP8 weight (codes, then a float scale a row, each
// 256-aligned) that together pass 1.5 GB.
struct Rotation {
  DeviceMem mem;
  int64_t stride = 0;
  int copies = 0;
  int64_t code_bytes = 0;
  int64_t weight_bytes = 0;  // codes + scales: what a call must read
  engine::Fp8WeightView View(int i, int64_t n, int64_t k) const {
    char* base = mem.get() + (i % copies) * stride;
    return {base, reinterpret_cast<const float*>(base + code_bytes), n, k, engine::Fp8Scales::kRow};
  }
};

absl::StatusOr<Rotation> MakeRotation(int64_t n, int64_t k, cudaStream_t stream) {
  Rotation r;
  r.code_bytes = (n * k + 255) / 256 * 256;
  r.weight_bytes = n * k + n * 4;
  r.stride = r.code_bytes + (n * 4 + 255) / 256 * 256;
  r.copies = static_cast<int>(std::max<int64_t>(2, (1536LL << 20) / r.stride + 1));
  ASSIGN_OR_RETURN(r.mem, DeviceMem::Random(r.stride * r.copies, 31, stream));
  for (int i = 0; i < r.copies; ++i) {
    char* base = r.mem.get() + i * r.stride;
    RETURN_IF_ERROR(engine::FillFp8(base, n * k, reinterpret_cast<float*>(base + r.code_bytes), n,
                                    32 + i, 0.002f / 448.0f, stream));
  }
  return r;
}

constexpr int32_t kMaxGemmRows = 2048;

struct Fp8GemmBuffers {
  engine::Fp8Matmul* matmul;
  void* workspace;
  int64_t workspace_bytes;
  DeviceMem* x;  // BF16 [kMaxGemmRows, k]
  DeviceMem* y;  // BF16 [kMaxGemmRows, n]
};

absl::Status GemmCases(const Ceilings& ceil, const Shape& s, const Rotation& rot, int* next,
                       const Fp8GemmBuffers& b, cudaStream_t stream, BenchReporter& reporter) {
  const bool silu = s.projection == engine::Projection::kGateUp;
  const bool add =
      s.projection == engine::Projection::kO || s.projection == engine::Projection::kDown;
  for (int32_t rows : {8, 16, 32, 64, 128, kMaxGemmRows}) {
    const int launches = rows >= kMaxGemmRows ? 5 : kLaunches;
    const auto params = [&](int i) {
      return engine::Fp8GemmParams{.w = rot.View(i, s.n, s.k),
                                   .x = b.x->get(),
                                   .x_row_stride = s.k,
                                   .y = b.y->get(),
                                   .add_to_y = add,
                                   .silu_mul_y = silu,
                                   .rows = rows,
                                   .workspace = b.workspace,
                                   .workspace_bytes = b.workspace_bytes};
    };
    RETURN_IF_ERROR(engine::PrepareFp8Gemm(*b.matmul, params(0)));
    ASSIGN_OR_RETURN(const double ms, MedianMs(stream, 1, 5, [&]() -> absl::Status {
                       for (int i = 0; i < launches; ++i) {
                         RETURN_IF_ERROR(engine::Fp8Gemm(*b.matmul, params((*next)++), stream));
                       }
                       return absl::OkStatus();
                     }));
    // The cuBLASLt product alone, on the same shape (codes of x: whatever the
    // workspace holds).
    const engine::Fp8GemmWorkspaceLayout ws = engine::Fp8GemmWorkspace(rows, s.n, s.k);
    char* base = static_cast<char*>(b.workspace);
    ASSIGN_OR_RETURN(
        const double mm_ms, MedianMs(stream, 1, 5, [&]() -> absl::Status {
          for (int i = 0; i < launches; ++i) {
            RETURN_IF_ERROR(b.matmul->Run({.x = base + ws.codes_offset,
                                           .w = rot.View((*next)++, s.n, s.k).codes,
                                           .acc = reinterpret_cast<float*>(base + ws.acc_offset),
                                           .m = rows,
                                           .n = s.n,
                                           .k = s.k,
                                           .acc_row_stride = ws.acc_row_stride},
                                          stream));
          }
          return absl::OkStatus();
        }));
    const double flops = 2.0 * s.n * s.k * rows;
    for (const auto& [suffix, t] : {std::pair{"gemm", ms}, std::pair{"matmul", mm_ms}}) {
      const double s_per_call = t / launches * 1e-3;
      const std::string name = absl::StrCat(s.name, "_", suffix, "_r", rows);
      reporter.Add({kScenario, name, "bandwidth", rot.weight_bytes / s_per_call / 1e9, "GB/s",
                    ceil.copy_bytes_per_s / 1e9});
      reporter.Add({kScenario, name, "compute", flops / s_per_call / 1e12, "TFLOP/s",
                    ceil.gemm_fp8_flops_per_s / 1e12});
      reporter.Add({kScenario, name, "time", s_per_call * 1e6, "us", {}});
    }
  }
  return absl::OkStatus();
}

absl::Status ShapeCases(const Ceilings& ceil, const Shape& s, const Fp8GemmBuffers& b,
                        cudaStream_t stream, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(Rotation rot, MakeRotation(s.n, s.k, stream));
  const bool silu = s.projection == engine::Projection::kGateUp;
  const bool add =
      s.projection == engine::Projection::kO || s.projection == engine::Projection::kDown;
  const bool norm = s.projection == engine::Projection::kQkv || silu;
  ASSIGN_OR_RETURN(DeviceMem x, DeviceMem::Random(engine::kGemvMaxRows * s.k * 2, 33, stream));
  ASSIGN_OR_RETURN(DeviceMem norm_w, DeviceMem::Random(s.k * 2, 34, stream));
  ASSIGN_OR_RETURN(DeviceMem y, DeviceMem::Random(engine::kGemvMaxRows * s.n * 2, 35, stream));
  int next = 0;
  for (int32_t rows = 1; rows <= engine::kGemvMaxRows; ++rows) {
    if (rows * s.k > engine::kGemvMaxRowValues) break;
    ASSIGN_OR_RETURN(
        const double ms, MedianMs(stream, 1, 5, [&]() -> absl::Status {
          for (int i = 0; i < kLaunches; ++i) {
            const engine::Fp8WeightView w = rot.View(next++, s.n, s.k);
            RETURN_IF_ERROR(engine::Gemv(
                {.prologue = norm ? engine::GemvPrologue::kRmsNorm : engine::GemvPrologue::kNone,
                 .x = x.get(),
                 .x_row_stride = s.k,
                 .norm_weight = norm_w.get(),
                 .w = w.codes,
                 .w_dtype = engine::DType::kF8E4M3,
                 .w_scales = w.scales,
                 .y = y.get(),
                 .add_to_y = add,
                 .silu_mul_y = silu,
                 .num_rows = rows,
                 .n = silu ? s.n / 2 : s.n,
                 .k = s.k},
                stream));
          }
          return absl::OkStatus();
        }));
    const double s_per_call = ms / kLaunches * 1e-3;
    const std::string name = absl::StrCat(s.name, "_gemv_r", rows);
    reporter.Add({kScenario, name, "bandwidth", rot.weight_bytes / s_per_call / 1e9, "GB/s",
                  ceil.copy_bytes_per_s / 1e9});
    reporter.Add({kScenario, name, "time", s_per_call * 1e6, "us", {}});
  }
  return GemmCases(ceil, s, rot, &next, b, stream, reporter);
}

absl::Status RunKernelsFp8(const BenchOptions&, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(const Ceilings ceil, MeasureCeilings());
  cudaStream_t stream;
  CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  ASSIGN_OR_RETURN(const std::vector<Shape> shapes, SelectedProjectionCases());
  int64_t max_n = 0, max_k = 0;
  for (const Shape& s : shapes) {
    max_n = std::max(max_n, s.n);
    max_k = std::max(max_k, s.k);
  }
  const int64_t ws_bytes = engine::Fp8GemmWorkspaceBytes(kMaxGemmRows, max_n, max_k);
  ASSIGN_OR_RETURN(DeviceMem ws, DeviceMem::Random(ws_bytes, 36, stream));
  ASSIGN_OR_RETURN(DeviceMem lt_ws, DeviceMem::Random(32 << 20, 37, stream));
  ASSIGN_OR_RETURN(DeviceMem x, DeviceMem::Random(kMaxGemmRows * max_k * 2, 38, stream));
  ASSIGN_OR_RETURN(DeviceMem y, DeviceMem::Random(kMaxGemmRows * max_n * 2, 39, stream));
  ASSIGN_OR_RETURN(std::unique_ptr<engine::Fp8Matmul> matmul,
                   engine::Fp8Matmul::Create(lt_ws.get(), 32 << 20));
  const Fp8GemmBuffers buffers{matmul.get(), ws.get(), ws_bytes, &x, &y};
  absl::Status st;
  for (const Shape& s : shapes) {
    if (st.ok()) st = ShapeCases(ceil, s, buffers, stream, reporter);
  }
  cudaStreamDestroy(stream);
  return st;
}

const bool kRegistered = RegisterScenario(
    {kScenario, "CUDA: FP8 projections (Gemv with FP8 weights, Fp8Gemm) alone vs the copy rate",
     &RunKernelsFp8});

}  // namespace
}  // namespace onecard::bench
