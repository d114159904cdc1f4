// Element types of weights and activations, shared by loaders, kernels and
// backends. Quantized block layouts live in engine/model/quant_blocks.h.
#ifndef ONECARD_ENGINE_COMMON_DTYPE_H_
#define ONECARD_ENGINE_COMMON_DTYPE_H_

#include <cstdint>
#include <string_view>

namespace onecard::engine {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,  // GGUF block of 32: fp16 scale + 32 int8
  kQ4_0,  // GGUF block of 32: fp16 scale + 16 bytes of nibbles
  kQ4_1,  // GGUF block of 32: fp16 scale, fp16 min + 16 bytes of nibbles
  kQ4_K,  // GGUF super-block of 256
  kQ5_K,  // GGUF super-block of 256
  kQ6_K,  // GGUF super-block of 256
  kI32,
  kI64,
  kU8,
  kF8E4M3,  // FP8 E4M3 ("fn": no infinities), engine/common/fp8.h
};

std::string_view DTypeName(DType dtype);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_COMMON_DTYPE_H_
