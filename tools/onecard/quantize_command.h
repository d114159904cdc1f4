// The `quantize` subcommand of the onecard CLI: an unquantized checkpoint (a
// Hugging Face folder: config.json and safetensors of F32, F16 or BF16; or a
// GGUF file) to a checkpoint folder of --format int4 (the default) or fp8.
// --format fp8: every decoder projection as per-output-channel FP8 E4M3
// (scale = amax(row) / 448) in a compressed-tensors float-quantized folder
// (quantize_fp8.h: llm-compressor's FP8_DYNAMIC layout and config, dynamic
// per-token activations; lm_head and the embeddings unquantized); the rest
// below as for int4 (--method, --group-size and --sym are int4's).
// --format int4: a 4-bit GPTQ checkpoint folder that transformers (optimum /
// GPTQModel) and onecard load: every decoder projection (q/k/v/o,
// gate/up/down) quantized by round-to-nearest as GPTQ quantizes
// (engine/model/gptq_quantizer.h: its scale and zero-point rules, groups of
// --group-size, sym or not, no act order) and written in GPTQ's v1 layout
// (qweight, qzeros stored minus one, fp16 scales, g_idx); every other tensor
// (embeddings, norms, biases, lm_head) copied in its own dtype. --method
// gptq quantizes with GPTQ instead (quantize_gptq.h: calibration text run
// through the model on the cpu backend, layer by layer; the same layout).
// The output folder gets one model.safetensors, config.json with
// "quantization_config" {quant_method "gptq", bits 4, group_size, desc_act
// false, sym, checkpoint_format "gptq"}, and the tokenizer and generation
// files that the input has.
// A GGUF input is written as the HF folder of its model: tensors under
// their HF names in HF order (llama.cpp's Q/K row permutation undone),
// config.json from its metadata (engine/model/hf_config.h HfConfigJson), and
// tokenizer.json / tokenizer_config.json from its tokenizer
// (engine/tokenizer/hf_json_writer.h); a GGUF tensor of a quantized type
// (Q4_K, Q8_0, ...) that is copied is written as F32 (its exact values).
// Projections stored in a quantized GGUF type are refused unless
// --allow-requantize (their values would be rounded a second time: what the
// accuracy table measures); a GGUF tensor with no place in the HF folder is
// refused by name.
// A progress bar (or log lines) on stderr, one per decoder layer; one JSON
// object on stdout at the end:
//   {"model", "out", "format", "method", "group_size", "sym", "layers",
//    "tensors_quantized", "tensors_copied", "bytes_in", "bytes_out", "seconds"}
// (gptq adds "calibration_tokens"; fp8 has no method, group_size nor sym).
// Refused, before anything is written: an already-quantized HF checkpoint
// (GPTQ, AWQ, compressed-tensors, FP8: quantize the unquantized model
// instead), and for int4 a projection whose k is not a multiple of the group
// or whose n or k is not a multiple of 8 (named).
// Tested by tests/tools/onecard/quantize_command_test.cc and, on the real
// GGUF files, quantize_gguf_test.cc.
#ifndef ONECARD_TOOLS_ONECARD_QUANTIZE_COMMAND_H_
#define ONECARD_TOOLS_ONECARD_QUANTIZE_COMMAND_H_

#include <cstdint>
#include <iosfwd>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace onecard::tools {

enum class QuantizeFormat { kInt4, kFp8 };

// The --format flag's text: "int4" or "fp8" (absl flags' hooks).
bool AbslParseFlag(absl::string_view text, QuantizeFormat* format, std::string* error);
std::string AbslUnparseFlag(QuantizeFormat format);

struct QuantizeCommandOptions {
  std::string model_path;  // an HF checkpoint folder or a GGUF file
  std::string out_dir;     // created when absent; its files are overwritten
  QuantizeFormat format = QuantizeFormat::kInt4;
  std::string method = "rtn";  // int4 only
  int32_t group_size = 128;    // columns a scale covers; -1: one group a row
  bool sym = true;
  // --method gptq: the calibration text, its first N tokens, the dampening
  // (a fraction of H's mean diagonal), cpu backend threads (0 = all cores).
  std::string calibration_path;
  int64_t calibration_tokens = 2048;
  double damp = 0.01;
  int32_t num_threads = 0;
  // Quantize projections a GGUF file stores in a quantized type (their
  // dequantized values, rounded again).
  bool allow_requantize = false;
};

// What can be wrong before anything loads: InvalidArgument naming the flag.
absl::Status CheckQuantizeOptions(const QuantizeCommandOptions& options);

// Quantizes and writes the folder, then prints the summary.
absl::Status RunQuantize(const QuantizeCommandOptions& options, std::ostream& out);

// Whether a RunQuantize error is the input's or the arguments' fault (the
// CLI exits 2: a missing or unreadable input, an unwritable output, a
// checkpoint it refuses) rather than a failure on the way (exit 1).
bool IsQuantizeUsageError(const absl::Status& status);

}  // namespace onecard::tools

#endif  // ONECARD_TOOLS_ONECARD_QUANTIZE_COMMAND_H_
