// LoadWeights, CheckpointWeightsSpec, CheckpointTensorSource (see
// cuda_weights.h): a layer at a time, a projection at a time, from host
// tensors to their device format, counted on a Progress (a bar on a
// terminal, log lines otherwise). Tested through
// tests/gpu/cuda_model_runner_test.cc.
#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/common/progress.h"
#include "engine/common/status_macros.h"
#include "engine/common/thread_pool.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/cuda_check.h"
#include "engine/model/dequantize.h"
#include "engine/model/mapped_file.h"
#include "engine/runtime/cuda/cuda_weights.h"

namespace onecard::engine {
namespace {

absl::Status Upload(void* dst, const void* src, int64_t bytes) {
  CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

// fp32 values to BF16 at dst (+ offset elements), `expected` of them; over
// `pool`'s threads when given.
absl::Status PutBf16(const std::vector<float>& src, int64_t expected, const std::string& what,
                     uint16_t* dst, ThreadPool* pool = nullptr) {
  if (static_cast<int64_t>(src.size()) != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight ", what, " has ", src.size(), " values, expected ", expected));
  }
  const auto convert = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = FloatToBf16(src[i]);
  };
  if (pool == nullptr) {
    convert(0, expected);
  } else {
    pool->ParallelFor(expected, convert);
  }
  return absl::OkStatus();
}

// A [rows, cols] table (embedding, head) in slices of kTableRows rows, so
// that the host holds one slice at a time, converted over `pool`.
constexpr int64_t kTableRows = 4096;
absl::Status UploadBf16Table(HostTensorSource& source, TensorPart part, int64_t rows, int64_t cols,
                             void* dst, ThreadPool& pool) {
  std::vector<uint16_t> bf;
  for (int64_t begin = 0; begin < rows; begin += kTableRows) {
    const int64_t count = std::min(kTableRows, rows - begin);
    ASSIGN_OR_RETURN(const std::vector<float> f, source.F32Rows(part, 0, rows, cols, begin, count));
    bf.resize(count * cols);
    RETURN_IF_ERROR(PutBf16(f, count * cols, absl::StrCat("rows ", begin, "+"), bf.data(), &pool));
    RETURN_IF_ERROR(
        Upload(static_cast<char*>(dst) + begin * cols * 2, bf.data(), count * cols * 2));
    source.ReleaseRead();
  }
  return absl::OkStatus();
}

absl::Status UploadBf16(HostTensorSource& source, TensorPart part, int64_t layer, int64_t count,
                        void* dst) {
  ASSIGN_OR_RETURN(const std::vector<float> f, source.F32(part, layer));
  std::vector<uint16_t> bf(count);
  RETURN_IF_ERROR(PutBf16(f, count, absl::StrCat("layer ", layer), bf.data()));
  return Upload(dst, bf.data(), count * 2);
}

std::string Where(Projection p, int64_t layer) {
  static const char* kNames[] = {"qkv", "o", "gate_up", "down"};
  return absl::StrCat("layer ", layer, " ", kNames[static_cast<int>(p)]);
}

// One BF16 projection: its parts one after the other ([q; k; v], [gate; up]).
absl::Status LoadBf16Projection(HostTensorSource& source, Projection p, int64_t layer,
                                const CudaWeight& w) {
  std::vector<uint16_t> fused(w.n * w.k);
  int64_t row = 0;
  for (TensorPart part : ProjectionParts(p)) {
    ASSIGN_OR_RETURN(const std::vector<float> f, source.F32(part, layer));
    const int64_t rows = static_cast<int64_t>(f.size()) / w.k;
    if (row + rows > w.n) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(p, layer), ": parts exceed ", w.n, " rows"));
    }
    RETURN_IF_ERROR(PutBf16(f, rows * w.k, Where(p, layer), fused.data() + row * w.k));
    row += rows;
  }
  if (row != w.n) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(p, layer), ": parts have ", row, " rows, expected ", w.n));
  }
  return Upload(w.data, fused.data(), w.n * w.k * 2);
}

// One FP8 projection: its parts' codes and scales stacked ([q; k; v],
// [gate; up]) exactly as stored.
absl::Status LoadFp8Projection(HostTensorSource& source, Projection p, int64_t layer,
                               const CudaWeight& w) {
  std::vector<Fp8Matrix> parts;
  for (TensorPart part : ProjectionParts(p)) {
    ASSIGN_OR_RETURN(Fp8Matrix m, source.Fp8(part, layer));
    parts.push_back(std::move(m));
  }
  std::vector<const Fp8Matrix*> pointers;
  for (const Fp8Matrix& m : parts) pointers.push_back(&m);
  Fp8Matrix fused;
  RETURN_IF_ERROR(StackFp8Rows(pointers, Where(p, layer), &fused));
  if (fused.n != w.n || fused.k != w.k || fused.scales_kind != w.spec.fp8_scales) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(p, layer), ": fp8 parts make [", fused.n, ", ", fused.k, "] with ",
                     Fp8ScalesName(fused.scales_kind), " scales; the projection is [", w.n, ", ",
                     w.k, "] with ", Fp8ScalesName(w.spec.fp8_scales), " scales"));
  }
  RETURN_IF_ERROR(Upload(w.data, fused.codes.data(), w.n * w.k));
  return Upload(w.scales, fused.scales.data(), static_cast<int64_t>(fused.scales.size()) * 4);
}

// Where part `part` (n rows, after `row` rows of the parts before it) goes
// in projection p's fused weight: gate and up interleaved by 8, the rest one
// after the other.
std::vector<int64_t> FusedRows(Projection p, size_t part, int64_t n, int64_t row) {
  return p == Projection::kGateUp ? InterleavedGateUpRows(n, static_cast<int>(part))
                                  : ConcatRows(n, row);
}

absl::Status CheckPartWidth(const std::string& name, int64_t n, int64_t k, int32_t group,
                            const CudaWeight& w) {
  if (k == w.k && group == w.spec.group) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", n, " x ", k, " in groups of ", group,
                                                 "; the projection is ", w.k, " wide in groups of ",
                                                 w.spec.group));
}

absl::Status CheckRowCount(Projection p, int64_t layer, int64_t rows, const CudaWeight& w) {
  if (rows == w.n) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Where(p, layer), ": parts have ", rows, " rows, expected ", w.n));
}

// The parts of projection p as their stored words, where every part has them
// with the spec's offset kind; nullopt otherwise.
absl::StatusOr<std::optional<std::vector<Int4WordMatrix>>> PartWords(HostTensorSource& source,
                                                                     Projection p, int64_t layer,
                                                                     const CudaWeight& w) {
  std::vector<Int4WordMatrix> words;
  for (TensorPart part : ProjectionParts(p)) {
    ASSIGN_OR_RETURN(std::optional<Int4WordMatrix> word, source.Int4Words(part, layer));
    if (!word.has_value() || word->offsets != w.spec.offsets) return std::nullopt;
    words.push_back(std::move(*word));
  }
  return words;
}

// The parts straight from their words into `fused`, all at once.
absl::Status PackWordParts(const std::vector<Int4WordMatrix>& words, Projection p, int64_t layer,
                           const CudaWeight& w, ThreadPool& pool, Int4Packed* fused) {
  std::vector<std::vector<int64_t>> rows(words.size());
  std::vector<Int4WordPart> parts;
  int64_t row = 0;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string name = absl::StrCat(Where(p, layer), " part ", i);
    RETURN_IF_ERROR(words[i].Validate(name));
    RETURN_IF_ERROR(CheckPartWidth(name, words[i].n, words[i].k, words[i].group, w));
    rows[i] = FusedRows(p, i, words[i].n, row);
    parts.push_back({&words[i], rows[i]});
    row += words[i].n;
  }
  RETURN_IF_ERROR(CheckRowCount(p, layer, row, w));
  return PackInt4WordRows(parts, w.n, fused, &pool);
}

// The parts one at a time through an Int4Matrix (offsets made the spec's
// kind exactly) into `fused`; their column map (act order: the same in every
// part, as the spec says) into `columns`.
absl::Status PackMatrixParts(HostTensorSource& source, Projection p, int64_t layer,
                             const CudaWeight& w, ThreadPool& pool, Int4Packed* fused,
                             std::vector<int32_t>* columns) {
  const std::vector<TensorPart> parts = ProjectionParts(p);
  int64_t row = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    ASSIGN_OR_RETURN(Int4Matrix m, source.Int4(parts[i], layer));
    const std::string name = absl::StrCat(Where(p, layer), " part ", i);
    RETURN_IF_ERROR(m.Validate(name));
    if (i == 0) *columns = m.columns;
    if (m.columns != *columns || m.columns.empty() == w.spec.act_order) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": its column order (", m.columns.empty() ? "as stored" : "act order",
                       ") is not the projection's (", w.spec.act_order ? "act order" : "as stored",
                       i > 0 ? ", the first part's map" : "", ")"));
    }
    RETURN_IF_ERROR(CheckPartWidth(name, m.n, m.k, m.group, w));
    RETURN_IF_ERROR(ConvertInt4Offsets(&m, w.spec.offsets, name));
    RETURN_IF_ERROR(PackInt4Rows(m, FusedRows(p, i, m.n, row), w.n, fused, &pool));
    row += m.n;
  }
  return CheckRowCount(p, layer, row, w);
}

// One 4-bit projection: its parts packed at their rows in `staging` (sized
// here; every byte is written), straight from their stored words where the
// source has them, then copied.
absl::Status LoadInt4Projection(HostTensorSource& source, Projection p, int64_t layer,
                                const CudaWeight& w, ThreadPool& pool, Int4Packed* staging) {
  ResizeInt4Packed(staging, w.n, w.k, w.spec.group, w.spec.offsets);
  ASSIGN_OR_RETURN(const std::optional<std::vector<Int4WordMatrix>> words,
                   PartWords(source, p, layer, w));  // none for act order
  std::vector<int32_t> columns;
  RETURN_IF_ERROR(words.has_value()
                      ? PackWordParts(*words, p, layer, w, pool, staging)
                      : PackMatrixParts(source, p, layer, w, pool, staging, &columns));
  if (w.columns != nullptr) RETURN_IF_ERROR(Upload(w.columns, columns.data(), w.k * 4));
  RETURN_IF_ERROR(Upload(w.data, staging->codes.data(), staging->codes.size()));
  RETURN_IF_ERROR(Upload(w.scales, staging->scales.data(), staging->scales.size() * 4));
  if (w.offsets == nullptr) return absl::OkStatus();
  return Upload(w.offsets, staging->offsets.data(), staging->offsets.size() * 4);
}

}  // namespace

absl::StatusOr<std::vector<float>> HostTensorSource::F32Rows(TensorPart part, int64_t layer,
                                                             int64_t rows, int64_t cols,
                                                             int64_t begin, int64_t count) {
  ASSIGN_OR_RETURN(std::vector<float> all, F32(part, layer));
  if (static_cast<int64_t>(all.size()) != rows * cols || begin + count > rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("table weight has ", all.size(), " values, expected ", rows, " x ", cols));
  }
  return std::vector<float>(all.begin() + begin * cols, all.begin() + (begin + count) * cols);
}

absl::StatusOr<Fp8Matrix> HostTensorSource::Fp8(TensorPart part, int64_t layer) {
  return absl::UnimplementedError(
      absl::StrCat("layer ", layer, ": this weight source holds no FP8 tensors"));
}

namespace {

class CheckpointSource : public HostTensorSource {
 public:
  explicit CheckpointSource(const Checkpoint& checkpoint) : checkpoint_(checkpoint) {}
  absl::StatusOr<std::vector<float>> F32(TensorPart part, int64_t layer) override {
    ASSIGN_OR_RETURN(const ResolvedTensor t, ResolveTensor(checkpoint_, part, layer));
    Remember(t);
    return ReadTensorF32(t);
  }
  absl::StatusOr<Fp8Matrix> Fp8(TensorPart part, int64_t layer) override {
    ASSIGN_OR_RETURN(const ResolvedTensor t, ResolveTensor(checkpoint_, part, layer));
    Remember(t);
    return ReadTensorFp8(t);
  }
  absl::StatusOr<Int4Matrix> Int4(TensorPart part, int64_t layer) override {
    ASSIGN_OR_RETURN(const ResolvedTensor t, ResolveTensor(checkpoint_, part, layer));
    Remember(t);
    return ReadTensorInt4(t, &pool_);
  }
  absl::StatusOr<std::optional<Int4WordMatrix>> Int4Words(TensorPart part, int64_t layer) override {
    ASSIGN_OR_RETURN(const ResolvedTensor t, ResolveTensor(checkpoint_, part, layer));
    Remember(t);
    return ReadTensorInt4Words(t);
  }
  absl::StatusOr<std::vector<float>> F32Rows(TensorPart part, int64_t layer, int64_t rows,
                                             int64_t cols, int64_t begin, int64_t count) override {
    ASSIGN_OR_RETURN(ResolvedTensor t, ResolveTensor(checkpoint_, part, layer));
    Remember(t);
    const TensorView* v = t.view;
    // A slice of whole rows of the stored tensor (any dtype whose rows are
    // whole blocks); otherwise the whole tensor, sliced.
    if (!t.hf_int4.has_value() && t.unpermute_heads == 0 && v != nullptr && t.shape.size() == 2 &&
        t.shape[0] == rows && t.shape[1] == cols && begin + count <= rows &&
        v->NumElements() == rows * cols && v->size_bytes % rows == 0) {
      const uint64_t row_bytes = v->size_bytes / t.shape[0];
      TensorView slice = *v;
      slice.shape = {count, cols};
      slice.data = v->data + begin * row_bytes;
      slice.size_bytes = count * row_bytes;
      slice.file_offset = v->file_offset + begin * row_bytes;
      // Dequantized over the pool, a run of whole rows a thread.
      std::vector<float> out(count * cols);
      std::mutex mu;
      absl::Status status;
      pool_.ParallelFor(count, [&](int64_t r0, int64_t r1) {
        TensorView rows_view = slice;
        rows_view.shape = {r1 - r0, cols};
        rows_view.data = slice.data + r0 * row_bytes;
        rows_view.size_bytes = (r1 - r0) * row_bytes;
        rows_view.file_offset = slice.file_offset + r0 * row_bytes;
        absl::Status st = DequantizeInto(rows_view, out.data() + r0 * cols);
        std::lock_guard<std::mutex> lock(mu);
        status.Update(st);
      });
      RETURN_IF_ERROR(status);
      return out;
    }
    return HostTensorSource::F32Rows(part, layer, rows, cols, begin, count);
  }
  void ReleaseRead() override {
    for (const TensorView* v : read_) DropMappedPages(v->data, v->size_bytes);
    read_.clear();
  }

 private:
  void Remember(const ResolvedTensor& t) {
    if (t.view != nullptr) read_.push_back(t.view);
    if (t.hf_fp8.has_value()) {
      for (const TensorView* v : {t.hf_fp8->weight, t.hf_fp8->scale}) {
        if (v != nullptr) read_.push_back(v);
      }
    }
    if (!t.hf_int4.has_value()) return;
    for (const TensorView* v :
         {t.hf_int4->packed, t.hf_int4->scales, t.hf_int4->zeros, t.hf_int4->g_idx}) {
      if (v != nullptr) read_.push_back(v);
    }
  }

  const Checkpoint& checkpoint_;
  std::vector<const TensorView*> read_;  // since the last ReleaseRead
  ThreadPool pool_{0};                   // every core: unpacking 4-bit codes, table slices
};

// The widest of two offset kinds (symmetric codes become zero points or
// mins, zero points mins, exactly or not at all: ConvertInt4Offsets).
Int4Offsets WiderOffsets(Int4Offsets a, Int4Offsets b) {
  if (a == Int4Offsets::kFloat || b == Int4Offsets::kFloat) return Int4Offsets::kFloat;
  if (a == Int4Offsets::kZero || b == Int4Offsets::kZero) return Int4Offsets::kZero;
  return Int4Offsets::kSymmetric;
}

// The 4-bit spec of a projection whose parts are all 4-bit with one group
// size and columns in order; nullopt otherwise.
absl::StatusOr<std::optional<ProjectionSpec>> Int4ProjectionSpec(const Checkpoint& checkpoint,
                                                                 Projection projection,
                                                                 int64_t layer) {
  std::optional<ProjectionSpec> spec;
  std::vector<int32_t> columns;  // the first part's map: every part must have it
  for (TensorPart part : ProjectionParts(projection)) {
    ASSIGN_OR_RETURN(const ResolvedTensor t, ResolveTensor(checkpoint, part, layer));
    ASSIGN_OR_RETURN(const std::optional<Int4Form> form, Int4FormOf(t));
    if (!form.has_value() || (spec && (spec->group != form->group || form->columns != columns))) {
      return std::nullopt;
    }
    if (!spec) {
      spec = ProjectionSpec{
          .format = WeightFormat::kInt4, .group = form->group, .act_order = form->reordered};
      columns = form->columns;
    }
    spec->offsets = WiderOffsets(spec->offsets, form->offsets);
  }
  return spec;
}

// The FP8 spec of a projection whose parts are all FP8 with one scale kind;
// nullopt otherwise.
absl::StatusOr<std::optional<ProjectionSpec>> Fp8ProjectionSpec(const Checkpoint& checkpoint,
                                                                Projection projection,
                                                                int64_t layer) {
  std::optional<Fp8Scales> kind;
  for (TensorPart part : ProjectionParts(projection)) {
    ASSIGN_OR_RETURN(const ResolvedTensor t, ResolveTensor(checkpoint, part, layer));
    const std::optional<Fp8Scales> form = Fp8FormOf(t);
    if (!form.has_value() || (kind.has_value() && *kind != *form)) return std::nullopt;
    kind = form;
  }
  return ProjectionSpec{.format = WeightFormat::kFp8, .fp8_scales = *kind};
}

}  // namespace

std::vector<TensorPart> ProjectionParts(Projection projection) {
  switch (projection) {
    case Projection::kQkv:
      return {TensorPart::kQ, TensorPart::kK, TensorPart::kV};
    case Projection::kO:
      return {TensorPart::kO};
    case Projection::kGateUp:
      return {TensorPart::kGate, TensorPart::kUp};
    case Projection::kDown:
      return {TensorPart::kDown};
  }
  return {};
}

std::unique_ptr<HostTensorSource> CheckpointTensorSource(const Checkpoint& checkpoint) {
  return std::make_unique<CheckpointSource>(checkpoint);
}

absl::StatusOr<ModelWeightsSpec> CheckpointWeightsSpec(const Checkpoint& checkpoint,
                                                       bool all_bf16) {
  const ModelConfig& c = checkpoint.config;
  ModelWeightsSpec spec = ModelWeightsSpec::Uniform(c, {});
  if (all_bf16) return spec;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    for (int p = 0; p < kNumProjections; ++p) {
      const Projection projection = static_cast<Projection>(p);
      ASSIGN_OR_RETURN(const std::optional<ProjectionSpec> int4,
                       Int4ProjectionSpec(checkpoint, projection, layer));
      if (int4.has_value() && CheckInt4Shape(c, projection, int4->group).ok()) {
        spec.layers[layer][p] = *int4;
        continue;
      }
      ASSIGN_OR_RETURN(const std::optional<ProjectionSpec> fp8,
                       Fp8ProjectionSpec(checkpoint, projection, layer));
      if (fp8.has_value() && CheckFp8Shape(c, projection, fp8->fp8_scales).ok()) {
        spec.layers[layer][p] = *fp8;
      }
    }
  }
  return spec;
}

absl::StatusOr<CudaWeights> LoadWeights(const ModelConfig& c, const ModelWeightsSpec& spec,
                                        HostTensorSource& source, DeviceArena* arena,
                                        const WeightHomes* homes) {
  ASSIGN_OR_RETURN(CudaWeights w, CarveWeights(c, spec, arena, homes));
  const int64_t h = c.hidden_size;
  // The layers, then the embedding, final norm and head as one more item.
  Progress progress("loading weights onto the GPU", c.num_layers + 1, "layers");
  ThreadPool pool(0);  // every core: packing 4-bit codes, converting the tables
  // The packed 4-bit projections on the host, reused layer after layer (no
  // fresh pages to fault in and zero for each).
  std::array<Int4Packed, kNumProjections> staging;
  for (int64_t layer = 0; layer < c.num_layers; ++layer, source.ReleaseRead(), progress.Add()) {
    CudaLayerWeights& l = w.layers[layer];
    RETURN_IF_ERROR(UploadBf16(source, TensorPart::kAttnNorm, layer, h, l.attn_norm));
    RETURN_IF_ERROR(UploadBf16(source, TensorPart::kFfnNorm, layer, h, l.ffn_norm));
    for (int p = 0; p < kNumProjections; ++p) {
      const CudaWeight& cw = l.proj[p];
      const Projection projection = static_cast<Projection>(p);
      switch (cw.spec.format) {
        case WeightFormat::kBf16:
          RETURN_IF_ERROR(LoadBf16Projection(source, projection, layer, cw));
          break;
        case WeightFormat::kInt4:
          RETURN_IF_ERROR(LoadInt4Projection(source, projection, layer, cw, pool, &staging[p]));
          break;
        case WeightFormat::kFp8:
          RETURN_IF_ERROR(LoadFp8Projection(source, projection, layer, cw));
          break;
      }
    }
    if (l.bqkv != nullptr) {
      const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
      char* dst = static_cast<char*>(l.bqkv);
      RETURN_IF_ERROR(UploadBf16(source, TensorPart::kQBias, layer, q, dst));
      RETURN_IF_ERROR(UploadBf16(source, TensorPart::kKBias, layer, kv, dst + q * 2));
      RETURN_IF_ERROR(UploadBf16(source, TensorPart::kVBias, layer, kv, dst + (q + kv) * 2));
    }
    if (homes != nullptr && homes->filled) RETURN_IF_ERROR(homes->filled(layer));
  }
  RETURN_IF_ERROR(
      UploadBf16Table(source, TensorPart::kEmbedding, c.vocab_size, h, w.embedding, pool));
  RETURN_IF_ERROR(UploadBf16(source, TensorPart::kFinalNorm, 0, h, w.final_norm));
  if (w.lm_head != w.embedding) {
    RETURN_IF_ERROR(UploadBf16Table(source, TensorPart::kLmHead, c.vocab_size, h, w.lm_head, pool));
  }
  source.ReleaseRead();
  progress.Add();
  progress.Done();
  return w;
}

}  // namespace onecard::engine
