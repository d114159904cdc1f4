// GPTQ calibration on the cpu backend (see quantize_gptq.h).
#include "tools/onecard/quantize_gptq.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/regular_file.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "engine/runtime/engine.h"

namespace onecard::tools {
namespace {

using engine::LinearInput;
using engine::TensorPart;

constexpr std::array<std::pair<TensorPart, LinearInput>, 7> kProjectionInputs = {{
    {TensorPart::kQ, LinearInput::kQkv},
    {TensorPart::kK, LinearInput::kQkv},
    {TensorPart::kV, LinearInput::kQkv},
    {TensorPart::kO, LinearInput::kO},
    {TensorPart::kGate, LinearInput::kGateUp},
    {TensorPart::kUp, LinearInput::kGateUp},
    {TensorPart::kDown, LinearInput::kDown},
}};

}  // namespace

absl::StatusOr<std::unique_ptr<GptqLayerQuantizer>> GptqLayerQuantizer::Create(
    const engine::Checkpoint& checkpoint, const GptqCalibrationOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<engine::Tokenizer> tokenizer, engine::OpenTokenizer(checkpoint));
  ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(options.text_path));
  std::vector<int32_t> tokens = tokenizer->Encode(text, /*add_special_tokens=*/false);
  if (options.num_tokens > 0 && static_cast<int64_t>(tokens.size()) > options.num_tokens) {
    tokens.resize(options.num_tokens);
  }
  if (tokens.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat("--calibration: ", options.text_path, " has ",
                                                   tokens.size(), " tokens (2 at least)"));
  }
  ASSIGN_OR_RETURN(engine::ModelWeightsF32 weights, engine::LoadWeightsF32(checkpoint));
  GptqCalibrationOptions o = options;  // sequences no longer than the model's context
  o.sequence_tokens = static_cast<int32_t>(
      std::clamp<int64_t>(o.sequence_tokens, 2, checkpoint.config.max_position_embeddings));
  return std::unique_ptr<GptqLayerQuantizer>(
      new GptqLayerQuantizer(checkpoint.config, o, std::move(weights), std::move(tokens)));
}

GptqLayerQuantizer::GptqLayerQuantizer(const engine::ModelConfig& config,
                                       GptqCalibrationOptions options,
                                       engine::ModelWeightsF32 weights, std::vector<int32_t> tokens)
    : config_(config),
      options_(std::move(options)),
      weights_(std::move(weights)),
      tokens_(std::move(tokens)) {}

absl::StatusOr<std::vector<float>> GptqLayerQuantizer::RunLayer(
    int64_t layer, std::vector<engine::GptqHessian>* hessians) const {
  // Layer 0 runs on the tokens; a later layer on the stored stream, whose
  // rows become the embedding table (tied as the head, whose logits no chunk
  // asks for) with token t its row t.
  engine::ModelConfig config = config_;
  config.num_layers = 1;
  engine::ModelWeightsF32 w;
  w.layers = {weights_.layers[layer]};
  w.final_norm = weights_.final_norm;
  std::vector<int32_t> ids = tokens_;
  if (layer == 0) {
    w.embedding = weights_.embedding;
  } else {
    config.vocab_size = static_cast<int64_t>(tokens_.size());
    w.embedding = stream_;
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  }
  const int64_t hidden = config_.hidden_size;
  std::vector<float> out(ids.size() * hidden);
  size_t start = 0;  // the running sequence's first token
  engine::CpuRunnerOptions o;
  o.num_threads = options_.num_threads;
  o.num_kv_blocks = (options_.sequence_tokens + o.kv_block_size - 1) / o.kv_block_size;
  o.linear_input_observer = [&](int64_t l, LinearInput input, std::span<const float> x,
                                int32_t rows) {
    if (input == LinearInput::kResidual) {
      if (l == 1) std::copy(x.begin(), x.end(), out.begin() + start * hidden);
    } else if (hessians != nullptr) {
      (*hessians)[static_cast<int>(input)].Add(x, rows);
    }
  };
  ASSIGN_OR_RETURN(std::unique_ptr<engine::ModelRunner> runner,
                   engine::CreateCpuModelRunnerFromWeights(config, std::move(w), o));
  std::vector<int32_t> table(o.num_kv_blocks);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  std::vector<float> logits;
  const std::span<const int32_t> all(ids);
  for (start = 0; start < all.size(); start += options_.sequence_tokens) {
    const size_t size = std::min<size_t>(options_.sequence_tokens, all.size() - start);
    engine::BatchInput batch;
    batch.chunks.push_back({.seq_id = static_cast<int64_t>(start),
                            .token_ids = all.subspan(start, size),
                            .start_pos = 0,
                            .block_table = table,
                            .want_logits = false});
    RETURN_IF_ERROR(runner->Forward(batch, &logits));
  }
  return out;
}

absl::StatusOr<std::vector<GptqProjection>> GptqLayerQuantizer::QuantizeLayer(int64_t layer) {
  if (layer != next_layer_) {
    return absl::FailedPreconditionError(absl::StrCat("GPTQ quantizes the layers in order: layer ",
                                                      next_layer_, " is next, not ", layer));
  }
  // The layer's linear inputs on the stream the quantized layers before it
  // give.
  const int64_t hidden = config_.hidden_size;
  std::vector<engine::GptqHessian> h = {
      engine::GptqHessian(hidden), engine::GptqHessian(config_.num_heads * config_.head_dim),
      engine::GptqHessian(hidden), engine::GptqHessian(config_.intermediate_size)};
  RETURN_IF_ERROR(RunLayer(layer, &h).status());
  std::vector<std::shared_ptr<const std::vector<double>>> hessians;
  for (const engine::GptqHessian& m : h) {
    hessians.push_back(std::make_shared<const std::vector<double>>(m.Matrix()));
  }
  std::vector<GptqProjection> out;
  for (const auto& [part, input] : kProjectionInputs) {
    const std::vector<float>& w = *engine::PartWeights(weights_, part, layer);
    const std::shared_ptr<const std::vector<double>>& h = hessians[static_cast<int>(input)];
    const int64_t k = static_cast<int64_t>(std::sqrt(static_cast<double>(h->size())) + 0.5);
    const int64_t n = static_cast<int64_t>(w.size()) / k;
    const engine::GptqOptions o = {
        .group = options_.group_size < 0 ? static_cast<int32_t>(k) : options_.group_size,
        .sym = options_.sym,
        .damp = options_.damp};
    ASSIGN_OR_RETURN(engine::GptqQuantized q, engine::QuantizeGptq(w, n, k, *h, o));
    out.push_back({part, std::move(q), h});
  }
  for (const GptqProjection& p : out) {
    *engine::PartWeights(weights_, p.part, layer) = engine::DequantizeGptq(p.quantized);
  }
  // The stream entering the next layer, through this one quantized.
  ASSIGN_OR_RETURN(stream_, RunLayer(layer, /*hessians=*/nullptr));
  ++next_layer_;
  return out;
}

}  // namespace onecard::tools
