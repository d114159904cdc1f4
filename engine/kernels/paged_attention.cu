// PagedAttention on CUDA (see paged_attention.h and paged_attention_split.h):
// the dispatch, the general kernel and the split combine. The tensor-core
// kernels are in paged_attention_flash.cu (prefill) and
// paged_attention_decode.cu (decode).
//
// General kernel (head_dims without a tensor-core kernel, and kGeneral):
// block (kv_head, token, split), 4 warps. K/V tiles of 64 keys stream into
// shared memory with cp.async (two buffers); each warp takes 16 keys of a
// tile, a few at a time: the lanes split head_dim, the scores of all the
// group's query heads come from warp sums, and an online softmax (base 2,
// fp32) updates per-warp running max / sum / output, merged at the end.
//
// Tested by tests/gpu/paged_attention_test.cc against PagedAttentionRef.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/common/fp8.h"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/launch_settings.h"
#include "engine/kernels/paged_attention.h"
#include "engine/kernels/paged_attention_internal.cuh"
#include "engine/kernels/paged_attention_split.h"

namespace onecard::engine {
namespace attention {
namespace {

// Loads keys [k_begin, k_begin + n) (n <= kTileKeys) of one kv head into
// ks/vs ([kTileKeys][D], unpadded): BF16 values (E = bf16) or FP8 codes
// (E = uint8_t, from a.k_codes / a.v_codes).
template <int D, typename E>
__device__ __forceinline__ void LoadTileGeneral(const AttnArgs& a, const int32_t* table, int kvh,
                                                int k_begin, int n, E* ks, E* vs) {
  constexpr int kPerChunk = 16 / static_cast<int>(sizeof(E));
  constexpr int kChunks = D / kPerChunk;
  const E* k_pool;
  const E* v_pool;
  if constexpr (sizeof(E) == 1) {
    k_pool = a.k_codes;
    v_pool = a.v_codes;
  } else {
    k_pool = a.k_cache;
    v_pool = a.v_cache;
  }
  for (int i = threadIdx.x; i < kTileKeys * kChunks; i += kThreads) {
    const int j = i / kChunks;
    const int c = i - j * kChunks;
    if (j < n) {
      const int64_t off = KvOffset(a, table, k_begin + j, kvh, D) + c * kPerChunk;
      cuda::CpAsync16(ks + j * D + c * kPerChunk, k_pool + off, true);
      cuda::CpAsync16(vs + j * D + c * kPerChunk, v_pool + off, true);
    }
  }
}

template <int D, int G>
struct WarpState {
  static constexpr int kDpl = (D + 31) / 32;  // dims per lane
  float q[G][kDpl];
  float m[G];
  float l[G];
  float acc[G][kDpl];
};

// Loads the lane's kDpl dims of one smem row (vector loads when aligned).
template <int D, int kDpl>
__device__ __forceinline__ void LoadDims(const bf16* row, int lane, bool ok, float* out) {
  if constexpr (D % 32 == 0 && kDpl == 4) {
    const uint2 v = ok ? *reinterpret_cast<const uint2*>(row + lane * 4) : make_uint2(0, 0);
    out[0] = __uint_as_float(v.x << 16);
    out[1] = __uint_as_float(v.x & 0xffff0000u);
    out[2] = __uint_as_float(v.y << 16);
    out[3] = __uint_as_float(v.y & 0xffff0000u);
  } else if constexpr (D % 32 == 0 && kDpl == 2) {
    const uint32_t v = ok ? *reinterpret_cast<const uint32_t*>(row + lane * 2) : 0u;
    out[0] = __uint_as_float(v << 16);
    out[1] = __uint_as_float(v & 0xffff0000u);
  } else {
#pragma unroll
    for (int j = 0; j < kDpl; ++j) {
      const int d = lane * kDpl + j;
      out[j] = (ok && d < D) ? cuda::ToFloat(row[d]) : 0.0f;
    }
  }
}

// FP8: the lane's kDpl dims of a row of codes, widened.
template <int D, int kDpl>
__device__ __forceinline__ void LoadDims(const uint8_t* row, int lane, bool ok, float* out) {
#pragma unroll
  for (int j = 0; j < kDpl; ++j) {
    const int d = lane * kDpl + j;
    out[j] = (ok && d < D) ? E4m3ToFloat(row[d]) : 0.0f;
  }
}

// Keys j0 .. j0 + cnt - 1 (cnt <= kKeys) of the tile in shared memory, for
// one warp: scores of the group's heads, then the online-softmax update.
template <int D, int G, int kKeys, typename E>
__device__ __forceinline__ void ProcessKeys(WarpState<D, G>& st, const E* ks, const E* vs, int j0,
                                            int cnt, int lane) {
  constexpr int kDpl = WarpState<D, G>::kDpl;
  float sc[kKeys][G];
  float vv[kKeys][kDpl];
#pragma unroll
  for (int jj = 0; jj < kKeys; ++jj) {
    float kv[kDpl];
    LoadDims<D, kDpl>(ks + (j0 + jj) * D, lane, jj < cnt, kv);
    LoadDims<D, kDpl>(vs + (j0 + jj) * D, lane, jj < cnt, vv[jj]);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < kDpl; ++j) part += st.q[g][j] * kv[j];
      sc[jj][g] = jj < cnt ? cuda::WarpSum(part) : -INFINITY;
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float mx = st.m[g];
#pragma unroll
    for (int jj = 0; jj < kKeys; ++jj) mx = fmaxf(mx, sc[jj][g]);
    const float alpha = exp2f(st.m[g] - mx);  // 0 while m is -inf; mx is finite
    st.m[g] = mx;
    st.l[g] *= alpha;
#pragma unroll
    for (int j = 0; j < kDpl; ++j) st.acc[g][j] *= alpha;
#pragma unroll
    for (int jj = 0; jj < kKeys; ++jj) {
      const float p = exp2f(sc[jj][g] - mx);  // 0 for -inf (absent keys)
      st.l[g] += p;
#pragma unroll
      for (int j = 0; j < kDpl; ++j) st.acc[g][j] += p * vv[jj][j];
    }
  }
}

// Stores the warps' states in shared memory and merges them.
template <int D, int G>
__device__ void FinishGeneral(const AttnArgs& a, const WarpState<D, G>& st, float* red, int t,
                              int kvh, int split, float out_scale) {
  constexpr int kDpl = WarpState<D, G>::kDpl;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  float* red_m = red + kWarps * G * D;
  float* red_l = red_m + kWarps * G;
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < kDpl; ++j) {
      const int d = lane * kDpl + j;
      if (d < D) red[(warp * G + g) * D + d] = st.acc[g][j];
    }
    if (lane == 0) {
      red_m[warp * G + g] = st.m[g];
      red_l[warp * G + g] = st.l[g];
    }
  }
  __syncthreads();
  MergeWarpsAndStore<D>(a, red, red_m, red_l, G, t, kvh, split, out_scale);
}

// E: bf16 for a BF16 cache, uint8_t for FP8 codes.
template <int D, int G, typename E>
__global__ void __launch_bounds__(kThreads) AttnGeneralKernel(AttnArgs a) {
  constexpr int kDpl = WarpState<D, G>::kDpl;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  E* ks = reinterpret_cast<E*>(smem_raw);  // [2][kTileKeys][D]
  E* vs = ks + 2 * kTileKeys * D;          // [2][kTileKeys][D]
  const int kvh = blockIdx.x;
  const int t = blockIdx.y;
  const int split = blockIdx.z;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  cuda::PdlEnter(a.early_dependents);
  const int s = FindSeq(a.cu_query_lens, a.num_seqs, t);
  const int len = a.start_pos[s] + (t - a.cu_query_lens[s]) + 1;  // keys 0 .. pos
  const int per_split = (len + a.num_splits - 1) / a.num_splits;
  const int k_lo = split * per_split;
  const int k_hi = min(len, k_lo + per_split);
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;

  WarpState<D, G> st;
  const float q_scale = a.scale_log2 * KScale(a, kvh);
#pragma unroll
  for (int g = 0; g < G; ++g) {
    st.m[g] = -INFINITY;
    st.l[g] = 0.0f;
    const bf16* qh = a.q + t * a.q_stride + static_cast<int64_t>(kvh * a.group + g) * D;
#pragma unroll
    for (int j = 0; j < kDpl; ++j) {
      const int d = lane * kDpl + j;
      st.q[g][j] = (g < a.group && d < D) ? cuda::ToFloat(qh[d]) * q_scale : 0.0f;
      st.acc[g][j] = 0.0f;
    }
  }
  const int num_tiles = k_hi > k_lo ? (k_hi - k_lo + kTileKeys - 1) / kTileKeys : 0;
  if (num_tiles > 0) LoadTileGeneral<D>(a, table, kvh, k_lo, min(kTileKeys, k_hi - k_lo), ks, vs);
  cuda::CpAsyncCommit();
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int buf = tile & 1;
    const int begin = k_lo + tile * kTileKeys;
    if (tile + 1 < num_tiles) {
      const int next = begin + kTileKeys;
      LoadTileGeneral<D>(a, table, kvh, next, min(kTileKeys, k_hi - next),
                         ks + (buf ^ 1) * kTileKeys * D, vs + (buf ^ 1) * kTileKeys * D);
    }
    cuda::CpAsyncCommit();
    cuda::CpAsyncWait<1>();
    __syncthreads();
    const int n = min(kTileKeys, k_hi - begin);
    constexpr int kKeys = G <= 8 ? 8 : 4;  // keeps G x kKeys scores in registers
#pragma unroll
    for (int grp = 0; grp < 16 / kKeys; ++grp) {
      const int j0 = warp * 16 + grp * kKeys;
      if (j0 < n) {
        ProcessKeys<D, G, kKeys, E>(st, ks + buf * kTileKeys * D, vs + buf * kTileKeys * D, j0,
                                    min(kKeys, n - j0), lane);
      }
    }
    __syncthreads();  // the buffer is refilled next iteration
  }
  cuda::CpAsyncWait<0>();
  __syncthreads();
  FinishGeneral<D, G>(a, st, reinterpret_cast<float*>(smem_raw), t, kvh, split, VScale(a, kvh));
}

// Merges a query's split partials: warp 0 turns the (max, sum) pairs into
// weights (all splits read at once), then every thread sums its dims over the
// non-empty splits (a prefix: empty ones wrote no output) with independent
// loads.
__global__ void __launch_bounds__(128)
    AttnCombineKernel(const float* __restrict__ o_part, const float2* __restrict__ ml_part,
                      bf16* __restrict__ out, int num_heads, int num_splits, int head_dim,
                      bool early) {
  __shared__ float weight[kMaxSplits];
  __shared__ float inv_den;
  __shared__ int used;  // the non-empty splits: a prefix (splits cover the keys in order)
  cuda::PdlEnter(early);
  const int t = blockIdx.x;
  const int h = blockIdx.y;
  const int64_t base = (static_cast<int64_t>(t) * num_heads + h) * num_splits;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float2 ml[2];
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int i = lane + 32 * k;
      ml[k] = i < num_splits ? ml_part[base + i] : make_float2(-INFINITY, 0.0f);
      if (ml[k].y > 0.0f) mx = fmaxf(mx, ml[k].x);
    }
    mx = cuda::WarpMax(mx);
    float den = 0.0f;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int i = lane + 32 * k;
      const float w = ml[k].y > 0.0f ? ml[k].y * exp2f(ml[k].x - mx) : 0.0f;
      if (i < num_splits) weight[i] = w;
      den += w;
    }
    den = cuda::WarpSum(den);
    const int nonempty = __popc(__ballot_sync(0xffffffffu, ml[0].y > 0.0f)) +
                         __popc(__ballot_sync(0xffffffffu, ml[1].y > 0.0f));
    if (lane == 0) {
      inv_den = 1.0f / den;
      used = nonempty;
    }
  }
  __syncthreads();
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float num = 0.0f;
#pragma unroll 8
    for (int i = 0; i < used; ++i) num += weight[i] * o_part[(base + i) * head_dim + d];
    out[(static_cast<int64_t>(t) * num_heads + h) * head_dim + d] =
        __float2bfloat16_rn(num * inv_den);
  }
}

template <int D, int G, typename E>
absl::Status LaunchGeneralGE(const AttnArgs& a, int num_tokens, cudaStream_t stream) {
  const int tiles = 2 * 2 * kTileKeys * D * static_cast<int>(sizeof(E));
  const int reduce = (kWarps * G * D + 2 * kWarps * G) * static_cast<int>(sizeof(float));
  return LaunchAttention<AttnGeneralKernel<D, G, E>>(
      std::max(tiles, reduce), dim3(a.num_kv_heads, num_tokens, a.num_splits), stream, a);
}

template <int D, int G>
absl::Status LaunchGeneralG(const AttnArgs& a, int num_tokens, cudaStream_t stream) {
  if constexpr (D % 16 == 0) {
    if (a.k_codes != nullptr) return LaunchGeneralGE<D, G, uint8_t>(a, num_tokens, stream);
  }
  return LaunchGeneralGE<D, G, bf16>(a, num_tokens, stream);
}

template <int D>
absl::Status LaunchGeneral(const AttnArgs& a, int num_tokens, cudaStream_t stream) {
  if (a.group <= 4) return LaunchGeneralG<D, 4>(a, num_tokens, stream);
  if (a.group <= 8) return LaunchGeneralG<D, 8>(a, num_tokens, stream);
  return LaunchGeneralG<D, 16>(a, num_tokens, stream);
}

absl::Status LaunchGeneralForDim(const AttnArgs& a, int head_dim, int num_tokens,
                                 cudaStream_t stream) {
  switch (head_dim) {
    case 16:
      return LaunchGeneral<16>(a, num_tokens, stream);
    case 24:
      return LaunchGeneral<24>(a, num_tokens, stream);
    case 32:
      return LaunchGeneral<32>(a, num_tokens, stream);
    case 64:
      return LaunchGeneral<64>(a, num_tokens, stream);
    case 96:
      return LaunchGeneral<96>(a, num_tokens, stream);
    default:
      return LaunchGeneral<128>(a, num_tokens, stream);
  }
}

absl::Status Validate(const PagedAttentionParams& p, const PagedAttentionSplitOptions& o) {
  constexpr char kOp[] = "PagedAttention";
  if (p.dtype != DType::kBF16) return cuda::Unsupported(kOp, p.dtype, "BF16");
  const int d = p.layout.head_dim;
  if (!PagedAttentionSupportsHeadDim(d)) {
    return absl::UnimplementedError(
        cuda::Cat(kOp, ": head_dim ", d, " is not supported; supported: 16, 24, 32, 64, 96, 128"));
  }
  if (p.layout.num_kv_heads <= 0 || p.num_heads % p.layout.num_kv_heads != 0 ||
      p.num_heads / p.layout.num_kv_heads > kMaxGroup) {
    return absl::UnimplementedError(cuda::Cat(kOp, ": num_heads ", p.num_heads,
                                              " over num_kv_heads ", p.layout.num_kv_heads,
                                              " must be a group of at most ", kMaxGroup));
  }
  if (p.num_tokens < 0 || p.num_seqs <= 0 || p.layout.block_size <= 0 || o.num_splits < 1 ||
      o.num_splits > kMaxSplits || p.q_token_stride < static_cast<int64_t>(p.num_heads) * d) {
    return absl::InvalidArgumentError(cuda::Cat(
        kOp, ": bad sizes num_tokens=", p.num_tokens, " num_seqs=", p.num_seqs, " block_size=",
        p.layout.block_size, " num_splits=", o.num_splits, " q_token_stride=", p.q_token_stride));
  }
  // The kernels' offsets within a KV block are 32-bit.
  if (int64_t{p.layout.block_size} * p.layout.num_kv_heads * d * 2 >
      std::numeric_limits<int32_t>::max()) {
    return absl::UnimplementedError(cuda::Cat(
        kOp, ": layout.block_size ", p.layout.block_size, " x num_kv_heads ", p.layout.num_kv_heads,
        " x head_dim ", d, " makes KV blocks over 2 GiB; supported: less"));
  }
  if (o.num_splits > 1 && o.workspace_bytes < PagedAttentionWorkspaceBytes(
                                                  p.num_tokens, p.num_heads, d, o.num_splits)) {
    return absl::InvalidArgumentError(cuda::Cat(kOp, ": workspace of ", o.workspace_bytes,
                                                " bytes is too small for ", o.num_splits,
                                                " splits"));
  }
  if ((p.kv_fp8.k == nullptr) != (p.kv_fp8.v == nullptr)) {
    return absl::InvalidArgumentError(
        cuda::Cat(kOp, ": kv_fp8.k and kv_fp8.v must both be set or null"));
  }
  if (p.kv_fp8.enabled() && d % 16 != 0) {
    return absl::UnimplementedError(cuda::Cat(
        kOp, ": an FP8 KV cache needs head_dim a multiple of 16 (16-byte rows), not ", d));
  }
  if ((o.kernel == AttentionKernel::kFlash || o.kernel == AttentionKernel::kFlashMma) && d != 64 &&
      d != 128) {
    return absl::UnimplementedError(
        cuda::Cat(kOp, ": the flash kernel takes head_dim 64 or 128, not ", d));
  }
  if (o.rope != nullptr) {
    const RopeKvWriteParams& r = *o.rope;
    const int64_t row = static_cast<int64_t>(p.num_heads + 2 * p.layout.num_kv_heads) * d;
    const char* bad = r.qkv != p.q                                     ? "rope.qkv (must be q)"
                      : r.dtype != p.dtype                             ? "rope.dtype (must be q's)"
                      : r.num_heads != p.num_heads                     ? "rope.num_heads"
                      : r.num_tokens != p.num_tokens                   ? "rope.num_tokens"
                      : r.layout.num_kv_heads != p.layout.num_kv_heads ? "rope.layout.num_kv_heads"
                      : r.layout.head_dim != d                         ? "rope.layout.head_dim"
                      : r.k_cache != p.k_cache     ? "rope.k_cache (must be k_cache)"
                      : r.v_cache != p.v_cache     ? "rope.v_cache (must be v_cache)"
                      : r.fp8.k != p.kv_fp8.k      ? "rope.fp8.k (must be kv_fp8.k)"
                      : r.fp8.v != p.kv_fp8.v      ? "rope.fp8.v (must be kv_fp8.v)"
                      : p.q_token_stride != row    ? "q_token_stride (must be a packed qkv row)"
                      : p.num_tokens != p.num_seqs ? "num_tokens (one a chunk with rope)"
                      : r.positions == nullptr     ? "rope.positions"
                      : r.slot_mapping == nullptr  ? "rope.slot_mapping"
                      : r.inv_freq == nullptr      ? "rope.inv_freq"
                                                   : nullptr;
    if (bad != nullptr) {
      return absl::InvalidArgumentError(cuda::Cat(kOp, ": bad fused RoPE: ", bad));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Run(const PagedAttentionParams& p, const PagedAttentionSplitOptions& o,
                 cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(p, o));
  if (p.num_tokens == 0) return absl::OkStatus();
  const int d = p.layout.head_dim;
  AttnArgs a{};
  a.early_dependents = GetLaunchSettings().early_dependents;
  a.q = static_cast<const bf16*>(p.q);
  a.q_stride = p.q_token_stride;
  a.k_cache = static_cast<const bf16*>(p.k_cache);
  a.v_cache = static_cast<const bf16*>(p.v_cache);
  a.out = static_cast<bf16*>(p.out);
  a.block_size = p.layout.block_size;
  a.block_shift = (p.layout.block_size & (p.layout.block_size - 1)) == 0
                      ? __builtin_ctz(static_cast<unsigned>(p.layout.block_size))
                      : -1;
  a.num_kv_heads = p.layout.num_kv_heads;
  a.num_heads = p.num_heads;
  a.group = p.num_heads / p.layout.num_kv_heads;
  a.num_seqs = p.num_seqs;
  a.cu_query_lens = p.cu_query_lens;
  a.start_pos = p.start_pos;
  a.block_tables = p.block_tables;
  a.max_blocks_per_seq = p.max_blocks_per_seq;
  a.scale_log2 = p.scale * kLog2e;
  if (p.kv_fp8.enabled()) {
    a.k_codes = static_cast<const uint8_t*>(p.k_cache);
    a.v_codes = static_cast<const uint8_t*>(p.v_cache);
    a.k_scale = p.kv_fp8.k;
    a.v_scale = p.kv_fp8.v;
    a.k_cache = nullptr;
    a.v_cache = nullptr;
  }
  const bool tensor_cores = (d == 64 || d == 128) && o.kernel != AttentionKernel::kGeneral;
  const bool decode = p.num_tokens == p.num_seqs;
  if (tensor_cores && !decode) {
    a.num_splits = 1;
#if ONECARD_CUDA_SM90A
    if (o.kernel != AttentionKernel::kFlashMma) {
      return LaunchFlashPrefillSm90(a, d, p.num_tokens, stream);
    }
#endif
    return LaunchFlashPrefill(a, d, p.num_tokens, stream);
  }
  a.num_splits = o.num_splits;
  const int64_t parts = static_cast<int64_t>(p.num_tokens) * p.num_heads * o.num_splits;
  a.o_part = static_cast<float*>(o.workspace);
  a.ml_part = reinterpret_cast<float2*>(static_cast<char*>(o.workspace) +
                                        parts * d * static_cast<int64_t>(sizeof(float)));
  // The step's RoPE and cache write: inside the flash decode kernel, or first.
  const bool fuse_rope = o.rope != nullptr && tensor_cores;
  if (o.rope != nullptr && !fuse_rope) RETURN_IF_ERROR(RopeKvWrite(*o.rope, stream));
  if (fuse_rope) {
    a.qkv_bias = static_cast<const bf16*>(o.rope->bias);
    a.inv_freq = o.rope->inv_freq;
    a.positions = o.rope->positions;
    a.slot_mapping = o.rope->slot_mapping;
    a.k_write = o.rope->k_cache;
    a.v_write = o.rope->v_cache;
  }
  if (tensor_cores) {
    a.prefetch = o.prefetch;
    RETURN_IF_ERROR(LaunchFlashDecode(a, d, p.num_tokens, fuse_rope, stream));
  } else {
    RETURN_IF_ERROR(LaunchGeneralForDim(a, d, p.num_tokens, stream));
  }
  if (o.num_splits > 1) {
    CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(AttnCombineKernel, dim3(p.num_tokens, p.num_heads),
                                         dim3(128), 0, stream, a.o_part, a.ml_part, a.out,
                                         p.num_heads, o.num_splits, d, a.early_dependents));
  }
  return absl::OkStatus();
}

}  // namespace attention

absl::Status PagedAttentionSplit(const PagedAttentionParams& params,
                                 const PagedAttentionSplitOptions& options, cudaStream_t stream) {
  return attention::Run(params, options, stream);
}

absl::Status PagedAttention(const PagedAttentionParams& params, cudaStream_t stream) {
  return attention::Run(params, PagedAttentionSplitOptions{}, stream);
}

}  // namespace onecard::engine
