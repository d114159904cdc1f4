// ProjectionSpec names, projection shapes and byte counts (see weight_spec.h).
// Tested by tests/gpu/memory_plan_test.cc.
#include "engine/runtime/cuda/weight_spec.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {
namespace {

int64_t Align(int64_t bytes) { return (bytes + 255) / 256 * 256; }

const char* ProjectionName(Projection p) {
  switch (p) {
    case Projection::kQkv:
      return "qkv";
    case Projection::kO:
      return "o";
    case Projection::kGateUp:
      return "gate_up";
    case Projection::kDown:
      return "down";
  }
  return "?";
}

}  // namespace

std::string ProjectionSpec::Name() const {
  if (format == WeightFormat::kBf16) return "bf16";
  if (format == WeightFormat::kFp8) return fp8_scales == Fp8Scales::kRow ? "fp8" : "fp8 block128";
  const char* kind = offsets == Int4Offsets::kSymmetric ? ""
                     : offsets == Int4Offsets::kZero    ? " zero"
                                                        : " min";
  return absl::StrCat("int4 g", group, kind, act_order ? " act-order" : "");
}

ModelWeightsSpec ModelWeightsSpec::Uniform(const ModelConfig& config, const ProjectionSpec& spec) {
  ModelWeightsSpec s;
  s.layers.assign(config.num_layers, {spec, spec, spec, spec});
  return s;
}

std::array<int64_t, 2> ProjectionShape(const ModelConfig& c, Projection projection) {
  const int64_t q = c.num_heads * c.head_dim;
  switch (projection) {
    case Projection::kQkv:
      return {q + 2 * c.num_kv_heads * c.head_dim, c.hidden_size};
    case Projection::kO:
      return {c.hidden_size, q};
    case Projection::kGateUp:
      return {2 * c.intermediate_size, c.hidden_size};
    case Projection::kDown:
      return {c.hidden_size, c.intermediate_size};
  }
  return {0, 0};
}

int64_t ProjectionBytes(const ProjectionSpec& spec, int64_t n, int64_t k) {
  if (spec.format == WeightFormat::kBf16) return Align(n * k * 2);
  if (spec.format == WeightFormat::kFp8) {
    return Align(n * k) + Align(Fp8ScaleCount(n, k, spec.fp8_scales) * 4);
  }
  return Align(Int4CodeBytes(n, k)) + Align(Int4ScaleBytes(n, k, spec.group)) +
         Align(Int4OffsetBytes(n, k, spec.group, spec.offsets)) +
         (spec.act_order ? Align(k * 4) : 0);
}

absl::Status CheckInt4Shape(const ModelConfig& c, Projection projection, int32_t group) {
  const auto [n, k] = ProjectionShape(c, projection);
  // gate_up interleaves gate and up rows by 8: each must be a multiple of 8.
  const bool rows_ok =
      n % kInt4TileRows == 0 && (projection != Projection::kGateUp || c.intermediate_size % 8 == 0);
  if (rows_ok && k % kInt4TileCols == 0 && group >= kInt4MinGroup && group % kInt4MinGroup == 0 &&
      k % group == 0) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat(
      c.name, ": the ", ProjectionName(projection), " projection [", n, ", ", k,
      "] with groups of ", group,
      " cannot be 4-bit; 4-bit weights need rows % 16 == 0, columns % 64 == 0 and a group "
      "size a multiple of 32 dividing the columns"));
}

absl::Status CheckFp8Shape(const ModelConfig& c, Projection projection, Fp8Scales scales) {
  const auto [n, k] = ProjectionShape(c, projection);
  bool ok = k % 16 == 0;
  if (scales == Fp8Scales::kBlock128) {
    if (projection == Projection::kQkv) {
      ok = ok && (c.num_heads * c.head_dim) % kFp8Block == 0 &&
           (c.num_kv_heads * c.head_dim) % kFp8Block == 0;
    } else if (projection == Projection::kGateUp) {
      ok = ok && c.intermediate_size % kFp8Block == 0;
    }
  }
  if (ok) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      c.name, ": the ", ProjectionName(projection), " projection [", n, ", ", k,
      "] cannot be FP8 with ", Fp8ScalesName(scales),
      " scales; FP8 weights need columns % 16 == 0, and with 128 x 128 block scales the parts of "
      "a fused projection (q, k, v; gate, up) in whole 128-row blocks"));
}

int64_t LayerBf16Bytes(const ModelConfig& c) {
  const int64_t qkv_rows = ProjectionShape(c, Projection::kQkv)[0];
  return 2 * Align(c.hidden_size * 2) + (c.attention_bias ? Align(qkv_rows * 2) : 0);
}

int64_t OtherWeightBytes(const ModelConfig& c) {
  const int64_t table = Align(c.vocab_size * c.hidden_size * 2);
  return table + Align(c.hidden_size * 2) + (c.tie_word_embeddings ? 0 : table);
}

int64_t LayerWeightBytes(const ModelConfig& c, const ModelWeightsSpec& spec, int64_t layer) {
  int64_t bytes = LayerBf16Bytes(c);
  for (int p = 0; p < kNumProjections; ++p) {
    const auto [n, k] = ProjectionShape(c, static_cast<Projection>(p));
    bytes += ProjectionBytes(spec.layers[layer][p], n, k);
  }
  return bytes;
}

absl::StatusOr<WeightBytes> CountWeightBytes(const ModelConfig& c, const ModelWeightsSpec& spec) {
  if (static_cast<int64_t>(spec.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight spec has ", spec.layers.size(), " layers, the model ", c.num_layers));
  }
  WeightBytes b;
  auto add = [&](const std::string& format, int64_t bytes) {
    b.by_format[format] += bytes;
    b.total += bytes;
  };
  for (const auto& layer : spec.layers) {
    for (int p = 0; p < kNumProjections; ++p) {
      const auto [n, k] = ProjectionShape(c, static_cast<Projection>(p));
      if (layer[p].format == WeightFormat::kInt4) {
        RETURN_IF_ERROR(CheckInt4Shape(c, static_cast<Projection>(p), layer[p].group));
      } else if (layer[p].format == WeightFormat::kFp8) {
        RETURN_IF_ERROR(CheckFp8Shape(c, static_cast<Projection>(p), layer[p].fp8_scales));
      }
      add(layer[p].Name(), ProjectionBytes(layer[p], n, k));
    }
    add("bf16", LayerBf16Bytes(c));
  }
  add("bf16", OtherWeightBytes(c));
  return b;
}

std::string WeightBytes::ToString() const {
  std::string out;
  for (const auto& [format, bytes] : by_format) {
    absl::StrAppend(&out, out.empty() ? "" : " + ", format,
                    absl::StrFormat(" %.2f GiB", static_cast<double>(bytes) / (1LL << 30)));
  }
  return out;
}

absl::StatusOr<ProjectionSpec> ParseProjectionSpec(absl::string_view text) {
  if (text == "bf16") return ProjectionSpec{};
  if (text == "fp8") return ProjectionSpec{.format = WeightFormat::kFp8};
  if (text == "fp8-block128") {
    return ProjectionSpec{.format = WeightFormat::kFp8, .fp8_scales = Fp8Scales::kBlock128};
  }
  ProjectionSpec s{.format = WeightFormat::kInt4, .group = 128};
  std::vector<absl::string_view> parts = absl::StrSplit(text, '-');
  bool ok = parts[0] == "int4";
  for (size_t i = 1; ok && i < parts.size(); ++i) {
    if (parts[i] == "zero") {
      s.offsets = Int4Offsets::kZero;
    } else if (parts[i] == "min") {
      s.offsets = Int4Offsets::kFloat;
    } else if (parts[i] == "act") {
      s.act_order = true;
    } else {
      ok = parts[i].size() > 1 && parts[i][0] == 'g' &&
           absl::SimpleAtoi(parts[i].substr(1), &s.group) && s.group >= kInt4MinGroup &&
           s.group % kInt4MinGroup == 0;
    }
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight format \"", text,
                     "\": expected bf16, fp8, fp8-block128 or "
                     "int4[-g<group, a multiple of 32>][-zero|-min][-act] "
                     "(e.g. int4, int4-g64, int4-g32-zero, int4-zero-act)"));
  }
  return s;
}

}  // namespace onecard::engine
