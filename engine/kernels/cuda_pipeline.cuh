// Hopper's asynchronous copy pipeline, as thin wrappers: shared-memory
// mbarriers (init, arrive, arrive with an expected byte count, parity wait)
// and the bulk copy engine's 1-D global -> shared copies and 2-D tensor
// copies (TMA, also multicast to a cluster) that complete on an mbarrier
// (cp.async.bulk; sm_90). A producer announces the bytes of a stage
// (ArriveExpectTx), issues its BulkCopy calls (and CpAsync16 pieces, each
// lane then CpAsyncArriveNoinc), and consumers wait on the stage's barrier
// parity; consumers release a stage with Arrive (MbarrierArriveCluster for
// a barrier of another block of the cluster) on a second barrier that the
// producer waits on before refilling it.
// Shared memory written with ordinary stores that the copy engine writes
// next needs FenceProxyAsync() in the writing thread first.
// Thread block clusters (sm_90): a block's rank in its cluster, the cluster
// barrier (every thread of every block of the cluster arrives; a thread that
// waits returns once all have), and a 16-byte store into another block's
// shared memory (distributed shared memory: the same offset in block `rank`)
// that completes on that block's mbarrier.
// Tested through tests/gpu/int4_gemm_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_CUDA_PIPELINE_CUH_
#define ONECARD_ENGINE_KERNELS_CUDA_PIPELINE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/cuda_ptx.cuh"

namespace onecard::engine::cuda {

__device__ __forceinline__ void MbarrierInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(count));
}

// Makes the barriers' initialization visible to the copy engine (then a
// __syncthreads makes it visible to the block).
__device__ __forceinline__ void FenceMbarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void MbarrierArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SmemAddr(bar)) : "memory");
}

// One arrival, and `bytes` more for the copies to bring before the phase ends.
__device__ __forceinline__ void MbarrierArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}

// `bytes` more for the current phase, without an arrival.
__device__ __forceinline__ void MbarrierExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}

// Waits until the phase of parity `parity` has completed (a fresh barrier
// counts its phase before the first as completed with parity 1).
__device__ __forceinline__ void MbarrierWait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(SmemAddr(bar)),
      "r"(parity)
      : "memory");
}

// Whether the phase of `parity` has completed (MbarrierWait would return at
// once), without waiting.
__device__ __forceinline__ bool MbarrierTestWait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(SmemAddr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from
// global to shared memory with the copy engine, completing on `bar`.
__device__ __forceinline__ void BulkCopy(void* smem, const void* gmem, uint32_t bytes,
                                         uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(SmemAddr(smem)),
      "l"(gmem), "r"(bytes), "r"(SmemAddr(bar))
      : "memory");
}

// Copies the box at element coordinates (c0 inner, c1 outer) of the 2-D
// tensor that `tensor_map` (a CUtensorMap in kernel parameter, constant or
// global memory) describes into shared memory with the copy engine (TMA),
// in the map's swizzle, completing on `bar`; the box's elements outside the
// tensor arrive as zeros and count toward the box's bytes all the same.
__device__ __forceinline__ void TensorCopy2d(void* smem, const void* tensor_map, int32_t c0,
                                             int32_t c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(SmemAddr(smem)),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(SmemAddr(bar))
      : "memory");
}

// TensorCopy2d into the same offset of the shared memory of every block of
// the cluster whose rank has its bit in cta_mask, completing on each one's
// mbarrier at `bar`'s offset.
__device__ __forceinline__ void TensorCopy2dMulticast(void* smem, const void* tensor_map,
                                                      int32_t c0, int32_t c1, uint64_t* bar,
                                                      uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(SmemAddr(smem)),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(SmemAddr(bar)), "h"(cta_mask)
      : "memory");
}

// Copies 16 bytes (both addresses 16-byte aligned) from global to shared
// memory asynchronously (cp.async, through L2 only). For many small pieces:
// the bulk copy engine takes ~100 cycles a copy whatever its size.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SmemAddr(smem)), "l"(gmem)
               : "memory");
}

// Waits until every cp.async this thread issued has landed.
__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// One arrival on `bar` once every cp.async this thread issued before has
// landed; the barrier's count must include it (.noinc).
__device__ __forceinline__ void CpAsyncArriveNoinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(SmemAddr(bar))
               : "memory");
}

// Synchronizes `threads` threads (a multiple of 32) of the block on named
// barrier `id` (1..15; 0 is __syncthreads').
__device__ __forceinline__ void NamedBarrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Arrival on the cluster barrier without ordering (the whole warp executes
// it); after FenceMbarrierInit it makes the block's barriers known to the
// cluster's other blocks once they wait.
__device__ __forceinline__ void ClusterArriveRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}

// Arrival on the cluster barrier, releasing what the thread did before (its
// stores and remote arrivals) to the threads that wait.
__device__ __forceinline__ void ClusterArriveRelease() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}

// One arrival on the mbarrier at `bar`'s offset in the shared memory of the
// cluster's block `rank` (this block's own too), with the default semantics
// (release, CTA scope): enough where what it orders is the thread's reads
// of a stage (complete before it) against the copy that refills the stage.
__device__ __forceinline__ void MbarrierArriveCluster(const uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(SmemAddr(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

// Waits until every thread of the cluster has arrived (acquire semantics).
__device__ __forceinline__ void ClusterWaitAcquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Stores v at `local`'s offset in the shared memory of the cluster's block
// `rank`, completing 16 bytes of transactions on that block's mbarrier at
// `bar`'s offset (st.async: the receiver waits on its barrier, the sender
// does not wait).
__device__ __forceinline__ void StoreAsyncCluster(const void* local, const uint64_t* bar,
                                                  uint32_t rank, float4 v) {
  uint32_t remote, remote_bar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(SmemAddr(local)), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote_bar)
               : "r"(SmemAddr(bar)), "r"(rank));
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(remote),
      "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(__float_as_uint(v.z)),
      "r"(__float_as_uint(v.w)), "r"(remote_bar)
      : "memory");
}

}  // namespace onecard::engine::cuda

#endif  // ONECARD_ENGINE_KERNELS_CUDA_PIPELINE_CUH_
