// SafetensorsSource: a WeightSource over HF safetensors checkpoints, a single
// model.safetensors or shards listed by model.safetensors.index.json
// ("weight_map": tensor -> shard file). Every file is mapped read-only and
// tensors are views into the mappings: no second copy in RAM. A file is
// u64 header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
// then the data. Errors name the file, the tensor and the byte offset.
// Tested by tests/engine/model/safetensors_test.cc.
#ifndef ONECARD_ENGINE_MODEL_SAFETENSORS_H_
#define ONECARD_ENGINE_MODEL_SAFETENSORS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/weight_source.h"

namespace onecard::engine {

class MappedFile;  // engine/model/mapped_file.h

class SafetensorsSource : public WeightSource {
 public:
  // One .safetensors file.
  static absl::StatusOr<std::unique_ptr<SafetensorsSource>> OpenFile(const std::string& path);
  // The shards named by an index file (paths relative to its folder).
  static absl::StatusOr<std::unique_ptr<SafetensorsSource>> OpenIndex(
      const std::string& index_path);
  // An HF folder: model.safetensors.index.json when present, otherwise
  // model.safetensors; NotFound naming both when neither exists.
  static absl::StatusOr<std::unique_ptr<SafetensorsSource>> OpenDirectory(const std::string& dir);
  ~SafetensorsSource() override;

  const TensorView* Find(const std::string& name) const override;
  std::vector<std::string> TensorNames() const override;  // sorted
  // The mapped files, in the order they were opened.
  std::vector<std::string> FilePaths() const;
  // "__metadata__" string entries of all files (the first file's wins).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsSource() = default;
  absl::Status AddFile(const std::string& path);

  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> tensor_index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_SAFETENSORS_H_
