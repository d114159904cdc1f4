// Thin wrappers over the PTX instructions the tensor-core and streaming
// kernels use: cp.async (16-byte global -> shared copies, zero-fill when not
// valid; 4-byte ones), ldmatrix (x4, plain and transposed), mma.sync m16n8k16 bf16 with
// fp32 accumulators, a streaming 16-byte global load that skips L1, and the
// approximate 2^x of the special function unit.
// Fragment layouts (PTX ISA, "mma.m16n8k16"): lane = 4 * g + t;
//   A (16x16, row): a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
//   B (16x8, col):  b0 (k 2t..2t+1, n g), b1 (k 2t+8..2t+9, n g)
//   C (16x8 f32):   c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)
// Tested through tests/gpu/paged_attention_test.cc and gemv_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_CUDA_PTX_CUH_
#define ONECARD_ENGINE_KERNELS_CUDA_PTX_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace onecard::engine::cuda {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 2^x by the special function unit alone (ex2.approx.ftz: relative error
// about 2^-22, results below 2^-126 flushed to zero, 2^-inf = 0); exp2f adds
// a range fix-up of four instructions around the same MUFU.EX2.
__device__ __forceinline__ float Exp2Approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Copies 16 bytes global -> shared asynchronously; writes zeros when !valid.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}

// Copies 4 bytes global -> shared asynchronously (through L1).
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(SmemAddr(smem)), "l"(gmem));
}

__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ void LdMatrixX4(uint32_t* r, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(smem)));
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t* r, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(smem)));
}

// c += a * b for one m16n8k16 tile (bf16 inputs, fp32 accumulators).
__device__ __forceinline__ void MmaBf16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += a * b for one m16n8k16 tile (f16 inputs, fp32 accumulators).
__device__ __forceinline__ void MmaF16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16-byte load of data read once (weights): no L1 allocation.
__device__ __forceinline__ uint4 LoadStreaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Asks for p's 128-byte line in this SM's L1 cache (no register, no wait).
__device__ __forceinline__ void PrefetchL1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
}

// A 32-bit load with acquire semantics at GPU scope: what the writer stored
// before its release (a fence, then the atomic this load reads) is visible
// to this thread's later loads.
__device__ __forceinline__ int32_t LoadAcquireGpu(const int32_t* p) {
  int32_t v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// atomicAdd with acquire and release semantics at GPU scope (a release of
// what this thread, and any thread it synchronized with, stored before; an
// acquire of what the writers of the values it follows released).
__device__ __forceinline__ int32_t AtomicAddAcqRelGpu(int32_t* p, int32_t v) {
  int32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n"
               : "=r"(old)
               : "l"(p), "r"(v)
               : "memory");
  return old;
}

// The GPU's global timer (ns; the same clock on every SM), for timelines.
__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

// The SM this thread runs on (%smid), for timelines.
__device__ __forceinline__ uint32_t SmId() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(id));
  return id;
}

// Programmatic dependent launch (sm_90). A kernel launched with LaunchPdl
// (cuda_common.cuh) may start while the previous kernel of the stream still
// runs: it must call GridDependencyWait() before it reads anything that
// kernel writes (weights and other constants may be read before). Both are
// no-ops for a kernel launched without the attribute.
__device__ __forceinline__ void GridDependencyWait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

// Lets the next kernel of the stream launch (it still waits for this one to
// finish in its own GridDependencyWait).
__device__ __forceinline__ void LaunchDependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
}

// A kernel's entry after its constant-data prologue: waits for the previous
// kernel and lets the next one launch, that one first when `early`
// (LaunchSettings::early_dependents). Either order is safe: the next kernel's
// own wait ends only when this one has finished, after this one's wait.
__device__ __forceinline__ void PdlEnter(bool early) {
  if (early) LaunchDependents();
  GridDependencyWait();
  if (!early) LaunchDependents();
}

}  // namespace onecard::engine::cuda

#endif  // ONECARD_ENGINE_KERNELS_CUDA_PTX_CUH_
