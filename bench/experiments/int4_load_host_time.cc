// Where the host time of a 4-bit checkpoint's CUDA load goes, per layer,
// without a GPU: what LoadInt4Projection (engine/runtime/cuda/
// weight_loader.cc) does before its copies, for the first LAYERS layers of an
// HF GPTQ / AWQ / compressed-tensors checkpoint, each projection fused as the
// loader fuses it (q, k, v one after the other; gate and up interleaved by 8
// rows), by two arms timed step by step:
//   matrix: a fresh zeroed buffer a projection (MakeInt4Packed), then a part
//           at a time ReadTensorInt4 (the stored codes into an Int4Matrix, a
//           byte a code), Validate, ConvertInt4Offsets, PackInt4Rows;
//   words:  the projection's buffer of the layer before (ResizeInt4Packed),
//           ReadTensorInt4Words (GPTQ's words and scales as stored, zero
//           points read) for every part, one PackInt4WordRows; a projection
//           with a part it cannot take goes the matrix way (counted).
// Both arms' bytes are compared for every projection (a difference is an
// error), and each arm's mapped pages are dropped after it (as the loader's
// ReleaseRead), so that both fault them in from the page cache. The arms take
// turns going first, layer by layer.
//   int4_load_host_time CHECKPOINT_DIR [LAYERS] [THREADS] [ARM]
// threads: 1 = no pool; arm: both (the default), matrix or words (one arm
// alone, nothing compared: for a profiler).
// Build: cmake --build build --target experiments (bench/experiments/README.md).
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/int4_matrix.h"
#include "engine/kernels/int4_words.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/mapped_file.h"

namespace onecard::engine {
namespace {

// Seconds per step of one arm, summed over the layers.
struct Times {
  double resolve = 0, read = 0, check = 0, alloc = 0, pack = 0;
  double cpu = 0;        // process CPU time, all threads
  int matrix_parts = 0;  // parts packed through an Int4Matrix
  double Total() const { return resolve + read + check + alloc + pack; }
};

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Seconds since the last Lap.
class Clock {
 public:
  double Lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

void DropPages(const ResolvedTensor& t) {
  if (!t.hf_int4.has_value()) return DropMappedPages(t.view->data, t.view->size_bytes);
  for (const TensorView* v :
       {t.hf_int4->packed, t.hf_int4->scales, t.hf_int4->zeros, t.hf_int4->g_idx}) {
    if (v != nullptr) DropMappedPages(v->data, v->size_bytes);
  }
}

// Part t through an Int4Matrix into rows `rows` of `fused`.
absl::Status PackThroughMatrix(const ResolvedTensor& t, std::span<const int64_t> rows,
                               int64_t n_dst, Int4Offsets offsets, ThreadPool* pool,
                               Int4Packed* fused, Times* times) {
  Clock clock;
  ASSIGN_OR_RETURN(Int4Matrix m, ReadTensorInt4(t, pool));
  times->read += clock.Lap();
  RETURN_IF_ERROR(m.Validate(t.name));
  RETURN_IF_ERROR(ConvertInt4Offsets(&m, offsets, t.name));
  times->check += clock.Lap();
  RETURN_IF_ERROR(PackInt4Rows(m, rows, n_dst, fused, pool));
  times->pack += clock.Lap();
  ++times->matrix_parts;
  return absl::OkStatus();
}

// The words of every part, or nullopt where a part has none with the
// projection's offset kind (then every part goes through an Int4Matrix, as
// in the loader).
absl::StatusOr<std::optional<std::vector<Int4WordMatrix>>> PartWords(
    const std::vector<ResolvedTensor>& tensors, Int4Offsets offsets) {
  std::vector<Int4WordMatrix> words;
  for (const ResolvedTensor& t : tensors) {
    ASSIGN_OR_RETURN(std::optional<Int4WordMatrix> w, ReadTensorInt4Words(t));
    if (!w.has_value() || w->offsets != offsets) return std::nullopt;
    RETURN_IF_ERROR(w->Validate(t.name));
    words.push_back(std::move(*w));
  }
  return words;
}

// One projection of `parts` (interleaved: gate and up) packed into `fused`
// by one arm: the matrix arm into a fresh buffer (MakeInt4Packed), the words
// arm into its buffer of the layer before (ResizeInt4Packed), as the loader
// does.
absl::Status PackProjection(const Checkpoint& c, std::span<const TensorPart> parts,
                            bool interleaved, int layer, bool words, ThreadPool* pool,
                            Int4Packed* fused, Times* times) {
  Clock clock;
  std::vector<ResolvedTensor> tensors;
  int64_t n_dst = 0;
  for (TensorPart part : parts) {
    ASSIGN_OR_RETURN(ResolvedTensor t, ResolveTensor(c, part, layer));
    n_dst += t.shape[0];
    tensors.push_back(std::move(t));
  }
  ASSIGN_OR_RETURN(const std::optional<Int4Form> form, Int4FormOf(tensors[0]));
  if (!form.has_value()) return absl::InvalidArgumentError(tensors[0].name + " is not 4-bit");
  const int64_t k = tensors[0].shape[1];
  times->resolve += clock.Lap();
  if (words) {
    ResizeInt4Packed(fused, n_dst, k, form->group, form->offsets);
  } else {
    *fused = MakeInt4Packed(n_dst, k, form->group, form->offsets);
  }
  times->alloc += clock.Lap();
  std::vector<std::vector<int64_t>> rows;
  for (int64_t row = 0; const ResolvedTensor& t : tensors) {
    const int part = static_cast<int>(rows.size());
    rows.push_back(interleaved ? InterleavedGateUpRows(t.shape[0], part)
                               : ConcatRows(t.shape[0], row));
    row += t.shape[0];
  }
  std::optional<std::vector<Int4WordMatrix>> part_words;
  if (words) {
    ASSIGN_OR_RETURN(part_words, PartWords(tensors, form->offsets));
  }
  times->read += clock.Lap();
  if (part_words.has_value()) {
    std::vector<Int4WordPart> word_parts;
    for (size_t i = 0; i < tensors.size(); ++i) word_parts.push_back({&(*part_words)[i], rows[i]});
    RETURN_IF_ERROR(PackInt4WordRows(word_parts, n_dst, fused, pool));
    times->pack += clock.Lap();
  } else {
    for (size_t i = 0; i < tensors.size(); ++i) {
      RETURN_IF_ERROR(
          PackThroughMatrix(tensors[i], rows[i], n_dst, form->offsets, pool, fused, times));
    }
  }
  for (const ResolvedTensor& t : tensors) DropPages(t);
  return absl::OkStatus();
}

void Print(const char* arm, const Times& t, int layers) {
  std::printf(
      "  %-6s resolve %.3f s, read %.3f s, validate+convert %.3f s, alloc %.3f s, pack %.3f s "
      "(%d parts via Int4Matrix); per layer %.3f s, %.3f s less alloc (CPU time %.3f s)\n",
      arm, t.resolve, t.read, t.check, t.alloc, t.pack, t.matrix_parts, t.Total() / layers,
      (t.Total() - t.alloc) / layers, t.cpu / layers);
}

absl::Status Run(const std::string& dir, int layers, int threads, const std::string& arm) {
  ThreadPool pool(threads);
  ThreadPool* p = threads > 1 ? &pool : nullptr;
  ASSIGN_OR_RETURN(const Checkpoint c, OpenCheckpoint(dir));
  const std::vector<TensorPart> qkv = {TensorPart::kQ, TensorPart::kK, TensorPart::kV};
  const std::vector<TensorPart> o = {TensorPart::kO}, down = {TensorPart::kDown};
  const std::vector<TensorPart> gate_up = {TensorPart::kGate, TensorPart::kUp};
  const std::vector<std::span<const TensorPart>> projections = {qkv, o, gate_up, down};
  Times matrix, words;
  Int4Packed staging[4];  // the words arm's, one a projection
  for (int layer = 0; layer < layers; ++layer) {
    for (size_t j = 0; j < projections.size(); ++j) {
      const bool interleaved = projections[j].size() == 2;
      Int4Packed by_matrix;
      for (int turn = 0; turn < 2; ++turn) {
        const bool use_words = (turn + layer) % 2 == 1;
        if (arm != "both" && arm != (use_words ? "words" : "matrix")) continue;
        Times* times = use_words ? &words : &matrix;
        const double cpu = CpuSeconds();
        RETURN_IF_ERROR(PackProjection(c, projections[j], interleaved, layer, use_words, p,
                                       use_words ? &staging[j] : &by_matrix, times));
        times->cpu += CpuSeconds() - cpu;
      }
      if (arm != "both") continue;
      if (by_matrix.codes != staging[j].codes || by_matrix.scales != staging[j].scales ||
          by_matrix.offsets != staging[j].offsets) {
        return absl::InternalError(absl::StrCat("layer ", layer, ": the arms' bytes differ"));
      }
    }
  }
  std::printf("%s: %d threads, %d layers, arm %s%s\n", dir.c_str(), threads, layers, arm.c_str(),
              arm == "both" ? ", the arms' bytes equal" : "");
  if (arm != "words") Print("matrix", matrix, layers);
  if (arm != "matrix") Print("words", words, layers);
  return absl::OkStatus();
}

}  // namespace
}  // namespace onecard::engine

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CHECKPOINT_DIR [LAYERS] [THREADS] [ARM]\n", argv[0]);
    return 2;
  }
  const std::string arm = argc > 4 ? argv[4] : "both";
  if (arm != "both" && arm != "matrix" && arm != "words") {
    std::fprintf(stderr, "arm must be both, matrix or words, not %s\n", arm.c_str());
    return 2;
  }
  const absl::Status status = onecard::engine::Run(argv[1], argc > 2 ? std::atoi(argv[2]) : 2,
                                                   argc > 3 ? std::atoi(argv[3]) : 1, arm);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
