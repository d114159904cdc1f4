// LoadHfQuantConfig / ParseHfQuantConfig (see hf_quant_config.h): JSON via
// nlohmann without exceptions, fields through JsonFields; "re:" targets are
// PCRE2 patterns matched anchored at the module name's start (Python's
// re.match). Tested by tests/engine/model/hf_quant_config_test.cc.
#include "engine/model/hf_quant_config.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/common/regular_file.h"
#include "engine/model/json_fields.h"

namespace onecard::engine {
namespace {

using Json = nlohmann::json;

constexpr char kSupportedMethods[] = "gptq, awq, compressed-tensors, fp8, fbgemm_fp8";

// Whether `pattern` matches `text` from its start; nullopt when it does not
// compile.
std::optional<bool> RegexMatchesAtStart(const std::string& pattern, const std::string& text) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_ANCHORED | PCRE2_UTF, &error, &offset, nullptr);
  if (code == nullptr) return std::nullopt;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const int rc =
      pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  pcre2_code_free(code);
  return rc >= 0;
}

absl::Status CheckBits(const JsonFields& f, const char* field) {
  ASSIGN_OR_RETURN(const int64_t bits, f.Int(field, 4));
  if (bits != 4) {
    return f.Unsupported(field, absl::StrCat("is ", bits, "; supported: 4-bit weights"));
  }
  return absl::OkStatus();
}

// group_size (-1: one group a row, stored as 0).
absl::StatusOr<int32_t> GroupSize(const JsonFields& f, const char* field,
                                  std::optional<int64_t> fallback) {
  ASSIGN_OR_RETURN(const int64_t group, f.Int(field, fallback));
  if (group == -1) return 0;
  if (group <= 0 || group > (int64_t{1} << 20)) {
    return f.Error(field, absl::StrCat("is ", group, "; expected -1 or a positive column count"));
  }
  return static_cast<int32_t>(group);
}

constexpr int64_t kFp8BlockSize = 128;

// A block shape field: [128, 128], the one the FP8 kernels take.
absl::Status CheckBlock128(const JsonFields& f, const char* field) {
  const Json* j = f.Find(field);
  if (j == nullptr) return f.Error(field, "is missing");
  const bool ints =
      j->is_array() && j->size() == 2 && (*j)[0].is_number_integer() && (*j)[1].is_number_integer();
  if (!ints) return f.Error(field, absl::StrCat("is not a pair of integers: ", j->dump()));
  if ((*j)[0].get<int64_t>() != kFp8BlockSize || (*j)[1].get<int64_t>() != kFp8BlockSize) {
    return f.Unsupported(field, absl::StrCat("is ", j->dump(), "; supported: [128, 128]"));
  }
  return absl::OkStatus();
}

absl::Status ParseGptq(const JsonFields& f, HfQuantConfig* c) {
  RETURN_IF_ERROR(CheckBits(f, "bits"));
  ASSIGN_OR_RETURN(c->group_size, GroupSize(f, "group_size", 128));
  ASSIGN_OR_RETURN(c->symmetric, f.Bool("sym", true));
  ASSIGN_OR_RETURN(c->desc_act, f.Bool("desc_act", false));
  const char* format_field =
      f.Find("checkpoint_format") != nullptr ? "checkpoint_format" : "format";
  ASSIGN_OR_RETURN(const std::string format, f.String(format_field, "gptq"));
  if (format != "gptq" && format != "gptq_v2") {
    return f.Unsupported(format_field,
                         absl::StrCat("is \"", format, "\"; supported: gptq, gptq_v2"));
  }
  c->gptq_v2 = format == "gptq_v2";
  ASSIGN_OR_RETURN(const std::string pack_dtype, f.String("pack_dtype", "int32"));
  if (pack_dtype != "int32" && pack_dtype != "torch.int32") {
    return f.Unsupported("pack_dtype", absl::StrCat("is \"", pack_dtype, "\"; supported: int32"));
  }
  const Json* dynamic = f.Find("dynamic");
  if (dynamic != nullptr && !(dynamic->is_object() && dynamic->empty())) {
    return f.Unsupported("dynamic", "(per-module overrides) is not supported");
  }
  return absl::OkStatus();
}

absl::Status ParseAwq(const JsonFields& f, HfQuantConfig* c) {
  RETURN_IF_ERROR(CheckBits(f, f.Find("w_bit") != nullptr ? "w_bit" : "bits"));
  const char* group_field = f.Find("q_group_size") != nullptr ? "q_group_size" : "group_size";
  ASSIGN_OR_RETURN(c->group_size, GroupSize(f, group_field, 128));
  ASSIGN_OR_RETURN(const bool zero_point, f.Bool("zero_point", true));
  if (!zero_point) {
    return f.Unsupported("zero_point", "= false is not supported (GEMM packing has zero points)");
  }
  ASSIGN_OR_RETURN(const std::string version, f.String("version", "gemm"));
  if (absl::AsciiStrToLower(version) != "gemm") {
    return f.Unsupported("version", absl::StrCat("is \"", version, "\"; supported: gemm"));
  }
  c->symmetric = false;
  return absl::OkStatus();
}

absl::Status CheckTargets(const JsonFields& g, CompressedGroup* group) {
  const Json* targets = g.Find("targets");
  if (targets == nullptr || !targets->is_array() || targets->empty()) {
    return g.Error("targets", "must be a non-empty list of strings");
  }
  for (const Json& t : *targets) {
    if (!t.is_string()) return g.Error("targets", absl::StrCat("holds ", t.dump()));
    std::string target = t.get<std::string>();
    if (absl::StartsWith(target, "re:") && !RegexMatchesAtStart(target.substr(3), "").has_value()) {
      return g.Error("targets", absl::StrCat("holds a bad pattern \"", target, "\""));
    }
    group->targets.push_back(std::move(target));
  }
  return absl::OkStatus();
}

// A group's "weights" scheme: int, 4-bit, group or channel.
absl::Status ParseCompressedWeights(const JsonFields& w, CompressedGroup* group) {
  RETURN_IF_ERROR(CheckBits(w, "num_bits"));
  ASSIGN_OR_RETURN(group->symmetric, w.Bool("symmetric", true));
  ASSIGN_OR_RETURN(const std::string strategy, w.String("strategy", "tensor"));
  if (strategy == "group") {
    ASSIGN_OR_RETURN(group->group_size, GroupSize(w, "group_size", std::nullopt));
    if (group->group_size == 0) return w.Error("group_size", "is -1 with strategy \"group\"");
  } else if (strategy != "channel") {
    return w.Unsupported("strategy",
                         absl::StrCat("is \"", strategy, "\"; supported: group, channel"));
  }
  ASSIGN_OR_RETURN(const bool dynamic, w.Bool("dynamic", false));
  if (dynamic) return w.Unsupported("dynamic", "= true is not supported for weights");
  return absl::OkStatus();
}

// A float 8-bit "weights" scheme: symmetric, static, tensor / channel /
// block [128, 128].
absl::StatusOr<Fp8WeightScales> ParseFp8Weights(const JsonFields& w) {
  ASSIGN_OR_RETURN(const int64_t bits, w.Int("num_bits", 8));
  if (bits != 8) {
    return w.Unsupported("num_bits", absl::StrCat("is ", bits, "; float weights: 8-bit (E4M3)"));
  }
  ASSIGN_OR_RETURN(const bool symmetric, w.Bool("symmetric", true));
  if (!symmetric) return w.Unsupported("symmetric", "= false is not supported for float weights");
  ASSIGN_OR_RETURN(const bool dynamic, w.Bool("dynamic", false));
  if (dynamic) return w.Unsupported("dynamic", "= true is not supported for weights");
  ASSIGN_OR_RETURN(const std::string strategy, w.String("strategy", "tensor"));
  if (strategy == "tensor") return Fp8WeightScales::kTensor;
  if (strategy == "channel") return Fp8WeightScales::kChannel;
  if (strategy != "block") {
    return w.Unsupported("strategy",
                         absl::StrCat("is \"", strategy, "\"; supported: tensor, channel, block"));
  }
  RETURN_IF_ERROR(CheckBlock128(w, "block_structure"));
  return Fp8WeightScales::kBlock128;
}

// A float 8-bit group's input_activations: absent, static per tensor,
// dynamic per token or per group of 128.
absl::StatusOr<Fp8Activations> ParseFp8Activations(const JsonFields& g) {
  const Json* a = g.Find("input_activations");
  if (a == nullptr) return Fp8Activations::kNone;
  if (!a->is_object()) return g.Error("input_activations", "must be an object or null");
  JsonFields f(*a, g.source(), absl::StrCat(g.prefix(), "input_activations."));
  ASSIGN_OR_RETURN(const std::string type, f.String("type", "float"));
  ASSIGN_OR_RETURN(const int64_t bits, f.Int("num_bits", 8));
  if (type != "float" || bits != 8) {
    return f.Unsupported(type != "float" ? "type" : "num_bits",
                         "is not that of float 8-bit activations");
  }
  ASSIGN_OR_RETURN(const bool dynamic, f.Bool("dynamic", false));
  ASSIGN_OR_RETURN(const std::string strategy, f.String("strategy", "tensor"));
  if (!dynamic && strategy == "tensor") return Fp8Activations::kStaticTensor;
  if (dynamic && strategy == "token") return Fp8Activations::kDynamicToken;
  if (dynamic && strategy == "group") {
    ASSIGN_OR_RETURN(const int64_t group, f.Int("group_size", std::nullopt));
    if (group == kFp8BlockSize) return Fp8Activations::kDynamicGroup128;
    return f.Unsupported("group_size", absl::StrCat("is ", group, "; supported: 128"));
  }
  return f.Unsupported(
      "strategy", absl::StrCat("is \"", strategy, "\" with dynamic ", dynamic ? "true" : "false",
                               "; supported: static tensor, dynamic token, "
                               "dynamic group (128)"));
}

absl::Status ParseCompressedGroup(const JsonFields& g, const std::string& top_format,
                                  CompressedGroup* group) {
  RETURN_IF_ERROR(CheckTargets(g, group));
  const Json* weights = g.Find("weights");
  if (weights == nullptr || !weights->is_object()) return g.Error("weights", "must be an object");
  JsonFields w(*weights, g.source(), absl::StrCat(g.prefix(), "weights."));
  ASSIGN_OR_RETURN(const std::string type, w.String("type", "int"));
  ASSIGN_OR_RETURN(const std::string format, g.String("format", top_format));
  if (type == "float") {
    if (format != "float-quantized" && format != "naive-quantized") {
      return g.Unsupported("format",
                           absl::StrCat("is \"", format, "\"; float weights: float-quantized"));
    }
    Fp8Scheme fp8;
    ASSIGN_OR_RETURN(fp8.weights, ParseFp8Weights(w));
    ASSIGN_OR_RETURN(fp8.activations, ParseFp8Activations(g));
    if (g.Find("output_activations") != nullptr) {
      return g.Unsupported("output_activations", "is set; supported: none");
    }
    group->fp8 = fp8;
    return absl::OkStatus();
  }
  if (type != "int") {
    return w.Unsupported("type", absl::StrCat("is \"", type, "\"; supported: int, float"));
  }
  if (format != "pack-quantized") {
    return g.Unsupported("format", absl::StrCat("is \"", format, "\"; supported: pack-quantized"));
  }
  if (g.Find("input_activations") != nullptr || g.Find("output_activations") != nullptr) {
    return g.Unsupported(
        g.Find("input_activations") != nullptr ? "input_activations" : "output_activations",
        "is set; supported: weight-only (W4A16)");
  }
  return ParseCompressedWeights(w, group);
}

// A list of strings (an ignore list) appended to `out`; absent or null: none.
absl::Status AppendStrings(const JsonFields& f, const char* field, std::vector<std::string>* out) {
  const Json* list = f.Find(field);
  if (list == nullptr) return absl::OkStatus();
  if (!list->is_array()) return f.Error(field, "must be a list of strings");
  for (const Json& item : *list) {
    if (!item.is_string()) return f.Error(field, absl::StrCat("holds ", item.dump()));
    out->push_back(item.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ParseCompressed(const JsonFields& f, HfQuantConfig* c) {
  ASSIGN_OR_RETURN(const std::string top_format, f.String("format", "pack-quantized"));
  const Json* groups = f.Find("config_groups");
  if (groups == nullptr || !groups->is_object() || groups->empty()) {
    return f.Error("config_groups", "must be a non-empty object");
  }
  for (const auto& [name, value] : groups->items()) {
    if (!value.is_object())
      return f.Error("config_groups", absl::StrCat("'", name, "' is not an object"));
    JsonFields g(value, f.source(), absl::StrCat(f.prefix(), "config_groups.", name, "."));
    CompressedGroup group;
    group.name = name;
    RETURN_IF_ERROR(ParseCompressedGroup(g, top_format, &group));
    c->groups.push_back(std::move(group));
  }
  RETURN_IF_ERROR(AppendStrings(f, "ignore", &c->ignore));
  for (const std::string& entry : c->ignore) {
    if (absl::StartsWith(entry, "re:") && !RegexMatchesAtStart(entry.substr(3), "").has_value()) {
      return f.Error("ignore", absl::StrCat("holds a bad pattern \"", entry, "\""));
    }
  }
  return absl::OkStatus();
}

// transformers' FineGrainedFP8Config (weight_block_size [128, 128]) or, without
// a block size, AutoFP8's per-tensor config.
absl::Status ParseFp8(const JsonFields& f, HfQuantConfig* c) {
  ASSIGN_OR_RETURN(const std::string fmt, f.String("fmt", "e4m3"));
  if (fmt != "e4m3") return f.Unsupported("fmt", absl::StrCat("is \"", fmt, "\"; supported: e4m3"));
  ASSIGN_OR_RETURN(const std::string activations, f.String("activation_scheme", "dynamic"));
  const bool block = f.Find("weight_block_size") != nullptr;
  if (activations == "dynamic") {
    c->fp8.activations = Fp8Activations::kDynamicToken;
  } else if (activations == "static" && !block) {
    c->fp8.activations = Fp8Activations::kStaticTensor;
  } else {
    return f.Unsupported("activation_scheme",
                         absl::StrCat("is \"", activations, "\"; supported: dynamic",
                                      block ? " (with weight_block_size)" : ", static"));
  }
  c->fp8.weights = Fp8WeightScales::kTensor;
  if (block) {
    RETURN_IF_ERROR(CheckBlock128(f, "weight_block_size"));
    c->fp8.weights = Fp8WeightScales::kBlock128;
    if (c->fp8.activations == Fp8Activations::kDynamicToken) {
      c->fp8.activations = Fp8Activations::kDynamicGroup128;  // act_quant: groups of 128
    }
  }
  RETURN_IF_ERROR(AppendStrings(f, "modules_to_not_convert", &c->ignore));
  return AppendStrings(f, "ignored_layers", &c->ignore);
}

absl::Status ParseFbgemmFp8(const JsonFields& f, HfQuantConfig* c) {
  c->fp8 = {Fp8WeightScales::kChannel, Fp8Activations::kDynamicToken};
  ASSIGN_OR_RETURN(c->activation_scale_ub, f.Float("activation_scale_ub", 1200.0f));
  if (!(c->activation_scale_ub > 0.0f)) {
    return f.Error("activation_scale_ub",
                   absl::StrCat("is ", c->activation_scale_ub, "; expected a positive bound"));
  }
  return AppendStrings(f, "modules_to_not_convert", &c->ignore);
}

absl::StatusOr<HfQuantConfig> ParseObject(const Json& j, const std::string& source,
                                          const std::string& prefix, HfQuantMethod default_method) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": field '", prefix.empty() ? "" : prefix.substr(0, prefix.size() - 1),
                     "' is not a JSON object"));
  }
  JsonFields f(j, source, prefix);
  HfQuantConfig c;
  c.source = source;
  if (f.Find("quant_method") == nullptr && default_method == HfQuantMethod::kNone) {
    return f.Error("quant_method", "is missing");
  }
  ASSIGN_OR_RETURN(const std::string method,
                   f.String("quant_method", HfQuantMethodName(default_method)));
  if (method == "gptq") {
    c.method = HfQuantMethod::kGptq;
    RETURN_IF_ERROR(ParseGptq(f, &c));
  } else if (method == "awq") {
    c.method = HfQuantMethod::kAwq;
    RETURN_IF_ERROR(ParseAwq(f, &c));
  } else if (method == "compressed-tensors") {
    c.method = HfQuantMethod::kCompressedTensors;
    RETURN_IF_ERROR(ParseCompressed(f, &c));
  } else if (method == "fp8") {
    c.method = HfQuantMethod::kFp8;
    RETURN_IF_ERROR(ParseFp8(f, &c));
  } else if (method == "fbgemm_fp8") {
    c.method = HfQuantMethod::kFbgemmFp8;
    RETURN_IF_ERROR(ParseFbgemmFp8(f, &c));
  } else {
    return f.Unsupported("quant_method",
                         absl::StrCat("is \"", method, "\"; supported: ", kSupportedMethods));
  }
  return c;
}

absl::StatusOr<Json> ReadJson(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(path));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  return j;
}

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

const char* HfQuantMethodName(HfQuantMethod method) {
  switch (method) {
    case HfQuantMethod::kNone:
      return "none";
    case HfQuantMethod::kGptq:
      return "gptq";
    case HfQuantMethod::kAwq:
      return "awq";
    case HfQuantMethod::kCompressedTensors:
      return "compressed-tensors";
    case HfQuantMethod::kFp8:
      return "fp8";
    case HfQuantMethod::kFbgemmFp8:
      return "fbgemm_fp8";
  }
  return "?";
}

const char* Fp8WeightScalesName(Fp8WeightScales scales) {
  switch (scales) {
    case Fp8WeightScales::kTensor:
      return "tensor";
    case Fp8WeightScales::kChannel:
      return "channel";
    case Fp8WeightScales::kBlock128:
      return "block128";
  }
  return "?";
}

const char* Fp8ActivationsName(Fp8Activations activations) {
  switch (activations) {
    case Fp8Activations::kNone:
      return "none";
    case Fp8Activations::kStaticTensor:
      return "static-tensor";
    case Fp8Activations::kDynamicToken:
      return "dynamic-token";
    case Fp8Activations::kDynamicGroup128:
      return "dynamic-group128";
  }
  return "?";
}

const CompressedGroup* HfQuantConfig::GroupFor(const std::string& module) const {
  for (const CompressedGroup& g : groups) {
    if (std::find(g.targets.begin(), g.targets.end(), module) != g.targets.end()) return &g;
  }
  for (const CompressedGroup& g : groups) {
    for (const std::string& t : g.targets) {
      if (absl::StartsWith(t, "re:") && RegexMatchesAtStart(t.substr(3), module).value_or(false)) {
        return &g;
      }
    }
  }
  for (const CompressedGroup& g : groups) {
    if (std::find(g.targets.begin(), g.targets.end(), "Linear") != g.targets.end()) return &g;
  }
  return nullptr;
}

bool HfQuantConfig::Ignores(const std::string& module) const {
  for (const std::string& entry : ignore) {
    if (method == HfQuantMethod::kCompressedTensors) {
      if (entry == module) return true;
      if (absl::StartsWith(entry, "re:") &&
          RegexMatchesAtStart(entry.substr(3), module).value_or(false)) {
        return true;
      }
      continue;
    }
    // transformers: re.match(entry, name) or name.endswith(entry); an entry
    // that is no pattern matches as a plain prefix.
    const bool prefix =
        RegexMatchesAtStart(entry, module).value_or(absl::StartsWith(module, entry));
    if (prefix || absl::EndsWith(module, entry)) return true;
  }
  return false;
}

std::optional<Fp8Scheme> HfQuantConfig::Fp8SchemeFor(const std::string& module) const {
  if (Ignores(module)) return std::nullopt;
  switch (method) {
    case HfQuantMethod::kFp8:
    case HfQuantMethod::kFbgemmFp8:
      return fp8;
    case HfQuantMethod::kCompressedTensors: {
      const CompressedGroup* g = GroupFor(module);
      return g != nullptr ? g->fp8 : std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

absl::StatusOr<HfQuantConfig> ParseHfQuantConfig(std::string_view json_text,
                                                 const std::string& source,
                                                 HfQuantMethod default_method) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(source, ": not JSON"));
  return ParseObject(j, source, "", default_method);
}

absl::StatusOr<HfQuantConfig> LoadHfQuantConfig(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  ASSIGN_OR_RETURN(const Json config, ReadJson(config_path));
  auto it = config.find("quantization_config");
  if (it != config.end() && !it->is_null()) {
    return ParseObject(*it, config_path, "quantization_config.", HfQuantMethod::kNone);
  }
  const std::pair<const char*, HfQuantMethod> kOwnFiles[] = {
      {"/quantize_config.json", HfQuantMethod::kGptq}, {"/quant_config.json", HfQuantMethod::kAwq}};
  for (const auto& [name, method] : kOwnFiles) {
    const std::string path = dir + name;
    if (!IsFile(path)) continue;
    ASSIGN_OR_RETURN(const Json j, ReadJson(path));
    return ParseObject(j, path, "", method);
  }
  return HfQuantConfig{};
}

}  // namespace onecard::engine
