// Where the host time of a 4-bit checkpoint's CUDA load goes, per layer,
// without a GPU: what LoadInt4Projection (engine/runtime/cuda/
// weight_loader.cc) does before its copies, timed step by step for the
// first --layers layers of an HF GPTQ / AWQ / compressed-tensors
// checkpoint: resolve the tensor, ReadTensorInt4 (unpack the stored codes
// into an Int4Matrix), ConvertInt4Offsets, PackInt4Rows (the device layout).
//   int4_load_host_time CHECKPOINT_DIR [LAYERS] [THREADS]   (threads: 1 = no pool)
// Build: see README.md (links the CPU libraries of build/).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/kernels/int4_matrix.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_tensors.h"

using namespace onecard::engine;

namespace {

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int layers = argc > 2 ? std::atoi(argv[2]) : 2;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 1;
  onecard::ThreadPool pool(threads);
  onecard::ThreadPool* p = threads > 1 ? &pool : nullptr;
  absl::StatusOr<Checkpoint> c = OpenCheckpoint(argv[1]);
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
    return 1;
  }
  double resolve = 0, read = 0, convert = 0, pack = 0;
  int64_t nibbles = 0;
  for (int layer = 0; layer < layers; ++layer) {
    for (TensorPart part : {TensorPart::kQ, TensorPart::kK, TensorPart::kV, TensorPart::kO,
                            TensorPart::kGate, TensorPart::kUp, TensorPart::kDown}) {
      auto t = std::chrono::steady_clock::now();
      absl::StatusOr<ResolvedTensor> r = ResolveTensor(*c, part, layer);
      resolve += Since(t);
      if (!r.ok()) return 1;
      t = std::chrono::steady_clock::now();
      absl::StatusOr<Int4Matrix> m = ReadTensorInt4(*r, p);
      read += Since(t);
      if (!m.ok()) {
        std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
        return 1;
      }
      t = std::chrono::steady_clock::now();
      if (!ConvertInt4Offsets(&*m, Int4Offsets::kSymmetric, "x").ok()) return 1;
      convert += Since(t);
      t = std::chrono::steady_clock::now();
      Int4Packed packed = MakeInt4Packed(m->n, m->k, m->group, m->offsets);
      if (!PackInt4Rows(*m, ConcatRows(m->n, 0), m->n, &packed, p).ok()) return 1;
      pack += Since(t);
      nibbles += m->n * m->k;
    }
  }
  std::printf(
      "%d threads, %d layers, %.3g G codes: resolve %.3f s, read %.3f s, convert offsets %.3f s, "
      "pack %.3f s; per layer %.2f s\n",
      threads, layers, nibbles / 1e9, resolve, read, convert, pack,
      (resolve + read + convert + pack) / layers);
  return 0;
}
