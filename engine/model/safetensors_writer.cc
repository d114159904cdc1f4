// SafetensorsWriter (see safetensors_writer.h).
#include "engine/model/safetensors_writer.h"

#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "nlohmann/json.hpp"

namespace onecard::engine {
namespace {

absl::Status FileError(const std::string& what, const std::string& path, int error) {
  const std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(error));
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  if (error == ENOENT || error == ENOTDIR) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

absl::Status CheckSpecs(const std::vector<SafetensorsTensorSpec>& tensors) {
  std::set<std::string> names;
  for (const SafetensorsTensorSpec& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: tensor name \"", t.name, "\" is empty, reserved or repeated"));
    }
    if (SafetensorsElementBytes(t.dtype) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("safetensors: tensor ", t.name, ": dtype ",
                                                     std::string(DTypeName(t.dtype)),
                                                     " has no safetensors form"));
    }
    for (int64_t d : t.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("safetensors: tensor ", t.name, ": negative dimension ", d));
      }
    }
  }
  return absl::OkStatus();
}

// The header JSON, padded with spaces to a multiple of 8 bytes.
std::string HeaderJson(const std::vector<SafetensorsTensorSpec>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsTensorSpec& t : tensors) {
    const uint64_t end = offset + t.SizeBytes();
    header[t.name] = {{"dtype", std::string(DTypeName(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  return text;
}

}  // namespace

int64_t SafetensorsElementBytes(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI64:
      return 8;
    case DType::kU8:
    case DType::kF8E4M3:
      return 1;
    default:
      return 0;
  }
}

uint64_t SafetensorsTensorSpec::SizeBytes() const {
  uint64_t n = static_cast<uint64_t>(SafetensorsElementBytes(dtype));
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

absl::StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, std::vector<SafetensorsTensorSpec> tensors,
    const std::map<std::string, std::string>& metadata) {
  RETURN_IF_ERROR(CheckSpecs(tensors));
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  w->path_ = path;
  w->tmp_path_ = path + ".tmp";
  w->file_ = std::fopen(w->tmp_path_.c_str(), "wb");
  if (w->file_ == nullptr) return FileError("cannot create", w->tmp_path_, errno);
  const std::string header = HeaderJson(tensors, metadata);
  w->tensors_ = std::move(tensors);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i));
  RETURN_IF_ERROR(w->WriteRaw(length, sizeof(length)));
  RETURN_IF_ERROR(w->WriteRaw(header.data(), header.size()));
  return w;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_) std::remove(tmp_path_.c_str());
}

absl::Status SafetensorsWriter::WriteRaw(const void* data, size_t size) {
  if (size > 0 && std::fwrite(data, 1, size, file_) != size) {
    return FileError("write failed", tmp_path_, errno);
  }
  file_bytes_ += size;
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::Write(const std::string& name, std::span<const uint8_t> bytes) {
  if (file_ == nullptr || next_ >= tensors_.size() || tensors_[next_].name != name) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors: ", path_, ": tensor ", name, " written out of order (expected ",
                     next_ < tensors_.size() ? tensors_[next_].name : std::string("none"), ")"));
  }
  if (bytes.size() != tensors_[next_].SizeBytes()) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors: ", path_, ": tensor ", name, ": ",
                                                   bytes.size(), " bytes, expected ",
                                                   tensors_[next_].SizeBytes()));
  }
  ++next_;
  return WriteRaw(bytes.data(), bytes.size());
}

absl::Status SafetensorsWriter::Finish() {
  if (file_ == nullptr || next_ != tensors_.size()) {
    return absl::FailedPreconditionError(absl::StrCat("safetensors: ", path_, ": ", next_, " of ",
                                                      tensors_.size(), " tensors written"));
  }
  const bool flushed = std::fflush(file_) == 0;
  const int error = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) return FileError("write failed", tmp_path_, flushed ? errno : error);
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return FileError("cannot rename to it", tmp_path_, errno);
  }
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace onecard::engine
