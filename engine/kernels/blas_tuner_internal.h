// The parts of BlasTuner (blas_tuner.h) shared by its two sources:
// blas_tuner.cc (tuning) and blas_tuner_cache.cc (Serialize / Deserialize).
// Not for other users.
#ifndef ONECARD_ENGINE_KERNELS_BLAS_TUNER_INTERNAL_H_
#define ONECARD_ENGINE_KERNELS_BLAS_TUNER_INTERNAL_H_

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "engine/kernels/blas_tuner.h"
#include "engine/kernels/cublas_lt.h"

namespace onecard::engine {
namespace blas_tuner_internal {

// The configuration attributes of a cuBLASLt algorithm that the search
// changes, in its order, then the two it leaves as the heuristic gave them;
// a saved choice keeps all of them (`name` in Serialize()'s JSON).
// CLUSTER_SHAPE_ID and INNER_SHAPE_ID are uint16_t, the others 32 bits
// (cublasLt.h; SPLITK_NUM is an int32_t, read as a uint32_t).
struct ConfigField {
  cublasLtMatmulAlgoConfigAttributes_t attribute;
  const char* name;
  bool narrow;  // uint16_t
};
inline constexpr ConfigField kConfigFields[] = {
    {CUBLASLT_ALGO_CONFIG_TILE_ID, "tile", false},
    {CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "splitk_num", false},
    {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, "reduction_scheme", false},
    {CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, "cluster_shape", true},
    {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, "custom_option", false},
    {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, "cta_swizzling", false},
    {CUBLASLT_ALGO_CONFIG_STAGES_ID, "stages", false},
    {CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, "inner_shape", true}};
inline constexpr size_t kSearchedFields = 6;  // the first ones of kConfigFields
inline constexpr size_t kAlgoWords = sizeof(cublasLtMatmulAlgo_t::data) / sizeof(uint64_t);

using ConfigGet = decltype(&::cublasLtMatmulAlgoConfigGetAttribute);
using ConfigSet = decltype(&::cublasLtMatmulAlgoConfigSetAttribute);

// One configuration attribute of `algo` (a uint16_t one widened); false when
// cuBLASLt does not report it.
bool GetConfig(ConfigGet get, const cublasLtMatmulAlgo_t& algo, const ConfigField& field,
               uint32_t* value);
// Sets one; false when cuBLASLt refuses the value (or it does not fit).
bool SetConfig(ConfigSet set, cublasLtMatmulAlgo_t* algo, const ConfigField& field, uint32_t value);

}  // namespace blas_tuner_internal

struct BlasTuner::Entry {
  const Lt* lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool use_lt = false;
  bool cached = false;  // loaded by Deserialize, not timed in this process
  bool at_cap = false;  // the finalists were ranked at the power cap (times: at the cap)
  int candidate = -1;   // heuristic index it was searched from, -1: the default
  int candidates = 0;   // heuristic algorithms that ran
  int searched = 0;     // configurations the search timed
  double tune_ms = 0.0;
  double default_us = 0.0;
  double best_us = 0.0;
  ~Entry() {
    if (a != nullptr) lt->layout_destroy(a);
    if (b != nullptr) lt->layout_destroy(b);
    if (c != nullptr) lt->layout_destroy(c);
    if (desc != nullptr) lt->desc_destroy(desc);
  }
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_BLAS_TUNER_INTERNAL_H_
