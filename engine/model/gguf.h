// GgufFile: a reader of GGUF v2 and v3 files (llama.cpp's model format):
// header, typed metadata, tensor infos, and the tensor data mapped read-only.
// Every malformed file gives an error naming the file, the byte offset and the
// field or tensor. Tested by tests/engine/model/gguf_test.cc.
#ifndef ONECARD_ENGINE_MODEL_GGUF_H_
#define ONECARD_ENGINE_MODEL_GGUF_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/weight_source.h"

namespace onecard::engine {

class MappedFile;  // engine/model/mapped_file.h

// One metadata value. Arrays hold scalars or strings (GGUF allows nested
// arrays; they are rejected with an error naming the key).
struct GgufValue {
  using Array = std::variant<std::vector<int64_t>, std::vector<double>,
                             std::vector<std::string>, std::vector<bool>>;
  std::variant<int64_t, double, bool, std::string, Array> value;
};

class GgufFile : public WeightSource {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  ~GgufFile() override;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }

  const GgufValue* FindMetadata(const std::string& key) const;
  // Typed getters: NotFound when absent, InvalidArgument (naming the key and
  // both types) when the stored type differs. Integer getters accept any
  // integer type; GetFloat accepts floats and integers.
  absl::StatusOr<std::string> GetString(const std::string& key) const;
  absl::StatusOr<int64_t> GetInt(const std::string& key) const;
  absl::StatusOr<double> GetFloat(const std::string& key) const;
  absl::StatusOr<bool> GetBool(const std::string& key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(const std::string& key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(const std::string& key) const;
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }

  // WeightSource: shapes are reported outermost first (reversed ne[]).
  const TensorView* Find(const std::string& name) const override;
  std::vector<std::string> TensorNames() const override;

 private:
  GgufFile() = default;
  std::string path_;
  uint32_t version_ = 0;
  std::unique_ptr<MappedFile> file_;
  std::map<std::string, GgufValue> metadata_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> tensor_index_;
  friend class GgufParser;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_GGUF_H_
