// SafetensorsSource: header parsing and validation for safetensors files and
// the sharded index. The header JSON is parsed with nlohmann::json without
// exceptions. Checked: header length inside the file, the JSON's shape, dtype,
// shape, data_offsets inside the data section, size == numel * dtype size, no
// two tensors overlapping. Tested by tests/engine/model/safetensors_test.cc.
#include "engine/model/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/regular_file.h"
#include "engine/common/status_macros.h"
#include "engine/model/mapped_file.h"
#include "engine/model/quant_blocks.h"
#include "nlohmann/json.hpp"

namespace onecard::engine {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // as the safetensors library
constexpr char kSupportedDTypes[] = "F32, F16, BF16, I32, I64, U8, F8_E4M3";

absl::StatusOr<DType> ParseDType(const std::string& name) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16},     {"I32", DType::kI32},
      {"I64", DType::kI64}, {"U8", DType::kU8},   {"F8_E4M3", DType::kF8E4M3}};
  for (const auto& [n, dtype] : kNames) {
    if (name == n) return dtype;
  }
  return absl::UnimplementedError(
      absl::StrCat("dtype \"", name, "\" is not supported (supported: ", kSupportedDTypes, ")"));
}

// Reads a non-negative integer JSON value.
bool GetCount(const Json& j, uint64_t* out) {
  if (!j.is_number_integer()) return false;
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  int64_t v = j.get<int64_t>();
  if (v < 0) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) { return ReadRegularFile(path); }

// One file's header, checked, turned into views.
class HeaderParser {
 public:
  HeaderParser(const MappedFile& file, std::vector<TensorView>* tensors,
               std::map<std::string, std::string>* metadata)
      : file_(file), tensors_(tensors), metadata_(metadata) {}

  absl::Status Parse() {
    const uint64_t size = file_.size();
    if (size < 8) return Error(0, absl::StrCat("file truncated: ", size, " bytes, no header"));
    uint64_t header_bytes;
    std::memcpy(&header_bytes, file_.data(), 8);
    if (header_bytes > size - 8 || header_bytes > kMaxHeaderBytes) {
      return Error(0, absl::StrCat("header length ", header_bytes,
                                   " runs past the end of the file (", size, " bytes)"));
    }
    data_start_ = 8 + header_bytes;
    data_bytes_ = size - data_start_;
    const char* text = reinterpret_cast<const char*>(file_.data() + 8);
    Json header = Json::parse(text, text + header_bytes, nullptr, /*allow_exceptions=*/false);
    if (header.is_discarded() || !header.is_object()) {
      return Error(8, absl::StrCat("header (", header_bytes, " bytes) is not a JSON object"));
    }
    size_t first = tensors_->size();
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        RETURN_IF_ERROR(ParseMetadata(entry));
        continue;
      }
      RETURN_IF_ERROR(ParseTensor(name, entry));
    }
    return CheckOverlaps(first);
  }

 private:
  absl::Status Error(uint64_t offset, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_.path(), ": byte offset ", offset, ": ", what));
  }
  absl::Status TensorError(const std::string& name, absl::string_view what) const {
    return Error(8, absl::StrCat("tensor '", name, "': ", what));
  }

  absl::Status ParseMetadata(const Json& entry) {
    if (!entry.is_object()) return Error(8, "\"__metadata__\" is not an object");
    for (const auto& [key, value] : entry.items()) {
      if (!value.is_string()) {
        return Error(8, absl::StrCat("\"__metadata__\" entry '", key, "' is not a string"));
      }
      metadata_->emplace(key, value.get<std::string>());
    }
    return absl::OkStatus();
  }

  absl::Status ParseTensor(const std::string& name, const Json& entry) {
    if (!entry.is_object()) return TensorError(name, "entry is not an object");
    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) {
      return TensorError(name, "missing string \"dtype\"");
    }
    TensorView view;
    view.name = name;
    view.file_path = file_.path();
    absl::StatusOr<DType> dtype = ParseDType(dtype_it->get<std::string>());
    if (!dtype.ok()) {
      return absl::UnimplementedError(
          absl::StrCat(file_.path(), ": tensor '", name, "': ", dtype.status().message()));
    }
    view.dtype = *dtype;
    RETURN_IF_ERROR(ParseShape(name, entry, &view.shape));
    RETURN_IF_ERROR(PlaceData(name, entry, &view));
    tensors_->push_back(std::move(view));
    return absl::OkStatus();
  }

  absl::Status ParseShape(const std::string& name, const Json& entry,
                          std::vector<int64_t>* shape) const {
    auto it = entry.find("shape");
    if (it == entry.end() || !it->is_array()) return TensorError(name, "missing array \"shape\"");
    if (it->size() > 8) return TensorError(name, absl::StrCat(it->size(), " dimensions"));
    for (const Json& dim : *it) {
      uint64_t d;
      if (!GetCount(dim, &d) || d > (uint64_t{1} << 40)) {
        return TensorError(name, absl::StrCat("bad dimension ", dim.dump(), " in \"shape\""));
      }
      shape->push_back(static_cast<int64_t>(d));
    }
    return absl::OkStatus();
  }

  absl::Status PlaceData(const std::string& name, const Json& entry, TensorView* view) const {
    auto it = entry.find("data_offsets");
    uint64_t begin = 0, end = 0;
    if (it == entry.end() || !it->is_array() || it->size() != 2 || !GetCount((*it)[0], &begin) ||
        !GetCount((*it)[1], &end) || begin > end) {
      return TensorError(name, "\"data_offsets\" must be [begin, end] with begin <= end");
    }
    if (end > data_bytes_) {
      return Error(
          data_start_ + begin,
          absl::StrCat("tensor '", name, "' data [", data_start_ + begin, ", ", data_start_ + end,
                       ") runs past the end of the file (", file_.size(), " bytes)"));
    }
    int64_t numel = 1;
    for (int64_t d : view->shape) {
      if (__builtin_mul_overflow(numel, d, &numel) || numel > (int64_t{1} << 50)) {
        return TensorError(name, "too many elements");
      }
    }
    uint64_t want = static_cast<uint64_t>(numel) * BlockBytes(view->dtype);
    if (end - begin != want) {
      return Error(data_start_ + begin,
                   absl::StrCat("tensor '", name, "' holds ", end - begin, " bytes; ",
                                std::string(DTypeName(view->dtype)), " of ", numel,
                                " elements needs ", want));
    }
    view->file_offset = data_start_ + begin;
    view->size_bytes = end - begin;
    view->data = file_.data() + view->file_offset;
    return absl::OkStatus();
  }

  absl::Status CheckOverlaps(size_t first) const {
    std::vector<const TensorView*> views;
    for (size_t i = first; i < tensors_->size(); ++i) views.push_back(&(*tensors_)[i]);
    std::sort(views.begin(), views.end(), [](const TensorView* a, const TensorView* b) {
      return a->file_offset < b->file_offset;
    });
    for (size_t i = 1; i < views.size(); ++i) {
      const TensorView& prev = *views[i - 1];
      if (views[i]->file_offset < prev.file_offset + prev.size_bytes) {
        return Error(views[i]->file_offset, absl::StrCat("tensor '", views[i]->name,
                                                         "' overlaps tensor '", prev.name, "'"));
      }
    }
    return absl::OkStatus();
  }

  const MappedFile& file_;
  std::vector<TensorView>* tensors_;
  std::map<std::string, std::string>* metadata_;
  uint64_t data_start_ = 0;
  uint64_t data_bytes_ = 0;
};

// Reads the index's weight_map: tensor -> shard file name.
absl::StatusOr<std::map<std::string, std::string>> ReadWeightMap(const std::string& index_path) {
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(index_path));
  Json index = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": not a JSON object"));
  }
  auto it = index.find("weight_map");
  if (it == index.end() || !it->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, ": missing object field \"weight_map\""));
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, shard] : it->items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": \"weight_map\" entry '", tensor, "' is not a file name"));
    }
    std::string file = shard.get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": \"weight_map\" entry '", tensor,
                                                     "' names bad shard \"", file, "\""));
    }
    weight_map.emplace(tensor, std::move(file));
  }
  return weight_map;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

SafetensorsSource::~SafetensorsSource() = default;

absl::Status SafetensorsSource::AddFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  size_t first = tensors_.size();
  RETURN_IF_ERROR(HeaderParser(*file, &tensors_, &metadata_).Parse());
  for (size_t i = first; i < tensors_.size(); ++i) {
    auto [it, inserted] = tensor_index_.emplace(tensors_[i].name, i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", tensors_[i].name, "' is also in ", tensors_[it->second].file_path));
    }
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SafetensorsSource>> SafetensorsSource::OpenFile(
    const std::string& path) {
  std::unique_ptr<SafetensorsSource> source(new SafetensorsSource());
  RETURN_IF_ERROR(source->AddFile(path));
  return source;
}

absl::StatusOr<std::unique_ptr<SafetensorsSource>> SafetensorsSource::OpenIndex(
    const std::string& index_path) {
  ASSIGN_OR_RETURN(auto weight_map, ReadWeightMap(index_path));
  std::vector<std::string> shards;
  for (const auto& [tensor, shard] : weight_map) {
    if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
  }
  std::sort(shards.begin(), shards.end());
  std::unique_ptr<SafetensorsSource> source(new SafetensorsSource());
  std::string dir = DirName(index_path);
  for (const std::string& shard : shards) RETURN_IF_ERROR(source->AddFile(dir + "/" + shard));
  for (const auto& [tensor, shard] : weight_map) {
    const TensorView* view = source->Find(tensor);
    std::string want = dir + "/" + shard;
    if (view == nullptr || view->file_path != want) {
      return absl::NotFoundError(
          absl::StrCat(index_path, ": tensor '", tensor, "' is not in its shard ", want));
    }
  }
  return source;
}

absl::StatusOr<std::unique_ptr<SafetensorsSource>> SafetensorsSource::OpenDirectory(
    const std::string& dir) {
  std::string index = dir + "/model.safetensors.index.json";
  if (FileExists(index)) return OpenIndex(index);
  std::string single = dir + "/model.safetensors";
  if (FileExists(single)) return OpenFile(single);
  return absl::NotFoundError(
      absl::StrCat(dir, ": neither model.safetensors.index.json nor ", "model.safetensors found"));
}

const TensorView* SafetensorsSource::Find(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<std::string> SafetensorsSource::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensor_index_.size());
  for (const auto& [name, index] : tensor_index_) names.push_back(name);
  return names;
}

std::vector<std::string> SafetensorsSource::FilePaths() const {
  std::vector<std::string> paths;
  for (const auto& file : files_) paths.push_back(file->path());
  return paths;
}

}  // namespace onecard::engine
