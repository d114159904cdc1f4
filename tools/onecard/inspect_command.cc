// RunInspect: config (and an HF folder's quantization), tensor table with each
// tensor's dtype and storage format, and totals by dtype and by format, as
// plain text.
// Tested by tests/tools/onecard/inspect_command_test.cc.
#include "tools/onecard/inspect_command.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
#include "engine/model/hf_fp8.h"
#include "engine/model/hf_int4.h"
#include "engine/model/safetensors.h"

namespace onecard::tools {
namespace {

using engine::Checkpoint;
using engine::ModelConfig;
using engine::TensorView;

std::string FormatName(const Checkpoint& ckpt) {
  if (const engine::GgufFile* gguf = ckpt.gguf()) {
    return absl::StrFormat("gguf v%d", gguf->version());
  }
  auto* source = dynamic_cast<const engine::SafetensorsSource*>(ckpt.weights.get());
  size_t files = source != nullptr ? source->FilePaths().size() : 0;
  return absl::StrFormat("safetensors (%d file%s)", files, files == 1 ? "" : "s");
}

std::string RopeScalingText(const ModelConfig& c) {
  if (!c.rope_scaling.enabled) return "none";
  const engine::RopeScaling& r = c.rope_scaling;
  return absl::StrFormat(
      "llama3 factor=%g low_freq_factor=%g high_freq_factor=%g "
      "original_max_position_embeddings=%d",
      r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_position_embeddings);
}

std::string QuantizationText(const Checkpoint& ckpt) {
  const engine::HfQuantConfig& q = ckpt.quant;
  if (q.method == engine::HfQuantMethod::kNone) return "none";
  std::string text = engine::HfQuantMethodName(q.method);
  if (q.method == engine::HfQuantMethod::kGptq) {
    absl::StrAppend(&text, q.gptq_v2 ? " v2" : " v1", " group_size=", q.group_size,
                    " sym=", q.symmetric ? "true" : "false",
                    " desc_act=", q.desc_act ? "true" : "false");
  } else if (q.method == engine::HfQuantMethod::kAwq) {
    absl::StrAppend(&text, " gemm group_size=", q.group_size);
  } else if (q.method == engine::HfQuantMethod::kFp8 ||
             q.method == engine::HfQuantMethod::kFbgemmFp8) {
    absl::StrAppend(&text, " e4m3 weights=", engine::Fp8WeightScalesName(q.fp8.weights),
                    " activations=", engine::Fp8ActivationsName(q.fp8.activations));
  } else {
    const size_t fp8 = std::count_if(q.groups.begin(), q.groups.end(),
                                     [](const engine::CompressedGroup& g) { return g.fp8; });
    const char* format = fp8 == 0                 ? " pack-quantized, "
                         : fp8 == q.groups.size() ? " float-quantized, "
                                                  : " pack- and float-quantized, ";
    absl::StrAppend(&text, format, q.groups.size(), " group", q.groups.size() == 1 ? "" : "s");
  }
  return absl::StrCat(text, " (", q.source, ")");
}

void PrintConfig(const Checkpoint& ckpt, std::ostream& out) {
  const ModelConfig& c = ckpt.config;
  out << absl::StrFormat("model: %s\nformat: %s\nquantization: %s\n", ckpt.path, FormatName(ckpt),
                         QuantizationText(ckpt));
  out << absl::StrFormat("architecture: %s\nname: %s\n", engine::ArchitectureName(c.architecture),
                         c.name);
  out << absl::StrFormat(
      "vocab_size: %d\nhidden_size: %d\nintermediate_size: %d\nnum_layers: %d\n"
      "num_heads: %d\nnum_kv_heads: %d\nhead_dim: %d\nmax_position_embeddings: %d\n",
      c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads, c.num_kv_heads,
      c.head_dim, c.max_position_embeddings);
  out << absl::StrFormat("rms_norm_eps: %g\nrope_theta: %g\nrope_scaling: %s\n", c.rms_norm_eps,
                         c.rope_theta, RopeScalingText(c));
  out << absl::StrFormat(
      "attention_bias: %s\ntie_word_embeddings: %s\nbos_token_id: %d\neos_token_id: %d\n",
      c.attention_bias ? "true" : "false", c.tie_word_embeddings ? "true" : "false", c.bos_token_id,
      c.eos_token_id);
}

std::string ShapeText(const TensorView& t) {
  return absl::StrCat("[", absl::StrJoin(t.shape, ", "), "]");
}

struct Totals {
  int64_t tensors = 0;
  int64_t elements = 0;
  uint64_t bytes = 0;
};

// A tensor's storage format: its HF 4-bit or FP8 module's format (an FP8
// weight and its scales alike), else its dtype.
std::string TensorFormat(const Checkpoint& ckpt, const TensorView& t) {
  const std::optional<engine::HfInt4Part> part = engine::HfInt4PartOf(ckpt, t.name);
  if (part.has_value()) return engine::HfInt4FormatName(ckpt.quant, part->module);
  if (t.dtype == engine::DType::kF8E4M3 && t.name.ends_with(".weight")) {
    return engine::HfFp8FormatName(ckpt.quant, t.name.substr(0, t.name.size() - 7));
  }
  const std::optional<std::string> fp8_module = engine::HfFp8ScaleModuleOf(ckpt, t.name);
  if (fp8_module.has_value()) return engine::HfFp8FormatName(ckpt.quant, *fp8_module);
  return std::string(engine::DTypeName(t.dtype));
}

void AddTo(Totals* totals, const TensorView& t) {
  ++totals->tensors;
  totals->elements += t.NumElements();
  totals->bytes += t.size_bytes;
}

void PrintTotals(const Totals& all, const std::map<std::string, Totals>& by_dtype,
                 const std::map<std::string, Totals>& by_format, std::ostream& out) {
  out << absl::StrFormat("\ntotals: %d tensors, %d parameters, %d bytes (%.2f MiB)\n", all.tensors,
                         all.elements, all.bytes, all.bytes / 1048576.0);
  for (const auto& [dtype, t] : by_dtype) {
    out << absl::StrFormat("  %-5s  %d tensor%s, %d parameters, %d bytes\n", dtype, t.tensors,
                           t.tensors == 1 ? "" : "s", t.elements, t.bytes);
  }
  out << "bytes by format:\n";
  for (const auto& [format, t] : by_format) {
    out << absl::StrFormat("  %-5s  %d tensor%s, %d bytes (%.2f MiB)\n", format, t.tensors,
                           t.tensors == 1 ? "" : "s", t.bytes, t.bytes / 1048576.0);
  }
}

void PrintTensors(const Checkpoint& ckpt, std::ostream& out) {
  std::vector<std::pair<const TensorView*, std::string>> rows;  // tensor, format
  size_t name_width = 4, shape_width = 5;
  for (const std::string& name : ckpt.weights->TensorNames()) {
    const TensorView* t = ckpt.weights->Find(name);
    rows.emplace_back(t, TensorFormat(ckpt, *t));
    name_width = std::max(name_width, name.size());
    shape_width = std::max(shape_width, ShapeText(*t).size());
  }
  out << absl::StrFormat("\ntensors:\n  %-*s  %-7s  %-*s  %12s  %s\n", name_width, "name", "dtype",
                         shape_width, "shape", "bytes", "format");
  Totals all;
  std::map<std::string, Totals> by_dtype, by_format;
  for (const auto& [t, format] : rows) {
    std::string dtype(engine::DTypeName(t->dtype));
    out << absl::StrFormat("  %-*s  %-7s  %-*s  %12d  %s\n", name_width, t->name, dtype,
                           shape_width, ShapeText(*t), t->size_bytes, format);
    for (Totals* totals : {&all, &by_dtype[dtype], &by_format[format]}) AddTo(totals, *t);
  }
  PrintTotals(all, by_dtype, by_format, out);
}

}  // namespace

absl::Status RunInspect(const std::string& model_path, std::ostream& out) {
  ASSIGN_OR_RETURN(Checkpoint ckpt, engine::OpenCheckpoint(model_path));
  PrintConfig(ckpt, out);
  PrintTensors(ckpt, out);
  return absl::OkStatus();
}

}  // namespace onecard::tools
