// GgufFile: parses a GGUF v2/v3 file over its read-only mapping. Layout
// (little-endian): "GGUF", u32 version, u64 tensor_count, u64 kv_count, the
// metadata key/values, the tensor infos (name, u32 n_dims, u64 ne[n_dims],
// u32 ggml type, u64 offset), then the data section at the next multiple of
// general.alignment (default 32). Every count and length is checked against
// the bytes left before anything is allocated from it.
// Tested by tests/engine/model/gguf_test.cc and gguf_smollm2_test.cc.
#include "engine/model/gguf.h"

#include <bit>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "engine/model/mapped_file.h"
#include "engine/model/quant_blocks.h"

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace onecard::engine {
namespace {

enum GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
constexpr uint32_t kNumGgufTypes = 13;
constexpr int kScalarBytes[kNumGgufTypes] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
constexpr uint32_t kDefaultAlignment = 32;
constexpr uint64_t kMaxNameBytes = 65535;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// The ggml tensor types: names of all known ids, and the ones we load.
struct GgmlType {
  uint32_t id;
  const char* name;
  bool supported;
  DType dtype;
};
constexpr GgmlType kGgmlTypes[] = {
    {0, "F32", true, DType::kF32},
    {1, "F16", true, DType::kF16},
    {2, "Q4_0", true, DType::kQ4_0},
    {3, "Q4_1", true, DType::kQ4_1},
    {6, "Q5_0", false, {}},
    {7, "Q5_1", false, {}},
    {8, "Q8_0", true, DType::kQ8_0},
    {9, "Q8_1", false, {}},
    {10, "Q2_K", false, {}},
    {11, "Q3_K", false, {}},
    {12, "Q4_K", true, DType::kQ4_K},
    {13, "Q5_K", true, DType::kQ5_K},
    {14, "Q6_K", true, DType::kQ6_K},
    {15, "Q8_K", false, {}},
    {16, "IQ2_XXS", false, {}},
    {17, "IQ2_XS", false, {}},
    {18, "IQ3_XXS", false, {}},
    {19, "IQ1_S", false, {}},
    {20, "IQ4_NL", false, {}},
    {21, "IQ3_S", false, {}},
    {22, "IQ2_S", false, {}},
    {23, "IQ4_XS", false, {}},
    {24, "I8", false, {}},
    {25, "I16", false, {}},
    {26, "I32", false, {}},
    {27, "I64", false, {}},
    {28, "F64", false, {}},
    {29, "IQ1_M", false, {}},
    {30, "BF16", true, DType::kBF16},
    {34, "TQ1_0", false, {}},
    {35, "TQ2_0", false, {}},
    {39, "MXFP4", false, {}},
    {40, "NVFP4", false, {}},
    {41, "Q1_0", false, {}},
};
constexpr char kSupportedTypes[] = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K";

const GgmlType* FindGgmlType(uint32_t id) {
  for (const GgmlType& type : kGgmlTypes) {
    if (type.id == id) return &type;
  }
  return nullptr;
}

const char* ValueTypeName(const GgufValue& value) {
  switch (value.value.index()) {
    case 0:
      return "int";
    case 1:
      return "float";
    case 2:
      return "bool";
    case 3:
      return "string";
    default:
      break;
  }
  switch (std::get<GgufValue::Array>(value.value).index()) {
    case 0:
      return "array of int";
    case 1:
      return "array of float";
    case 2:
      return "array of string";
    default:
      return "array of bool";
  }
}

}  // namespace

// Reads one file front to back; on error the file is discarded.
class GgufParser {
 public:
  explicit GgufParser(GgufFile* file)
      : file_(file), data_(file->file_->data()), size_(file->file_->size()) {}

  absl::Status Parse() {
    uint64_t tensor_count = 0, kv_count = 0;
    RETURN_IF_ERROR(ReadHeader(&tensor_count, &kv_count));
    for (uint64_t i = 0; i < kv_count; ++i) RETURN_IF_ERROR(ReadKeyValue());
    RETURN_IF_ERROR(ReadTensorInfos(tensor_count));
    return PlaceTensors();
  }

 private:
  struct PendingTensor {
    uint64_t info_offset;  // where the tensor info starts, for errors
    uint32_t ggml_type;
    uint64_t data_offset;  // relative to the data section
  };

  absl::Status Error(uint64_t offset, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_->path_, ": byte offset ", offset, ": ", what));
  }

  // Fails unless `n` more bytes are there for `what`.
  absl::Status Need(uint64_t n, absl::string_view what) const {
    if (n <= size_ - pos_) return absl::OkStatus();
    return Error(pos_, absl::StrCat("file truncated: ", what, " needs ", n, " bytes, only ",
                                    size_ - pos_, " left"));
  }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    RETURN_IF_ERROR(Need(sizeof(T), what));
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  absl::StatusOr<std::string> ReadString(absl::string_view what, uint64_t max_bytes) {
    uint64_t at = pos_;
    ASSIGN_OR_RETURN(uint64_t length, Read<uint64_t>(what));
    if (length > max_bytes) {
      return Error(at, absl::StrCat(what, ": string length ", length, " exceeds the limit of ",
                                    max_bytes, " bytes"));
    }
    RETURN_IF_ERROR(Need(length, what));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return s;
  }

  absl::Status ReadHeader(uint64_t* tensor_count, uint64_t* kv_count) {
    RETURN_IF_ERROR(Need(4, "magic"));
    if (std::memcmp(data_, "GGUF", 4) != 0) {
      return Error(0, absl::StrFormat("bad magic %02x %02x %02x %02x (want \"GGUF\")", data_[0],
                                      data_[1], data_[2], data_[3]));
    }
    pos_ = 4;
    ASSIGN_OR_RETURN(file_->version_, Read<uint32_t>("version"));
    if (file_->version_ != 2 && file_->version_ != 3) {
      std::string what = absl::StrCat("unsupported GGUF version ", file_->version_,
                                      " (supported: 2, 3; little-endian only)");
      if (file_->version_ == 1) return absl::UnimplementedError(Error(4, what).message());
      return Error(4, what);
    }
    ASSIGN_OR_RETURN(*tensor_count, Read<uint64_t>("tensor count"));
    ASSIGN_OR_RETURN(*kv_count, Read<uint64_t>("metadata count"));
    // A key/value takes at least 13 bytes (key length, type, one byte).
    if (*kv_count > (size_ - pos_) / 13) {
      return Error(16, absl::StrCat("metadata count ", *kv_count, " cannot fit in the ",
                                    size_ - pos_, " bytes left"));
    }
    return absl::OkStatus();
  }

  absl::Status ReadKeyValue() {
    uint64_t at = pos_;
    ASSIGN_OR_RETURN(std::string key, ReadString("metadata key", kMaxNameBytes));
    std::string what = absl::StrCat("type of key '", key, "'");
    ASSIGN_OR_RETURN(uint32_t type, Read<uint32_t>(what));
    ASSIGN_OR_RETURN(GgufValue value, ReadValue(type, key));
    if (!file_->metadata_.emplace(key, std::move(value)).second) {
      return Error(at, absl::StrCat("duplicate metadata key '", key, "'"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<GgufValue> ReadValue(uint32_t type, const std::string& key) {
    GgufValue value;
    if (type == kArray) {
      ASSIGN_OR_RETURN(GgufValue::Array array, ReadArray(key));
      value.value = std::move(array);
      return value;
    }
    std::string what = absl::StrCat("value of key '", key, "'");
    if (type == kString) {
      ASSIGN_OR_RETURN(std::string s, ReadString(what, size_));
      value.value = std::move(s);
      return value;
    }
    if (type >= kNumGgufTypes) {
      return Error(pos_ - 4, absl::StrCat("unknown metadata type ", type, " of key '", key, "'"));
    }
    uint64_t at = pos_;
    RETURN_IF_ERROR(Need(kScalarBytes[type], what));
    pos_ += kScalarBytes[type];
    return DecodeScalar(type, data_ + at, at, key);
  }

  // One scalar of `type` stored at p (file offset `at`).
  absl::StatusOr<GgufValue> DecodeScalar(uint32_t type, const uint8_t* p, uint64_t at,
                                         const std::string& key) const {
    GgufValue v;
    auto load = [p](auto zero) {
      decltype(zero) x;
      std::memcpy(&x, p, sizeof(x));
      return x;
    };
    switch (type) {
      case kU8:
        v.value = int64_t{load(uint8_t{})};
        break;
      case kI8:
        v.value = int64_t{load(int8_t{})};
        break;
      case kU16:
        v.value = int64_t{load(uint16_t{})};
        break;
      case kI16:
        v.value = int64_t{load(int16_t{})};
        break;
      case kU32:
        v.value = int64_t{load(uint32_t{})};
        break;
      case kI32:
        v.value = int64_t{load(int32_t{})};
        break;
      case kI64:
        v.value = load(int64_t{});
        break;
      case kF32:
        v.value = double{load(float{})};
        break;
      case kF64:
        v.value = load(double{});
        break;
      case kU64: {
        uint64_t x = load(uint64_t{});
        if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return Error(at, absl::StrCat("uint64 value ", x, " of key '", key, "' is too large"));
        }
        v.value = static_cast<int64_t>(x);
        break;
      }
      case kBool: {
        uint8_t b = *p;
        if (b > 1) {
          return Error(at, absl::StrCat("bool value ", int{b}, " of key '", key, "'"));
        }
        v.value = b == 1;
        break;
      }
      default:
        return Error(at, absl::StrCat("metadata type ", type, " of key '", key, "'"));
    }
    return v;
  }

  absl::StatusOr<GgufValue::Array> ReadArray(const std::string& key) {
    std::string what = absl::StrCat("array of key '", key, "'");
    uint64_t at = pos_;
    ASSIGN_OR_RETURN(uint32_t type, Read<uint32_t>(what));
    ASSIGN_OR_RETURN(uint64_t count, Read<uint64_t>(what));
    if (type == kArray) return Error(at, absl::StrCat("nested array in key '", key, "'"));
    if (type >= kNumGgufTypes) {
      return Error(at, absl::StrCat("unknown array element type ", type, " of key '", key, "'"));
    }
    uint64_t min_element_bytes = type == kString ? 8 : kScalarBytes[type];
    if (count > (size_ - pos_) / min_element_bytes) {
      return Error(at + 4, absl::StrCat(what, ": ", count, " elements cannot fit in the ",
                                        size_ - pos_, " bytes left"));
    }
    if (type == kString) return ReadStringArray(count, what);
    GgufValue::Array array;
    if (type == kF32 || type == kF64) array = std::vector<double>();
    if (type == kBool) array = std::vector<bool>();
    std::visit([count](auto& v) { v.reserve(count); }, array);
    for (uint64_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(GgufValue element, DecodeScalar(type, data_ + pos_, pos_, key));
      pos_ += kScalarBytes[type];
      std::visit([&array](auto x) { AppendScalar(array, x); }, element.value);
    }
    return array;
  }

  template <typename T>
  static void AppendScalar(GgufValue::Array& array, T x) {
    if constexpr (std::is_same_v<T, int64_t>) std::get<std::vector<int64_t>>(array).push_back(x);
    if constexpr (std::is_same_v<T, double>) std::get<std::vector<double>>(array).push_back(x);
    if constexpr (std::is_same_v<T, bool>) std::get<std::vector<bool>>(array).push_back(x);
  }

  absl::StatusOr<GgufValue::Array> ReadStringArray(uint64_t count, const std::string& what) {
    std::vector<std::string> strings;
    strings.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(std::string s, ReadString(what, size_));
      strings.push_back(std::move(s));
    }
    return GgufValue::Array(std::move(strings));
  }

  absl::Status ReadTensorInfos(uint64_t tensor_count) {
    // A tensor info takes at least 32 bytes (name length, n_dims, one ne,
    // type, offset).
    if (tensor_count > (size_ - pos_) / 32) {
      return Error(8, absl::StrCat("tensor count ", tensor_count, " cannot fit in the ",
                                   size_ - pos_, " bytes left after the metadata"));
    }
    file_->tensors_.reserve(tensor_count);
    pending_.reserve(tensor_count);
    for (uint64_t i = 0; i < tensor_count; ++i) RETURN_IF_ERROR(ReadTensorInfo());
    return absl::OkStatus();
  }

  absl::Status ReadTensorInfo() {
    uint64_t at = pos_;
    TensorView view;
    ASSIGN_OR_RETURN(view.name, ReadString("tensor name", kMaxNameBytes));
    std::string what = absl::StrCat("info of tensor '", view.name, "'");
    ASSIGN_OR_RETURN(uint32_t n_dims, Read<uint32_t>(what));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Error(at, absl::StrCat("tensor '", view.name, "' has ", n_dims,
                                    " dimensions (1 to 4 allowed)"));
    }
    view.shape.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      ASSIGN_OR_RETURN(uint64_t ne, Read<uint64_t>(what));
      if (ne == 0 || ne > (uint64_t{1} << 40)) {
        return Error(pos_ - 8,
                     absl::StrCat("tensor '", view.name, "' dimension ", d, " has size ", ne));
      }
      view.shape[n_dims - 1 - d] = static_cast<int64_t>(ne);  // outermost first
    }
    PendingTensor pending{at, 0, 0};
    ASSIGN_OR_RETURN(pending.ggml_type, Read<uint32_t>(what));
    ASSIGN_OR_RETURN(pending.data_offset, Read<uint64_t>(what));
    RETURN_IF_ERROR(CheckType(pending, &view));
    view.file_path = file_->path_;
    if (!file_->tensor_index_.emplace(view.name, file_->tensors_.size()).second) {
      return Error(at, absl::StrCat("duplicate tensor name '", view.name, "'"));
    }
    file_->tensors_.push_back(std::move(view));
    pending_.push_back(pending);
    return absl::OkStatus();
  }

  absl::Status CheckType(const PendingTensor& pending, TensorView* view) const {
    const GgmlType* type = FindGgmlType(pending.ggml_type);
    if (type == nullptr) {
      return Error(
          pending.info_offset,
          absl::StrCat("tensor '", view->name, "' has unknown ggml type ", pending.ggml_type));
    }
    if (!type->supported) {
      return absl::UnimplementedError(absl::StrCat(
          file_->path_, ": byte offset ", pending.info_offset, ": tensor '", view->name,
          "' has ggml type ", type->name, "; supported: ", kSupportedTypes));
    }
    view->dtype = type->dtype;
    int64_t block = BlockElements(view->dtype);
    if (view->shape.back() % block != 0) {
      return Error(
          pending.info_offset,
          absl::StrCat("tensor '", view->name, "' has rows of ", view->shape.back(),
                       " elements, not a multiple of the ", type->name, " block size ", block));
    }
    int64_t numel = 1;
    for (int64_t dim : view->shape) {
      if (__builtin_mul_overflow(numel, dim, &numel) || numel > (int64_t{1} << 50)) {
        return Error(pending.info_offset,
                     absl::StrCat("tensor '", view->name, "' has too many elements"));
      }
    }
    view->size_bytes = static_cast<uint64_t>(numel / block * BlockBytes(view->dtype));
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> Alignment() const {
    auto it = file_->metadata_.find("general.alignment");
    if (it == file_->metadata_.end()) return kDefaultAlignment;
    const int64_t* a = std::get_if<int64_t>(&it->second.value);
    if (a == nullptr || *a <= 0 || *a > (1 << 30) || (*a & (*a - 1)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          file_->path_, ": metadata key 'general.alignment' must be a power of two integer"));
    }
    return static_cast<uint32_t>(*a);
  }

  absl::Status PlaceTensors() {
    ASSIGN_OR_RETURN(uint32_t alignment, Alignment());
    uint64_t data_start = (pos_ + alignment - 1) / alignment * alignment;
    if (!pending_.empty() && data_start > size_) {
      return Error(pos_, absl::StrCat("data section at ", data_start,
                                      " starts past the end of the file (", size_, " bytes)"));
    }
    for (size_t i = 0; i < pending_.size(); ++i) {
      TensorView& view = file_->tensors_[i];
      const PendingTensor& p = pending_[i];
      if (p.data_offset % alignment != 0) {
        return Error(p.info_offset,
                     absl::StrCat("tensor '", view.name, "' data offset ", p.data_offset,
                                  " is not a multiple of the ", "alignment ", alignment));
      }
      uint64_t room = size_ - data_start;
      if (p.data_offset > room || view.size_bytes > room - p.data_offset) {
        return Error(
            p.info_offset,
            absl::StrCat("tensor '", view.name, "' data [", data_start + p.data_offset, ", +",
                         view.size_bytes, ") runs past the end of the file (", size_, " bytes)"));
      }
      view.file_offset = data_start + p.data_offset;
      view.data = data_ + view.file_offset;
    }
    return absl::OkStatus();
  }

  GgufFile* file_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::vector<PendingTensor> pending_;
};

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  ASSIGN_OR_RETURN(file->file_, MappedFile::Open(path));
  RETURN_IF_ERROR(GgufParser(file.get()).Parse());
  // The parser copied the header into metadata_ and tensors_: its pages
  // leave the resident set (the loaders read the tensors' pages, then drop
  // them).
  if (file->file_->size() > 0) DropMappedPages(file->file_->data(), file->file_->size());
  return file;
}

GgufFile::~GgufFile() = default;

const GgufValue* GgufFile::FindMetadata(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const TensorView* GgufFile::Find(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<std::string> GgufFile::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const TensorView& t : tensors_) names.push_back(t.name);
  return names;
}

namespace {

// The value of `key` as T, or NotFound / InvalidArgument naming the key.
template <typename T>
absl::StatusOr<const T*> GetAs(const GgufFile& file, const std::string& key, const char* want) {
  const GgufValue* value = file.FindMetadata(key);
  if (value == nullptr) {
    return absl::NotFoundError(absl::StrCat(file.path(), ": metadata key '", key, "' not found"));
  }
  const T* typed = nullptr;
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double> ||
                std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    typed = std::get_if<T>(&value->value);
  } else if (const auto* array = std::get_if<GgufValue::Array>(&value->value)) {
    typed = std::get_if<T>(array);
  }
  if (typed == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": metadata key '", key, "' is ",
                                                   ValueTypeName(*value), ", not ", want));
  }
  return typed;
}

}  // namespace

absl::StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  ASSIGN_OR_RETURN(const std::string* s, GetAs<std::string>(*this, key, "string"));
  return *s;
}

absl::StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  ASSIGN_OR_RETURN(const int64_t* i, GetAs<int64_t>(*this, key, "int"));
  return *i;
}

absl::StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  const GgufValue* value = FindMetadata(key);
  if (value != nullptr) {
    if (const int64_t* i = std::get_if<int64_t>(&value->value)) return static_cast<double>(*i);
  }
  ASSIGN_OR_RETURN(const double* d, GetAs<double>(*this, key, "float"));
  return *d;
}

absl::StatusOr<bool> GgufFile::GetBool(const std::string& key) const {
  ASSIGN_OR_RETURN(const bool* b, GetAs<bool>(*this, key, "bool"));
  return *b;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(const std::string& key) const {
  ASSIGN_OR_RETURN(const auto* v, GetAs<std::vector<std::string>>(*this, key, "array of string"));
  return *v;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(const std::string& key) const {
  ASSIGN_OR_RETURN(const auto* v, GetAs<std::vector<int64_t>>(*this, key, "array of int"));
  return *v;
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(const std::string& key) const {
  const GgufValue* value = FindMetadata(key);
  if (value != nullptr) {
    if (const auto* array = std::get_if<GgufValue::Array>(&value->value)) {
      if (const auto* ints = std::get_if<std::vector<int64_t>>(array)) {
        return std::vector<double>(ints->begin(), ints->end());
      }
    }
  }
  ASSIGN_OR_RETURN(const auto* v, GetAs<std::vector<double>>(*this, key, "array of float"));
  return *v;
}

}  // namespace onecard::engine
