// Scenario "timeline-int4": where a 4-bit projection's time goes inside its
// launch. Int4Gemm's kStream kernel (the decode path, 1 and 16 rows, as the
// runner calls it: gate_up with the SiLU·mul epilogue, o and down adding to
// the residual; the cluster split where --int4_cluster_split_k asks for it)
// writes, for each consumer warp of each block, the block's
// start, the warp's first stage landed and the warp's end in the GPU's global
// timer, its last stage computed, and the block's SM (Int4GemmParams::trace).
// Two launches on rotated weights run back to
// back as in a decode step (programmatic dependent launch), both traced, and
// the scenario reports, in us (the median of kPairs pairs):
//   start_skew   the first launch's last block start after its first
//   first_data   the median warp's wait from its block's start to its first
//                stage of weights landed (the pipeline's ramp)
//   end_median   the median warp's end after the launch's first block start
//   span         the last warp's end after it (the launch's time on the SMs)
//   tail         span - end_median (the last blocks and the split-K sums)
//   last_spread  the last warp's last stage computed after the median warp's
//                (the streaming's own imbalance)
//   finish_max   the longest time from a warp's last stage computed to its
//                end (its last segment's split-K sums and epilogue)
//   late_sm_repeat  of the tenth of the SMs whose last warp ends latest in the
//                first launch, the fraction that are so in the second too
//                (near 1: the same SMs are slow every launch; ~0.1: chance)
//   late_block_repeat  the same for the blocks (a block's share and its
//                split-K parts are the same in both launches, its SM and its
//                weights' copy are not)
//   late_block_segments  the late tenth of the blocks' mean count of
//                segments (row groups its share touches: 1 + its split-K
//                finishes mid-share) over every block's (above 1: the blocks
//                with more finishes end last; 1 in a cluster split,
//                --int4_cluster_split_k, where a block has one segment)
//   gap          the second launch's first block start after the first's
//                last end (negative: they overlapped)
//   pair         CUDA events around both launches (with the host's launch
//                calls: an upper bound)
//   period       the second launch's last warp end after the first's: what
//                one more launch adds to a chain of them on the GPU
//   timer_step   the smallest nonzero step seen between two stamps (ns: the
//                timer's resolution bounds every figure above)
// and span_bandwidth and period_bandwidth, the weight bytes over span and
// over period (GB/s, against the copy rate).
// Shapes: those of kernels-int4 (--shape picks one).
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/int4_gemm.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"
#include "tools/bench/cuda/kernels_int4.h"

namespace onecard::bench {
namespace {

constexpr char kScenario[] = "timeline-int4";
constexpr int kPairs = 7;
constexpr int kWarmup = 5;

// One warp's stamps (ns), its block's SM and its block.
struct WarpStamps {
  uint64_t start = 0, first = 0, last = 0, end = 0, sm = 0, block = 0;
};

// The warps that wrote (start != 0) in a trace.
std::vector<WarpStamps> Stamps(const std::vector<uint64_t>& trace) {
  constexpr size_t kWords = engine::kInt4GemmTraceStamps;
  constexpr size_t kBlockWords = kWords * engine::kInt4GemmTraceWarps;
  std::vector<WarpStamps> out;
  for (size_t i = 0; i + kWords <= trace.size(); i += kWords) {
    if (trace[i] == 0) continue;
    out.push_back(
        {trace[i], trace[i + 1], trace[i + 2], trace[i + 3], trace[i + 4], i / kBlockWords});
  }
  return out;
}

struct PairFigures {
  double start_skew = 0, first_data = 0, end_median = 0, span = 0, tail = 0, gap = 0, pair = 0;
  double period = 0;
  double last_spread = 0, finish_max = 0, late_sm_repeat = 0, late_block_repeat = 0;
  double late_block_segments = 0;
  double timer_step = 0;
};

// The tenth (at least one) of the SMs or of the blocks (key: WarpStamps::sm
// or ::block) whose last warp ends latest in a launch, sorted.
std::vector<uint64_t> Late(const std::vector<WarpStamps>& warps, uint64_t WarpStamps::*key) {
  std::map<uint64_t, uint64_t> last_end;  // key -> its last warp's end
  for (const WarpStamps& w : warps) last_end[w.*key] = std::max(last_end[w.*key], w.end);
  std::vector<std::pair<uint64_t, uint64_t>> by_end;  // (end, key)
  for (const auto& [k, end] : last_end) by_end.push_back({end, k});
  std::sort(by_end.rbegin(), by_end.rend());
  by_end.resize(std::max<size_t>(1, by_end.size() / 10));
  std::vector<uint64_t> keys;
  for (const auto& e : by_end) keys.push_back(e.second);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// The fraction of the first launch's late keys that are late in the second.
double LateRepeat(const std::vector<WarpStamps>& a, const std::vector<WarpStamps>& b,
                  uint64_t WarpStamps::*key) {
  const std::vector<uint64_t> late_a = Late(a, key), late_b = Late(b, key);
  std::vector<uint64_t> both;
  std::set_intersection(late_a.begin(), late_a.end(), late_b.begin(), late_b.end(),
                        std::back_inserter(both));
  return static_cast<double>(both.size()) / static_cast<double>(late_a.size());
}

// The late tenth of a launch's blocks' mean segments over every block's: a
// block's share is Int4Gemm's stream-K share (iterations b * iters / grid to
// (b + 1) * iters / grid of row groups of k_tiles iterations), the grid the
// blocks that wrote; 1 in a cluster split (cluster > 0: one segment a block).
double LateBlockSegments(const std::vector<WarpStamps>& warps, int64_t iters, int64_t k_tiles,
                         int32_t cluster) {
  if (cluster > 0) return 1.0;
  uint64_t grid = 0;
  for (const WarpStamps& w : warps) grid = std::max(grid, w.block + 1);
  const auto segments = [&](uint64_t b) {
    const int64_t g = static_cast<int64_t>(grid), blk = static_cast<int64_t>(b);
    const int64_t begin = blk * iters / g, end = (blk + 1) * iters / g;
    return end > begin ? static_cast<double>((end - 1) / k_tiles - begin / k_tiles + 1) : 0.0;
  };
  double all = 0;
  for (uint64_t b = 0; b < grid; ++b) all += segments(b);
  const std::vector<uint64_t> late = Late(warps, &WarpStamps::block);
  double late_sum = 0;
  for (uint64_t b : late) late_sum += segments(b);
  return all > 0 ? (late_sum / static_cast<double>(late.size())) / (all / static_cast<double>(grid))
                 : 0.0;
}

double Us(double ns) { return ns * 1e-3; }

// iters, k_tiles and cluster: the launches' walk (LateBlockSegments).
absl::StatusOr<PairFigures> Figures(const std::vector<WarpStamps>& a,
                                    const std::vector<WarpStamps>& b, double pair_ms, int64_t iters,
                                    int64_t k_tiles, int32_t cluster) {
  if (a.empty() || b.empty()) {
    return absl::InternalError("timeline-int4: a traced launch wrote no stamps");
  }
  uint64_t a_first_start = UINT64_MAX, a_last_start = 0, a_last_end = 0, b_first_start = UINT64_MAX;
  uint64_t b_last_end = 0;
  std::vector<double> first_data, ends, lasts;
  std::vector<uint64_t> all;
  double finish_max = 0;
  for (const WarpStamps& w : a) {
    a_first_start = std::min(a_first_start, w.start);
    a_last_start = std::max(a_last_start, w.start);
    a_last_end = std::max(a_last_end, w.end);
    first_data.push_back(static_cast<double>(w.first) - static_cast<double>(w.start));
    lasts.push_back(static_cast<double>(w.last));
    finish_max = std::max(finish_max, static_cast<double>(w.end) - static_cast<double>(w.last));
    all.insert(all.end(), {w.start, w.first, w.last, w.end});
  }
  for (const WarpStamps& w : a) ends.push_back(static_cast<double>(w.end - a_first_start));
  for (const WarpStamps& w : b) {
    b_first_start = std::min(b_first_start, w.start);
    b_last_end = std::max(b_last_end, w.end);
    all.insert(all.end(), {w.start, w.first, w.last, w.end});
  }
  std::sort(all.begin(), all.end());
  uint64_t step = UINT64_MAX;
  for (size_t i = 1; i < all.size(); ++i) {
    if (all[i] > all[i - 1]) step = std::min(step, all[i] - all[i - 1]);
  }
  PairFigures f;
  f.start_skew = Us(static_cast<double>(a_last_start - a_first_start));
  f.first_data = Us(Median(first_data));
  f.end_median = Us(Median(ends));
  f.span = Us(static_cast<double>(a_last_end - a_first_start));
  f.tail = f.span - f.end_median;
  f.gap = Us(static_cast<double>(b_first_start) - static_cast<double>(a_last_end));
  f.period = Us(static_cast<double>(b_last_end) - static_cast<double>(a_last_end));
  f.pair = pair_ms * 1e3;
  f.timer_step = step == UINT64_MAX ? 0 : static_cast<double>(step);
  f.last_spread = Us(*std::max_element(lasts.begin(), lasts.end()) - Median(lasts));
  f.finish_max = Us(finish_max);
  f.late_sm_repeat = LateRepeat(a, b, &WarpStamps::sm);
  f.late_block_repeat = LateRepeat(a, b, &WarpStamps::block);
  f.late_block_segments = LateBlockSegments(a, iters, k_tiles, cluster);
  return f;
}

absl::Status ShapeTimeline(const Ceilings& ceil, const ProjectionCase& s, int32_t rows,
                           cudaStream_t stream, void* ws, int64_t ws_bytes, uint64_t* traces[2],
                           int64_t trace_words, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(Int4Rotation rot, MakeInt4Rotation(s.n, s.k, stream));
  ASSIGN_OR_RETURN(DeviceMem x, DeviceMem::Random(int64_t{rows} * s.k * 2, 23, stream));
  ASSIGN_OR_RETURN(DeviceMem y, DeviceMem::Random(int64_t{rows} * s.n * 2, 25, stream));
  int next = 0;
  const auto params = [&](uint64_t* trace) {
    engine::Int4GemmParams p =
        ProjectionInt4Params(s, rot.View(next, s.n, s.k), x.get(), y.get(), rows, ws, ws_bytes);
    p.path = engine::Int4GemmPath::kStream;
    p.trace = trace;
    return p;
  };
  auto launch = [&](uint64_t* trace) {
    const absl::Status st = engine::Int4Gemm(params(trace), stream);
    ++next;
    return st;
  };
  // The launches' cluster size (--int4_cluster_split_k; 0: stream-K).
  ASSIGN_OR_RETURN(const engine::Int4GemmClusterPlan plan,
                   engine::Int4GemmClusterSplit(params(traces[0])));
  const int32_t cluster = plan.size;
  for (int i = 0; i < kWarmup; ++i) RETURN_IF_ERROR(launch(nullptr));
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&e0));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&e1));
  std::vector<PairFigures> figures;
  absl::Status st;
  for (int p = 0; p < kPairs && st.ok(); ++p) {
    st = [&]() -> absl::Status {
      for (int t = 0; t < 2; ++t) {
        CUDA_RETURN_IF_ERROR(cudaMemsetAsync(traces[t], 0, trace_words * 8, stream));
      }
      RETURN_IF_ERROR(launch(nullptr));  // the kernel before, as in a step
      CUDA_RETURN_IF_ERROR(cudaEventRecord(e0, stream));
      RETURN_IF_ERROR(launch(traces[0]));
      RETURN_IF_ERROR(launch(traces[1]));
      CUDA_RETURN_IF_ERROR(cudaEventRecord(e1, stream));
      CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      float ms = 0;
      CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, e0, e1));
      std::vector<uint64_t> host[2];
      for (int t = 0; t < 2; ++t) {
        host[t].resize(trace_words);
        CUDA_RETURN_IF_ERROR(
            cudaMemcpy(host[t].data(), traces[t], trace_words * 8, cudaMemcpyDeviceToHost));
      }
      const int64_t k_tiles = s.k / engine::kInt4TileCols;
      const int64_t row_groups = (s.n + engine::kInt4GemmRowGroup - 1) / engine::kInt4GemmRowGroup;
      ASSIGN_OR_RETURN(PairFigures f, Figures(Stamps(host[0]), Stamps(host[1]), ms,
                                              row_groups * k_tiles, k_tiles, cluster));
      figures.push_back(f);
      return absl::OkStatus();
    }();
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  RETURN_IF_ERROR(st);
  auto median = [&](double PairFigures::*field) {
    std::vector<double> v;
    for (const PairFigures& f : figures) v.push_back(f.*field);
    return Median(v);
  };
  const std::string name = absl::StrCat(s.name, "_r", rows);
  const std::pair<const char*, double PairFigures::*> fields[] = {
      {"start_skew", &PairFigures::start_skew},
      {"first_data", &PairFigures::first_data},
      {"end_median", &PairFigures::end_median},
      {"span", &PairFigures::span},
      {"tail", &PairFigures::tail},
      {"gap", &PairFigures::gap},
      {"pair", &PairFigures::pair},
      {"period", &PairFigures::period},
      {"last_spread", &PairFigures::last_spread},
      {"finish_max", &PairFigures::finish_max}};
  for (const auto& [metric, field] : fields) {
    reporter.Add({kScenario, name, metric, median(field), "us", {}});
  }
  struct Shares {
    const char* metric;
    double PairFigures::*field;
    const char* unit;
  };
  const Shares shares[] = {{"late_sm_repeat", &PairFigures::late_sm_repeat, "fraction"},
                           {"late_block_repeat", &PairFigures::late_block_repeat, "fraction"},
                           {"late_block_segments", &PairFigures::late_block_segments, "ratio"}};
  for (const Shares& m : shares) {
    reporter.Add({kScenario, name, m.metric, median(m.field), m.unit, {}});
  }
  reporter.Add({kScenario, name, "timer_step", median(&PairFigures::timer_step), "ns", {}});
  for (const auto& [metric, field] : {std::pair{"span_bandwidth", &PairFigures::span},
                                      std::pair{"period_bandwidth", &PairFigures::period}}) {
    reporter.Add({kScenario, name, metric, rot.weight_bytes / (median(field) * 1e-6) / 1e9, "GB/s",
                  ceil.copy_bytes_per_s / 1e9});
  }
  return absl::OkStatus();
}

absl::Status RunTimelineInt4(const BenchOptions&, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(const Ceilings ceil, MeasureCeilings());
  ASSIGN_OR_RETURN(Int4BenchSetup setup, MakeInt4BenchSetup());
  const int64_t trace_words = engine::Int4GemmTraceWords(setup.sms);
  DeviceMem trace_mem[2];
  for (DeviceMem& t : trace_mem) {
    ASSIGN_OR_RETURN(t, DeviceMem::Zeroed(trace_words * 8));
  }
  uint64_t* traces[2] = {reinterpret_cast<uint64_t*>(trace_mem[0].get()),
                         reinterpret_cast<uint64_t*>(trace_mem[1].get())};
  cudaStream_t stream;
  CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  absl::Status st;
  for (const ProjectionCase& s : setup.shapes) {
    for (int32_t rows : {1, 16}) {
      if (st.ok()) {
        st = ShapeTimeline(ceil, s, rows, stream, setup.workspace.get(), setup.workspace_bytes,
                           traces, trace_words, reporter);
      }
    }
  }
  cudaStreamDestroy(stream);
  return st;
}

const bool kRegistered = RegisterScenario(
    {kScenario, "CUDA: a 4-bit projection's launch from the inside (per-warp global-timer stamps)",
     &RunTimelineInt4});

}  // namespace
}  // namespace onecard::bench
