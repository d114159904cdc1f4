# ONECARD_CUDA: ON when nvcc is found (auto), or forced with -DONECARD_CUDA=ON/OFF.
# The CUDA code is built for Hopper (sm_90a) by default; override with
# -DONECARD_CUDA_GENCODE="-gencode=..." for other cards.
include(CheckLanguage)
set(ONECARD_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set(ONECARD_CUDA_GENCODE "-gencode=arch=compute_90a,code=sm_90a"
    CACHE STRING "nvcc -gencode flags for the CUDA backend")

set(_onecard_want_cuda OFF)
if(ONECARD_CUDA STREQUAL "AUTO")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(_onecard_want_cuda ON)
  endif()
elseif(ONECARD_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  set(_onecard_want_cuda ON)
endif()

if(_onecard_want_cuda)
  set(CMAKE_CUDA_ARCHITECTURES OFF)
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  separate_arguments(_gencode UNIX_COMMAND "${ONECARD_CUDA_GENCODE}")
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:${_gencode}>"
                      "$<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>")
  find_package(CUDAToolkit REQUIRED)
  set(ONECARD_HAVE_CUDA ON)
  message(STATUS "onecard: CUDA backend ON (${ONECARD_CUDA_GENCODE})")
else()
  set(ONECARD_HAVE_CUDA OFF)
  message(STATUS "onecard: CUDA backend OFF")
endif()
