// FindHfInt4 / ReadHfInt4 / ReadHfInt4Words (see hf_int4.h): names and
// shapes per method, then the codes a packed word at a time, the scales and
// zero points a group at a time, and the group order from g_idx. Every word
// is copied out of the mapping (no alignment assumed). Tested by
// tests/engine/model/hf_int4_test.cc, hf_int4_bad_input_test.cc and
// hf_int4_words_test.cc.
#include "engine/model/hf_int4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/fp16.h"
#include "engine/common/status_macros.h"
#include "engine/model/quant_blocks.h"

namespace onecard::engine {
namespace {

// The tensor suffixes of a method (nullptr: none).
struct FieldNames {
  const char* packed;
  const char* scales;
  const char* zeros;
  const char* g_idx;
};

constexpr char kWeightShape[] = "weight_shape";          // compressed-tensors
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // row 8 w + j: nibble of word w

FieldNames NamesOf(HfQuantMethod method) {
  switch (method) {
    case HfQuantMethod::kGptq:
      return {"qweight", "scales", "qzeros", "g_idx"};
    case HfQuantMethod::kAwq:
      return {"qweight", "scales", "qzeros", nullptr};
    case HfQuantMethod::kCompressedTensors:
      return {"weight_packed", "weight_scale", "weight_zero_point", "weight_g_idx"};
    case HfQuantMethod::kNone:
    case HfQuantMethod::kFp8:
    case HfQuantMethod::kFbgemmFp8:
      break;
  }
  return {nullptr, nullptr, nullptr, nullptr};
}

const char* Title(HfQuantMethod method) {
  return method == HfQuantMethod::kGptq  ? "GPTQ"
         : method == HfQuantMethod::kAwq ? "AWQ"
                                         : "compressed-tensors";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// "<file>: tensor '<name>' (GPTQ field qzeros): <what>"
absl::Status FieldError(HfQuantMethod method, const std::string& file, const std::string& tensor,
                        const char* field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", tensor, "' (", Title(method),
                                                 " field ", field, "): ", what));
}
absl::Status FieldError(HfQuantMethod method, const TensorView& v, const char* field,
                        absl::string_view what) {
  return FieldError(method, v.file_path, v.name, field, what);
}

uint32_t Word(const TensorView& v, int64_t i) {
  uint32_t w;
  std::memcpy(&w, v.data + 4 * i, 4);
  return w;
}

int64_t IntAt(const TensorView& v, int64_t i) {  // I32 or I64
  if (v.dtype == DType::kI32) return static_cast<int32_t>(Word(v, i));
  int64_t x;
  std::memcpy(&x, v.data + 8 * i, 8);
  return x;
}

bool IsFloat(DType d) { return d == DType::kF16 || d == DType::kBF16 || d == DType::kF32; }

// dtype (I32, or a float type when `floating`) and shape of one field.
absl::Status CheckView(HfQuantMethod method, const TensorView& v, const char* field, bool floating,
                       const std::vector<int64_t>& want, absl::string_view want_text) {
  if (floating ? !IsFloat(v.dtype) : v.dtype != DType::kI32) {
    return FieldError(method, v, field,
                      absl::StrCat("has dtype ", std::string(DTypeName(v.dtype)), ", expected ",
                                   floating ? "F16 (or BF16 / F32)" : "I32"));
  }
  if (v.shape != want) {
    return FieldError(method, v, field,
                      absl::StrCat("has shape ", ShapeText(v.shape), ", expected ", want_text,
                                   " = ", ShapeText(want)));
  }
  return absl::OkStatus();
}

// Group size, symmetry and zero point convention from the config.
absl::Status ResolveScheme(const HfQuantConfig& q, HfInt4Tensors* t) {
  int32_t group = q.group_size;
  t->symmetric = q.symmetric;
  t->zeros_minus_one = q.method == HfQuantMethod::kGptq && !q.gptq_v2;
  if (q.method == HfQuantMethod::kCompressedTensors) {
    const CompressedGroup* g = q.GroupFor(t->module);
    if (g == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          q.source, ": field 'config_groups' has no group whose targets match module '", t->module,
          "' (tensor '", t->packed->name, "')"));
    }
    if (g->fp8.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(q.source, ": field 'config_groups.", g->name,
                                                     "' is float 8-bit, but module '", t->module,
                                                     "' has 4-bit tensor '", t->packed->name, "'"));
    }
    group = g->group_size;
    t->symmetric = g->symmetric;
  }
  t->group = group > 0 ? group : static_cast<int32_t>(t->k);
  if (t->k % t->group != 0) {
    return FieldError(t->method, *t->packed, NamesOf(t->method).packed,
                      absl::StrCat("k = ", t->k, " is not a multiple of the group size ", t->group,
                                   " (", q.source, ")"));
  }
  return absl::OkStatus();
}

// The scales, zero points and g_idx tensors; a missing required one is an error.
absl::Status FindFields(const WeightSource& w, HfInt4Tensors* t) {
  const FieldNames f = NamesOf(t->method);
  const std::string base = t->module + ".";
  t->scales = w.Find(base + f.scales);
  t->zeros = t->symmetric && t->method == HfQuantMethod::kCompressedTensors
                 ? nullptr
                 : w.Find(base + f.zeros);
  t->g_idx = f.g_idx != nullptr ? w.Find(base + f.g_idx) : nullptr;
  const bool zeros_needed = !(t->symmetric && t->method == HfQuantMethod::kCompressedTensors);
  const char* missing = t->scales == nullptr                  ? f.scales
                        : zeros_needed && t->zeros == nullptr ? f.zeros
                                                              : nullptr;
  if (missing == nullptr) return absl::OkStatus();
  return FieldError(t->method, t->packed->file_path, base + missing, missing,
                    absl::StrCat("not found; ", Title(t->method), " module '", t->module, "' has ",
                                 t->packed->name, " but no ", missing));
}

absl::Status CheckGptqAwqShapes(const HfInt4Tensors& t) {
  const FieldNames f = NamesOf(t.method);
  const int64_t n = t.n, k = t.k, groups = k / t.group;
  const bool gptq = t.method == HfQuantMethod::kGptq;
  if (n % 8 != 0 || (gptq && k % 8 != 0)) {
    return FieldError(t.method, *t.packed, f.packed,
                      absl::StrCat("W [", n, ", ", k, "] cannot be packed 8 codes a word"));
  }
  RETURN_IF_ERROR(gptq ? CheckView(t.method, *t.packed, f.packed, false, {k / 8, n}, "[k / 8, n]")
                       : CheckView(t.method, *t.packed, f.packed, false, {k, n / 8}, "[k, n / 8]"));
  RETURN_IF_ERROR(
      CheckView(t.method, *t.zeros, f.zeros, false, {groups, n / 8}, "[k / group, n / 8]"));
  RETURN_IF_ERROR(CheckView(t.method, *t.scales, f.scales, true, {groups, n}, "[k / group, n]"));
  if (t.g_idx == nullptr) return absl::OkStatus();
  return CheckView(t.method, *t.g_idx, f.g_idx, false, {k}, "[k]");
}

absl::Status CheckCompressedShapes(const WeightSource& w, const HfInt4Tensors& t) {
  const FieldNames f = NamesOf(t.method);
  const int64_t n = t.n, k = t.k, groups = k / t.group;
  RETURN_IF_ERROR(
      CheckView(t.method, *t.packed, f.packed, false, {n, (k + 7) / 8}, "[n, ceil(k / 8)]"));
  RETURN_IF_ERROR(CheckView(t.method, *t.scales, f.scales, true, {n, groups}, "[n, k / group]"));
  if (t.zeros != nullptr) {
    RETURN_IF_ERROR(CheckView(t.method, *t.zeros, f.zeros, false, {(n + 7) / 8, groups},
                              "[ceil(n / 8), k / group]"));
  }
  if (t.g_idx != nullptr)
    RETURN_IF_ERROR(CheckView(t.method, *t.g_idx, f.g_idx, false, {k}, "[k]"));
  const TensorView* shape = w.Find(t.module + "." + kWeightShape);
  if (shape == nullptr) {
    return FieldError(t.method, t.packed->file_path, t.module + "." + kWeightShape, kWeightShape,
                      "not found");
  }
  const bool ints = shape->dtype == DType::kI64 || shape->dtype == DType::kI32;
  if (!ints || shape->shape != std::vector<int64_t>{2} || IntAt(*shape, 0) != n ||
      IntAt(*shape, 1) != k) {
    return FieldError(t.method, *shape, kWeightShape,
                      absl::StrCat("must be an I64 [2] holding [", n, ", ", k, "]"));
  }
  return absl::OkStatus();
}

// A 4-bit tensor in a checkpoint without a 4-bit quantization config is an
// error.
absl::Status CheckUnconfigured(const Checkpoint& c, const std::string& module) {
  for (const char* packed : {"qweight", "weight_packed"}) {
    const TensorView* v = c.weights->Find(absl::StrCat(module, ".", packed));
    if (v == nullptr) continue;
    const std::string why =
        c.quant.method == HfQuantMethod::kNone
            ? "the checkpoint has no quantization config (config.json quantization_config, "
              "quantize_config.json or quant_config.json)"
            : absl::StrCat("the quantization config (", HfQuantMethodName(c.quant.method), ", ",
                           c.quant.source, ") is not a 4-bit one");
    return absl::InvalidArgumentError(absl::StrCat(v->file_path, ": tensor '", v->name, "' (field ",
                                                   packed, ") is 4-bit, but ", why));
  }
  return absl::OkStatus();
}

// Scale i of the scales tensor as fp16 bits; BF16 / F32 must be exact in fp16.
absl::StatusOr<uint16_t> HalfAt(const HfInt4Tensors& t, int64_t i) {
  const TensorView& v = *t.scales;
  uint16_t bits = 0;
  float f = 0.0f;
  if (v.dtype == DType::kF16) {
    std::memcpy(&bits, v.data + 2 * i, 2);
    return bits;
  }
  if (v.dtype == DType::kBF16) {
    std::memcpy(&bits, v.data + 2 * i, 2);
    f = Bf16ToFloat(bits);
  } else {
    std::memcpy(&f, v.data + 4 * i, 4);
  }
  const uint16_t half = FloatToHalf(f);
  if (HalfToFloat(half) != f && !std::isnan(f)) {
    return FieldError(t.method, v, NamesOf(t.method).scales,
                      absl::StrCat("scale ", f, " at index ", i, " is not exact in fp16"));
  }
  return half;
}

absl::Status ReadScales(const HfInt4Tensors& t, Int4Matrix* m) {
  const int64_t groups = m->num_groups();
  const bool by_row = t.method == HfQuantMethod::kCompressedTensors;  // [n, G], else [G, n]
  for (int64_t r = 0; r < t.n; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      ASSIGN_OR_RETURN(m->scales[r * groups + g], HalfAt(t, by_row ? r * groups + g : g * t.n + r));
    }
  }
  return absl::OkStatus();
}

// The zero point of row r in group g, 0..15.
int ZeroPoint(const HfInt4Tensors& t, int64_t r, int64_t g) {
  const int64_t groups = t.k / t.group;
  switch (t.method) {
    case HfQuantMethod::kGptq: {
      const uint32_t word =
          Word(*t.zeros, g * (t.n / 8) + r / 8) + (t.zeros_minus_one ? 0x11111111u : 0u);
      return (word >> (4 * (r % 8))) & 15;
    }
    case HfQuantMethod::kAwq:
      return (Word(*t.zeros, g * (t.n / 8) + r / 8) >> (4 * kAwqNibble[r % 8])) & 15;
    case HfQuantMethod::kCompressedTensors:
      return (Word(*t.zeros, (r / 8) * groups + g) >> (4 * (r % 8))) & 15;
    default:
      break;
  }
  return 8;
}

// The zero points into offset [n, k / group] (asymmetric), or checked to be
// 8 (symmetric).
absl::Status ReadZeros(const HfInt4Tensors& t, std::vector<uint16_t>* offset) {
  if (t.zeros == nullptr) return absl::OkStatus();
  const int64_t groups = t.k / t.group;
  for (int64_t r = 0; r < t.n; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int z = ZeroPoint(t, r, g);
      if (!t.symmetric) {
        (*offset)[r * groups + g] = static_cast<uint16_t>(z);
      } else if (z != 8) {
        return FieldError(t.method, *t.zeros, NamesOf(t.method).zeros,
                          absl::StrCat("zero point ", z, " of row ", r, ", group ", g,
                                       " is not 8, though the config says sym = true"));
      }
    }
  }
  return absl::OkStatus();
}

// The eight nibbles of a word, lowest first, as eight bytes (little-endian).
uint64_t NibblesToBytes(uint32_t word) {
  // Even nibbles to bytes 0, 2, 4, 6 and odd ones to 1, 3, 5, 7: each 8-bit
  // lane of x is spread to a 16-bit lane.
  uint64_t x = word;
  x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
  x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;  // byte i of word in 16-bit lane i
  return (x & 0x000F000F000F000Full) | ((x & 0x00F000F000F000F0ull) << 4);
}

// GPTQ's zero points (qzeros [G, n / 8]: rows 8 w .. 8 w + 7 in word w, v1
// words plus 0x11111111) a word at a time, as ReadZeros reads them; a
// symmetric word other than all 8s is left to ReadZeros to name.
absl::Status ReadGptqZeros(const HfInt4Tensors& t, std::vector<uint16_t>* offset) {
  const int64_t groups = t.k / t.group, words = t.n / 8;
  const uint32_t add = t.zeros_minus_one ? 0x11111111u : 0u;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t w = 0; w < words; ++w) {
      const uint32_t z = Word(*t.zeros, g * words + w) + add;
      if (t.symmetric && z != 0x88888888u) return ReadZeros(t, offset);
      if (t.symmetric) continue;
      for (int j = 0; j < 8; ++j) (*offset)[(8 * w + j) * groups + g] = (z >> (4 * j)) & 15;
    }
  }
  return absl::OkStatus();
}

// Each tensor holds the bytes its dtype and shape need (checked before a
// word is read where a view was not made by the safetensors reader).
absl::Status CheckBytes(const HfInt4Tensors& t) {
  const FieldNames f = NamesOf(t.method);
  const std::pair<const TensorView*, const char*> fields[] = {
      {t.packed, f.packed}, {t.scales, f.scales}, {t.zeros, f.zeros}, {t.g_idx, f.g_idx}};
  for (const auto& [v, field] : fields) {
    if (v == nullptr) continue;
    const uint64_t want = static_cast<uint64_t>(v->NumElements()) * BlockBytes(v->dtype);
    if (v->size_bytes < want || (want > 0 && v->data == nullptr)) {
      return FieldError(
          t.method, *v, field,
          absl::StrCat("holds ", v->size_bytes, " bytes; ", std::string(DTypeName(v->dtype)), " ",
                       ShapeText(v->shape), " needs ", want));
    }
  }
  return absl::OkStatus();
}

// Codes in the source's column order. GPTQ's [k / 8, n] words are read in
// blocks of 256 rows (each block's output rows stay in cache), the blocks in
// parallel over `pool` when there is one.
void ReadCodes(const HfInt4Tensors& t, Int4Matrix* m, ThreadPool* pool) {
  const int64_t n = t.n, k = t.k;
  uint8_t* q = m->q.data();
  if (t.method == HfQuantMethod::kGptq) {
    constexpr int64_t kRows = 256;
    const auto blocks = [&](int64_t b0, int64_t b1) {
      for (int64_t r0 = b0 * kRows; r0 < std::min(n, b1 * kRows); r0 += kRows) {
        const int64_t r1 = std::min(n, r0 + kRows);
        for (int64_t wr = 0; wr < k / 8; ++wr) {
          for (int64_t r = r0; r < r1; ++r) {
            const uint64_t bytes = NibblesToBytes(Word(*t.packed, wr * n + r));
            std::memcpy(q + r * k + wr * 8, &bytes, 8);
          }
        }
      }
    };
    const int64_t num_blocks = (n + kRows - 1) / kRows;
    pool != nullptr ? pool->ParallelFor(num_blocks, blocks) : blocks(0, num_blocks);
  } else if (t.method == HfQuantMethod::kAwq) {
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t w = 0; w < n / 8; ++w) {
        const uint32_t word = Word(*t.packed, c * (n / 8) + w);
        for (int j = 0; j < 8; ++j) q[(w * 8 + j) * k + c] = (word >> (4 * kAwqNibble[j])) & 15;
      }
    }
  } else {
    const int64_t words = (k + 7) / 8;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t w = 0; w < words; ++w) {
        const uint32_t word = Word(*t.packed, r * words + w);
        for (int64_t j = 0; j < 8 && w * 8 + j < k; ++j)
          q[r * k + w * 8 + j] = (word >> (4 * j)) & 15;
      }
    }
  }
}

// The stable sort of columns by g_idx (empty when it changes nothing).
absl::StatusOr<std::vector<int32_t>> GroupOrder(const HfInt4Tensors& t) {
  if (t.g_idx == nullptr) return std::vector<int32_t>();
  const int64_t groups = t.k / t.group;
  const char* field = NamesOf(t.method).g_idx;
  std::vector<int64_t> g(t.k), counts(groups, 0);
  for (int64_t c = 0; c < t.k; ++c) g[c] = IntAt(*t.g_idx, c);
  if (t.method == HfQuantMethod::kCompressedTensors && std::count(g.begin(), g.end(), -1) > 0) {
    return std::vector<int32_t>();  // "-1 in g_idx": columns in order (compressed-tensors)
  }
  for (int64_t c = 0; c < t.k; ++c) {
    if (g[c] < 0 || g[c] >= groups) {
      return FieldError(t.method, *t.g_idx, field,
                        absl::StrCat("g_idx[", c, "] = ", g[c], " is outside [0, ", groups, ")"));
    }
    ++counts[g[c]];
  }
  for (int64_t gi = 0; gi < groups; ++gi) {
    if (counts[gi] != t.group) {
      return FieldError(
          t.method, *t.g_idx, field,
          absl::StrCat("group ", gi, " holds ", counts[gi], " columns, not ", t.group));
    }
  }
  std::vector<int32_t> order(t.k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return g[a] < g[b]; });
  for (int64_t j = 0; j < t.k; ++j) {
    if (order[j] != j) return order;
  }
  return std::vector<int32_t>();
}

void PermuteColumns(Int4Matrix* m) {
  std::vector<uint8_t> row(m->k);
  for (int64_t r = 0; r < m->n; ++r) {
    uint8_t* q = m->q.data() + r * m->k;
    for (int64_t j = 0; j < m->k; ++j) row[j] = q[m->columns[j]];
    std::copy(row.begin(), row.end(), q);
  }
}

}  // namespace

absl::StatusOr<std::optional<HfInt4Tensors>> FindHfInt4(const Checkpoint& c,
                                                        const std::string& module, int64_t n,
                                                        int64_t k) {
  if (NamesOf(c.quant.method).packed == nullptr) {  // none, fp8, fbgemm_fp8
    RETURN_IF_ERROR(CheckUnconfigured(c, module));
    return std::nullopt;
  }
  HfInt4Tensors t;
  t.method = c.quant.method;
  t.module = module;
  t.n = n;
  t.k = k;
  t.packed = c.weights->Find(absl::StrCat(module, ".", NamesOf(t.method).packed));
  if (t.packed == nullptr) return std::nullopt;
  RETURN_IF_ERROR(ResolveScheme(c.quant, &t));
  RETURN_IF_ERROR(FindFields(*c.weights, &t));
  RETURN_IF_ERROR(t.method == HfQuantMethod::kCompressedTensors
                      ? CheckCompressedShapes(*c.weights, t)
                      : CheckGptqAwqShapes(t));
  return t;
}

absl::StatusOr<Int4Matrix> ReadHfInt4(const HfInt4Tensors& t, ThreadPool* pool) {
  Int4Matrix m;
  m.n = t.n;
  m.k = t.k;
  m.group = t.group;
  m.offsets = t.offsets();
  m.q.resize(t.n * t.k);
  m.scales.resize(t.n * m.num_groups());
  if (!t.symmetric) m.offset.resize(m.scales.size());
  RETURN_IF_ERROR(ReadScales(t, &m));
  RETURN_IF_ERROR(ReadZeros(t, &m.offset));
  ReadCodes(t, &m, pool);
  ASSIGN_OR_RETURN(m.columns, GroupOrder(t));
  if (!m.columns.empty()) PermuteColumns(&m);
  return m;
}

absl::StatusOr<std::optional<Int4WordMatrix>> ReadHfInt4Words(const HfInt4Tensors& t) {
  if (t.method != HfQuantMethod::kGptq || t.packed == nullptr || t.scales == nullptr ||
      t.zeros == nullptr || t.scales->dtype != DType::kF16) {
    return std::nullopt;
  }
  RETURN_IF_ERROR(CheckGptqAwqShapes(t));
  RETURN_IF_ERROR(CheckBytes(t));
  ASSIGN_OR_RETURN(const bool reordered, HfInt4ReordersColumns(t));
  if (reordered) return std::nullopt;
  Int4WordMatrix w;
  w.n = t.n;
  w.k = t.k;
  w.group = t.group;
  w.offsets = t.offsets();
  w.codes = t.packed->data;  // [k / 8, n]
  w.code_row_stride = 1;
  w.code_word_stride = t.n;
  w.scales = t.scales->data;  // [k / group, n]
  w.scale_row_stride = 1;
  w.scale_group_stride = t.n;
  if (!t.symmetric) w.offset.resize(t.n * w.num_groups());
  RETURN_IF_ERROR(ReadGptqZeros(t, &w.offset));
  return w;
}

absl::StatusOr<bool> HfInt4ReordersColumns(const HfInt4Tensors& t) {
  ASSIGN_OR_RETURN(const std::vector<int32_t> order, GroupOrder(t));
  return !order.empty();
}

absl::StatusOr<std::vector<int32_t>> HfInt4ColumnOrder(const HfInt4Tensors& t) {
  return GroupOrder(t);
}

std::optional<HfInt4Part> HfInt4PartOf(const Checkpoint& c, const std::string& name) {
  const FieldNames f = NamesOf(c.quant.method);
  if (f.packed == nullptr || c.weights == nullptr) return std::nullopt;
  const bool compressed = c.quant.method == HfQuantMethod::kCompressedTensors;
  const char* fields[] = {f.packed, f.scales, f.zeros, f.g_idx,
                          compressed ? kWeightShape : nullptr};
  for (const char* field : fields) {
    if (field == nullptr || !absl::EndsWith(name, absl::StrCat(".", field))) continue;
    std::string module = name.substr(0, name.size() - std::strlen(field) - 1);
    if (c.weights->Find(absl::StrCat(module, ".", f.packed)) != nullptr) {
      return HfInt4Part{c.quant.method, std::move(module), field};
    }
  }
  return std::nullopt;
}

std::string HfInt4FormatName(const HfQuantConfig& q, const std::string& module) {
  int32_t group = q.group_size;
  bool symmetric = q.symmetric;
  if (q.method == HfQuantMethod::kCompressedTensors) {
    const CompressedGroup* g = q.GroupFor(module);
    if (g == nullptr) return "compressed-tensors int4 (no config group)";
    group = g->group_size;
    symmetric = g->symmetric;
  }
  return absl::StrCat(HfQuantMethodName(q.method), " int4 ",
                      group > 0 ? absl::StrCat("g", group) : "channel", symmetric ? "" : " zero",
                      q.method == HfQuantMethod::kGptq && q.desc_act ? " desc_act" : "");
}

}  // namespace onecard::engine
