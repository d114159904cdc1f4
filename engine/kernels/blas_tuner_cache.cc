// BlasTuner's saved choices (see blas_tuner.h): Context, Serialize and
// Deserialize, which rebuilds each cuBLASLt choice from the heuristic
// (Rebuild) rather than trusting a saved cublasLtMatmulAlgo_t.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/blas_tuner.h"
#include "engine/kernels/blas_tuner_internal.h"
#include "nlohmann/json.hpp"

namespace onecard::engine {

using blas_tuner_internal::ConfigField;
using blas_tuner_internal::GetConfig;
using blas_tuner_internal::kAlgoWords;
using blas_tuner_internal::kConfigFields;
using blas_tuner_internal::SetConfig;

// A saved cuBLASLt choice (Serialize()'s "algo" of a product).
struct BlasTuner::SavedAlgo {
  int candidate = 0;          // the heuristic's index the choice was searched from
  std::optional<int32_t> id;  // CUBLASLT_ALGO_CONFIG_ID of that algorithm
  std::array<std::optional<uint32_t>, std::size(kConfigFields)> config;  // kConfigFields order
  std::optional<std::array<uint64_t, kAlgoWords>> words;  // the struct as tuned (information)
};

std::string BlasTuner::Context() const {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::StrCat("cuBLASLt ", lt_->version(), " on an unknown device");
  }
  return absl::StrCat("cuBLASLt ", lt_->version(), " on ", prop.name, " (",
                      prop.multiProcessorCount, " SMs, sm_", prop.major, prop.minor, ")");
}

namespace {

// Of Serialize()'s text. 1 kept each choice's raw cublasLtMatmulAlgo_t (a
// second runner that loaded it passed cublasLtMatmulAlgoCheck, then gave
// all-zero logits on the H200); 2 keeps what rebuilds it (Rebuild).
constexpr int kFormat = 2;

nlohmann::ordered_json KeyJson(int64_t m, int64_t n, int64_t k, int dtype, int y_dtype,
                               bool accumulate, int32_t splits) {
  return {{"m", m},
          {"n", n},
          {"k", k},
          {"dtype", dtype},
          {"y_dtype", y_dtype},
          {"accumulate", accumulate},
          {"splits", splits}};
}

// Reading Serialize()'s text: every error names the field, e.g.
// "BlasTuner: products[3].algo.candidate is 17, not an integer in [0, 15]".
std::string FieldName(absl::string_view where, absl::string_view name) {
  return where.empty() ? std::string(name) : absl::StrCat(where, ".", name);
}

absl::Status Malformed(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("BlasTuner: ", field, " ", what));
}

// The member `name` of `object`, the JSON object at `where`.
absl::StatusOr<const nlohmann::json*> Member(const nlohmann::json& object, absl::string_view where,
                                             const char* name) {
  const auto it = object.find(name);
  if (it == object.end()) return Malformed(FieldName(where, name), "is missing");
  return &*it;
}

absl::StatusOr<int64_t> IntMember(const nlohmann::json& object, absl::string_view where,
                                  const char* name, int64_t lo, int64_t hi) {
  ASSIGN_OR_RETURN(const nlohmann::json* v, Member(object, where, name));
  const bool above = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi);
  if (!v->is_number_integer() || above || v->get<int64_t>() < lo || v->get<int64_t>() > hi) {
    return Malformed(FieldName(where, name),
                     absl::StrCat("is ", v->dump(), ", not an integer in [", lo, ", ", hi, "]"));
  }
  return v->get<int64_t>();
}

absl::StatusOr<bool> BoolMember(const nlohmann::json& object, absl::string_view where,
                                const char* name) {
  ASSIGN_OR_RETURN(const nlohmann::json* v, Member(object, where, name));
  if (!v->is_boolean()) {
    return Malformed(FieldName(where, name), absl::StrCat("is ", v->dump(), ", not true or false"));
  }
  return v->get<bool>();
}

absl::StatusOr<double> NumberMember(const nlohmann::json& object, absl::string_view where,
                                    const char* name) {
  ASSIGN_OR_RETURN(const nlohmann::json* v, Member(object, where, name));
  if (!v->is_number()) return Malformed(FieldName(where, name), "is not a number");
  return v->get<double>();
}

// The product shape of the record at `where` (as KeyJson writes it).
absl::StatusOr<BlasGemmParams> ShapeOf(const nlohmann::json& j, absl::string_view where) {
  if (!j.is_object()) return Malformed(where, "is not an object");
  constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max();
  constexpr int64_t kLastDType = static_cast<int64_t>(DType::kU8);
  BlasGemmParams p;
  ASSIGN_OR_RETURN(p.m, IntMember(j, where, "m", 1, kMaxExtent));
  ASSIGN_OR_RETURN(p.n, IntMember(j, where, "n", 1, kMaxExtent));
  ASSIGN_OR_RETURN(p.k, IntMember(j, where, "k", 1, kMaxExtent));
  ASSIGN_OR_RETURN(const int64_t dtype, IntMember(j, where, "dtype", 0, kLastDType));
  ASSIGN_OR_RETURN(const int64_t y_dtype, IntMember(j, where, "y_dtype", 0, kLastDType));
  ASSIGN_OR_RETURN(const bool accumulate, BoolMember(j, where, "accumulate"));
  ASSIGN_OR_RETURN(const int64_t splits, IntMember(j, where, "splits", 1, kMaxExtent));
  p.dtype = static_cast<DType>(dtype);
  p.y_dtype = static_cast<DType>(y_dtype);
  p.beta = accumulate ? 1.0f : 0.0f;
  p.splits = static_cast<int32_t>(splits);
  if (p.splits != 1 && !BlasGemmSplitsFit(p.k, p.splits)) {  // as Tune refuses it
    return Malformed(FieldName(where, "splits"),
                     absl::StrCat("is ", p.splits, ": k = ", p.k, " cannot be split so"));
  }
  return p;
}

}  // namespace

std::string BlasTuner::Serialize() const {
  nlohmann::ordered_json products = nlohmann::ordered_json::array();
  for (const auto& [key, e] : entries_) {
    const auto& [m, n, k, dtype, y_dtype, accumulate, splits] = key;
    nlohmann::ordered_json j = KeyJson(m, n, k, dtype, y_dtype, accumulate, splits);
    j["use_lt"] = e->use_lt;
    j["default_us"] = e->default_us;
    j["best_us"] = e->best_us;
    if (e->use_lt) {
      // What Rebuild needs: the heuristic's index (and that algorithm's id,
      // checked), and the configuration values. The words are the struct as
      // it ran here, only compared with the rebuilt one.
      nlohmann::ordered_json algo = {{"candidate", e->candidate}};
      int32_t id = 0;
      size_t written = 0;
      if (lt_->config_get(&e->algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &written) ==
          CUBLAS_STATUS_SUCCESS) {
        algo["id"] = id;
      }
      nlohmann::ordered_json config = nlohmann::ordered_json::object();
      for (const ConfigField& field : kConfigFields) {
        uint32_t value = 0;
        if (GetConfig(lt_->config_get, e->algo, field, &value)) config[field.name] = value;
      }
      algo["config"] = std::move(config);
      nlohmann::ordered_json words = nlohmann::ordered_json::array();
      for (const uint64_t word : e->algo.data) words.push_back(absl::StrFormat("%016x", word));
      algo["words"] = std::move(words);
      j["algo"] = std::move(algo);
    }
    products.push_back(std::move(j));
  }
  nlohmann::ordered_json notes = nlohmann::ordered_json::array();
  for (const auto& [key, value] : notes_) {
    const auto& [m, n, k, dtype, y_dtype, accumulate, splits] = key;
    nlohmann::ordered_json j = KeyJson(m, n, k, dtype, y_dtype, accumulate, splits);
    j["value"] = value;
    notes.push_back(std::move(j));
  }
  nlohmann::ordered_json root = {{"format", kFormat}, {"context", Context()}};
  root["products"] = std::move(products);
  root["notes"] = std::move(notes);
  return root.dump(1);
}

absl::Status BlasTuner::Rebuild(const SavedAlgo& saved, Entry* e) const {
  const Lt& lt = *lt_;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  ASSIGN_OR_RETURN(const int found, Heuristic(*e, results));
  if (saved.candidate >= found) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the heuristic gives ", found, " algorithms, the choice came from #", saved.candidate));
  }
  const cublasLtMatmulHeuristicResult_t& result = results[saved.candidate];
  if (result.state != CUBLAS_STATUS_SUCCESS) {
    return absl::FailedPreconditionError(
        absl::StrCat("the heuristic's #", saved.candidate, " has state ", result.state));
  }
  cublasLtMatmulAlgo_t algo = result.algo;
  if (saved.id.has_value()) {
    int32_t id = -1;
    size_t written = 0;
    if (lt.config_get(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &written) !=
            CUBLAS_STATUS_SUCCESS ||
        id != *saved.id) {
      return absl::FailedPreconditionError(absl::StrCat("the heuristic's #", saved.candidate,
                                                        " is algorithm ", id, ", not ", *saved.id));
    }
  }
  // The search's changes, in its order. Only values that differ are set, so
  // a choice the search did not change stays the heuristic's struct as is.
  bool changed = false;
  for (size_t f = 0; f < std::size(kConfigFields); ++f) {
    const std::optional<uint32_t>& value = saved.config[f];
    uint32_t now = 0;
    if (!value.has_value() ||
        (GetConfig(lt.config_get, algo, kConfigFields[f], &now) && now == *value)) {
      continue;
    }
    if (!SetConfig(lt.config_set, &algo, kConfigFields[f], *value)) {
      return absl::FailedPreconditionError(
          absl::StrCat("config.", kConfigFields[f].name, " = ", *value, " cannot be set"));
    }
    changed = true;
  }
  cublasLtMatmulHeuristicResult_t checked{};
  const cublasStatus_t st = lt.check(lt.handle, e->desc, e->a, e->b, e->c, e->c, &algo, &checked);
  if (st != CUBLAS_STATUS_SUCCESS) {
    return absl::FailedPreconditionError(
        absl::StrCat("cublasLtMatmulAlgoCheck refuses it (status ", st, ")"));
  }
  // The workspace Tune ran it with: what the check asks of a searched
  // configuration, what the heuristic gave for its own.
  const size_t workspace = changed ? checked.workspaceSize : result.workspaceSize;
  if (workspace > static_cast<size_t>(workspace_bytes_)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "it needs ", workspace, " bytes of workspace, the tuner has ", workspace_bytes_));
  }
  e->algo = algo;
  e->workspace = workspace;
  return absl::OkStatus();
}

absl::StatusOr<BlasTuner::Loaded> BlasTuner::Deserialize(std::string_view text) {
  const nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError("BlasTuner: not JSON, or not an object");
  }
  ASSIGN_OR_RETURN(const int64_t format, IntMember(root, "", "format", 0, INT32_MAX));
  if (format != kFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlasTuner: format ", format, ", expected ", kFormat));
  }
  ASSIGN_OR_RETURN(const nlohmann::json* context, Member(root, "", "context"));
  if (!context->is_string()) return Malformed("context", "is not a string");
  if (context->get<std::string>() != Context()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "BlasTuner: tuned for \"", context->get<std::string>(), "\", this is \"", Context(), "\""));
  }
  ASSIGN_OR_RETURN(const nlohmann::json* products, Member(root, "", "products"));
  ASSIGN_OR_RETURN(const nlohmann::json* notes, Member(root, "", "notes"));
  if (!products->is_array()) return Malformed("products", "is not an array");
  if (!notes->is_array()) return Malformed("notes", "is not an array");

  // A product's "algo" at `where`.
  auto read_algo = [](const nlohmann::json& j,
                      const std::string& where) -> absl::StatusOr<SavedAlgo> {
    if (!j.is_object()) return Malformed(where, "is not an object");
    SavedAlgo saved;
    ASSIGN_OR_RETURN(const int64_t candidate, IntMember(j, where, "candidate", 0, kCandidates - 1));
    saved.candidate = static_cast<int>(candidate);
    if (j.contains("id")) {
      ASSIGN_OR_RETURN(const int64_t id, IntMember(j, where, "id", 0, INT32_MAX));
      saved.id = static_cast<int32_t>(id);
    }
    ASSIGN_OR_RETURN(const nlohmann::json* config, Member(j, where, "config"));
    const std::string config_where = FieldName(where, "config");
    if (!config->is_object()) return Malformed(config_where, "is not an object");
    for (const auto& item : config->items()) {
      const auto* field = std::find_if(std::begin(kConfigFields), std::end(kConfigFields),
                                       [&](const ConfigField& f) { return item.key() == f.name; });
      if (field == std::end(kConfigFields)) {
        return Malformed(FieldName(config_where, item.key()), "is not a configuration attribute");
      }
      const int64_t last = field->narrow ? UINT16_MAX : UINT32_MAX;
      ASSIGN_OR_RETURN(const int64_t value, IntMember(*config, config_where, field->name, 0, last));
      saved.config[field - std::begin(kConfigFields)] = static_cast<uint32_t>(value);
    }
    if (j.contains("words")) {  // information: a rebuilt struct is used whatever its words
      const nlohmann::json& words = j["words"];
      const std::string words_where = FieldName(where, "words");
      if (!words.is_array() || words.size() != kAlgoWords) {
        return Malformed(words_where, absl::StrCat("is not ", kAlgoWords, " hex words"));
      }
      std::array<uint64_t, kAlgoWords> raw{};
      for (size_t w = 0; w < kAlgoWords; ++w) {
        if (!words[w].is_string() || !absl::SimpleHexAtoi(words[w].get<std::string>(), &raw[w])) {
          return Malformed(absl::StrCat(words_where, "[", w, "]"), "is not a hex word");
        }
      }
      saved.words = raw;
    }
    return saved;
  };

  // Read whole before anything is added: a malformed file adds nothing.
  std::map<Key, std::unique_ptr<Entry>> entries;
  Loaded loaded;
  for (size_t i = 0; i < products->size(); ++i) {
    const nlohmann::json& j = (*products)[i];
    const std::string where = absl::StrCat("products[", i, "]");
    ASSIGN_OR_RETURN(const BlasGemmParams p, ShapeOf(j, where));
    ASSIGN_OR_RETURN(const bool use_lt, BoolMember(j, where, "use_lt"));
    ASSIGN_OR_RETURN(const double default_us, NumberMember(j, where, "default_us"));
    ASSIGN_OR_RETURN(const double best_us, NumberMember(j, where, "best_us"));
    std::optional<SavedAlgo> saved;
    if (use_lt) {
      ASSIGN_OR_RETURN(const nlohmann::json* algo, Member(j, where, "algo"));
      ASSIGN_OR_RETURN(saved, read_algo(*algo, FieldName(where, "algo")));
    } else if (j.contains("algo")) {
      return Malformed(FieldName(where, "algo"), "is given with use_lt false");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Entry> e, NewEntry(p));
    e->cached = true;
    e->use_lt = use_lt;
    e->default_us = default_us;
    e->best_us = best_us;
    if (saved.has_value()) {
      e->candidate = saved->candidate;
      if (const absl::Status rebuilt = Rebuild(*saved, e.get()); !rebuilt.ok()) {
        loaded.left_out.push_back(
            absl::StrCat(where, " (", p.m, " x ", p.n, " x ", p.k, "): ", rebuilt.message()));
        continue;  // Tune times it afresh
      }
      ++loaded.rebuilt;
      if (saved->words.has_value() &&
          std::equal(saved->words->begin(), saved->words->end(), std::begin(e->algo.data))) {
        ++loaded.rebuilt_identical;
      }
    }
    entries[KeyOf(p)] = std::move(e);
  }
  std::map<Key, int32_t> new_notes;
  for (size_t i = 0; i < notes->size(); ++i) {
    const std::string where = absl::StrCat("notes[", i, "]");
    ASSIGN_OR_RETURN(const BlasGemmParams p, ShapeOf((*notes)[i], where));
    ASSIGN_OR_RETURN(const int64_t value,
                     IntMember((*notes)[i], where, "value", INT32_MIN, INT32_MAX));
    new_notes[KeyOf(p)] = static_cast<int32_t>(value);
  }
  loaded.products = static_cast<int>(entries.size());
  for (auto& [key, e] : entries) entries_[key] = std::move(e);
  for (const auto& [key, value] : new_notes) notes_[key] = value;
  return loaded;
}

}  // namespace onecard::engine
