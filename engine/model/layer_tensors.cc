// ResolveTensor, ReadTensorF32, ReadTensorBlocks, ReadTensorInt4,
// ReadTensorFp8 (see layer_tensors.h).
// Tested by tests/engine/model/layer_tensors_test.cc.
#include "engine/model/layer_tensors.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/model/dequantize.h"
#include "engine/model/quant_blocks.h"

namespace onecard::engine {
namespace {

struct PartInfo {
  const char* gguf;  // name after "blk.N." (per layer) or whole
  const char* hf;    // name after "model.layers.N." (per layer) or whole
  bool per_layer;
  bool rope_permuted;  // Q and K: permuted by llama.cpp's converter
};

PartInfo InfoOf(TensorPart part) {
  switch (part) {
    case TensorPart::kEmbedding:
      return {"token_embd.weight", "model.embed_tokens.weight", false, false};
    case TensorPart::kFinalNorm:
      return {"output_norm.weight", "model.norm.weight", false, false};
    case TensorPart::kLmHead:
      return {"output.weight", "lm_head.weight", false, false};
    case TensorPart::kAttnNorm:
      return {"attn_norm.weight", "input_layernorm.weight", true, false};
    case TensorPart::kQ:
      return {"attn_q.weight", "self_attn.q_proj.weight", true, true};
    case TensorPart::kK:
      return {"attn_k.weight", "self_attn.k_proj.weight", true, true};
    case TensorPart::kV:
      return {"attn_v.weight", "self_attn.v_proj.weight", true, false};
    case TensorPart::kO:
      return {"attn_output.weight", "self_attn.o_proj.weight", true, false};
    case TensorPart::kFfnNorm:
      return {"ffn_norm.weight", "post_attention_layernorm.weight", true, false};
    case TensorPart::kGate:
      return {"ffn_gate.weight", "mlp.gate_proj.weight", true, false};
    case TensorPart::kUp:
      return {"ffn_up.weight", "mlp.up_proj.weight", true, false};
    case TensorPart::kDown:
      return {"ffn_down.weight", "mlp.down_proj.weight", true, false};
    case TensorPart::kQBias:
      return {"attn_q.bias", "self_attn.q_proj.bias", true, true};
    case TensorPart::kKBias:
      return {"attn_k.bias", "self_attn.k_proj.bias", true, true};
    case TensorPart::kVBias:
      return {"attn_v.bias", "self_attn.v_proj.bias", true, false};
  }
  return {"", "", false, false};
}

std::vector<int64_t> ShapeOf(TensorPart part, const ModelConfig& c) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  switch (part) {
    case TensorPart::kEmbedding:
    case TensorPart::kLmHead:
      return {c.vocab_size, c.hidden_size};
    case TensorPart::kFinalNorm:
    case TensorPart::kAttnNorm:
    case TensorPart::kFfnNorm:
      return {c.hidden_size};
    case TensorPart::kQ:
      return {q, c.hidden_size};
    case TensorPart::kK:
    case TensorPart::kV:
      return {kv, c.hidden_size};
    case TensorPart::kO:
      return {c.hidden_size, q};
    case TensorPart::kGate:
    case TensorPart::kUp:
      return {c.intermediate_size, c.hidden_size};
    case TensorPart::kDown:
      return {c.hidden_size, c.intermediate_size};
    case TensorPart::kQBias:
      return {q};
    case TensorPart::kKBias:
    case TensorPart::kVBias:
      return {kv};
  }
  return {};
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The heads whose Q/K row permutation must be undone (0: none). transformers
// undoes it for every GGUF of the llama architecture (also biases).
int64_t UnpermuteHeads(const Checkpoint& ckpt, TensorPart part) {
  const bool permuted = InfoOf(part).rope_permuted && ckpt.format == CheckpointFormat::kGguf &&
                        ckpt.config.architecture != Architecture::kQwen2;
  if (!permuted) return 0;
  const bool query = part == TensorPart::kQ || part == TensorPart::kQBias;
  return query ? ckpt.config.num_heads : ckpt.config.num_kv_heads;
}

// Codes, scales and offsets of one GGUF block: BlockElements codes, and a
// scale (and offset) for each group of 32. True when every scale and offset
// is finite.
template <typename Block>
bool UnpackBlock(const Block& b, uint8_t* q, uint16_t* scale, uint16_t* offset) {
  constexpr int kHalf = kQuantBlock32 / 2;
  for (int j = 0; j < kHalf; ++j) {
    q[j] = b.qs[j] & 0x0F;
    q[j + kHalf] = b.qs[j] >> 4;
  }
  *scale = b.d;
  if constexpr (requires { b.m; }) *offset = b.m;
  return true;
}

bool FiniteHalf(uint16_t bits) { return (bits & 0x7c00u) != 0x7c00u; }

// A Q4_K super-block as 8 groups of 32: y = d sc q - dmin m becomes the
// scale d sc and the offset -(dmin m) (Int4Offsets::kFloat). Both products
// are exact in fp32 (an fp16 times a 6-bit integer), so their rounding to
// fp16 here is the only difference from ggml's dequantization.
bool UnpackBlock(const BlockQ4_K& b, uint8_t* q, uint16_t* scale, uint16_t* offset) {
  const float d = HalfToFloat(b.d), dmin = HalfToFloat(b.dmin);
  bool finite = true;
  for (int j = 0; j < kQuantSuperBlock / kQuantBlock32; ++j) {
    uint8_t sc, m;
    Q4KScaleMin(b.scales, j, &sc, &m);
    scale[j] = FloatToHalf(d * static_cast<float>(sc));
    offset[j] = FloatToHalf(-(dmin * static_cast<float>(m)));
    finite = finite && FiniteHalf(scale[j]) && FiniteHalf(offset[j]);
    // Sub-blocks 2 i and 2 i + 1 share bytes qs[32 i .. 32 i + 31]: low
    // nibbles the first, high nibbles the second.
    const uint8_t* qs = b.qs + kQuantBlock32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < kQuantBlock32; ++l) q[kQuantBlock32 * j + l] = (qs[l] >> shift) & 0x0F;
  }
  return finite;
}

// Rows of `m` from the blocks of t's rows `sources`, over `pool` when given.
// False when some scale or offset is not a finite fp16.
template <typename Block>
bool ReadBlocks(const ResolvedTensor& t, const std::vector<int64_t>& sources, Int4Matrix* m,
                ThreadPool* pool) {
  constexpr int64_t kGroups = Block::kElements / kQuantBlock32;
  const int64_t blocks_per_row = m->k / Block::kElements;
  const int64_t groups_per_row = m->k / kQuantBlock32;
  const uint8_t* data = t.view->data;
  std::atomic<bool> finite = true;
  const auto read_rows = [&](int64_t begin, int64_t end) {
    uint16_t unused[kGroups];
    Block block;
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* row = data + sources[r] * blocks_per_row * sizeof(Block);
      for (int64_t b = 0; b < blocks_per_row; ++b) {
        std::memcpy(&block, row + b * sizeof(Block), sizeof(Block));  // no alignment assumed
        const int64_t g = r * groups_per_row + b * kGroups;
        uint16_t* offset = m->offset.empty() ? unused : &m->offset[g];
        if (!UnpackBlock(block, &m->q[r * m->k + b * Block::kElements], &m->scales[g], offset)) {
          finite = false;
        }
      }
    }
  };
  if (pool == nullptr) {
    read_rows(0, m->n);
  } else {
    pool->ParallelFor(m->n, read_rows);
  }
  return finite;
}

std::vector<int64_t> Identity(int64_t rows) {
  std::vector<int64_t> v(rows);
  for (int64_t r = 0; r < rows; ++r) v[r] = r;
  return v;
}

}  // namespace

std::vector<int64_t> LlamaCppRowSources(int64_t num_heads, int64_t rows) {
  std::vector<int64_t> sources(rows);
  const int64_t half = rows / num_heads / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j)
        sources[h * 2 * half + j * half + i] = h * 2 * half + i * 2 + j;
    }
  }
  return sources;
}

std::string HfTensorName(TensorPart part, int64_t layer) {
  const PartInfo info = InfoOf(part);
  return info.per_layer ? absl::StrCat("model.layers.", layer, ".", info.hf) : info.hf;
}

absl::StatusOr<ResolvedTensor> ResolveTensor(const Checkpoint& ckpt, TensorPart part,
                                             int64_t layer) {
  if (ckpt.weights == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(ckpt.path, ": no weights opened"));
  }
  const PartInfo info = InfoOf(part);
  const bool gguf = ckpt.format == CheckpointFormat::kGguf;
  ResolvedTensor t;
  t.name = info.per_layer ? absl::StrCat(gguf ? "blk." : "model.layers.", layer, ".",
                                         gguf ? info.gguf : info.hf)
                          : std::string(gguf ? info.gguf : info.hf);
  t.shape = ShapeOf(part, ckpt.config);
  t.unpermute_heads = UnpermuteHeads(ckpt, part);
  t.view = ckpt.weights->Find(t.name);
  if (t.view == nullptr && !gguf && t.shape.size() == 2 && t.name.ends_with(".weight")) {
    const std::string module = t.name.substr(0, t.name.size() - 7);
    ASSIGN_OR_RETURN(t.hf_int4, FindHfInt4(ckpt, module, t.shape[0], t.shape[1]));
    if (t.hf_int4.has_value()) {
      t.view = t.hf_int4->packed;
      return t;
    }
  }
  if (t.view == nullptr) {
    return absl::NotFoundError(absl::StrCat(ckpt.path, ": tensor '", t.name, "' not found"));
  }
  if (t.view->shape != t.shape) {
    return absl::InvalidArgumentError(absl::StrCat(t.view->file_path, ": tensor '", t.name,
                                                   "' has shape ", ShapeString(t.view->shape),
                                                   ", expected ", ShapeString(t.shape)));
  }
  if (t.view->dtype == DType::kF8E4M3 && !gguf && t.shape.size() == 2 &&
      t.name.ends_with(".weight")) {
    const std::string module = t.name.substr(0, t.name.size() - 7);
    ASSIGN_OR_RETURN(t.hf_fp8, FindHfFp8(ckpt, module, t.shape[0], t.shape[1]));
    if (t.hf_fp8.has_value()) return t;
  }
  if (!IsDequantizable(t.view->dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(t.view->file_path, ": tensor '", t.name,
                                                   "' has non-float dtype ",
                                                   std::string(DTypeName(t.view->dtype))));
  }
  return t;
}

absl::StatusOr<std::vector<float>> ReadTensorF32(const ResolvedTensor& t) {
  if (t.hf_int4.has_value()) {
    ASSIGN_OR_RETURN(const Int4Matrix m, ReadHfInt4(*t.hf_int4));
    return DequantizeInt4(m);
  }
  if (t.hf_fp8.has_value()) {
    ASSIGN_OR_RETURN(const Fp8Matrix m, ReadHfFp8(*t.hf_fp8));
    return DequantizeFp8(m);
  }
  std::vector<float> out(static_cast<size_t>(t.view->NumElements()));
  RETURN_IF_ERROR(DequantizeInto(*t.view, out.data()));
  if (t.unpermute_heads == 0) return out;
  const int64_t rows = t.shape[0], cols = static_cast<int64_t>(out.size()) / rows;
  const std::vector<int64_t> sources = LlamaCppRowSources(t.unpermute_heads, rows);
  std::vector<float> permuted(out.size());
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(permuted.data() + r * cols, out.data() + sources[r] * cols, cols * sizeof(float));
  }
  return permuted;
}

absl::StatusOr<std::vector<uint8_t>> ReadTensorBlocks(const ResolvedTensor& t) {
  const DType dtype = t.view->dtype;
  const int64_t block = BlockElements(dtype);
  if (t.hf_int4.has_value() || block == 1 || t.shape.size() != 2 || t.shape[1] % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        t.view->file_path, ": tensor '", t.name, "' (", std::string(DTypeName(dtype)), ", shape ",
        ShapeString(t.shape),
        ") is not a matrix of whole GGUF blocks a row (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K)"));
  }
  const int64_t rows = t.shape[0];
  const int64_t row_bytes = t.shape[1] / block * BlockBytes(dtype);
  if (t.view->size_bytes != static_cast<uint64_t>(rows * row_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(t.view->file_path, ": tensor '", t.name, "' at offset ", t.view->file_offset,
                     " holds ", t.view->size_bytes, " bytes, ", ShapeString(t.shape), " in ",
                     std::string(DTypeName(dtype)), " needs ", rows * row_bytes));
  }
  std::vector<uint8_t> out(rows * row_bytes);
  if (t.unpermute_heads == 0) {
    std::memcpy(out.data(), t.view->data, out.size());
    return out;
  }
  const std::vector<int64_t> sources = LlamaCppRowSources(t.unpermute_heads, rows);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + r * row_bytes, t.view->data + sources[r] * row_bytes, row_bytes);
  }
  return out;
}

absl::Status RunTensorJobs(size_t n, const std::function<absl::Status(size_t)>& job,
                           Progress& progress) {
  std::vector<absl::Status> statuses(n);
  std::atomic<size_t> next{0};
  auto work = [&]() {
    for (size_t i = next++; i < n; i = next++) {
      statuses[i] = job(i);
      progress.Add();
    }
  };
  const unsigned num_threads = std::clamp(std::thread::hardware_concurrency(), 1u, 2u);
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < num_threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& helper : helpers) helper.join();
  for (const absl::Status& status : statuses) RETURN_IF_ERROR(status);
  return absl::OkStatus();
}

bool IsInt4Dtype(DType dtype) {
  return dtype == DType::kQ4_0 || dtype == DType::kQ4_1 || dtype == DType::kQ4_K;
}

namespace {

Int4Offsets GgufInt4Offsets(DType dtype) {
  return dtype == DType::kQ4_0 ? Int4Offsets::kSymmetric : Int4Offsets::kFloat;
}

}  // namespace

absl::StatusOr<std::optional<Int4Form>> Int4FormOf(const ResolvedTensor& t) {
  if (t.hf_int4.has_value()) {
    ASSIGN_OR_RETURN(std::vector<int32_t> columns, HfInt4ColumnOrder(*t.hf_int4));
    const bool reordered = !columns.empty();
    return Int4Form{t.hf_int4->group, t.hf_int4->offsets(), reordered, std::move(columns)};
  }
  if (!IsInt4Dtype(t.view->dtype) || t.shape.size() != 2) return std::nullopt;
  return Int4Form{kQuantBlock32, GgufInt4Offsets(t.view->dtype), false};
}

absl::StatusOr<Int4Matrix> ReadTensorInt4(const ResolvedTensor& t, ThreadPool* pool) {
  if (t.hf_int4.has_value()) return ReadHfInt4(*t.hf_int4, pool);
  const DType dtype = t.view->dtype;
  if (!IsInt4Dtype(dtype) || t.shape.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        t.view->file_path, ": tensor '", t.name, "' (", std::string(DTypeName(dtype)), ", shape ",
        ShapeString(t.shape),
        ") is not a 4-bit matrix; 4-bit: Q4_0, Q4_1, Q4_K, GPTQ, AWQ, compressed-tensors "
        "pack-quantized"));
  }
  Int4Matrix m;
  m.n = t.shape[0];
  m.k = t.shape[1];
  m.group = kQuantBlock32;
  m.offsets = GgufInt4Offsets(dtype);
  const int64_t block = BlockElements(dtype);
  const int64_t blocks = m.n * (m.k / block);
  if (m.k % block != 0 || t.view->size_bytes != static_cast<uint64_t>(blocks * BlockBytes(dtype))) {
    return absl::InvalidArgumentError(
        absl::StrCat(t.view->file_path, ": tensor '", t.name, "' at offset ", t.view->file_offset,
                     " holds ", t.view->size_bytes, " bytes, ", ShapeString(t.shape), " in ",
                     std::string(DTypeName(dtype)), " needs ", blocks * BlockBytes(dtype)));
  }
  m.q.resize(m.n * m.k);
  m.scales.resize(m.n * m.num_groups());
  if (m.offsets == Int4Offsets::kFloat) m.offset.resize(m.scales.size());
  const std::vector<int64_t> sources =
      t.unpermute_heads > 0 ? LlamaCppRowSources(t.unpermute_heads, m.n) : Identity(m.n);
  bool finite = false;
  switch (dtype) {
    case DType::kQ4_0:
      finite = ReadBlocks<BlockQ4_0>(t, sources, &m, pool);
      break;
    case DType::kQ4_1:
      finite = ReadBlocks<BlockQ4_1>(t, sources, &m, pool);
      break;
    default:  // kQ4_K: IsInt4Dtype above
      finite = ReadBlocks<BlockQ4_K>(t, sources, &m, pool);
      break;
  }
  if (!finite) {
    return absl::InvalidArgumentError(absl::StrCat(
        t.view->file_path, ": tensor '", t.name, "' (", std::string(DTypeName(dtype)),
        ") has a group scale or min that is not a finite fp16 (d * sc or dmin * m above 65504, "
        "or a NaN)"));
  }
  return m;
}

std::optional<Fp8Scales> Fp8FormOf(const ResolvedTensor& t) {
  if (!t.hf_fp8.has_value()) return std::nullopt;
  return t.hf_fp8->kind();
}

absl::StatusOr<Fp8Matrix> ReadTensorFp8(const ResolvedTensor& t) {
  if (!t.hf_fp8.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        t.view->file_path, ": tensor '", t.name, "' (", std::string(DTypeName(t.view->dtype)),
        ", shape ", ShapeString(t.shape),
        ") is not an FP8 projection; FP8: an F8_E4M3 weight with its scales (compressed-tensors "
        "float-quantized, fp8, fbgemm_fp8)"));
  }
  return ReadHfFp8(*t.hf_fp8);
}

absl::StatusOr<std::optional<Int4WordMatrix>> ReadTensorInt4Words(const ResolvedTensor& t) {
  if (!t.hf_int4.has_value()) return std::nullopt;
  return ReadHfInt4Words(*t.hf_int4);
}

}  // namespace onecard::engine
