// BlasTuner (see blas_tuner.h): cuBLASLt descriptors per tuned shape, the
// candidates of cublasLtMatmulAlgoGetHeuristic timed against cuBLAS's default
// with CUDA events, the winner kept. cuBLASLt is reached through
// cuda::CublasLt (cublas_lt.h: opened on first use, like cuBLAS).
#include "engine/kernels/blas_tuner.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/blas_tuner_internal.h"
#include "engine/kernels/cuda_check.h"

namespace onecard::engine {
namespace {

using blas_tuner_internal::ConfigField;
using blas_tuner_internal::GetConfig;
using blas_tuner_internal::kConfigFields;
using blas_tuner_internal::kSearchedFields;
using blas_tuner_internal::SetConfig;

constexpr int kTimedPasses = 3;         // over all weights, after one warm-up pass
constexpr size_t kDescentStarts = 2;    // the heuristic's fastest, searched around
constexpr int kMaxSearched = 600;       // configurations timed by the search, a shape
constexpr double kSampleBytes = 256e6;  // weight bytes a quick timing streams (5x L2)
constexpr double kBetter = 0.99;        // a neighbour this much faster replaces the current
constexpr int kMaxCustomOption = 7;
constexpr uint32_t kMaxClusterShape = 20;  // CUBLASLT_CLUSTER_SHAPE_* ids tried

constexpr double kHeatMs = 300;    // back to back before the timing: the board reaches its limit
constexpr double kAtCapMs = 200;   // then timed
constexpr size_t kAtCapExtra = 3;  // undescended candidates added to the finalists

cudaDataType_t CudaType(DType dtype) { return dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF; }

}  // namespace

namespace blas_tuner_internal {

bool GetConfig(ConfigGet get, const cublasLtMatmulAlgo_t& algo, const ConfigField& field,
               uint32_t* value) {
  size_t written = 0;
  if (field.narrow) {
    uint16_t narrow = 0;
    if (get(&algo, field.attribute, &narrow, sizeof(narrow), &written) != CUBLAS_STATUS_SUCCESS) {
      return false;
    }
    *value = narrow;
    return true;
  }
  return get(&algo, field.attribute, value, sizeof(*value), &written) == CUBLAS_STATUS_SUCCESS;
}

bool SetConfig(ConfigSet set, cublasLtMatmulAlgo_t* algo, const ConfigField& field,
               uint32_t value) {
  if (field.narrow) {
    if (value > std::numeric_limits<uint16_t>::max()) return false;
    const uint16_t narrow = static_cast<uint16_t>(value);
    return set(algo, field.attribute, &narrow, sizeof(narrow)) == CUBLAS_STATUS_SUCCESS;
  }
  return set(algo, field.attribute, &value, sizeof(value)) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace blas_tuner_internal

absl::StatusOr<std::unique_ptr<BlasTuner>> BlasTuner::Create(void* workspace,
                                                             int64_t workspace_bytes,
                                                             const BlasTunerOptions& options) {
  if (options.at_cap_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlasTunerOptions.at_cap_rows = ", options.at_cap_rows, ": must be >= 0"));
  }
  std::unique_ptr<BlasTuner> tuner(new BlasTuner());
  tuner->options_ = options;
  tuner->lt_ = std::make_unique<Lt>();
  RETURN_IF_ERROR(tuner->lt_->Load());
  tuner->workspace_ = workspace;
  tuner->workspace_bytes_ = workspace != nullptr ? workspace_bytes : 0;
  return tuner;
}

BlasTuner::~BlasTuner() { entries_.clear(); }

BlasTuner::Key BlasTuner::KeyOf(const BlasGemmParams& p) {
  return {p.m,     p.n, p.k, static_cast<int>(p.dtype), static_cast<int>(p.y_dtype), p.beta != 0.0f,
          p.splits};
}

absl::Status BlasTuner::Enqueue(const Entry& e, const cublasLtMatmulAlgo_t& algo, size_t workspace,
                                const BlasGemmParams& p, const void* w, cudaStream_t stream) const {
  const float alpha = 1.0f;
  CUDA_RETURN_IF_ERROR(lt_->matmul(lt_->handle, e.desc, &alpha, w, e.a, p.x, e.b, &p.beta, p.y, e.c,
                                   p.y, e.c, &algo, workspace_, workspace, stream));
  return absl::OkStatus();
}

absl::StatusOr<bool> BlasTuner::TryRun(const BlasGemmParams& p, cudaStream_t stream) const {
  const auto it = entries_.find(KeyOf(p));
  if (it == entries_.end() || !it->second->use_lt) return false;
  const Entry& e = *it->second;
  RETURN_IF_ERROR(Enqueue(e, e.algo, e.workspace, p, p.w, stream));
  return true;
}

// The values a search tries for one configuration attribute of `algo`.
std::vector<uint32_t> BlasTuner::SearchValues(const cublasLtMatmulAlgo_t& algo,
                                              int attribute) const {
  auto cap_list = [&](cublasLtMatmulAlgoCapAttributes_t cap) {
    size_t bytes = 0;
    std::vector<uint32_t> out;
    if (lt_->cap_get(&algo, cap, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS) return out;
    out.resize(bytes / sizeof(uint32_t));
    if (!out.empty() && lt_->cap_get(&algo, cap, out.data(), out.size() * sizeof(uint32_t),
                                     &bytes) != CUBLAS_STATUS_SUCCESS) {
      out.clear();
    }
    return out;
  };
  auto range = [](uint32_t last) {
    std::vector<uint32_t> out;
    for (uint32_t v = 0; v <= last; ++v) out.push_back(v);
    return out;
  };
  switch (attribute) {
    case CUBLASLT_ALGO_CONFIG_TILE_ID:
      return cap_list(CUBLASLT_ALGO_CAP_TILE_IDS);
    case CUBLASLT_ALGO_CONFIG_SPLITK_NUM:
      return {1, 2, 3, 4, 6, 8};
    case CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME:
      return {CUBLASLT_REDUCTION_SCHEME_NONE, CUBLASLT_REDUCTION_SCHEME_INPLACE,
              CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE};
    case CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING:
      return {0, 1};
    case CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION: {
      int32_t last = 0;
      size_t bytes = 0;
      lt_->cap_get(&algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &last, sizeof(last), &bytes);
      return range(static_cast<uint32_t>(std::clamp(last, 0, kMaxCustomOption)));
    }
    case CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID:
      return range(kMaxClusterShape);
    default:
      return {};
  }
}

absl::StatusOr<std::unique_ptr<BlasTuner::Entry>> BlasTuner::NewEntry(
    const BlasGemmParams& p) const {
  const Lt& lt = *lt_;
  auto e = std::make_unique<Entry>();
  e->lt = lt_.get();
  // Column-major view, as BlasGemm: y^T [n, m] = op_T(W^T [k, n]) x^T [k, m].
  CUDA_RETURN_IF_ERROR(lt.desc_create(&e->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  CUDA_RETURN_IF_ERROR(lt.desc_set(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
  CUDA_RETURN_IF_ERROR(lt.desc_set(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
  // Split-K partials: batch s multiplies the s-th k-slice of W and x (strided
  // by the slice within each row) into the s-th [n, m] slice of y.
  const int64_t depth = p.k / std::max(p.splits, 1);
  CUDA_RETURN_IF_ERROR(lt.layout_create(&e->a, CUDA_R_16BF, depth, p.n, p.k));
  CUDA_RETURN_IF_ERROR(lt.layout_create(&e->b, CUDA_R_16BF, depth, p.m, p.k));
  CUDA_RETURN_IF_ERROR(lt.layout_create(&e->c, CudaType(p.y_dtype), p.n, p.m, p.n));
  if (p.splits > 1) {
    const int32_t count = p.splits;
    const int64_t c_stride = p.m * p.n;
    for (cublasLtMatrixLayout_t layout : {e->a, e->b, e->c}) {
      const int64_t stride = layout == e->c ? c_stride : depth;
      CUDA_RETURN_IF_ERROR(
          lt.layout_set(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      CUDA_RETURN_IF_ERROR(lt.layout_set(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                         &stride, sizeof(stride)));
    }
  }
  return e;
}

absl::StatusOr<int> BlasTuner::Heuristic(const Entry& e,
                                         cublasLtMatmulHeuristicResult_t* results) const {
  const Lt& lt = *lt_;
  cublasLtMatmulPreference_t pref = nullptr;
  CUDA_RETURN_IF_ERROR(lt.pref_create(&pref));
  const uint64_t max_workspace = static_cast<uint64_t>(workspace_bytes_);
  int found = 0;
  cublasStatus_t st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                  sizeof(max_workspace));
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = lt.heuristic(lt.handle, e.desc, e.a, e.b, e.c, e.c, pref, kCandidates, results, &found);
  }
  lt.pref_destroy(pref);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return 0;  // none for this shape: the default stays
  CUDA_RETURN_IF_ERROR(st);
  return found;
}

absl::Status BlasTuner::Tune(cublasHandle_t handle, const BlasGemmParams& p,
                             std::span<const void* const> weights, cudaStream_t stream) {
  if (p.splits != 1 && !BlasGemmSplitsFit(p.k, p.splits)) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlasTuner: k = ", p.k, " cannot be split ", p.splits, " ways"));
  }
  if (p.dtype != DType::kBF16 || weights.empty() || p.m <= 0) return absl::OkStatus();
  if (Tuned(p)) return absl::OkStatus();
  const auto began = std::chrono::steady_clock::now();
  const Lt& lt = *lt_;
  ASSIGN_OR_RETURN(std::unique_ptr<Entry> e, NewEntry(p));
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  ASSIGN_OR_RETURN(const int found, Heuristic(*e, results));

  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  // Microseconds a product over `over` (after one warm-up pass); an error
  // from `run` (an algorithm that turns out not to apply) is returned as is.
  auto time = [&](std::span<const void* const> over, int passes,
                  auto&& run) -> absl::StatusOr<double> {
    for (const void* w : over) RETURN_IF_ERROR(run(w));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
    for (int pass = 0; pass < passes; ++pass) {
      for (const void* w : over) RETURN_IF_ERROR(run(w));
    }
    CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
    return 1e3 * ms / (passes * static_cast<double>(over.size()));
  };
  // The search times each configuration once over enough weights to stream
  // kSampleBytes from HBM; the finalists are timed over all of them.
  const double weight_bytes = 2.0 * static_cast<double>(p.n) * static_cast<double>(p.k);
  const size_t sample_count = std::min(
      weights.size(), std::max<size_t>(2, static_cast<size_t>(kSampleBytes / weight_bytes) + 1));
  const std::span<const void* const> sample = weights.first(sample_count);
  struct Candidate {
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
    double us;
    int origin;  // the heuristic's index it came from
  };
  // Quick time of one configuration; nullopt-like -1 when it does not run.
  auto quick = [&](const cublasLtMatmulAlgo_t& algo, size_t workspace) -> absl::StatusOr<double> {
    absl::StatusOr<double> us =
        time(sample, 1, [&](const void* w) { return Enqueue(*e, algo, workspace, p, w, stream); });
    if (us.ok()) return *us;
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    (void)cudaGetLastError();
    return -1.0;
  };
  absl::Status status = [&]() -> absl::Status {
    std::vector<Candidate> pool;
    for (int i = 0; i < found; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS ||
          results[i].workspaceSize > static_cast<size_t>(workspace_bytes_)) {
        continue;
      }
      ASSIGN_OR_RETURN(const double us, quick(results[i].algo, results[i].workspaceSize));
      if (us > 0) pool.push_back({results[i].algo, results[i].workspaceSize, us, i});
    }
    e->candidates = static_cast<int>(pool.size());
    std::sort(pool.begin(), pool.end(),
              [](const Candidate& x, const Candidate& y) { return x.us < y.us; });
    // Coordinate descent from one configuration: one attribute at a time over
    // the values the algorithm allows, a change kept when it is kBetter
    // faster; cublasLtMatmulAlgoCheck screens out what cannot run.
    auto descend = [&](Candidate cur) -> absl::StatusOr<Candidate> {
      for (const ConfigField& field : std::span(kConfigFields).first<kSearchedFields>()) {
        uint32_t now = 0;
        if (!GetConfig(lt.config_get, cur.algo, field, &now)) continue;
        for (const uint32_t value : SearchValues(cur.algo, field.attribute)) {
          if (e->searched >= kMaxSearched) return cur;
          if (value == now) continue;
          cublasLtMatmulAlgo_t next = cur.algo;
          cublasLtMatmulHeuristicResult_t checked{};
          if (!SetConfig(lt.config_set, &next, field, value) ||
              lt.check(lt.handle, e->desc, e->a, e->b, e->c, e->c, &next, &checked) !=
                  CUBLAS_STATUS_SUCCESS ||
              checked.workspaceSize > static_cast<size_t>(workspace_bytes_)) {
            continue;
          }
          ++e->searched;
          ASSIGN_OR_RETURN(const double us, quick(next, checked.workspaceSize));
          if (us > 0 && us < kBetter * cur.us) {
            cur = {next, checked.workspaceSize, us, cur.origin};
            now = value;
          }
        }
      }
      return cur;
    };
    // Finalists: the heuristic's fastest, each after a descent from it (the
    // kDescentStarts fastest), or as it is for a product run once a step
    // (one weight: the LM head), whose search would cost more than it saves.
    const bool search = weights.size() > 1 && options_.search;
    std::vector<Candidate> finalists;
    for (size_t s = 0; s < pool.size() && s < (search ? kDescentStarts : 1); ++s) {
      if (search) {
        ASSIGN_OR_RETURN(pool[s], descend(pool[s]));
      }
      finalists.push_back(pool[s]);
    }
    const bool at_cap = options_.at_cap_rows > 0 && p.m >= options_.at_cap_rows && search;
    e->at_cap = at_cap;
    if (at_cap) {  // more choice for the ranking at the cap: the next undescended ones
      for (size_t s = kDescentStarts; s < pool.size() && s < kDescentStarts + kAtCapExtra; ++s) {
        finalists.push_back(pool[s]);
      }
    }
    // The finalists and cuBLAS's default, each over every weight.
    BlasGemmParams q = p;
    ASSIGN_OR_RETURN(e->default_us, time(weights, kTimedPasses, [&](const void* w) {
                       q.w = w;
                       return BlasGemm(handle, q, stream);
                     }));
    // At the cap: passes over every weight for kHeatMs, then kAtCapMs timed.
    auto time_at_cap = [&](double burst_us, auto&& run) -> absl::StatusOr<double> {
      const double pass_ms = std::max(1e-3, burst_us * weights.size() * 1e-3);
      const int heat = static_cast<int>(kHeatMs / pass_ms) + 1;
      const int timed = static_cast<int>(kAtCapMs / pass_ms) + 1;
      for (int i = 0; i < heat; ++i) {
        for (const void* w : weights) RETURN_IF_ERROR(run(w));
      }
      return time(weights, timed, run);
    };
    if (at_cap) {
      ASSIGN_OR_RETURN(e->default_us, time_at_cap(e->default_us, [&](const void* w) {
                         q.w = w;
                         return BlasGemm(handle, q, stream);
                       }));
    }
    e->best_us = e->default_us;
    for (const Candidate& c : finalists) {
      auto run = [&](const void* w) { return Enqueue(*e, c.algo, c.workspace, p, w, stream); };
      absl::StatusOr<double> us = time(weights, kTimedPasses, run);
      if (us.ok() && at_cap) us = time_at_cap(*us, run);
      if (!us.ok()) {
        CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
        (void)cudaGetLastError();
        continue;
      }
      if (*us < e->best_us) {
        e->best_us = *us;
        e->candidate = c.origin;
        e->algo = c.algo;
        e->workspace = c.workspace;
        e->use_lt = true;
      }
    }
    return absl::OkStatus();
  }();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  RETURN_IF_ERROR(status);
  e->tune_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
  entries_[KeyOf(p)] = std::move(e);
  return absl::OkStatus();
}

bool BlasTuner::Tuned(const BlasGemmParams& p) const { return entries_.contains(KeyOf(p)); }

void BlasTuner::SetNote(const BlasGemmParams& p, int32_t value) { notes_[KeyOf(p)] = value; }

std::optional<int32_t> BlasTuner::Note(const BlasGemmParams& p) const {
  const auto it = notes_.find(KeyOf(p));
  if (it == notes_.end()) return std::nullopt;
  return it->second;
}

std::string BlasTuner::Summary() const {
  std::string out;
  for (const auto& [key, e] : entries_) {
    const auto& [m, n, k, dtype, y_dtype, accumulate, splits] = key;
    absl::StrAppend(
        &out,
        absl::StrFormat("%d x %d x %d%s%s: %s %.1f us (default %.1f us, %d "
                        "candidates, %d searched, %.0f ms)\n",
                        m, n, k, accumulate ? " +=" : "",
                        splits > 1 ? absl::StrCat(" /", splits) : std::string(),
                        absl::StrCat(e->use_lt ? absl::StrCat("cublasLt from #", e->candidate)
                                               : std::string("default"),
                                     e->cached ? " (cached)" : "", e->at_cap ? " at the cap" : ""),
                        e->best_us, e->default_us, e->candidates, e->searched, e->tune_ms));
  }
  return out;
}

}  // namespace onecard::engine
