// Test-only helpers of tests/engine/model: a scratch folder, file I/O, JSON
// loading, a GGUF writer (v2/v3, any metadata, raw tensors, every offset of
// the layout exposed so tests can corrupt it) and a safetensors writer.
// Tested through the tests that use them.
#ifndef ONECARD_TESTS_ENGINE_MODEL_MODEL_TEST_UTIL_H_
#define ONECARD_TESTS_ENGINE_MODEL_MODEL_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/model_config.h"
#include "nlohmann/json.hpp"

namespace onecard::testing {

// A fresh folder under $TMPDIR (or /tmp), removed with its files at the end.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }
  // Writes `bytes` to path()/name (creating sub-folders) and returns the path.
  std::string Write(const std::string& name, const std::string& bytes) const;

 private:
  std::string path_;
};

// On failure: a gtest failure naming the file, and an empty result.
std::string ReadTestFile(const std::string& path);
nlohmann::json LoadTestJson(const std::string& path);

// Little-endian field writes and patches.
void AppendU32(std::string* out, uint32_t v);
void AppendU64(std::string* out, uint64_t v);
void PutU32(std::string* bytes, uint64_t at, uint32_t v);
void PutU64(std::string* bytes, uint64_t at, uint64_t v);
std::string FloatBytes(const std::vector<float>& values);

// GGUF metadata value types and ggml tensor type ids (as in the spec).
enum GgufMetaType : uint32_t {
  kMetaU8 = 0,
  kMetaI8 = 1,
  kMetaU16 = 2,
  kMetaI16 = 3,
  kMetaU32 = 4,
  kMetaI32 = 5,
  kMetaF32 = 6,
  kMetaBool = 7,
  kMetaString = 8,
  kMetaArray = 9,
  kMetaU64 = 10,
  kMetaI64 = 11,
  kMetaF64 = 12,
};
enum GgmlTypeId : uint32_t {
  kGgmlF32 = 0,
  kGgmlF16 = 1,
  kGgmlQ4_0 = 2,
  kGgmlQ4_1 = 3,
  kGgmlQ5_0 = 6,
  kGgmlQ8_0 = 8,
  kGgmlQ4_K = 12,
  kGgmlQ5_K = 13,
  kGgmlQ6_K = 14,
  kGgmlBF16 = 30,
};

struct GgufBytes {
  std::string bytes;
  uint64_t infos_offset = 0;                  // first tensor info
  uint64_t data_offset = 0;                   // data section
  std::vector<uint64_t> tensor_info_offsets;  // each tensor info
  std::vector<uint64_t> type_fields;          // each tensor's u32 ggml type
  std::vector<uint64_t> offset_fields;        // each tensor's u64 data offset
};

class GgufTestWriter {
 public:
  explicit GgufTestWriter(uint32_t version = 3) : version_(version) {}

  // A key with a value already encoded (type + bytes), for any (bad) input.
  void AddRaw(const std::string& key, uint32_t type, const std::string& value_bytes);
  void AddInt(const std::string& key, uint32_t type, int64_t value);  // integer types
  void AddF32(const std::string& key, float value);
  void AddF64(const std::string& key, double value);
  void AddBool(const std::string& key, bool value);
  void AddString(const std::string& key, const std::string& value);
  void AddIntArray(const std::string& key, uint32_t type, const std::vector<int64_t>& values);
  void AddF32Array(const std::string& key, const std::vector<float>& values);
  void AddStringArray(const std::string& key, const std::vector<std::string>& values);

  // shape is outermost first; data holds the tensor's bytes.
  void AddTensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> shape,
                 std::string data);
  void AddF32Tensor(const std::string& name, std::vector<int64_t> shape,
                    const std::vector<float>& values);

  // Layout alignment (add "general.alignment" yourself when not 32).
  void set_alignment(uint32_t alignment) { alignment_ = alignment; }

  GgufBytes Build() const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> shape;
    std::string data;
  };
  uint32_t version_;
  uint32_t alignment_ = 32;
  uint64_t kv_count_ = 0;
  std::string kv_bytes_;
  std::vector<Tensor> tensors_;
};

std::string GgufString(const std::string& s);  // u64 length + bytes

// A safetensors file from a header JSON text and the data section.
std::string SafetensorsBytes(const std::string& header_json, const std::string& data);

// A safetensors file of F32 tensors (name, shape, values), in order.
struct F32Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};
std::string SafetensorsF32(const std::vector<F32Tensor>& tensors);

// A tensor of any safetensors dtype ("F16", "I32", ...) as raw bytes, for
// writing edited copies of files.
struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
std::string SafetensorsRaw(const std::vector<RawTensor>& tensors);
// The tensors of a safetensors file, sorted by name (a gtest failure and
// none when it cannot be read).
std::vector<RawTensor> ReadRawTensors(const std::string& path);

// A copy of an HF checkpoint folder in a scratch folder: its config.json and
// quantize_config.json, and the tensors of its model.safetensors, editable
// (the tests of broken quantized checkpoints).
class EditedCheckpoint {
 public:
  explicit EditedCheckpoint(const std::string& folder);
  RawTensor* Find(const std::string& name);  // a gtest failure when absent
  void Remove(const std::string& name);
  void WriteFile(const std::string& name, const std::string& text) const;
  void RemoveFile(const std::string& name) const;
  std::string model_path() const { return scratch_.path() + "/model.safetensors"; }
  const std::string& path() const { return scratch_.path(); }
  // Writes model.safetensors from the tensors.
  void WriteTensors() const;
  // Writes the tensors, opens the folder and loads every weight as
  // LoadWeightsF32 does: its status.
  absl::Status Load() const;

 private:
  ScratchDir scratch_;
  std::vector<RawTensor> tensors_;
};

// EXPECTs every field of the two configs equal (the name too unless
// `compare_name` is false).
void ExpectSameModelConfig(const engine::ModelConfig& a, const engine::ModelConfig& b,
                           bool compare_name = true);

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_ENGINE_MODEL_MODEL_TEST_UTIL_H_
