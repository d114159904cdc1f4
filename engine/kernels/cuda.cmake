# onecard_kernels_cuda: the CUDA versions of the kernels (x.cu beside x.h and
# x_ref.cc), built for ONECARD_CUDA_GENCODE (sm_90a by default), plus the
# references of the CUDA-side ops that have no CPU user (gemv, kv_amax
# and sample), in onecard_kernels_cuda_ref.
# Included by engine/kernels/CMakeLists.txt (or engine/runtime/cuda) when
# ONECARD_HAVE_CUDA; guarded so a second include is harmless.
# CMake 3.25 does not know nvcc's C++20 flag (CUDA_STANDARD 20 fails at
# generate time); tell it, for the targets of the including directory.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()

if(NOT TARGET onecard_kernels_cuda)
  set(_k ${CMAKE_CURRENT_LIST_DIR})
  add_library(onecard_kernels_cuda_ref
    ${_k}/gemv_ref.cc
    ${_k}/kv_amax_ref.cc
    ${_k}/sample_ref.cc)
  target_include_directories(onecard_kernels_cuda_ref PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(onecard_kernels_cuda_ref PUBLIC onecard_kernels_ref)

  add_library(onecard_kernels_cuda
    ${_k}/blas_tuner.cc
    ${_k}/blas_tuner_cache.cc
    ${_k}/cublas_loader.cc
    ${_k}/cublas_lt.cc
    ${_k}/embedding.cu
    ${_k}/fp8_dequant.cu
    ${_k}/fp8_gemm.cu
    ${_k}/fp8_matmul.cc
    ${_k}/gather_columns.cu
    ${_k}/gemv.cu
    ${_k}/gemv_fp8.cu
    ${_k}/int4_dequant.cu
    ${_k}/int4_gemm.cu
    ${_k}/int4_gemm_gemv.cu
    ${_k}/int4_gemm_tiled.cu
    ${_k}/int4_gemm_wgmma.cu
    ${_k}/kv_amax.cu
    ${_k}/kv_block_copy.cu
    ${_k}/kv_cache_write.cu
    ${_k}/linear.cu
    ${_k}/paged_attention.cu
    ${_k}/paged_attention_decode.cu
    ${_k}/paged_attention_flash.cu
    ${_k}/paged_attention_flash_sm90.cu
    ${_k}/rms_norm.cu
    ${_k}/rope.cu
    ${_k}/rope_kv_write.cu
    ${_k}/sample.cu
    ${_k}/silu_mul.cu)
  target_include_directories(onecard_kernels_cuda PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(onecard_kernels_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo -Xptxas=-warn-spills>)
  # Kernels with Hopper-only instructions (wgmma) are dispatched to only when
  # every card the build targets has them.
  if(ONECARD_CUDA_GENCODE MATCHES "sm_90a" AND NOT ONECARD_CUDA_GENCODE MATCHES "sm_[0-8]")
    target_compile_definitions(onecard_kernels_cuda PRIVATE ONECARD_CUDA_SM90A=1)
  endif()
  target_link_libraries(onecard_kernels_cuda
    PUBLIC onecard_kernels_ref onecard_common absl::status absl::statusor absl::strings
           CUDA::cudart_static ${CMAKE_DL_LIBS}
    PRIVATE nlohmann_json::nlohmann_json)
  # cuBLAS is opened on first use, not linked (cublas_loader.h says why); its
  # headers are still needed.
  target_include_directories(onecard_kernels_cuda PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
  set_property(SOURCE ${_k}/cublas_loader.cc APPEND PROPERTY COMPILE_DEFINITIONS
    ONECARD_CUDA_LIBRARY_DIR="${CUDAToolkit_LIBRARY_DIR}")
endif()
