// cuBLAS, loaded when first used rather than when the process starts.
//
// Why: libcublasLt reserves about 94 KiB of static thread-local storage. A
// library loaded at startup puts its TLS into every thread's stack, and
// prometheus-cpp's HTTP server (civetweb) starts its threads with a 100 KiB
// stack, so in a process that links cuBLAS normally the /metrics server cannot
// start ("Cannot create first worker thread"). A library opened later with
// dlopen gets dynamic TLS instead, allocated on first use per thread.
//
// So onecard_kernels_cuda does not link libcublas. cublas_loader.cc defines
// the few cuBLAS entry points onecard calls (cublasCreate_v2, cublasGemmEx,
// cublasGemmStridedBatchedEx, ...); the first call opens libcublas.so.<major> (then the toolkit's
// library directory), resolves the real functions and each forwards to its own. HTTP servers
// started before or after that both work.
//
// Tested by tests/engine/kernels/cublas_loader_test.cc (runs without a GPU).
#ifndef ONECARD_ENGINE_KERNELS_CUBLAS_LOADER_H_
#define ONECARD_ENGINE_KERNELS_CUBLAS_LOADER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace onecard::engine::cuda {

// Opens cuBLAS now (thread-safe, once) and resolves every entry point onecard
// uses. FailedPrecondition naming the library and dlerror() when it cannot.
absl::Status LoadCublas();

// Whether LoadCublas has succeeded in this process.
bool CublasLoaded();

// The file name opened: "libcublas.so.<CUBLAS_VER_MAJOR>", found by the
// dynamic loader's search (LD_LIBRARY_PATH, the system's libraries), else in
// the toolkit this was built against.
std::string CublasLibraryName();

// The address of a cuBLASLt function (CublasLt, cublas_lt.h, resolves cuBLASLt through
// these), opening "libcublasLt.so.<major>" the same way, once.
// FailedPrecondition naming the library or the symbol when it cannot.
absl::StatusOr<void*> CublasLtSymbol(const char* name);

}  // namespace onecard::engine::cuda

#endif  // ONECARD_ENGINE_KERNELS_CUBLAS_LOADER_H_
