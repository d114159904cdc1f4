// CheckCpuConfig, PackCpuWeights and LoadCpuWeights (see cpu_weights.h).
// LoadCpuWeights reads one tensor a job (RunTensorJobs, as LoadWeightsF32
// does), then fuses q/k/v and gate/up.
// Tested by tests/engine/runtime/cpu/cpu_weights_test.cc.
#include "engine/runtime/cpu/cpu_weights.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/progress.h"
#include "engine/common/status_macros.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/mapped_file.h"

namespace onecard::engine {
namespace {

// InvalidArgument unless `v` has rows * cols elements.
absl::Status CheckSize(const std::string& where, const char* part, const std::vector<float>& v,
                       int64_t rows, int64_t cols = 1) {
  if (static_cast<int64_t>(v.size()) == rows * cols) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where, part, " has ", v.size(),
                                                 " elements; the config needs [", rows, ", ", cols,
                                                 "] = ", rows * cols));
}

// Values of `parts` one after another; the parts are freed.
std::vector<float> Stack(std::initializer_list<std::vector<float>*> parts) {
  size_t total = 0;
  for (const std::vector<float>* p : parts) total += p->size();
  std::vector<float> out;
  out.reserve(total);
  for (std::vector<float>* p : parts) {
    out.insert(out.end(), p->begin(), p->end());
    std::vector<float>().swap(*p);
  }
  return out;
}

// An fp32 part of a linear (its size checked by CheckSize): the values move.
struct F32Part {
  const char* name;
  std::vector<float>* values;
  int64_t rows;
};

// The parts' rows stacked, in order, as one CpuLinear of fp32 runs.
absl::StatusOr<CpuLinear> StackF32(const std::string& where, int64_t cols,
                                   std::initializer_list<F32Part> parts) {
  CpuLinear out;
  for (const F32Part& p : parts) {
    const std::string name = absl::StrCat(where, p.name);
    ASSIGN_OR_RETURN(CpuLinear part,
                     CpuLinear::FromF32(std::exchange(*p.values, {}), p.rows, cols, name));
    RETURN_IF_ERROR(out.Append(std::move(part), name));
  }
  return out;
}

absl::StatusOr<CpuLayerWeights> PackLayer(const ModelConfig& c, int64_t index, LayerWeightsF32& w) {
  const std::string where = absl::StrCat("layer ", index, " ");
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  RETURN_IF_ERROR(CheckSize(where, "attn_norm", w.attn_norm, hidden));
  RETURN_IF_ERROR(CheckSize(where, "wq", w.wq, q_dim, hidden));
  RETURN_IF_ERROR(CheckSize(where, "wk", w.wk, kv_dim, hidden));
  RETURN_IF_ERROR(CheckSize(where, "wv", w.wv, kv_dim, hidden));
  RETURN_IF_ERROR(CheckSize(where, "wo", w.wo, hidden, q_dim));
  RETURN_IF_ERROR(CheckSize(where, "ffn_norm", w.ffn_norm, hidden));
  RETURN_IF_ERROR(CheckSize(where, "w_gate", w.w_gate, inter, hidden));
  RETURN_IF_ERROR(CheckSize(where, "w_up", w.w_up, inter, hidden));
  RETURN_IF_ERROR(CheckSize(where, "w_down", w.w_down, hidden, inter));
  const bool has_bias = !w.bq.empty() || !w.bk.empty() || !w.bv.empty();
  if (has_bias || c.attention_bias) {
    RETURN_IF_ERROR(CheckSize(where, "bq", w.bq, q_dim));
    RETURN_IF_ERROR(CheckSize(where, "bk", w.bk, kv_dim));
    RETURN_IF_ERROR(CheckSize(where, "bv", w.bv, kv_dim));
  }
  CpuLayerWeights out;
  out.attn_norm = std::move(w.attn_norm);
  ASSIGN_OR_RETURN(out.wqkv,
                   StackF32(where, hidden,
                            {{"wq", &w.wq, q_dim}, {"wk", &w.wk, kv_dim}, {"wv", &w.wv, kv_dim}}));
  if (has_bias) out.bqkv = Stack({&w.bq, &w.bk, &w.bv});
  ASSIGN_OR_RETURN(out.wo, StackF32(where, q_dim, {{"wo", &w.wo, hidden}}));
  out.ffn_norm = std::move(w.ffn_norm);
  ASSIGN_OR_RETURN(
      out.w_gate_up,
      StackF32(where, hidden, {{"w_gate", &w.w_gate, inter}, {"w_up", &w.w_up, inter}}));
  ASSIGN_OR_RETURN(out.w_down, StackF32(where, inter, {{"w_down", &w.w_down, hidden}}));
  return out;
}

// One tensor to load and where it goes: a linear's weights or fp32 values.
struct LoadJob {
  TensorPart part;
  int64_t layer = 0;
  CpuLinear* linear = nullptr;
  std::vector<float>* values = nullptr;
  ResolvedTensor tensor;
};

// A layer's parts as read, before q/k/v and gate/up are fused.
struct LayerParts {
  CpuLinear q, k, v, gate, up;
  std::vector<float> bq, bk, bv;
};

std::vector<LoadJob> PlanLoad(const ModelConfig& c, CpuWeights* w, std::vector<LayerParts>* parts) {
  std::vector<LoadJob> jobs;
  jobs.push_back({TensorPart::kEmbedding, 0, &w->embedding});
  w->layers.resize(c.num_layers);
  parts->resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    CpuLayerWeights& l = w->layers[i];
    LayerParts& p = (*parts)[i];
    jobs.push_back({TensorPart::kAttnNorm, i, nullptr, &l.attn_norm});
    jobs.push_back({TensorPart::kQ, i, &p.q});
    jobs.push_back({TensorPart::kK, i, &p.k});
    jobs.push_back({TensorPart::kV, i, &p.v});
    jobs.push_back({TensorPart::kO, i, &l.wo});
    jobs.push_back({TensorPart::kFfnNorm, i, nullptr, &l.ffn_norm});
    jobs.push_back({TensorPart::kGate, i, &p.gate});
    jobs.push_back({TensorPart::kUp, i, &p.up});
    jobs.push_back({TensorPart::kDown, i, &l.w_down});
    if (c.attention_bias) {
      jobs.push_back({TensorPart::kQBias, i, nullptr, &p.bq});
      jobs.push_back({TensorPart::kKBias, i, nullptr, &p.bk});
      jobs.push_back({TensorPart::kVBias, i, nullptr, &p.bv});
    }
  }
  jobs.push_back({TensorPart::kFinalNorm, 0, nullptr, &w->final_norm});
  if (!c.tie_word_embeddings) jobs.push_back({TensorPart::kLmHead, 0, &w->lm_head});
  return jobs;
}

// A linear's tensor: its blocks (kNative and a block type the kernels
// multiply) or its fp32 values.
absl::StatusOr<CpuLinear> ReadLinear(const ResolvedTensor& t, CpuWeightFormat format) {
  const DType dtype = t.view->dtype;
  if (format == CpuWeightFormat::kNative && !t.hf_int4.has_value() && dtype != DType::kF32 &&
      IsCpuLinearDtype(dtype)) {
    ASSIGN_OR_RETURN(std::vector<uint8_t> blocks, ReadTensorBlocks(t));
    return CpuLinear::FromBlocks(dtype, std::move(blocks), t.shape[0], t.shape[1], t.name);
  }
  ASSIGN_OR_RETURN(std::vector<float> values, ReadTensorF32(t));
  return CpuLinear::FromF32(std::move(values), t.shape[0], t.shape[1], t.name);
}

// The mapped pages of a job's tensor (and of its scales, zero points and
// group index) dropped from the process's resident set.
void DropJobPages(const LoadJob& job) {
  const ResolvedTensor& t = job.tensor;
  std::vector<const TensorView*> views = {t.view};
  if (t.hf_int4.has_value()) {
    views = {t.hf_int4->packed, t.hf_int4->scales, t.hf_int4->zeros, t.hf_int4->g_idx};
  }
  if (t.hf_fp8.has_value()) views = {t.hf_fp8->weight, t.hf_fp8->scale};
  for (const TensorView* v : views) {
    if (v != nullptr) DropMappedPages(v->data, v->size_bytes);
  }
}

// The tensor read into its place, then its mapped pages dropped.
absl::Status RunLoadJob(const LoadJob& job, CpuWeightFormat format) {
  const ResolvedTensor& t = job.tensor;
  if (job.linear != nullptr) {
    ASSIGN_OR_RETURN(*job.linear, ReadLinear(t, format));
  } else {
    ASSIGN_OR_RETURN(*job.values, ReadTensorF32(t));
  }
  DropJobPages(job);
  return absl::OkStatus();
}

// q/k/v and gate/up of each layer stacked (runs moved, not copied).
absl::Status FuseLayers(std::vector<LayerParts>& parts, CpuWeights* w) {
  for (size_t i = 0; i < parts.size(); ++i) {
    LayerParts& p = parts[i];
    CpuLayerWeights& l = w->layers[i];
    const std::string where = absl::StrCat("layer ", i, " ");
    l.wqkv = std::move(p.q);
    RETURN_IF_ERROR(l.wqkv.Append(std::move(p.k), absl::StrCat(where, "wk")));
    RETURN_IF_ERROR(l.wqkv.Append(std::move(p.v), absl::StrCat(where, "wv")));
    if (!p.bq.empty()) l.bqkv = Stack({&p.bq, &p.bk, &p.bv});
    l.w_gate_up = std::move(p.gate);
    RETURN_IF_ERROR(l.w_gate_up.Append(std::move(p.up), absl::StrCat(where, "w_up")));
  }
  return absl::OkStatus();
}

absl::Status ConfigError(const char* field, int64_t value, const char* need) {
  return absl::InvalidArgumentError(
      absl::StrCat("model config: ", field, " = ", value, "; the cpu backend needs ", need));
}

}  // namespace

absl::Status CheckCpuConfig(const ModelConfig& c) {
  for (auto [field, value] : {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size},
                              {"hidden_size", c.hidden_size},
                              {"intermediate_size", c.intermediate_size},
                              {"num_layers", c.num_layers},
                              {"num_heads", c.num_heads},
                              {"num_kv_heads", c.num_kv_heads},
                              {"head_dim", c.head_dim},
                              {"max_position_embeddings", c.max_position_embeddings}}) {
    if (value <= 0) return ConfigError(field, value, "> 0");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return ConfigError("num_heads", c.num_heads, "a multiple of num_kv_heads");
  }
  if (c.head_dim % 2 != 0) return ConfigError("head_dim", c.head_dim, "an even value (RoPE)");
  if (!(c.rms_norm_eps > 0.0f)) return ConfigError("rms_norm_eps", 0, "> 0");
  if (!(c.rope_theta > 0.0f)) return ConfigError("rope_theta", 0, "> 0");
  return absl::OkStatus();
}

absl::StatusOr<CpuWeights> PackCpuWeights(const ModelConfig& c, ModelWeightsF32 weights) {
  RETURN_IF_ERROR(CheckCpuConfig(c));
  CpuWeights out;
  RETURN_IF_ERROR(CheckSize("", "embedding", weights.embedding, c.vocab_size, c.hidden_size));
  RETURN_IF_ERROR(CheckSize("", "final_norm", weights.final_norm, c.hidden_size));
  if (!weights.lm_head.empty()) {
    RETURN_IF_ERROR(CheckSize("", "lm_head", weights.lm_head, c.vocab_size, c.hidden_size));
  }
  if (static_cast<int64_t>(weights.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("the weights have ", weights.layers.size(),
                                                   " layers; the config says ", c.num_layers));
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    ASSIGN_OR_RETURN(CpuLayerWeights layer, PackLayer(c, i, weights.layers[i]));
    out.layers.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(out.embedding,
                   StackF32("", c.hidden_size, {{"embedding", &weights.embedding, c.vocab_size}}));
  out.final_norm = std::move(weights.final_norm);
  if (!weights.lm_head.empty()) {
    ASSIGN_OR_RETURN(out.lm_head,
                     StackF32("", c.hidden_size, {{"lm_head", &weights.lm_head, c.vocab_size}}));
  }
  return out;
}

int64_t CpuWeights::bytes() const {
  const auto f32 = [](const std::vector<float>& v) { return static_cast<int64_t>(v.size() * 4); };
  int64_t total = embedding.bytes() + lm_head.bytes() + f32(final_norm);
  for (const CpuLayerWeights& l : layers) {
    total += l.wqkv.bytes() + l.wo.bytes() + l.w_gate_up.bytes() + l.w_down.bytes();
    total += f32(l.attn_norm) + f32(l.ffn_norm) + f32(l.bqkv);
  }
  return total;
}

absl::StatusOr<CpuWeights> LoadCpuWeights(const Checkpoint& checkpoint, CpuWeightFormat format) {
  if (checkpoint.weights == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(checkpoint.path, ": no weights opened"));
  }
  RETURN_IF_ERROR(checkpoint.config.Validate());
  RETURN_IF_ERROR(CheckCpuConfig(checkpoint.config));
  CpuWeights weights;
  weights.format = format;
  std::vector<LayerParts> parts;
  std::vector<LoadJob> jobs = PlanLoad(checkpoint.config, &weights, &parts);
  for (LoadJob& job : jobs) {  // every tensor found and checked before any work
    ASSIGN_OR_RETURN(job.tensor, ResolveTensor(checkpoint, job.part, job.layer));
  }
  Progress progress(absl::StrCat("loading ", checkpoint.path), static_cast<int64_t>(jobs.size()),
                    "tensors");
  RETURN_IF_ERROR(RunTensorJobs(
      jobs.size(), [&](size_t i) { return RunLoadJob(jobs[i], format); }, progress));
  // Every tensor's pages dropped again once all are read: a read's fault
  // (the kernel maps the cached pages around a faulting address with it)
  // maps back pages of neighbouring tensors dropped before it.
  for (const LoadJob& job : jobs) DropJobPages(job);
  RETURN_IF_ERROR(FuseLayers(parts, &weights));
  return weights;
}

}  // namespace onecard::engine
