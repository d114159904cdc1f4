// Test-only tiny decoder checkpoints with seeded random fp32 weights, written
// as a GGUF file (llama.cpp's names and metadata; for the llama architecture
// Q/K rows permuted as llama.cpp's converter does) or as an HF folder
// (config.json + model.safetensors). The HF-layout weights are kept for
// comparison. Tested through checkpoint_test, model_weights_test and
// inspect_command_test.
#ifndef ONECARD_TESTS_ENGINE_MODEL_TINY_MODEL_H_
#define ONECARD_TESTS_ENGINE_MODEL_TINY_MODEL_H_

#include <cstdint>
#include <map>
#include <string>

#include "engine/model/model_weights.h"
#include "tests/engine/model/model_test_util.h"

namespace onecard::testing {

struct TinySpec {
  std::string arch = "llama";  // "llama" or "qwen2" (q/k/v biases)
  int64_t vocab = 40;
  int64_t hidden = 16;
  int64_t intermediate = 24;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  bool tied = false;
  uint32_t seed = 1;
};

struct TinyModel {
  TinySpec spec;
  std::map<std::string, F32Tensor> hf;  // by HF name, HF layout
  int64_t head_dim() const { return spec.hidden / spec.heads; }
};

TinyModel MakeTinyModel(const TinySpec& spec);

// llama.cpp's convert_hf_to_gguf.py LlamaModel.permute: rows viewed as
// [heads, 2, head_dim / 2] are stored as [heads, head_dim / 2, 2].
std::vector<float> LlamaCppPermute(const std::vector<float>& w, int64_t rows, int64_t heads);

// The GGUF bytes; `skip` names a GGUF tensor to leave out.
GgufTestWriter TinyGgufWriter(const TinyModel& model, const std::string& skip = "");

// Writes config.json and model.safetensors under dir/name; returns the folder.
std::string WriteTinyHfFolder(const TinyModel& model, const ScratchDir& dir,
                              const std::string& name);

// The loaded tensor that holds HF tensor `hf_name` (nullptr if none);
// lm_head.weight of a tied model is the embedding.
const std::vector<float>* LoadedTensor(const engine::ModelWeightsF32& w,
                                       const std::string& hf_name);

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_ENGINE_MODEL_TINY_MODEL_H_
