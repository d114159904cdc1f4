// DequantizeInto / DequantizeToF32: a switch on dtype, then a loop over blocks
// (each block copied out of the mapping first, so no alignment is assumed).
// Tested by tests/engine/model/dequantize_test.cc.
#include "engine/model/dequantize.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/model_weights.h"
#include "engine/model/quant_blocks.h"

namespace onecard::engine {
namespace {

template <typename Block>
void DequantizeBlocks(const uint8_t* data, int64_t num_blocks, float* out) {
  Block block;
  for (int64_t i = 0; i < num_blocks; ++i) {
    std::memcpy(&block, data + i * sizeof(Block), sizeof(Block));
    DequantizeBlock(block, out + i * Block::kElements);
  }
}

void Convert16(const uint8_t* data, int64_t n, bool bf16, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, data + 2 * i, 2);
    out[i] = bf16 ? Bf16ToFloat(bits) : HalfToFloat(bits);
  }
}

absl::Status CheckDequantizable(const TensorView& tensor, int64_t numel) {
  if (!IsDequantizable(tensor.dtype)) {
    return absl::UnimplementedError(
        absl::StrCat(tensor.file_path, ": tensor '", tensor.name, "' has dtype ",
                     std::string(DTypeName(tensor.dtype)),
                     "; dequantizable: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K"));
  }
  int64_t block = BlockElements(tensor.dtype);
  int64_t row = tensor.shape.empty() ? 1 : tensor.shape.back();
  if (row % block != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(tensor.file_path, ": tensor '", tensor.name, "' has rows of ", row,
                     " elements, not a multiple of the ", std::string(DTypeName(tensor.dtype)),
                     " block size ", block));
  }
  uint64_t want = static_cast<uint64_t>(numel / block * BlockBytes(tensor.dtype));
  if (tensor.size_bytes != want || (want > 0 && tensor.data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        tensor.file_path, ": tensor '", tensor.name, "' at byte offset ", tensor.file_offset,
        " holds ", tensor.size_bytes, " bytes; ", std::string(DTypeName(tensor.dtype)), " of ",
        numel, " elements needs ", want));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsDequantizable(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void DequantizeElements(DType dtype, const uint8_t* data, int64_t numel, float* out) {
  const int64_t blocks = numel / BlockElements(dtype);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, data, numel * sizeof(float));
      break;
    case DType::kF16:
      Convert16(data, numel, /*bf16=*/false, out);
      break;
    case DType::kBF16:
      Convert16(data, numel, /*bf16=*/true, out);
      break;
    case DType::kQ8_0:
      DequantizeBlocks<BlockQ8_0>(data, blocks, out);
      break;
    case DType::kQ4_0:
      DequantizeBlocks<BlockQ4_0>(data, blocks, out);
      break;
    case DType::kQ4_1:
      DequantizeBlocks<BlockQ4_1>(data, blocks, out);
      break;
    case DType::kQ4_K:
      DequantizeBlocks<BlockQ4_K>(data, blocks, out);
      break;
    case DType::kQ5_K:
      DequantizeBlocks<BlockQ5_K>(data, blocks, out);
      break;
    case DType::kQ6_K:
      DequantizeBlocks<BlockQ6_K>(data, blocks, out);
      break;
    default:
      break;  // not dequantizable: the callers check IsDequantizable
  }
}

absl::Status DequantizeInto(const TensorView& tensor, float* out) {
  const int64_t numel = tensor.NumElements();
  RETURN_IF_ERROR(CheckDequantizable(tensor, numel));
  DequantizeElements(tensor.dtype, tensor.data, numel, out);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> DequantizeToF32(const TensorView& tensor) {
  RETURN_IF_ERROR(CheckDequantizable(tensor, tensor.NumElements()));
  std::vector<float> out(static_cast<size_t>(tensor.NumElements()));
  RETURN_IF_ERROR(DequantizeInto(tensor, out.data()));
  return out;
}

}  // namespace onecard::engine
