// KvScaleFromAmax, KvScales::Describe, ReadCheckpointKvScales and
// KvCalibrationPrompts (see kv_scales.h). The checkpoint's scales are read
// through DequantizeInto (F32, BF16, F16; sizes checked) and broadcast from a
// scalar to every kv head; the calibration text is fixed here, one prompt a
// paragraph.
// Tested by tests/engine/runtime/kv_scales_test.cc.
#include "engine/runtime/kv_scales.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/common/fp8.h"
#include "engine/common/status_macros.h"
#include "engine/model/dequantize.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine {
namespace {

// The calibration text: one prompt a paragraph (prose, code, numbers and a
// table, a chat turn, technical prose), about 1,000 tokens in all for a
// 49k-vocabulary BPE.
constexpr std::array<std::string_view, 5> kCalibrationText = {
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the "
    "steps as his father had taught him: one hundred and twelve, no more and no fewer. From "
    "the lantern room he could see the whole bay, the fishing boats coming home with their "
    "lights swinging, the long grey line of the breakwater and, on clear nights, the glow of "
    "the city forty miles to the south. He wrote the weather in a leather book, the wind's "
    "direction and strength, the height of the swell, whether the gulls had gone inland. "
    "Nobody had asked him to keep that record for years, yet he kept it, because a "
    "lighthouse without a logbook seemed to him like a church without a bell.",

    "def merge_intervals(intervals):\n"
    "    \"\"\"Merges overlapping [start, end] pairs; returns them sorted.\"\"\"\n"
    "    if not intervals:\n"
    "        return []\n"
    "    intervals = sorted(intervals, key=lambda pair: pair[0])\n"
    "    merged = [list(intervals[0])]\n"
    "    for start, end in intervals[1:]:\n"
    "        if start <= merged[-1][1]:\n"
    "            merged[-1][1] = max(merged[-1][1], end)\n"
    "        else:\n"
    "            merged.append([start, end])\n"
    "    return merged\n\n"
    "template <typename T>\n"
    "T Clamp(T value, T lo, T hi) {\n"
    "  return value < lo ? lo : (hi < value ? hi : value);\n"
    "}\n\n"
    "SELECT customer_id, COUNT(*) AS orders, SUM(total) AS revenue\n"
    "FROM orders WHERE created_at >= '2024-01-01'\n"
    "GROUP BY customer_id HAVING COUNT(*) > 3 ORDER BY revenue DESC;",

    "Quarterly results (in thousands of euros):\n"
    "| quarter | revenue | costs  | margin |\n"
    "|---------|--------:|-------:|-------:|\n"
    "| Q1 2023 | 12,480  | 9,312  | 25.4 % |\n"
    "| Q2 2023 | 13,105  | 9,876  | 24.6 % |\n"
    "| Q3 2023 | 11,947  | 9,020  | 24.5 % |\n"
    "| Q4 2023 | 15,660  | 11,204 | 28.5 % |\n"
    "The sequence 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144 grows by about 1.618 a step; "
    "pi is 3.14159265358979, e is 2.71828182845905, and 2^32 = 4294967296. Flight LH 2471 "
    "leaves at 06:45 from gate B17; call +49 30 1234 5678 before 2024-03-15.",

    "User: I have a small garden on a north-facing balcony. Which herbs will grow there, "
    "and how often should I water them?\n"
    "Assistant: A north-facing balcony gets little direct sun, so choose herbs that tolerate "
    "shade: mint, parsley, chives, chervil and lemon balm all do well. Basil and rosemary "
    "want six hours of sun and will struggle. Water when the top two centimetres of soil "
    "feel dry, usually every two or three days in summer and once a week in cooler months; "
    "pots dry out faster than beds, and shade slows evaporation, so check with a finger "
    "rather than following a fixed schedule.\n"
    "User: Thanks! Can I keep them outside in winter?",

    "A write-ahead log makes a database durable: before a page changes on disk, a record of "
    "the change is appended to the log and flushed, so that after a crash the system can "
    "replay committed transactions and undo the rest. Checkpoints bound the replay by "
    "writing dirty pages and noting the position in the log from which recovery must start. "
    "Group commit amortizes the cost of the flush over many transactions, trading a few "
    "milliseconds of latency for much higher throughput. Die Temperatur sank über Nacht auf "
    "minus zwölf Grad; le train de 8 h 15 est parti à l'heure.",
};

constexpr uint32_t kSeededPromptsSeed = 0x6b76u;  // "kv"

// A tensor's scales: [] or [1] broadcast to every kv head, or [num_kv_heads];
// each finite and > 0. Errors name the tensor (and its file).
absl::Status ReadScaleTensor(const TensorView& t, int64_t num_kv_heads, float* out) {
  const auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat(t.file_path, ": KV cache scale tensor '", t.name, "' ", what));
  };
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16 && t.dtype != DType::kF16) {
    return error(
        absl::StrCat("has dtype ", std::string(DTypeName(t.dtype)), ", expected F32, BF16 or F16"));
  }
  const bool scalar = t.shape.empty() || t.shape == std::vector<int64_t>{1};
  if (!scalar && t.shape != std::vector<int64_t>{num_kv_heads}) {
    return error(absl::StrCat("has shape [", absl::StrJoin(t.shape, ", "),
                              "], expected [], [1] or [", num_kv_heads, "] (num_kv_heads)"));
  }
  std::vector<float> values(scalar ? 1 : num_kv_heads);
  RETURN_IF_ERROR(DequantizeInto(t, values.data()));
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]) || values[i] <= 0.0f) {
      return error(
          absl::StrCat("holds ", values[i], " at [", i, "]; a scale must be finite and > 0"));
    }
  }
  for (int64_t h = 0; h < num_kv_heads; ++h) out[h] = values[scalar ? 0 : h];
  return absl::OkStatus();
}

std::string ScaleName(int64_t layer, const char* field) {
  return absl::StrCat("model.layers.", layer, ".self_attn.", field);
}

// Layer `layer`'s K and V scales into k and v; false when it has none.
absl::StatusOr<bool> ReadLayerScales(const WeightSource& w, int64_t layer, int64_t num_kv_heads,
                                     float* k, float* v) {
  const TensorView* k_scale = w.Find(ScaleName(layer, "k_scale"));
  const TensorView* v_scale = w.Find(ScaleName(layer, "v_scale"));
  const TensorView* kv_scale = w.Find(ScaleName(layer, "kv_scale"));
  if (k_scale == nullptr && v_scale == nullptr && kv_scale == nullptr) return false;
  if (k_scale == nullptr) k_scale = kv_scale;  // one tensor for both, or the missing one
  if (v_scale == nullptr) v_scale = kv_scale;
  if (k_scale == nullptr || v_scale == nullptr) {
    const TensorView* present = k_scale != nullptr ? k_scale : v_scale;
    return absl::InvalidArgumentError(
        absl::StrCat(present->file_path, ": KV cache scale tensor '",
                     ScaleName(layer, k_scale == nullptr ? "k_scale" : "v_scale"),
                     "' not found while '", present->name, "' is present"));
  }
  RETURN_IF_ERROR(ReadScaleTensor(*k_scale, num_kv_heads, k));
  RETURN_IF_ERROR(ReadScaleTensor(*v_scale, num_kv_heads, v));
  return true;
}

// max_tokens seeded ids below vocab_size in four prompts of unequal lengths.
std::vector<std::vector<int32_t>> SeededPrompts(int64_t vocab_size, int32_t max_tokens) {
  std::mt19937 rng(kSeededPromptsSeed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab_size) - 1);
  std::vector<std::vector<int32_t>> prompts;
  constexpr int32_t kParts[] = {4, 3, 2, 1};  // tenths of max_tokens; the rest to the last
  int32_t left = max_tokens;
  for (size_t i = 0; i < std::size(kParts) && left > 0; ++i) {
    const int32_t n = i + 1 == std::size(kParts) ? left : std::max(1, max_tokens * kParts[i] / 10);
    prompts.emplace_back(std::min(n, left));
    for (int32_t& t : prompts.back()) t = id(rng);
    left -= static_cast<int32_t>(prompts.back().size());
  }
  return prompts;
}

}  // namespace

float KvScaleFromAmax(float amax) {
  if (!std::isfinite(amax) || amax <= 0.0f) return 1.0f;
  // Never 0 nor subnormal: a tiny amax still gives a usable divisor.
  return std::max(amax * kKvScaleHeadroom / kE4m3Max, std::numeric_limits<float>::min());
}

KvScales KvScales::Ones(int64_t num_layers, int64_t num_kv_heads, std::string source) {
  const int64_t n = num_layers * num_kv_heads;
  return {.num_layers = num_layers,
          .num_kv_heads = num_kv_heads,
          .k = std::vector<float>(n, 1.0f),
          .v = std::vector<float>(n, 1.0f),
          .source = std::move(source)};
}

void KvScales::SetLayerFromAmax(int64_t layer, std::span<const float> amax) {
  for (int64_t h = 0; h < num_kv_heads; ++h) {
    k[layer * num_kv_heads + h] = KvScaleFromAmax(amax[h]);
    v[layer * num_kv_heads + h] = KvScaleFromAmax(amax[num_kv_heads + h]);
  }
}

double KvFp8KError(std::span<const float> k, int64_t tokens, int64_t num_kv_heads, int64_t head_dim,
                   const float* k_scales) {
  const int64_t width = num_kv_heads * head_dim;
  if (tokens <= 0 || static_cast<int64_t>(k.size()) < tokens * width) return 0.0;
  std::vector<double> mean(width, 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < width; ++c) mean[c] += k[t * width + c];
  }
  for (double& m : mean) m /= static_cast<double>(tokens);
  double error = 0.0, variation = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < width; ++c) {
      const float x = k[t * width + c];
      const double e = x - RoundThroughE4m3(x, k_scales[c / head_dim]);
      error += e * e;
      variation += (x - mean[c]) * (x - mean[c]);
    }
  }
  return variation > 0.0 ? error / variation : 0.0;
}

void KvScales::SetLayerKError(int64_t layer, std::span<const float> k_values, int64_t tokens,
                              int64_t head_dim) {
  if (bf16_layers.empty()) bf16_layers.assign(num_layers, 0);
  if (k_error.empty()) k_error.assign(num_layers, 0.0);
  k_error[layer] = KvFp8KError(k_values, tokens, num_kv_heads, head_dim, Layer(layer).k);
  bf16_layers[layer] = k_error[layer] > kKvFp8MaxKError ? 1 : 0;
}

absl::Status KvScales::CheckFits(int64_t layers, int64_t kv_heads, absl::string_view field) const {
  const int64_t n = layers * kv_heads;
  if (num_layers == layers && num_kv_heads == kv_heads && static_cast<int64_t>(k.size()) == n &&
      static_cast<int64_t>(v.size()) == n &&
      (bf16_layers.empty() || static_cast<int64_t>(bf16_layers.size()) == layers)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", num_layers, " layers x ", num_kv_heads, " kv heads (", k.size(),
                   " K and ", v.size(), " V scales, ", bf16_layers.size(),
                   " bf16_layers) for a model of ", layers, " layers x ", kv_heads, " kv heads"));
}

int64_t KvScales::NumBf16Layers() const {
  return std::count(bf16_layers.begin(), bf16_layers.end(), uint8_t{1});
}

KvCalibrationBatch::KvCalibrationBatch(const std::vector<std::vector<int32_t>>& prompts,
                                       const KvLayout& layout, const KvCalibrationLimits& limits) {
  tables_.reserve(prompts.size());  // the chunks' spans point into them
  int32_t next_block = 0;
  for (const std::vector<int32_t>& prompt : prompts) {
    if (static_cast<int64_t>(batch_.chunks.size()) == limits.max_seqs) break;
    const int64_t len = std::min({static_cast<int64_t>(prompt.size()), limits.max_context,
                                  limits.max_tokens - num_tokens_,
                                  int64_t{layout.num_blocks - next_block} * layout.block_size});
    if (len <= 0 || len < limits.min_tokens) break;
    tables_.emplace_back((len + layout.block_size - 1) / layout.block_size);
    std::iota(tables_.back().begin(), tables_.back().end(), next_block);
    next_block += static_cast<int32_t>(tables_.back().size());
    batch_.chunks.push_back({.seq_id = static_cast<int64_t>(batch_.chunks.size()),
                             .token_ids = std::span(prompt).first(len),
                             .block_table = tables_.back(),
                             .want_logits = limits.want_logits});
    num_tokens_ += len;
  }
}

std::string KvCalibrationBatch::Source() const {
  return absl::StrCat("calibrated on ", num_tokens_, " tokens");
}

std::string KvScales::Describe() const {
  if (k.empty() || v.empty()) return absl::StrCat("KV cache FP8 scales: none (", source, ")");
  const auto [k_min, k_max] = std::minmax_element(k.begin(), k.end());
  const auto [v_min, v_max] = std::minmax_element(v.begin(), v.end());
  std::string out = absl::StrFormat(
      "KV cache FP8 scales (%s), %d layers x %d kv heads: K %.4g..%.4g, V %.4g..%.4g", source,
      num_layers, num_kv_heads, *k_min, *k_max, *v_min, *v_max);
  if (!k_error.empty()) {
    absl::StrAppendFormat(&out, "; K's FP8 error %.2g..%.2g",
                          *std::min_element(k_error.begin(), k_error.end()),
                          *std::max_element(k_error.begin(), k_error.end()));
  }
  std::vector<std::string> kept;
  for (int64_t l = 0; l < num_layers; ++l) {
    if (!LayerBf16(l)) continue;
    kept.push_back(k_error.empty() ? absl::StrCat(l)
                                   : absl::StrFormat("%d (K error %.2g)", l, k_error[l]));
  }
  if (!kept.empty()) {
    absl::StrAppend(&out, "; layers kept in BF16 (K's FP8 error over ", kKvFp8MaxKError,
                    "): ", absl::StrJoin(kept, ", "));
  }
  return out;
}

absl::StatusOr<std::optional<KvScales>> ReadCheckpointKvScales(const Checkpoint& checkpoint) {
  if (checkpoint.format == CheckpointFormat::kGguf || checkpoint.weights == nullptr) {
    return std::nullopt;
  }
  const ModelConfig& c = checkpoint.config;
  KvScales s{.num_layers = c.num_layers,
             .num_kv_heads = c.num_kv_heads,
             .k = std::vector<float>(c.num_layers * c.num_kv_heads),
             .v = std::vector<float>(c.num_layers * c.num_kv_heads),
             .source = "checkpoint"};
  int64_t first_with = -1, first_without = -1;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const int64_t at = layer * c.num_kv_heads;
    ASSIGN_OR_RETURN(const bool has, ReadLayerScales(*checkpoint.weights, layer, c.num_kv_heads,
                                                     &s.k[at], &s.v[at]));
    int64_t& first = has ? first_with : first_without;
    if (first < 0) first = layer;
  }
  if (first_with < 0) return std::nullopt;
  if (first_without >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        checkpoint.path, ": KV cache scale tensor '", ScaleName(first_without, "k_scale"),
        "' (or .kv_scale) not found while '", ScaleName(first_with, "k_scale"),
        "' (or .kv_scale) is present: every layer needs its scales"));
  }
  return s;
}

absl::StatusOr<std::vector<std::vector<int32_t>>> KvCalibrationPrompts(const Checkpoint* checkpoint,
                                                                       const ModelConfig& config,
                                                                       int32_t max_tokens) {
  if (max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV calibration: max_tokens = ", max_tokens, " < 1"));
  }
  if (checkpoint == nullptr) return SeededPrompts(config.vocab_size, max_tokens);
  ASSIGN_OR_RETURN(const std::unique_ptr<Tokenizer> tokenizer, OpenTokenizer(*checkpoint));
  std::vector<std::vector<int32_t>> prompts;
  int32_t left = max_tokens;
  for (std::string_view paragraph : kCalibrationText) {
    if (left == 0) break;
    std::vector<int32_t> ids = tokenizer->Encode(paragraph, /*add_special_tokens=*/true);
    std::erase_if(ids, [&](int32_t id) { return id < 0 || id >= config.vocab_size; });
    if (ids.empty()) continue;
    if (static_cast<int64_t>(ids.size()) > left) ids.resize(left);
    left -= static_cast<int32_t>(ids.size());
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

}  // namespace onecard::engine
