// SafetensorsWriter: writes one .safetensors file, streaming: the tensors'
// names, dtypes and shapes are given first (the header is written from
// them), then each tensor's bytes in that order, so that a large checkpoint
// never has to be held in memory at once. The format, as the safetensors
// library writes it: u64 little-endian header length N, N bytes of JSON
// {"__metadata__": {string: string}, name: {"dtype", "shape",
// "data_offsets": [begin, end]}} padded with spaces so that the data starts
// at a multiple of 8, then the tensors' bytes back to back (offsets relative
// to the data's start). The file is written as PATH.tmp and renamed to PATH
// by Finish(), so a failed run leaves no half-written PATH.
// Tested by tests/engine/model/safetensors_writer_test.cc (read back with
// SafetensorsSource).
#ifndef ONECARD_ENGINE_MODEL_SAFETENSORS_WRITER_H_
#define ONECARD_ENGINE_MODEL_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/dtype.h"

namespace onecard::engine {

struct SafetensorsTensorSpec {
  std::string name;
  DType dtype = DType::kF32;   // F32, F16, BF16, I32, I64, U8 or F8_E4M3
  std::vector<int64_t> shape;  // outermost first
  uint64_t SizeBytes() const;  // product of shape times the element size
};

class SafetensorsWriter {
 public:
  // Opens PATH.tmp and writes the header. InvalidArgument for a dtype the
  // format lacks, a repeated or empty name, a negative dimension;
  // PermissionDenied / NotFound (naming the path) when it cannot be created.
  static absl::StatusOr<std::unique_ptr<SafetensorsWriter>> Create(
      const std::string& path, std::vector<SafetensorsTensorSpec> tensors,
      const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();  // removes PATH.tmp unless Finish() succeeded

  // The next tensor's bytes (the specs' order): InvalidArgument naming the
  // tensor when the name or the size is not the expected one.
  absl::Status Write(const std::string& name, std::span<const uint8_t> bytes);
  // After every tensor: flushes, closes and renames PATH.tmp to PATH.
  absl::Status Finish();

  uint64_t file_bytes() const { return file_bytes_; }  // header and data

 private:
  SafetensorsWriter() = default;
  absl::Status WriteRaw(const void* data, size_t size);

  std::string path_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
  std::vector<SafetensorsTensorSpec> tensors_;
  size_t next_ = 0;
  uint64_t file_bytes_ = 0;
  bool finished_ = false;
};

// The element size of a dtype the format holds; 0 for the GGUF block types.
int64_t SafetensorsElementBytes(DType dtype);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_SAFETENSORS_WRITER_H_
