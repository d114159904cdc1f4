// The lazily loaded cuBLAS (see cublas_loader.h): a table of the real entry
// points, filled once by dlopen/dlsym, and the exported functions of the same
// names that forward to it.
#include "engine/kernels/cublas_loader.h"

#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace onecard::engine::cuda {
namespace {

struct CublasTable {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  decltype(&::cublasGetStream_v2) get_stream = nullptr;
  decltype(&::cublasSetWorkspace_v2) set_workspace = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                            int, int, int, const void*, const void*, cudaDataType,
                                            int, long long, const void*, cudaDataType, int,
                                            long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t,
                                            cublasGemmAlgo_t) = nullptr;
  decltype(&::cublasGetStatusName) status_name = nullptr;
  decltype(&::cublasGetStatusString) status_string = nullptr;
};

struct LoadState {
  std::once_flag once;
  absl::Status status;
  CublasTable table;
};

LoadState& State() {
  static LoadState* state = new LoadState;
  return *state;
}

template <typename Fn>
absl::Status Resolve(void* library, const char* symbol, Fn* out) {
  dlerror();
  void* address = dlsym(library, symbol);
  if (address == nullptr) {
    const char* error = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("cuBLAS: no symbol ", symbol, ": ", error != nullptr ? error : "null"));
  }
  *out = reinterpret_cast<Fn>(address);
  return absl::OkStatus();
}

// dlopen of `name`, then of the toolkit's copy of it: the handle, or an
// error naming the library.
absl::StatusOr<void*> OpenLibrary(const std::string& name) {
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string error;
  if (library == nullptr) {
    const char* first = dlerror();
    error = first != nullptr ? first : "unknown";
#if defined(ONECARD_CUDA_LIBRARY_DIR)
    // Not on the loader's path: try the toolkit this was built against.
    if (name.find('/') == std::string::npos) {
      library =
          dlopen(absl::StrCat(ONECARD_CUDA_LIBRARY_DIR, "/", name).c_str(), RTLD_NOW | RTLD_LOCAL);
    }
#endif
  }
  if (library == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("cannot load ", name, ": ", error,
                                                      "; install the CUDA ", CUBLAS_VER_MAJOR,
                                                      " cuBLAS libraries or add their folder to "
                                                      "LD_LIBRARY_PATH"));
  }
  return library;
}

std::string LibraryName(const char* stem) { return absl::StrCat(stem, ".so.", CUBLAS_VER_MAJOR); }

absl::Status Open(CublasTable* table) {
  absl::StatusOr<void*> opened = OpenLibrary(CublasLibraryName());
  if (!opened.ok()) return opened.status();
  void* library = *opened;
  // The library stays open for the life of the process.
  for (absl::Status s :
       {Resolve(library, "cublasCreate_v2", &table->create),
        Resolve(library, "cublasDestroy_v2", &table->destroy),
        Resolve(library, "cublasSetStream_v2", &table->set_stream),
        Resolve(library, "cublasGetStream_v2", &table->get_stream),
        Resolve(library, "cublasSetWorkspace_v2", &table->set_workspace),
        Resolve(library, "cublasGemmEx", &table->gemm_ex),
        Resolve(library, "cublasGemmStridedBatchedEx", &table->gemm_strided_batched_ex),
        Resolve(library, "cublasGetStatusName", &table->status_name),
        Resolve(library, "cublasGetStatusString", &table->status_string)}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The table once loaded, or null (the forwarding functions then answer
// CUBLAS_STATUS_NOT_INITIALIZED, and LoadCublas() says why).
const CublasTable* Table() {
  LoadState& state = State();
  std::call_once(state.once, [&state] { state.status = Open(&state.table); });
  return state.status.ok() ? &state.table : nullptr;
}

}  // namespace

absl::Status LoadCublas() {
  Table();
  return State().status;
}

bool CublasLoaded() { return Table() != nullptr; }

std::string CublasLibraryName() { return LibraryName("libcublas"); }

absl::StatusOr<void*> CublasLtSymbol(const char* name) {
  static const absl::StatusOr<void*>* library =
      new absl::StatusOr<void*>(OpenLibrary(LibraryName("libcublasLt")));
  if (!library->ok()) return library->status();
  void* address = nullptr;
  RETURN_IF_ERROR(Resolve(**library, name, &address));
  return address;
}

}  // namespace onecard::engine::cuda

using onecard::engine::cuda::Table;

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  const auto* t = Table();
  return t != nullptr ? t->create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  const auto* t = Table();
  return t != nullptr ? t->destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  const auto* t = Table();
  return t != nullptr ? t->set_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
  const auto* t = Table();
  return t != nullptr ? t->get_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                                  size_t bytes) {
  const auto* t = Table();
  return t != nullptr ? t->set_workspace(handle, workspace, bytes) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const void* alpha, const void* a, cudaDataType a_type,
                                         int lda, const void* b, cudaDataType b_type, int ldb,
                                         const void* beta, void* c, cudaDataType c_type, int ldc,
                                         cublasComputeType_t compute_type, cublasGemmAlgo_t algo) {
  const auto* t = Table();
  if (t == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  return t->gemm_ex(handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c,
                    c_type, ldc, compute_type, algo);
}

cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* a, cudaDataType a_type, int lda, long long stride_a,
    const void* b, cudaDataType b_type, int ldb, long long stride_b, const void* beta, void* c,
    cudaDataType c_type, int ldc, long long stride_c, int batch_count,
    cublasComputeType_t compute_type, cublasGemmAlgo_t algo) {
  const auto* t = Table();
  if (t == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  return t->gemm_strided_batched_ex(handle, transa, transb, m, n, k, alpha, a, a_type, lda,
                                    stride_a, b, b_type, ldb, stride_b, beta, c, c_type, ldc,
                                    stride_c, batch_count, compute_type, algo);
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  const auto* t = Table();
  return t != nullptr ? t->status_name(status) : "CUBLAS_STATUS_NOT_INITIALIZED";
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  const auto* t = Table();
  return t != nullptr ? t->status_string(status) : "cuBLAS could not be loaded";
}

}  // extern "C"
