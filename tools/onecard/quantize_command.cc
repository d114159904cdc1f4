// onecard quantize (see quantize_command.h).
#include "tools/onecard/quantize_command.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/fp16.h"
#include "engine/common/log.h"
#include "engine/common/progress.h"
#include "engine/common/regular_file.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16.h"
#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
#include "engine/model/gptq_quantizer.h"
#include "engine/model/hf_config.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/safetensors_writer.h"
#include "engine/tokenizer/hf_json_writer.h"
#include "nlohmann/json.hpp"
#include "tools/onecard/quantize_fp8.h"
#include "tools/onecard/quantize_gptq.h"

namespace onecard::tools {
namespace {

using engine::DType;
using engine::SafetensorsTensorSpec;

constexpr engine::TensorPart kProjections[] = {engine::TensorPart::kQ,    engine::TensorPart::kK,
                                               engine::TensorPart::kV,    engine::TensorPart::kO,
                                               engine::TensorPart::kGate, engine::TensorPart::kUp,
                                               engine::TensorPart::kDown};

// Files of an HF folder besides the weights and config.json that a loader
// of the quantized folder reads (tokenizer, chat template, generation).
constexpr const char* kCopiedFiles[] = {"tokenizer.json",
                                        "tokenizer_config.json",
                                        "special_tokens_map.json",
                                        "tokenizer.model",
                                        "vocab.json",
                                        "merges.txt",
                                        "added_tokens.json",
                                        "chat_template.jinja",
                                        "chat_template.json",
                                        "generation_config.json"};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One projection to quantize: its resolved ".weight" and W [n, k].
struct Projection {
  engine::ResolvedTensor tensor;
  std::string module;  // the name without ".weight"
  int64_t n = 0;
  int64_t k = 0;
  int32_t group = 0;
};

absl::StatusOr<Projection> PlanProjection(const engine::Checkpoint& checkpoint,
                                          engine::TensorPart part, int64_t layer,
                                          const QuantizeCommandOptions& o) {
  ASSIGN_OR_RETURN(engine::ResolvedTensor tensor, engine::ResolveTensor(checkpoint, part, layer));
  Projection p;
  p.n = tensor.shape[0];
  p.k = tensor.shape[1];
  p.group = o.group_size < 0 ? static_cast<int32_t>(p.k) : o.group_size;
  const std::string hf_name = engine::HfTensorName(part, layer);
  p.module = hf_name.substr(0, hf_name.size() - std::string(".weight").size());
  const std::string where =
      absl::StrCat(tensor.name, " [", p.n, ", ", p.k, "] in ", tensor.view->file_path);
  if (o.format == QuantizeFormat::kFp8) {
    p.tensor = std::move(tensor);
    return p;
  }
  if (p.k % p.group != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": k = ", p.k, " is not a multiple of --group-size ", p.group,
        " (pick a group that divides every projection's input size, or -1: one a row)"));
  }
  if (p.n % 8 != 0 || p.k % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": GPTQ packs 8 codes a word; n and k must be multiples of 8"));
  }
  p.tensor = std::move(tensor);
  return p;
}

std::vector<SafetensorsTensorSpec> ProjectionSpecs(const Projection& p, QuantizeFormat format) {
  if (format == QuantizeFormat::kFp8) return Fp8ProjectionSpecs(p.module, p.n, p.k);
  const int64_t groups = p.k / p.group;
  return {{p.module + ".g_idx", DType::kI32, {p.k}},
          {p.module + ".qweight", DType::kI32, {p.k / 8, p.n}},
          {p.module + ".qzeros", DType::kI32, {groups, p.n / 8}},
          {p.module + ".scales", DType::kF16, {groups, p.n}}};
}

template <typename T>
std::span<const uint8_t> Bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

bool IsFloatDtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

// One tensor copied into the output: an HF folder's tensor byte for byte, or
// a GGUF tensor under its HF name with its values in HF order (ReadTensorF32
// undoes llama.cpp's Q/K permutation), in its own dtype when that is F32,
// F16 or BF16 (exact: the values came from it) and F32 otherwise.
struct CopiedTensor {
  std::string name;  // in the output
  const engine::TensorView* view = nullptr;
  std::optional<engine::ResolvedTensor> gguf;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};

// What the output holds: the projections to quantize, layer by layer, and
// the tensors copied; the header's specs in the order they are written
// (copied tensors first, then each layer's projections).
struct OutputPlan {
  std::vector<std::vector<Projection>> layers;
  std::vector<CopiedTensor> copied;
  std::vector<SafetensorsTensorSpec> specs;
  uint64_t bytes_in = 0;
};

// A GGUF file's other tensors by part; every tensor of the file must have
// a place (rope_freqs.weight is the config's llama3 rope_scaling).
absl::Status PlanGgufCopies(const engine::Checkpoint& checkpoint,
                            const std::set<std::string>& quantized, OutputPlan* plan) {
  using engine::TensorPart;
  std::vector<std::pair<TensorPart, int64_t>> parts = {{TensorPart::kEmbedding, 0},
                                                       {TensorPart::kFinalNorm, 0}};
  if (!checkpoint.config.tie_word_embeddings) parts.push_back({TensorPart::kLmHead, 0});
  for (int64_t l = 0; l < checkpoint.config.num_layers; ++l) {
    parts.push_back({TensorPart::kAttnNorm, l});
    parts.push_back({TensorPart::kFfnNorm, l});
    if (checkpoint.config.attention_bias) {
      for (TensorPart bias : {TensorPart::kQBias, TensorPart::kKBias, TensorPart::kVBias}) {
        parts.push_back({bias, l});
      }
    }
  }
  std::set<std::string> placed = quantized;
  placed.insert("rope_freqs.weight");
  for (const auto& [part, layer] : parts) {
    ASSIGN_OR_RETURN(engine::ResolvedTensor t, engine::ResolveTensor(checkpoint, part, layer));
    placed.insert(t.name);
    CopiedTensor c;
    c.name = engine::HfTensorName(part, layer);
    c.dtype = IsFloatDtype(t.view->dtype) ? t.view->dtype : DType::kF32;
    c.shape = t.shape;
    c.gguf = std::move(t);
    plan->copied.push_back(std::move(c));
  }
  for (const std::string& name : checkpoint.weights->TensorNames()) {
    plan->bytes_in += checkpoint.weights->Find(name)->size_bytes;
    if (!placed.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(checkpoint.path, ": tensor '", name,
                       "' has no place in a Hugging Face folder of this architecture"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<OutputPlan> PlanOutput(const engine::Checkpoint& checkpoint,
                                      const QuantizeCommandOptions& o) {
  OutputPlan plan;
  plan.layers.resize(checkpoint.config.num_layers);
  std::set<std::string> quantized;
  for (int64_t l = 0; l < checkpoint.config.num_layers; ++l) {
    for (engine::TensorPart part : kProjections) {
      ASSIGN_OR_RETURN(Projection p, PlanProjection(checkpoint, part, l, o));
      quantized.insert(p.tensor.name);
      plan.layers[l].push_back(std::move(p));
    }
  }
  if (checkpoint.format == engine::CheckpointFormat::kGguf) {
    RETURN_IF_ERROR(PlanGgufCopies(checkpoint, quantized, &plan));
  } else {
    for (const std::string& name : checkpoint.weights->TensorNames()) {
      const engine::TensorView* view = checkpoint.weights->Find(name);
      plan.bytes_in += view->size_bytes;
      if (quantized.contains(name)) continue;
      plan.copied.push_back(
          {.name = name, .view = view, .dtype = view->dtype, .shape = view->shape});
    }
  }
  for (const CopiedTensor& c : plan.copied) plan.specs.push_back({c.name, c.dtype, c.shape});
  for (const std::vector<Projection>& layer : plan.layers) {
    for (const Projection& p : layer) {
      for (SafetensorsTensorSpec& s : ProjectionSpecs(p, o.format)) {
        plan.specs.push_back(std::move(s));
      }
    }
  }
  return plan;
}

absl::Status WriteCopied(const CopiedTensor& c, engine::SafetensorsWriter& writer) {
  if (!c.gguf.has_value()) return writer.Write(c.name, {c.view->data, c.view->size_bytes});
  ASSIGN_OR_RETURN(const std::vector<float> values, engine::ReadTensorF32(*c.gguf));
  if (c.dtype == DType::kF32) return writer.Write(c.name, Bytes(values));
  std::vector<uint16_t> half(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    half[i] =
        c.dtype == DType::kF16 ? engine::FloatToHalf(values[i]) : engine::FloatToBf16(values[i]);
  }
  return writer.Write(c.name, Bytes(half));
}

absl::Status WriteProjection(const Projection& p, const engine::GptqQuantized& q,
                             engine::SafetensorsWriter& writer) {
  ASSIGN_OR_RETURN(const engine::GptqV1Tensors t, engine::PackGptqV1(q));
  RETURN_IF_ERROR(writer.Write(p.module + ".g_idx", Bytes(t.g_idx)));
  RETURN_IF_ERROR(writer.Write(p.module + ".qweight", Bytes(t.qweight)));
  RETURN_IF_ERROR(writer.Write(p.module + ".qzeros", Bytes(t.qzeros)));
  return writer.Write(p.module + ".scales", Bytes(t.scales));
}

// One layer's projections, quantized to FP8, by round-to-nearest or by GPTQ
// (when `gptq` is set), written in order.
absl::Status WriteLayer(int64_t layer, const std::vector<Projection>& projections,
                        const QuantizeCommandOptions& o, GptqLayerQuantizer* gptq,
                        engine::SafetensorsWriter& writer) {
  if (gptq != nullptr) {
    ASSIGN_OR_RETURN(const std::vector<GptqProjection> q, gptq->QuantizeLayer(layer));
    for (size_t i = 0; i < projections.size(); ++i) {
      RETURN_IF_ERROR(WriteProjection(projections[i], q[i].quantized, writer));
    }
    return absl::OkStatus();
  }
  for (const Projection& p : projections) {
    ASSIGN_OR_RETURN(const std::vector<float> w, engine::ReadTensorF32(p.tensor));
    if (o.format == QuantizeFormat::kFp8) {
      RETURN_IF_ERROR(WriteFp8Projection(p.module, w, p.n, p.k, writer));
      continue;
    }
    ASSIGN_OR_RETURN(const engine::GptqQuantized q,
                     engine::QuantizeGptqRtn(w, p.n, p.k, p.group, o.sym));
    RETURN_IF_ERROR(WriteProjection(p, q, writer));
  }
  return absl::OkStatus();
}

absl::Status CheckNotQuantized(const engine::Checkpoint& checkpoint) {
  if (checkpoint.quant.method != engine::HfQuantMethod::kNone) {
    return absl::FailedPreconditionError(
        absl::StrCat(checkpoint.path, " is already quantized (",
                     HfQuantMethodName(checkpoint.quant.method), ", ", checkpoint.quant.source,
                     "): re-quantizing would round twice; quantize the unquantized checkpoint"));
  }
  return absl::OkStatus();
}

// A GGUF file's projections in a quantized type need --allow-requantize.
absl::Status CheckRequantize(const engine::Checkpoint& checkpoint, const OutputPlan& plan,
                             bool allow_requantize) {
  if (allow_requantize) return absl::OkStatus();
  for (const std::vector<Projection>& layer : plan.layers) {
    for (const Projection& p : layer) {
      const DType dtype = p.tensor.view->dtype;
      if (IsFloatDtype(dtype)) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          checkpoint.path, ": ", p.tensor.name, " is ", std::string(engine::DTypeName(dtype)),
          ": its values are already rounded to a quantized grid, and quantizing them again "
          "rounds twice (--allow-requantize does it anyway, e.g. to measure that cost)"));
    }
  }
  return absl::OkStatus();
}

absl::Status PrepareOutputDir(const std::string& in, const std::string& out) {
  std::error_code error;
  std::filesystem::create_directories(out, error);
  if (error || !std::filesystem::is_directory(out)) {
    return absl::PermissionDeniedError(
        absl::StrCat("--out: cannot create the folder ", out, ": ", error.message()));
  }
  if (std::filesystem::equivalent(in, out, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out: ", out, " is the input folder; write the quantized model elsewhere"));
  }
  return absl::OkStatus();
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  std::error_code error;
  if (std::filesystem::file_size(path, error) != text.size() || error) {
    return absl::InternalError(absl::StrCat(path, ": write failed"));
  }
  return absl::OkStatus();
}

// The input's config.json (a GGUF file's: written from its metadata) with
// the quantization_config added.
absl::Status WriteConfig(const QuantizeCommandOptions& o, const engine::Checkpoint& checkpoint) {
  std::string text;
  std::string source = checkpoint.path;
  if (checkpoint.format == engine::CheckpointFormat::kGguf) {
    text = engine::HfConfigJson(checkpoint.config);
  } else {
    source = o.model_path + "/config.json";
    ASSIGN_OR_RETURN(text, ReadRegularFile(source));
  }
  nlohmann::ordered_json config =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  if (o.format == QuantizeFormat::kFp8) {
    config["quantization_config"] = Fp8QuantizationConfig();
    return WriteTextFile(o.out_dir + "/config.json", config.dump(2) + "\n");
  }
  config["quantization_config"] = {
      {"quant_method", "gptq"}, {"bits", 4},        {"group_size", o.group_size},
      {"desc_act", false},      {"sym", o.sym},     {"checkpoint_format", "gptq"},
      {"pack_dtype", "int32"},  {"lm_head", false}, {"true_sequential", false},
      {"damp_percent", o.damp}};
  return WriteTextFile(o.out_dir + "/config.json", config.dump(2) + "\n");
}

// A GGUF file's tokenizer as tokenizer.json and tokenizer_config.json (none
// when the file has no tokenizer.ggml.model).
absl::Status WriteGgufTokenizer(const QuantizeCommandOptions& o,
                                const engine::Checkpoint& checkpoint) {
  const engine::GgufFile* gguf = checkpoint.gguf();
  if (gguf->FindMetadata("tokenizer.ggml.model") == nullptr) {
    Log(LogLevel::kWarn, "quantize", "%s has no tokenizer: the output folder has none",
        checkpoint.path);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const engine::BpeTokenizerSpec spec, engine::BpeTokenizerSpecFromGguf(*gguf));
  ASSIGN_OR_RETURN(const engine::HfTokenizerFiles files,
                   engine::HfTokenizerJson(spec, checkpoint.config.max_position_embeddings));
  RETURN_IF_ERROR(WriteTextFile(o.out_dir + "/tokenizer.json", files.tokenizer_json));
  return WriteTextFile(o.out_dir + "/tokenizer_config.json", files.tokenizer_config_json);
}

absl::Status CopyTokenizerFiles(const QuantizeCommandOptions& o) {
  for (const char* name : kCopiedFiles) {
    const std::string from = o.model_path + "/" + name;
    if (!std::filesystem::exists(from)) continue;
    std::error_code error;
    std::filesystem::copy_file(from, o.out_dir + "/" + name,
                               std::filesystem::copy_options::overwrite_existing, error);
    if (error) return absl::InternalError(absl::StrCat(from, ": copy failed: ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace

bool AbslParseFlag(absl::string_view text, QuantizeFormat* format, std::string* error) {
  if (text == "int4") {
    *format = QuantizeFormat::kInt4;
  } else if (text == "fp8") {
    *format = QuantizeFormat::kFp8;
  } else {
    *error = absl::StrCat("\"", text, "\" is not one of int4, fp8");
    return false;
  }
  return true;
}

std::string AbslUnparseFlag(QuantizeFormat format) {
  return format == QuantizeFormat::kFp8 ? "fp8" : "int4";
}

absl::Status CheckQuantizeOptions(const QuantizeCommandOptions& o) {
  if (o.model_path.empty()) return absl::InvalidArgumentError("quantize: --model is required");
  if (o.out_dir.empty()) return absl::InvalidArgumentError("quantize: --out is required");
  if (o.method != "rtn" && o.method != "gptq") {
    return absl::InvalidArgumentError(
        absl::StrCat("--method: \"", o.method, "\" is not one of rtn, gptq"));
  }
  if (o.format == QuantizeFormat::kFp8 && o.method != "rtn") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--method ", o.method, ": only --format int4 takes it (fp8 rounds to nearest)"));
  }
  if ((o.method == "gptq") == o.calibration_path.empty()) {
    return absl::InvalidArgumentError(o.method == "gptq"
                                          ? "--method gptq: --calibration FILE is required"
                                          : "--calibration: only --method gptq takes it");
  }
  if (o.calibration_tokens < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--calibration-tokens: ", o.calibration_tokens, " < 2"));
  }
  if (!(o.damp > 0.0 && o.damp <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("--damp: ", o.damp, " is not in (0, 1]"));
  }
  if (o.num_threads < 0) return absl::InvalidArgumentError("--threads: must not be negative");
  if (o.group_size != -1 && (o.group_size < 8 || o.group_size % 8 != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--group-size: ", o.group_size, " (a positive multiple of 8, or -1: one group a row)"));
  }
  return absl::OkStatus();
}

bool IsQuantizeUsageError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

absl::Status RunQuantize(const QuantizeCommandOptions& o, std::ostream& out) {
  RETURN_IF_ERROR(CheckQuantizeOptions(o));
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const engine::Checkpoint checkpoint, engine::OpenCheckpoint(o.model_path));
  RETURN_IF_ERROR(CheckNotQuantized(checkpoint));
  ASSIGN_OR_RETURN(OutputPlan plan, PlanOutput(checkpoint, o));
  RETURN_IF_ERROR(CheckRequantize(checkpoint, plan, o.allow_requantize));
  std::unique_ptr<GptqLayerQuantizer> gptq;
  if (o.method == "gptq") {
    ASSIGN_OR_RETURN(gptq,
                     GptqLayerQuantizer::Create(checkpoint, {.text_path = o.calibration_path,
                                                             .num_tokens = o.calibration_tokens,
                                                             .damp = o.damp,
                                                             .group_size = o.group_size,
                                                             .sym = o.sym,
                                                             .num_threads = o.num_threads}));
  }
  RETURN_IF_ERROR(PrepareOutputDir(o.model_path, o.out_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<engine::SafetensorsWriter> writer,
                   engine::SafetensorsWriter::Create(o.out_dir + "/model.safetensors",
                                                     std::move(plan.specs), {{"format", "pt"}}));
  for (const CopiedTensor& c : plan.copied) RETURN_IF_ERROR(WriteCopied(c, *writer));
  const int64_t num_layers = static_cast<int64_t>(plan.layers.size());
  Progress progress(absl::StrCat("quantizing ", o.model_path), num_layers, "layers");
  for (int64_t l = 0; l < num_layers; ++l) {
    RETURN_IF_ERROR(WriteLayer(l, plan.layers[l], o, gptq.get(), *writer));
    progress.Add();
  }
  progress.Done();
  RETURN_IF_ERROR(writer->Finish());
  RETURN_IF_ERROR(WriteConfig(o, checkpoint));
  if (checkpoint.format == engine::CheckpointFormat::kGguf) {
    RETURN_IF_ERROR(WriteGgufTokenizer(o, checkpoint));
  } else {
    RETURN_IF_ERROR(CopyTokenizerFiles(o));
  }
  nlohmann::json summary = {{"model", o.model_path},
                            {"out", o.out_dir},
                            {"format", AbslUnparseFlag(o.format)},
                            {"layers", num_layers},
                            {"tensors_quantized", 7 * num_layers},
                            {"tensors_copied", plan.copied.size()},
                            {"bytes_in", plan.bytes_in},
                            {"bytes_out", writer->file_bytes()},
                            {"seconds", SecondsSince(start)}};
  if (o.format == QuantizeFormat::kInt4) {
    summary["method"] = o.method;
    summary["group_size"] = o.group_size;
    summary["sym"] = o.sym;
  }
  if (gptq != nullptr) summary["calibration_tokens"] = gptq->num_calibration_tokens();
  out << summary.dump() << "\n";
  return absl::OkStatus();
}

}  // namespace onecard::tools
