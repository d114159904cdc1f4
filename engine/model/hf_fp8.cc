// FindHfFp8 / ReadHfFp8 (see hf_fp8.h): the config's scheme for the module,
// the scales tensor's name, dtype and shape, then the codes copied and the
// scales converted (copied out of the mapping: no alignment assumed).
// Tested by tests/engine/model/hf_fp8_test.cc and hf_fp8_bad_input_test.cc.
#include "engine/model/hf_fp8.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/model/quant_blocks.h"

namespace onecard::engine {
namespace {

constexpr char kWeightScale[] = "weight_scale";
constexpr char kWeightScaleInv[] = "weight_scale_inv";

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// "<file>: tensor '<name>' (FP8 field weight_scale): <what>"
absl::Status FieldError(const std::string& file, const std::string& tensor, const char* field,
                        absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ": tensor '", tensor, "' (FP8 field ", field, "): ", what));
}

// The scales field of a method: the block fp8 config's "weight_scale_inv",
// every other layout's "weight_scale".
const char* ScaleField(const HfQuantConfig& q) {
  return q.method == HfQuantMethod::kFp8 && q.fp8.weights == Fp8WeightScales::kBlock128
             ? kWeightScaleInv
             : kWeightScale;
}

// The shapes the scales of W [n, k] may have under `scales` (the first is
// the one named in errors).
std::vector<std::vector<int64_t>> ScaleShapes(Fp8WeightScales scales, int64_t n, int64_t k) {
  switch (scales) {
    case Fp8WeightScales::kTensor:
      return {{1}, {}};
    case Fp8WeightScales::kChannel:
      return {{n, 1}, {n}};
    case Fp8WeightScales::kBlock128:
      return {{(n + kFp8Block - 1) / kFp8Block, (k + kFp8Block - 1) / kFp8Block}};
  }
  return {};
}

// The F8_E4M3 weight of a module the config does not make FP8.
absl::Status NotConfigured(const Checkpoint& c, const TensorView& w, const std::string& module) {
  std::string why;
  if (c.quant.method == HfQuantMethod::kNone) {
    why = "the checkpoint has no quantization config (config.json quantization_config)";
  } else if (c.quant.Ignores(module)) {
    why = absl::StrCat("module '", module, "' is on the ignore list of ", c.quant.source,
                       " (so it should be unquantized)");
  } else {
    why = absl::StrCat(c.quant.source, " (", HfQuantMethodName(c.quant.method), ") gives module '",
                       module, "' no FP8 weights");
  }
  return absl::InvalidArgumentError(
      absl::StrCat(w.file_path, ": tensor '", w.name, "' is F8_E4M3, but ", why));
}

absl::Status CheckScale(const HfFp8Tensors& t) {
  const TensorView& s = *t.scale;
  if (s.dtype != DType::kF32 && s.dtype != DType::kBF16 && s.dtype != DType::kF16) {
    return FieldError(
        s.file_path, s.name, t.scale_field,
        absl::StrCat("has dtype ", std::string(DTypeName(s.dtype)), ", expected F32, BF16 or F16"));
  }
  const std::vector<std::vector<int64_t>> shapes = ScaleShapes(t.scheme.weights, t.n, t.k);
  for (const std::vector<int64_t>& shape : shapes) {
    if (s.shape == shape) return absl::OkStatus();
  }
  return FieldError(
      s.file_path, s.name, t.scale_field,
      absl::StrCat("has shape ", ShapeText(s.shape), ", expected ", ShapeText(shapes[0]), " (",
                   Fp8WeightScalesName(t.scheme.weights), " scales of W [", t.n, ", ", t.k, "])"));
}

// Each tensor holds the bytes its dtype and shape need (views not made by
// the safetensors reader are not trusted).
absl::Status CheckBytes(const TensorView& v, const char* field) {
  const uint64_t want = static_cast<uint64_t>(v.NumElements()) * BlockBytes(v.dtype);
  if (v.size_bytes >= want && (want == 0 || v.data != nullptr)) return absl::OkStatus();
  return FieldError(
      v.file_path, v.name, field,
      absl::StrCat("holds ", v.size_bytes, " bytes; ", std::string(DTypeName(v.dtype)), " ",
                   ShapeText(v.shape), " needs ", want));
}

float ScaleAt(const TensorView& s, int64_t i) {
  if (s.dtype == DType::kF32) {
    float f;
    std::memcpy(&f, s.data + 4 * i, 4);
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, s.data + 2 * i, 2);
  return s.dtype == DType::kBF16 ? Bf16ToFloat(bits) : HalfToFloat(bits);
}

}  // namespace

absl::StatusOr<std::optional<HfFp8Tensors>> FindHfFp8(const Checkpoint& c,
                                                      const std::string& module, int64_t n,
                                                      int64_t k) {
  const TensorView* weight = c.weights->Find(absl::StrCat(module, ".weight"));
  if (weight == nullptr || weight->dtype != DType::kF8E4M3) return std::nullopt;
  const std::optional<Fp8Scheme> scheme = c.quant.Fp8SchemeFor(module);
  if (!scheme.has_value()) return NotConfigured(c, *weight, module);
  HfFp8Tensors t;
  t.method = c.quant.method;
  t.module = module;
  t.weight = weight;
  t.n = n;
  t.k = k;
  t.scheme = *scheme;
  t.scale_field = ScaleField(c.quant);
  const std::string scale_name = absl::StrCat(module, ".", t.scale_field);
  t.scale = c.weights->Find(scale_name);
  if (t.scale == nullptr) {
    return FieldError(weight->file_path, scale_name, t.scale_field,
                      absl::StrCat("not found; FP8 weight '", weight->name, "' (",
                                   HfQuantMethodName(c.quant.method), ", ",
                                   Fp8WeightScalesName(t.scheme.weights), ") has no scales"));
  }
  RETURN_IF_ERROR(CheckScale(t));
  return t;
}

absl::StatusOr<Fp8Matrix> ReadHfFp8(const HfFp8Tensors& t) {
  const TensorView& w = *t.weight;
  if (w.shape != std::vector<int64_t>{t.n, t.k}) {
    return FieldError(
        w.file_path, w.name, "weight",
        absl::StrCat("has shape ", ShapeText(w.shape), ", expected [", t.n, ", ", t.k, "]"));
  }
  RETURN_IF_ERROR(CheckBytes(w, "weight"));
  RETURN_IF_ERROR(CheckBytes(*t.scale, t.scale_field));
  Fp8Matrix m;
  m.n = t.n;
  m.k = t.k;
  m.scales_kind = t.kind();
  m.codes.assign(w.data, w.data + t.n * t.k);
  if (t.scheme.weights == Fp8WeightScales::kTensor) {
    m.scales.assign(t.n, ScaleAt(*t.scale, 0));
  } else {
    m.scales.resize(Fp8ScaleCount(t.n, t.k, m.scales_kind));
    for (size_t i = 0; i < m.scales.size(); ++i) m.scales[i] = ScaleAt(*t.scale, i);
  }
  const absl::Status valid = m.Validate(w.name);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(w.file_path, ": ", valid.message(), " (scales from ", t.scale->name, ")"));
  }
  return m;
}

std::optional<std::string> HfFp8ScaleModuleOf(const Checkpoint& c, const std::string& name) {
  if (c.weights == nullptr) return std::nullopt;
  for (const char* field : {kWeightScale, kWeightScaleInv}) {
    const std::string suffix = absl::StrCat(".", field);
    if (!name.ends_with(suffix)) continue;
    std::string module = name.substr(0, name.size() - suffix.size());
    const TensorView* w = c.weights->Find(module + ".weight");
    if (w != nullptr && w->dtype == DType::kF8E4M3) return module;
  }
  return std::nullopt;
}

std::string HfFp8FormatName(const HfQuantConfig& q, const std::string& module) {
  const std::optional<Fp8Scheme> scheme = q.Fp8SchemeFor(module);
  if (!scheme.has_value()) return "e4m3 (not in the config)";
  return absl::StrCat(HfQuantMethodName(q.method), " e4m3 ", Fp8WeightScalesName(scheme->weights));
}

}  // namespace onecard::engine
