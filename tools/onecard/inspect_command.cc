// RunInspect: config, tensor table and totals of a checkpoint, as plain text.
// Tested by tests/tools/onecard/inspect_command_test.cc.
#include "tools/onecard/inspect_command.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
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

void PrintConfig(const Checkpoint& ckpt, std::ostream& out) {
  const ModelConfig& c = ckpt.config;
  out << absl::StrFormat("model: %s\nformat: %s\n", ckpt.path, FormatName(ckpt));
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

void PrintTensors(const Checkpoint& ckpt, std::ostream& out) {
  std::vector<const TensorView*> views;
  size_t name_width = 4, shape_width = 5;
  for (const std::string& name : ckpt.weights->TensorNames()) {
    const TensorView* t = ckpt.weights->Find(name);
    views.push_back(t);
    name_width = std::max(name_width, name.size());
    shape_width = std::max(shape_width, ShapeText(*t).size());
  }
  out << absl::StrFormat("\ntensors:\n  %-*s  %-5s  %-*s  %12s\n", name_width, "name", "dtype",
                         shape_width, "shape", "bytes");
  Totals all;
  std::map<std::string, Totals> by_dtype;
  for (const TensorView* t : views) {
    std::string dtype(engine::DTypeName(t->dtype));
    out << absl::StrFormat("  %-*s  %-5s  %-*s  %12d\n", name_width, t->name, dtype, shape_width,
                           ShapeText(*t), t->size_bytes);
    for (Totals* totals : {&all, &by_dtype[dtype]}) {
      ++totals->tensors;
      totals->elements += t->NumElements();
      totals->bytes += t->size_bytes;
    }
  }
  out << absl::StrFormat("\ntotals: %d tensors, %d parameters, %d bytes (%.2f MiB)\n", all.tensors,
                         all.elements, all.bytes, all.bytes / 1048576.0);
  for (const auto& [dtype, t] : by_dtype) {
    out << absl::StrFormat("  %-5s  %d tensor%s, %d parameters, %d bytes\n", dtype, t.tensors,
                           t.tensors == 1 ? "" : "s", t.elements, t.bytes);
  }
}

}  // namespace

absl::Status RunInspect(const std::string& model_path, std::ostream& out) {
  ASSIGN_OR_RETURN(Checkpoint ckpt, engine::OpenCheckpoint(model_path));
  PrintConfig(ckpt, out);
  PrintTensors(ckpt, out);
  return absl::OkStatus();
}

}  // namespace onecard::tools
