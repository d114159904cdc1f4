// LoadWeightsF32: maps a checkpoint's tensor names (GGUF "blk.N.attn_q.weight"
// or HF "model.layers.N.self_attn.q_proj.weight") to the decoder's parts,
// checks every shape against the ModelConfig, then dequantizes the tensors in
// parallel (one job per tensor). For GGUF llama files it undoes the Q/K row
// permutation of llama.cpp's converter, exactly as transformers' GGUF loader
// does (LlamaTensorProcessor._reverse_permute_weights). Tested by
// tests/engine/model/model_weights_test.cc and model_weights_smollm2_test.cc.
#include "engine/model/model_weights.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/model/dequantize.h"

namespace onecard::engine {
namespace {

// One tensor to load: where it goes and what it must look like.
struct Job {
  std::string name;
  std::vector<float>* dest;
  std::vector<int64_t> shape;   // expected, outermost first
  int64_t unpermute_heads = 0;  // > 0: undo llama.cpp's Q/K permutation
  const TensorView* view = nullptr;
};

enum class Dims { kHidden, kQ, kKv, kO, kUpProj, kDownProj, kQBias, kKvBias };

struct LayerPart {
  const char* gguf;
  const char* hf;
  std::vector<float> LayerWeightsF32::*field;
  Dims dims;
  bool rope_permuted;  // Q and K: permuted by llama.cpp's converter
};

constexpr LayerPart kLayerParts[] = {
    {"attn_norm.weight", "input_layernorm.weight", &LayerWeightsF32::attn_norm, Dims::kHidden,
     false},
    {"attn_q.weight", "self_attn.q_proj.weight", &LayerWeightsF32::wq, Dims::kQ, true},
    {"attn_k.weight", "self_attn.k_proj.weight", &LayerWeightsF32::wk, Dims::kKv, true},
    {"attn_v.weight", "self_attn.v_proj.weight", &LayerWeightsF32::wv, Dims::kKv, false},
    {"attn_output.weight", "self_attn.o_proj.weight", &LayerWeightsF32::wo, Dims::kO, false},
    {"ffn_norm.weight", "post_attention_layernorm.weight", &LayerWeightsF32::ffn_norm,
     Dims::kHidden, false},
    {"ffn_gate.weight", "mlp.gate_proj.weight", &LayerWeightsF32::w_gate, Dims::kUpProj, false},
    {"ffn_up.weight", "mlp.up_proj.weight", &LayerWeightsF32::w_up, Dims::kUpProj, false},
    {"ffn_down.weight", "mlp.down_proj.weight", &LayerWeightsF32::w_down, Dims::kDownProj, false},
};
constexpr LayerPart kBiasParts[] = {
    {"attn_q.bias", "self_attn.q_proj.bias", &LayerWeightsF32::bq, Dims::kQBias, true},
    {"attn_k.bias", "self_attn.k_proj.bias", &LayerWeightsF32::bk, Dims::kKvBias, true},
    {"attn_v.bias", "self_attn.v_proj.bias", &LayerWeightsF32::bv, Dims::kKvBias, false},
};

std::vector<int64_t> ShapeOf(Dims dims, const ModelConfig& c) {
  int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  switch (dims) {
    case Dims::kHidden:
      return {c.hidden_size};
    case Dims::kQ:
      return {q, c.hidden_size};
    case Dims::kKv:
      return {kv, c.hidden_size};
    case Dims::kO:
      return {c.hidden_size, q};
    case Dims::kUpProj:
      return {c.intermediate_size, c.hidden_size};
    case Dims::kDownProj:
      return {c.hidden_size, c.intermediate_size};
    case Dims::kQBias:
      return {q};
    case Dims::kKvBias:
      return {kv};
  }
  return {};
}

// The heads whose Q/K row permutation must be undone (0: none). transformers
// undoes it for every GGUF of the llama architecture (also biases).
int64_t UnpermuteHeads(const Checkpoint& ckpt, const LayerPart& part) {
  bool permuted = part.rope_permuted && ckpt.format == CheckpointFormat::kGguf &&
                  ckpt.config.architecture != Architecture::kQwen2;
  if (!permuted) return 0;
  bool query = part.dims == Dims::kQ || part.dims == Dims::kQBias;
  return query ? ckpt.config.num_heads : ckpt.config.num_kv_heads;
}

void AddLayerJobs(const Checkpoint& ckpt, int64_t layer, LayerWeightsF32* weights,
                  std::vector<Job>* jobs) {
  bool gguf = ckpt.format == CheckpointFormat::kGguf;
  std::string prefix =
      gguf ? absl::StrCat("blk.", layer, ".") : absl::StrCat("model.layers.", layer, ".");
  auto add = [&](const LayerPart& part) {
    jobs->push_back(Job{prefix + (gguf ? part.gguf : part.hf), &(weights->*part.field),
                        ShapeOf(part.dims, ckpt.config), UnpermuteHeads(ckpt, part)});
  };
  for (const LayerPart& part : kLayerParts) add(part);
  if (!ckpt.config.attention_bias) return;
  for (const LayerPart& part : kBiasParts) add(part);
}

std::vector<Job> PlanJobs(const Checkpoint& ckpt, ModelWeightsF32* w) {
  const ModelConfig& c = ckpt.config;
  bool gguf = ckpt.format == CheckpointFormat::kGguf;
  std::vector<Job> jobs;
  jobs.push_back({gguf ? "token_embd.weight" : "model.embed_tokens.weight",
                  &w->embedding,
                  {c.vocab_size, c.hidden_size}});
  w->layers.resize(c.num_layers);
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    AddLayerJobs(ckpt, layer, &w->layers[layer], &jobs);
  }
  jobs.push_back(
      {gguf ? "output_norm.weight" : "model.norm.weight", &w->final_norm, {c.hidden_size}});
  if (!c.tie_word_embeddings) {
    jobs.push_back(
        {gguf ? "output.weight" : "lm_head.weight", &w->lm_head, {c.vocab_size, c.hidden_size}});
  }
  return jobs;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Finds every job's tensor and checks its shape and dtype, before any work.
absl::Status ResolveJobs(const Checkpoint& ckpt, std::vector<Job>* jobs) {
  for (Job& job : *jobs) {
    job.view = ckpt.weights->Find(job.name);
    if (job.view == nullptr) {
      return absl::NotFoundError(absl::StrCat(ckpt.path, ": tensor '", job.name, "' not found"));
    }
    if (job.view->shape != job.shape) {
      return absl::InvalidArgumentError(absl::StrCat(job.view->file_path, ": tensor '", job.name,
                                                     "' has shape ", ShapeString(job.view->shape),
                                                     ", expected ", ShapeString(job.shape)));
    }
    if (!IsDequantizable(job.view->dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(job.view->file_path, ": tensor '", job.name,
                                                     "' has non-float dtype ",
                                                     std::string(DTypeName(job.view->dtype))));
    }
  }
  return absl::OkStatus();
}

// llama.cpp stores each head's rows as [head_dim / 2, 2] pairs (row i*2 + j);
// HF's order is [2, head_dim / 2] (row j * head_dim/2 + i).
void UndoLlamaCppPermutation(int64_t num_heads, int64_t rows, std::vector<float>* w) {
  const int64_t cols = static_cast<int64_t>(w->size()) / rows;
  const int64_t half = rows / num_heads / 2;
  const std::vector<float> src = *w;
  for (int64_t h = 0; h < num_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const float* from = src.data() + (h * 2 * half + i * 2 + j) * cols;
        float* to = w->data() + (h * 2 * half + j * half + i) * cols;
        std::memcpy(to, from, cols * sizeof(float));
      }
    }
  }
}

absl::Status RunJob(const Job& job) {
  job.dest->resize(static_cast<size_t>(job.view->NumElements()));
  RETURN_IF_ERROR(DequantizeInto(*job.view, job.dest->data()));
  if (job.unpermute_heads > 0) {
    UndoLlamaCppPermutation(job.unpermute_heads, job.shape[0], job.dest);
  }
  return absl::OkStatus();
}

// Runs the jobs on up to two threads; returns the first failure in job order.
absl::Status RunJobs(const std::vector<Job>& jobs) {
  std::vector<absl::Status> statuses(jobs.size());
  std::atomic<size_t> next{0};
  auto work = [&]() {
    for (size_t i = next++; i < jobs.size(); i = next++) statuses[i] = RunJob(jobs[i]);
  };
  unsigned num_threads = std::clamp(std::thread::hardware_concurrency(), 1u, 2u);
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < num_threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& helper : helpers) helper.join();
  for (const absl::Status& status : statuses) RETURN_IF_ERROR(status);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelWeightsF32> LoadWeightsF32(const Checkpoint& checkpoint) {
  if (checkpoint.weights == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(checkpoint.path, ": no weights opened"));
  }
  RETURN_IF_ERROR(checkpoint.config.Validate());
  ModelWeightsF32 weights;
  std::vector<Job> jobs = PlanJobs(checkpoint, &weights);
  RETURN_IF_ERROR(ResolveJobs(checkpoint, &jobs));
  RETURN_IF_ERROR(RunJobs(jobs));
  return weights;
}

}  // namespace onecard::engine
