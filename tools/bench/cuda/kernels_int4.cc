// Scenario "kernels-int4": the 4-bit projections alone (Int4Gemm, groups of
// 128, symmetric: codes + one fp16 scale a group) on the llama3-8b,
// llama3-70b and mistral-large-123b shapes, as the runner calls them (x
// already normalized, gate_up with the SiLU·mul epilogue, o and down adding
// to the residual), at 1 to 256 rows, as the runner launches them and (cases
// suffixed _stream, _t16 .. _t128) on each kernel and tile height: GB/s of the weight bytes against
// this run's copy rate, TFLOP/s against its bf16 matrix rate, and us a call. Weights rotate over
// copies totalling >= 1.5 GB (L2 never holds them); 20 back-to-back launches per timing, median
// of 5. Also Int4DequantizeBf16 (the prefill path): GB/s of the bytes it reads and writes.
#include "tools/bench/cuda/kernels_int4.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/int4_dequant.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/runtime/cuda/weight_spec.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

namespace onecard::bench {

absl::StatusOr<Int4Rotation> MakeInt4Rotation(int64_t n, int64_t k, cudaStream_t stream) {
  Int4Rotation r;
  r.code_bytes = (engine::Int4CodeBytes(n, k) + 255) / 256 * 256;
  const int64_t scale_bytes = engine::Int4ScaleBytes(n, k, kInt4BenchGroup);
  r.weight_bytes = engine::Int4CodeBytes(n, k) + scale_bytes;
  r.stride = r.code_bytes + (scale_bytes + 255) / 256 * 256;
  r.copies = static_cast<int>(std::max<int64_t>(2, (1536LL << 20) / r.stride + 1));
  ASSIGN_OR_RETURN(r.mem, DeviceMem::Random(r.stride * r.copies, 21, stream));
  for (int i = 0; i < r.copies; ++i) {  // real scales (random codes are fine as they are)
    char* scales = r.mem.get() + i * r.stride + r.code_bytes;
    RETURN_IF_ERROR(engine::FillInt4Scales(scales, nullptr, scale_bytes / 4, 22 + i, 0.002f,
                                           engine::Int4Offsets::kSymmetric, stream));
  }
  return r;
}

absl::StatusOr<Int4BenchSetup> MakeInt4BenchSetup() {
  Int4BenchSetup setup;
  int device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&setup.sms, cudaDevAttrMultiProcessorCount, device));
  ASSIGN_OR_RETURN(setup.shapes, SelectedProjectionCases());
  int64_t widest = 0;
  for (const ProjectionCase& s : setup.shapes) widest = std::max(widest, s.n);
  setup.workspace_bytes = engine::Int4GemmWorkspaceBytes(widest, setup.sms);
  ASSIGN_OR_RETURN(setup.workspace, DeviceMem::Zeroed(setup.workspace_bytes));
  return setup;
}

namespace {

constexpr char kScenario[] = "kernels-int4";
constexpr int kLaunches = 20;

using Shape = ProjectionCase;

// A launch shape: the rows, and the kernel (kAuto: what the runner gets;
// the others, suffixed, for the comparison of the kernels and of the tiled
// and wgmma kernels' tile heights and clusters: _t16.._t128, _w16c1..
// _w128c4; and from 64 rows the wgmma kernel's 128-row tiles with K in 1-4
// parts, _w128c1s1.._w128c1s4, where the workspace holds them; up to 8
// rows kStream and kGemv side by side, _stream and _gemv, the latter where x
// fits its shared memory).
struct Variant {
  int32_t rows;
  engine::Int4GemmPath path = engine::Int4GemmPath::kAuto;
  int32_t tile_rows = 0;
  std::string suffix;
  int32_t cluster = 0;  // kWgmma
  int32_t splits = 0;   // kWgmma: Int4GemmParams::wgmma_splits
};

std::vector<Variant> Variants() {
  using engine::Int4GemmPath;
  std::vector<Variant> out;
  for (int32_t rows : {1, 4, 8, 16, 32, 64, 128, 256}) {
    out.push_back({rows});
    if (rows <= engine::kInt4GemmGemvMaxRows) {
      out.push_back({rows, Int4GemmPath::kStream, 0, "_stream"});
      out.push_back({rows, Int4GemmPath::kGemv, 0, "_gemv"});
    }
    if (rows < 16) continue;
    if (rows <= engine::kInt4GemmStreamMaxRows) {
      out.push_back({rows, Int4GemmPath::kStream, 0, "_stream"});
    }
    for (int32_t tile : {16, 32, 64, 128}) {
      if (tile > 2 * rows || tile < rows / 8) continue;
      out.push_back({rows, Int4GemmPath::kTiled, tile, absl::StrCat("_t", tile)});
    }
    for (int32_t tile : {16, 32, 64, 128}) {
      if (tile > 4 * rows || 4 * tile < rows) continue;
      for (int32_t cluster : {1, 2, 4}) {
        if (tile / cluster < 8) continue;
        out.push_back(
            {rows, Int4GemmPath::kWgmma, tile, absl::StrCat("_w", tile, "c", cluster), cluster});
      }
    }
    if (rows < 64) continue;
    for (int32_t splits = 1; splits <= 4; ++splits) {
      out.push_back({rows, Int4GemmPath::kWgmma, 128, absl::StrCat("_w128c1s", splits), 1, splits});
    }
  }
  return out;
}

absl::Status ShapeCases(const Ceilings& ceil, const Shape& s, cudaStream_t stream,
                        const Int4BenchSetup& setup, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(Int4Rotation rot, MakeInt4Rotation(s.n, s.k, stream));
  constexpr int32_t kMaxRows = engine::kInt4GemmMaxRows;
  ASSIGN_OR_RETURN(DeviceMem x, DeviceMem::Random(kMaxRows * s.k * 2, 23, stream));
  ASSIGN_OR_RETURN(DeviceMem y, DeviceMem::Random(kMaxRows * s.n * 2, 25, stream));
  int next = 0;
  for (const Variant& v : Variants()) {
    const int32_t rows = v.rows;
    // The variant's launch of weight copy `copy`.
    auto params = [&](int copy) {
      engine::Int4GemmParams p =
          ProjectionInt4Params(s, rot.View(copy, s.n, s.k), x.get(), y.get(), rows,
                               setup.workspace.get(), setup.workspace_bytes);
      p.path = v.path;
      p.tile_rows = v.tile_rows;
      p.cluster = v.cluster;
      p.wgmma_splits = v.splits;
      return p;
    };
    if (v.splits != 0) {  // K's parts: where the shape and the workspace take them
      const engine::Int4GemmParams p = params(0);
      if (!engine::CheckInt4GemmParams(p, "kernels-int4").ok() ||
          !engine::CheckInt4GemmWgmmaSplits(p, v.tile_rows, v.splits, setup.sms).ok()) {
        continue;
      }
    }
    if (v.path == engine::Int4GemmPath::kGemv && !engine::Int4GemmGemvFits(params(0))) continue;
    ASSIGN_OR_RETURN(const double ms, MedianMs(stream, 1, 5, [&]() -> absl::Status {
                       for (int i = 0; i < kLaunches; ++i) {
                         RETURN_IF_ERROR(engine::Int4Gemm(params(next++), stream));
                       }
                       return absl::OkStatus();
                     }));
    const double s_per_call = ms / kLaunches * 1e-3;
    const std::string name = absl::StrCat(s.name, "_r", rows, v.suffix);
    reporter.Add({kScenario, name, "bandwidth", rot.weight_bytes / s_per_call / 1e9, "GB/s",
                  ceil.copy_bytes_per_s / 1e9});
    reporter.Add({kScenario, name, "time", s_per_call * 1e6, "us", {}});
    if (rows >= 16) {
      reporter.Add({kScenario, name, "compute", 2.0 * s.n * s.k * rows / s_per_call / 1e12,
                    "TFLOP/s", ceil.gemm_flops_per_s / 1e12});
    }
  }
  // The prefill path: the whole weight to BF16 (reads the packed bytes,
  // writes 2 bytes a weight).
  ASSIGN_OR_RETURN(DeviceMem out, DeviceMem::Random(s.n * s.k * 2, 26, stream));
  ASSIGN_OR_RETURN(const double ms, MedianMs(stream, 1, 5, [&]() -> absl::Status {
                     for (int i = 0; i < kLaunches; ++i) {
                       RETURN_IF_ERROR(engine::Int4DequantizeBf16(
                           {.w = rot.View(next++, s.n, s.k),
                            .out = out.get(),
                            .gate_up = s.projection == engine::Projection::kGateUp},
                           stream));
                     }
                     return absl::OkStatus();
                   }));
  const double bytes = rot.weight_bytes + s.n * s.k * 2.0;
  reporter.Add({kScenario, absl::StrCat(s.name, "_dequant"), "bandwidth",
                bytes / (ms / kLaunches * 1e-3) / 1e9, "GB/s", ceil.copy_bytes_per_s / 1e9});
  return absl::OkStatus();
}

absl::Status RunKernelsInt4(const BenchOptions&, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(const Ceilings ceil, MeasureCeilings());
  ASSIGN_OR_RETURN(Int4BenchSetup setup, MakeInt4BenchSetup());
  cudaStream_t stream;
  CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  absl::Status st;
  for (const Shape& s : setup.shapes) {
    if (st.ok()) {
      st = ShapeCases(ceil, s, stream, setup, reporter);
    }
  }
  cudaStreamDestroy(stream);
  return st;
}

const bool kRegistered = RegisterScenario(
    {kScenario, "CUDA: 4-bit projections (Int4Gemm, dequantization) alone vs the copy rate",
     &RunKernelsInt4});

}  // namespace
}  // namespace onecard::bench
