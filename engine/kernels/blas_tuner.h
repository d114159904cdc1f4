// BlasTuner: cuBLASLt algorithms picked by timing for GEMM shapes known ahead
// (the CUDA runner's batched decode steps, m = 8..max_num_seqs), used by
// BlasGemm (blas_gemm.h) when given the tuner.
//
// Why: for the skinny products of batched decode (m <= 128 rows against
// 4096-28672 weight rows) cuBLAS's default heuristic leaves bandwidth unused
// (e.g. only 32 output tiles for a 4096-wide projection at m = 128 on 132
// SMs), and so do the heuristic's own first choices (on the H200 at m = 128
// a searched configuration of the 14336-deep down product runs 10 % faster
// than the heuristic's best). Tune() times up to kCandidates algorithms the
// cuBLASLt heuristic proposes (split-K ones included), searches around the
// fastest few one configuration attribute at a time (tile, split-K and its
// reduction, cluster shape, custom option, swizzle: the values the
// algorithm reports, screened by cublasLtMatmulAlgoCheck), and times the
// finalists and cuBLAS's default over every weight in `weights` (the
// model's layers, so the weights stream from HBM as in a step, not from L2);
// the fastest is kept, or the default when that is the fastest. With
// BlasTunerOptions::at_cap_rows = <rows>, shapes of that many rows or more rank their
// finalists, three more of the heuristic's undescended candidates and the
// default at the board's power limit instead: each runs back to back over
// every weight for 300 ms, then is timed for 200 ms (batch-128 decode steps
// run at the H200's 700 W limit, where a product's time is its energy over
// 700 W, not its burst time). With 128 (bench/results/2026-11-29-h200-cuda.md):
// batch 128 +0.6 % on one card (3 of 3 pairs), nothing on another, for ~3 s
// of tuning a shape; so it is off unless asked for. Every
// configuration computes the same product in fp32 accumulation; only the
// summation order differs. BlasTunerOptions::search = false skips the search
// (the heuristic's candidates and the default only), for comparisons.
// The choices can be saved and loaded (Serialize / Deserialize: JSON, for a
// tuning cache file), so that a process on the same card and cuBLASLt
// version starts without timing them again (blas_tuner_cache.cc). A
// cuBLASLt choice is saved as what rebuilds it, not as its
// cublasLtMatmulAlgo_t: with the raw struct (format 1), a second runner
// (another cuBLASLt handle) passed cublasLtMatmulAlgoCheck and then gave
// all-zero logits on the H200. Saved: the index of the heuristic's algorithm
// the choice was searched from (and that algorithm's id), and the final
// value of every configuration attribute the search changes (tile, split-K
// and reduction, cluster shape, custom option, swizzle) plus stages and
// inner shape, which it leaves as the heuristic gave them; the struct's 8
// words too, only to count how many rebuilt structs equal them. Deserialize
// asks the heuristic again for the shape (same descriptor, preference,
// workspace limit and kCandidates), takes that algorithm, sets the saved
// values that differ, and checks it (cublasLtMatmulAlgoCheck, the workspace
// limit); a choice that fails any step is left out, and Tune times its shape
// afresh. The same algorithm and configuration should run the same kernel,
// so the same products, bit for bit, as in the process that tuned it.
// Tested by tests/gpu/blas_tuner_test.cc against LinearRef, and a second
// tuner's loaded products against the tuning one's, bit for bit.
#ifndef ONECARD_ENGINE_KERNELS_BLAS_TUNER_H_
#define ONECARD_ENGINE_KERNELS_BLAS_TUNER_H_

#include <cublasLt.h>
#include <cublas_v2.h>

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/kernels/blas_gemm.h"

namespace onecard::engine {
namespace cuda {
struct CublasLt;  // cublas_lt.h
}  // namespace cuda

struct BlasTunerOptions {
  bool search = true;       // search around the heuristic's fastest (false: comparisons)
  int64_t at_cap_rows = 0;  // rank shapes of >= this many rows at the power cap; 0: none
};

class BlasTuner {
 public:
  static constexpr int kCandidates = 16;

  // `workspace` (device, `workspace_bytes`) is what tuned algorithms may use;
  // it must outlive the tuner and be used only on the stream the products run
  // on (it may be the cuBLAS handle's workspace: both run in stream order).
  static absl::StatusOr<std::unique_ptr<BlasTuner>> Create(void* workspace, int64_t workspace_bytes,
                                                           const BlasTunerOptions& options = {});
  ~BlasTuner();
  BlasTuner(const BlasTuner&) = delete;
  BlasTuner& operator=(const BlasTuner&) = delete;

  // Tunes the shape of `params` (x, y: buffers of that shape; y is
  // overwritten, or accumulated into when beta = 1; split-K partials when
  // params.splits > 1, a shape of its own). Synchronizes `stream`; not during
  // graph capture. BF16 x and w only (others keep the default).
  absl::Status Tune(cublasHandle_t handle, const BlasGemmParams& params,
                    std::span<const void* const> weights, cudaStream_t stream);
  // Whether the shape of `params` has a choice (tuned or loaded); Tune does
  // nothing for such a shape.
  bool Tuned(const BlasGemmParams& params) const;

  // A caller's own decision about a shape (the runner's split-K partial
  // count for a residual product), saved and loaded with the choices.
  void SetNote(const BlasGemmParams& params, int32_t value);
  std::optional<int32_t> Note(const BlasGemmParams& params) const;

  // What the choices hold for: the cuBLASLt version and the device (name,
  // SMs). A saved set loads only into the same context.
  std::string Context() const;
  // The choices and notes as JSON text (with the context): {"format",
  // "context", "products": [{m, n, k, dtype, y_dtype, accumulate, splits,
  // use_lt, default_us, best_us, "algo" (cuBLASLt choices): {candidate, id,
  // "config": {tile, splitk_num, reduction_scheme, cluster_shape,
  // custom_option, cta_swizzling, stages, inner_shape}, "words": [8 hex]}}],
  // "notes": [{m, n, ..., splits, value}]}.
  std::string Serialize() const;
  // What Deserialize added.
  struct Loaded {
    int products = 0;  // shapes that now have a choice (the default or a cuBLASLt one)
    int rebuilt = 0;   // of those, cuBLASLt configurations rebuilt from the heuristic
    // Of those, the ones whose struct came out word for word as saved.
    // Information only: a rebuilt configuration is used either way.
    int rebuilt_identical = 0;
    // The cuBLASLt choices that could not be rebuilt, each with why
    // ("products[3] (8 x 4096 x 14336): ..."); Tune times them.
    std::vector<std::string> left_out;
  };
  // Adds the choices and notes of Serialize()'s text (nothing when it fails).
  // InvalidArgument for text that is not such JSON (naming the field, e.g.
  // "BlasTuner: products[3].algo.candidate is missing"), or of another
  // format; FailedPrecondition when it was made in another Context().
  absl::StatusOr<Loaded> Deserialize(std::string_view text);

  // Runs `params` with its shape's tuned algorithm: true when there is one,
  // false (nothing enqueued) when the shape was not tuned or the default won.
  absl::StatusOr<bool> TryRun(const BlasGemmParams& params, cudaStream_t stream) const;

  // One line per tuned shape: "m x n x k[ +=][ /splits]: <choice> <us> us (default <us> us,
  // <n> candidates, <n> searched, <ms tuning took> ms)".
  std::string Summary() const;  // loaded choices say "cached", ranked at the cap "at the cap"

 private:
  // Entry: blas_tuner_internal.h; SavedAlgo: blas_tuner_cache.cc.
  using Lt = cuda::CublasLt;
  struct Entry;
  struct SavedAlgo;
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool, int32_t>;
  static Key KeyOf(const BlasGemmParams& p);

  BlasTuner() = default;
  absl::Status Enqueue(const Entry& e, const cublasLtMatmulAlgo_t& algo, size_t workspace,
                       const BlasGemmParams& p, const void* w, cudaStream_t stream) const;
  // An entry with the descriptor and layouts of p's shape, nothing chosen.
  absl::StatusOr<std::unique_ptr<Entry>> NewEntry(const BlasGemmParams& p) const;
  std::vector<uint32_t> SearchValues(const cublasLtMatmulAlgo_t& algo, int attribute) const;
  // cublasLtMatmulAlgoGetHeuristic for e's shape, within the workspace: the
  // count written to `results` (kCandidates of them), 0 when none applies.
  absl::StatusOr<int> Heuristic(const Entry& e, cublasLtMatmulHeuristicResult_t* results) const;
  // Sets e's algorithm and workspace from a saved choice (the header
  // comment); an error says why it cannot be.
  absl::Status Rebuild(const SavedAlgo& saved, Entry* e) const;

  std::unique_ptr<Lt> lt_;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  BlasTunerOptions options_;
  std::map<Key, std::unique_ptr<Entry>> entries_;
  std::map<Key, int32_t> notes_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_BLAS_TUNER_H_
