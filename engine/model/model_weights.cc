// LoadWeightsF32: every tensor of the decoder found and shape-checked
// (layer_tensors.h: names, shapes, llama.cpp's Q/K permutation undone as
// transformers' LlamaTensorProcessor._reverse_permute_weights does), then
// dequantized in parallel (one job per tensor, counted on a Progress: a bar
// on a terminal, periodic log lines otherwise). Tested by
// tests/engine/model/model_weights_test.cc and model_weights_smollm2_test.cc.
#include "engine/model/model_weights.h"

#include "absl/strings/str_cat.h"
#include "engine/common/progress.h"
#include "engine/common/status_macros.h"
#include "engine/model/layer_tensors.h"

namespace onecard::engine {
namespace {

// One tensor to load: where it goes.
struct Job {
  TensorPart part;
  int64_t layer;
  std::vector<float>* dest;
  ResolvedTensor tensor;
};

std::vector<Job> PlanJobs(const ModelConfig& c, ModelWeightsF32* w) {
  std::vector<Job> jobs;
  jobs.push_back({TensorPart::kEmbedding, 0, &w->embedding});
  w->layers.resize(c.num_layers);
  static constexpr TensorPart kLayerParts[] = {
      TensorPart::kAttnNorm, TensorPart::kQ,       TensorPart::kK,     TensorPart::kV,
      TensorPart::kO,        TensorPart::kFfnNorm, TensorPart::kGate,  TensorPart::kUp,
      TensorPart::kDown,     TensorPart::kQBias,   TensorPart::kKBias, TensorPart::kVBias};
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    for (TensorPart part : kLayerParts) {
      const bool bias =
          part == TensorPart::kQBias || part == TensorPart::kKBias || part == TensorPart::kVBias;
      if (!bias || c.attention_bias) jobs.push_back({part, layer, PartWeights(*w, part, layer)});
    }
  }
  jobs.push_back({TensorPart::kFinalNorm, 0, &w->final_norm});
  if (!c.tie_word_embeddings) jobs.push_back({TensorPart::kLmHead, 0, &w->lm_head});
  return jobs;
}

}  // namespace

std::vector<float>* PartWeights(ModelWeightsF32& w, TensorPart part, int64_t layer) {
  switch (part) {
    case TensorPart::kEmbedding:
      return &w.embedding;
    case TensorPart::kFinalNorm:
      return &w.final_norm;
    case TensorPart::kLmHead:
      return &w.lm_head;
    default:
      break;
  }
  LayerWeightsF32& l = w.layers[layer];
  switch (part) {
    case TensorPart::kAttnNorm:
      return &l.attn_norm;
    case TensorPart::kQ:
      return &l.wq;
    case TensorPart::kK:
      return &l.wk;
    case TensorPart::kV:
      return &l.wv;
    case TensorPart::kO:
      return &l.wo;
    case TensorPart::kFfnNorm:
      return &l.ffn_norm;
    case TensorPart::kGate:
      return &l.w_gate;
    case TensorPart::kUp:
      return &l.w_up;
    case TensorPart::kDown:
      return &l.w_down;
    case TensorPart::kQBias:
      return &l.bq;
    case TensorPart::kKBias:
      return &l.bk;
    default:
      return &l.bv;
  }
}

absl::StatusOr<ModelWeightsF32> LoadWeightsF32(const Checkpoint& checkpoint) {
  if (checkpoint.weights == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(checkpoint.path, ": no weights opened"));
  }
  RETURN_IF_ERROR(checkpoint.config.Validate());
  ModelWeightsF32 weights;
  std::vector<Job> jobs = PlanJobs(checkpoint.config, &weights);
  for (Job& job : jobs) {  // every tensor found and checked before any work
    ASSIGN_OR_RETURN(job.tensor, ResolveTensor(checkpoint, job.part, job.layer));
  }
  Progress progress(absl::StrCat("loading ", checkpoint.path), static_cast<int64_t>(jobs.size()),
                    "tensors");
  auto read = [&jobs](size_t i) -> absl::Status {
    ASSIGN_OR_RETURN(*jobs[i].dest, ReadTensorF32(jobs[i].tensor));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(RunTensorJobs(jobs.size(), read, progress));
  return weights;
}

}  // namespace onecard::engine
