// Thin wrappers over Hopper's warpgroup MMA (wgmma, sm_90a; PTX ISA
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"), for kernels
// whose four warps (one warpgroup, 128 threads) issue them together:
// - WgmmaM64N16K16 .. WgmmaM64N128K16: d (64 x N, f32) (+)= a (64 x 16, bf16 or
//   f16, in registers) x b (16 x N, shared memory, by descriptor);
//   WgmmaM64N64K16Ss: a K-major in shared memory too. The
//   register layouts are mma.sync m16n8k16's (cuda_ptx.cuh) with warp w of
//   the warpgroup holding rows 16w..16w+15: a as that A fragment; d as N/8
//   C fragments, d[4j..4j+3] for columns 8j..8j+7.
// - SmemDescriptor128B: b in 128-byte swizzled rows (Swizzle<3,4,3>: the
//   16-byte chunk c of the row at byte offset r * 128 of a 1024-byte
//   aligned atom sits at chunk c ^ (r % 8)). K-major b (kTransB = 0: N rows
//   of K contiguous elements, a 16-element step inside the row moves the
//   start by 32 bytes): lbo unused, sbo = the bytes between 8-row groups.
//   N-major b (kTransB = 1: K rows of N contiguous elements, N in panels of
//   64 elements): lbo = the bytes between panels, sbo = the bytes between
//   8-row groups.
// - WgmmaFence before the first wgmma that reads registers written since;
//   WgmmaCommit / WgmmaWait<n> to close and await groups. KeepOperand pins a
//   register at a point of the asm sequence: after a wait, so the compiler
//   reads the result after it, never before; before a fence, so the
//   compiler finishes writing the operand before it (plain arithmetic may
//   otherwise sink past the fence to just before the wgmma, which then
//   reads the register unfenced: stale values).
// - SetMaxRegisters: setmaxnreg, registers moved between warpgroups.
// - FenceProxyAsyncShared: makes the thread's generic-proxy writes to
//   shared memory (stores, cp.async) visible to wgmma's reads.
// Tested through tests/gpu/paged_attention_test.cc (the flash prefill).
#ifndef ONECARD_ENGINE_KERNELS_CUDA_WGMMA_CUH_
#define ONECARD_ENGINE_KERNELS_CUDA_WGMMA_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace onecard::engine::cuda {

__device__ __forceinline__ uint64_t SmemDescriptor128B(uint32_t smem_addr, uint32_t lbo,
                                                       uint32_t sbo) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16) |
         (static_cast<uint64_t>((sbo & 0x3FFFF) >> 4) << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void KeepOperand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void KeepOperand(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
// Every register of a fragment array, in order.
template <int N>
__device__ __forceinline__ void KeepOperands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) KeepOperand(r[i]);
}
template <int N, int M>
__device__ __forceinline__ void KeepOperands(uint32_t (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int j = 0; j < M; ++j) KeepOperand(r[i][j]);
  }
}

// setmaxnreg: the executing warpgroup's registers a thread raised (kInc)
// or lowered to kRegs (24..256, a multiple of 8), for kernels whose
// warpgroups need unequal shares (a producer's few, the consumers' many);
// every warp of the warpgroup executes it.
template <bool kInc, int kRegs>
__device__ __forceinline__ void SetMaxRegisters() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg's range");
  if constexpr (kInc) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
  } else {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
  }
}

__device__ __forceinline__ void FenceProxyAsyncShared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#define ONECARD_WGMMA_M64N16K16_RS(TYPE)                                                    \
  asm volatile(                                                                             \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"                                          \
      "wgmma.mma_async.sync.aligned.m64n16k16.f32." TYPE "." TYPE                           \
      " {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, %14;\n}\n"      \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
        "+f"(d[7])                                                                          \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate ? 1 : 0),   \
        "n"(kTransB))

#define ONECARD_WGMMA_M64N32K16_RS(TYPE)                                                        \
  asm volatile(                                                                                 \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"                                              \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE                               \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15},"                \
      " {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"                                          \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),     \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
        "+f"(d[14]), "+f"(d[15])                                                                \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate ? 1 : 0),       \
        "n"(kTransB))

#define ONECARD_WGMMA_M64N64K16_RS(TYPE)                                                           \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE                                  \
      " {"                                                                                         \
      "%0, %1, %2, %3, %4, %5, %6, %7, "                                                           \
      "%8, %9, %10, %11, %12, %13, %14, %15, "                                                     \
      "%16, %17, %18, %19, %20, %21, %22, %23, "                                                   \
      "%24, %25, %26, %27, %28, %29, %30, %31"                                                     \
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"                                           \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                         \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate ? 1 : 0),          \
        "n"(kTransB))

#define ONECARD_WGMMA_M64N128K16_RS(TYPE)                                                          \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE                                 \
      " {"                                                                                         \
      "%0, %1, %2, %3, %4, %5, %6, %7, "                                                           \
      "%8, %9, %10, %11, %12, %13, %14, %15, "                                                     \
      "%16, %17, %18, %19, %20, %21, %22, %23, "                                                   \
      "%24, %25, %26, %27, %28, %29, %30, %31, "                                                   \
      "%32, %33, %34, %35, %36, %37, %38, %39, "                                                   \
      "%40, %41, %42, %43, %44, %45, %46, %47, "                                                   \
      "%48, %49, %50, %51, %52, %53, %54, %55, "                                                   \
      "%56, %57, %58, %59, %60, %61, %62, %63"                                                     \
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"                                           \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
        "+f"(d[63])                                                                                \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate ? 1 : 0),          \
        "n"(kTransB))

#define ONECARD_WGMMA_M64N64K16_SS(TYPE)                                                           \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE                                  \
      " {"                                                                                         \
      "%0, %1, %2, %3, %4, %5, %6, %7, "                                                           \
      "%8, %9, %10, %11, %12, %13, %14, %15, "                                                     \
      "%16, %17, %18, %19, %20, %21, %22, %23, "                                                   \
      "%24, %25, %26, %27, %28, %29, %30, %31"                                                     \
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"                                                           \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                         \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate ? 1 : 0))

// d (+)= a x b: 64 x 16 and 64 x 32.
template <bool kF16, int kTransB>
__device__ __forceinline__ void WgmmaM64N16K16(float (&d)[8], const uint32_t (&a)[4],
                                               uint64_t desc_b, bool accumulate) {
  if constexpr (kF16) {
    ONECARD_WGMMA_M64N16K16_RS("f16");
  } else {
    ONECARD_WGMMA_M64N16K16_RS("bf16");
  }
}

template <bool kF16, int kTransB>
__device__ __forceinline__ void WgmmaM64N32K16(float (&d)[16], const uint32_t (&a)[4],
                                               uint64_t desc_b, bool accumulate) {
  if constexpr (kF16) {
    ONECARD_WGMMA_M64N32K16_RS("f16");
  } else {
    ONECARD_WGMMA_M64N32K16_RS("bf16");
  }
}

// d (+)= a x b: 64 x 64 (accumulate false: d = a x b).
template <bool kF16, int kTransB>
__device__ __forceinline__ void WgmmaM64N64K16(float (&d)[32], const uint32_t (&a)[4],
                                               uint64_t desc_b, bool accumulate) {
  if constexpr (kF16) {
    ONECARD_WGMMA_M64N64K16_RS("f16");
  } else {
    ONECARD_WGMMA_M64N64K16_RS("bf16");
  }
}

// d (+)= a x b: 64 x 128.
template <bool kF16, int kTransB>
__device__ __forceinline__ void WgmmaM64N128K16(float (&d)[64], const uint32_t (&a)[4],
                                                uint64_t desc_b, bool accumulate) {
  if constexpr (kF16) {
    ONECARD_WGMMA_M64N128K16_RS("f16");
  } else {
    ONECARD_WGMMA_M64N128K16_RS("bf16");
  }
}

// d (+)= a x b: 64 x 64, a (64 x 16) K-major in shared memory too.
template <bool kF16>
__device__ __forceinline__ void WgmmaM64N64K16Ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                 bool accumulate) {
  if constexpr (kF16) {
    ONECARD_WGMMA_M64N64K16_SS("f16");
  } else {
    ONECARD_WGMMA_M64N64K16_SS("bf16");
  }
}

#undef ONECARD_WGMMA_M64N64K16_SS
#undef ONECARD_WGMMA_M64N64K16_RS
#undef ONECARD_WGMMA_M64N128K16_RS
#undef ONECARD_WGMMA_M64N32K16_RS
#undef ONECARD_WGMMA_M64N16K16_RS

}  // namespace onecard::engine::cuda

#endif  // ONECARD_ENGINE_KERNELS_CUDA_WGMMA_CUH_
