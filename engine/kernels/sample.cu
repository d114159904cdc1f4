// Sample on CUDA (see sample.h): one block of 1024 threads a row.
// Penalties count the history with atomics in a per-row counter array and
// apply once per distinct token (atomicExch hands each token to one thread
// and zeroes the counter again). Top-k and top-p thresholds are found without
// sorting, by bisection over the bit patterns of non-negative floats (which
// order like integers): about 31 block-wide counts / sums each. Masses are
// summed in double (as SampleRef does), so the GPU and the reference agree
// on the drawn token unless the draw falls within ~1e-12 of a boundary.
// Greedy rows without penalties take the argmax straight from the logits (one
// read of the row, 16-byte loads). Tested by tests/gpu/sample_test.cc against
// SampleRef.
#include <cfloat>
#include <cstdint>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/sample.h"

namespace onecard::engine {
namespace {

constexpr int kThreads = 1024;

struct RowView {
  float* ws;        // [vocab] scratch: logits, then probabilities
  int32_t* counts;  // [vocab] zero on entry and exit
  int32_t vocab;
};

__device__ float BlockMax(float v, float* scratch) {
  v = cuda::WarpMax(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = (threadIdx.x & 31) < (blockDim.x >> 5) ? scratch[threadIdx.x & 31] : -FLT_MAX;
  return cuda::WarpMax(v);
}

// The first index of the largest value (NaN counts as -inf).
__device__ int32_t BlockArgmax(const float* ws, int32_t vocab, float* fs, int32_t* is) {
  float best = -INFINITY;
  int32_t idx = INT32_MAX;
  auto consider = [&](float v, int32_t i) {
    if (v > best || (idx == INT32_MAX && !isnan(v))) {
      best = v;
      idx = i;
    }
  };
  // 16-byte loads where the row is aligned (each thread still sees its
  // indices in increasing order, so its first maximum wins), then the tail.
  int32_t head = 0;
  if (reinterpret_cast<uintptr_t>(ws) % 16 == 0) {
    const int32_t n4 = vocab / 4;
    const float4* w4 = reinterpret_cast<const float4*>(ws);
#pragma unroll 2
    for (int32_t i = threadIdx.x; i < n4; i += kThreads) {
      const float4 q = w4[i];
      consider(q.x, 4 * i);
      consider(q.y, 4 * i + 1);
      consider(q.z, 4 * i + 2);
      consider(q.w, 4 * i + 3);
    }
    head = 4 * n4;
  }
  for (int32_t i = head + threadIdx.x; i < vocab; i += kThreads) consider(ws[i], i);
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ob > best || (ob == best && oi < idx)) {
      best = ob;
      idx = oi;
    }
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) {
    fs[threadIdx.x >> 5] = best;
    is[threadIdx.x >> 5] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      if (fs[w] > best || (fs[w] == best && is[w] < idx)) {
        best = fs[w];
        idx = is[w];
      }
    }
    is[0] = idx == INT32_MAX ? 0 : idx;
  }
  __syncthreads();
  return is[0];
}

__device__ void ApplyPenalties(const SampleParams& a, int r, const SampleRowParams& sp,
                               const RowView& v) {
  const int32_t h0 = a.cu_history[r];
  const int32_t h1 = a.cu_history[r + 1];
  for (int32_t j = h0 + threadIdx.x; j < h1; j += kThreads) {
    const int32_t t = a.history[j];
    if (t >= 0 && t < v.vocab) atomicAdd(&v.counts[t], 1);
  }
  __syncthreads();
  for (int32_t j = h0 + threadIdx.x; j < h1; j += kThreads) {
    const int32_t t = a.history[j];
    if (t < 0 || t >= v.vocab) continue;
    const int32_t c = atomicExch(&v.counts[t], 0);
    if (c == 0) continue;  // another thread owns this token
    float l = v.ws[t];
    l = l > 0.0f ? l / sp.repetition_penalty : l * sp.repetition_penalty;
    v.ws[t] = l - (sp.frequency_penalty * static_cast<float>(c) + sp.presence_penalty);
  }
  __syncthreads();
}

__device__ double WarpSumD(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block in double; every thread gets it. scratch: 32 doubles.
__device__ double BlockSumD(double v, double* scratch) {
  v = WarpSumD(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = (threadIdx.x & 31) < (blockDim.x >> 5) ? scratch[threadIdx.x & 31] : 0.0;
  return WarpSumD(v);
}

// Sum over the row of (p >= thr ? (mass ? p : 1) : 0), in double (sums over
// 1e5 terms in float would move draws by whole tokens).
__device__ double KeptSum(const RowView& v, float thr, bool mass, double* scratch) {
  double s = 0.0;
  for (int32_t i = threadIdx.x; i < v.vocab; i += kThreads) {
    const float p = v.ws[i];
    if (p >= thr) s += mass ? static_cast<double>(p) : 1.0;
  }
  return BlockSumD(s, scratch);
}

// The largest t in [lo, 1] with KeptSum(max(t, floor)) >= need (KeptSum at lo
// must reach need).
__device__ float Bisect(const RowView& v, float lo_value, float floor, bool mass, double need,
                        double* scratch) {
  int32_t lo = __float_as_int(lo_value);
  int32_t hi = __float_as_int(1.0f);
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    const float t = fmaxf(__int_as_float(mid), floor);
    if (KeptSum(v, t, mass, scratch) >= need) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return __int_as_float(lo);
}

// Step 7 of sample.h: the kept index where the running mass passes target
// (sums in double, in vocabulary order: chunk sums, a block prefix sum, then
// one thread walks the chunk that holds the target).
__device__ int32_t Draw(const RowView& v, float thr, double target, double* ds, int32_t* is) {
  const int32_t chunk = (v.vocab + kThreads - 1) / kThreads;
  const int32_t begin = min(v.vocab, static_cast<int32_t>(threadIdx.x) * chunk);
  const int32_t end = min(v.vocab, begin + chunk);
  double local = 0.0;
  int32_t last = -1;
  for (int32_t i = begin; i < end; ++i) {
    const float p = v.ws[i];
    if (p >= thr) {
      local += p;
      last = i;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double incl = local;
  for (int o = 1; o < 32; o <<= 1) {
    const double n = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += n;
  }
  __syncthreads();
  if (lane == 31) ds[warp] = incl;
  if (threadIdx.x == 0) is[0] = INT32_MAX;
  __syncthreads();
  double warp_base = 0.0;
  for (int w = 0; w < warp; ++w) warp_base += ds[w];
  const double prefix = warp_base + incl - local;
  int32_t last_any = last;
  for (int o = 16; o > 0; o >>= 1)
    last_any = max(last_any, __shfl_xor_sync(0xffffffffu, last_any, o));
  if (last >= 0 && prefix <= target && target < prefix + local) {
    double cum = prefix;
    int32_t pick = last;
    for (int32_t i = begin; i < end; ++i) {
      const float p = v.ws[i];
      if (p < thr) continue;
      cum += p;
      if (cum > target) {
        pick = i;
        break;
      }
    }
    atomicMin(&is[0], pick);
  }
  __syncthreads();
  if (is[0] == INT32_MAX) atomicMax(&is[1], last_any);  // rounding left no chunk: last kept
  __syncthreads();
  return is[0] == INT32_MAX ? is[1] : is[0];
}

__global__ void __launch_bounds__(kThreads)
    SampleKernel(SampleParams a, float* ws_all, int32_t* counts_all) {
  __shared__ float fs[32];
  __shared__ double ds[32];
  __shared__ int32_t is[32];
  cuda::GridDependencyWait();
  cuda::LaunchDependents();
  const int r = blockIdx.x;
  const SampleRowParams sp = a.rows[r];
  const RowView v{ws_all + static_cast<int64_t>(r) * a.vocab_size,
                  counts_all + static_cast<int64_t>(r) * a.vocab_size, a.vocab_size};
  const float* logits = a.logits + static_cast<int64_t>(r) * a.vocab_size;
  const bool penalized = a.cu_history != nullptr && a.cu_history[r + 1] > a.cu_history[r] &&
                         (sp.repetition_penalty != 1.0f || sp.presence_penalty != 0.0f ||
                          sp.frequency_penalty != 0.0f);
  if (sp.temperature <= 0.0f && !penalized) {  // greedy: one pass over the logits
    const int32_t t = BlockArgmax(logits, v.vocab, fs, is);
    if (threadIdx.x == 0) a.out_tokens[r] = t;
    return;
  }
  for (int32_t i = threadIdx.x; i < v.vocab; i += kThreads) v.ws[i] = logits[i];
  if (threadIdx.x == 0) is[1] = 0;
  __syncthreads();
  if (a.cu_history != nullptr) ApplyPenalties(a, r, sp, v);
  if (sp.temperature <= 0.0f) {
    const int32_t t = BlockArgmax(v.ws, v.vocab, fs, is);
    if (threadIdx.x == 0) a.out_tokens[r] = t;
    return;
  }
  float mx = -FLT_MAX;
  for (int32_t i = threadIdx.x; i < v.vocab; i += kThreads) {
    const float l = v.ws[i] / sp.temperature;
    v.ws[i] = l;
    mx = fmaxf(mx, l);
  }
  mx = BlockMax(mx, fs);
  for (int32_t i = threadIdx.x; i < v.vocab; i += kThreads) v.ws[i] = expf(v.ws[i] - mx);
  __syncthreads();
  float thr = 0.0f;
  if (sp.top_k > 0 && sp.top_k < v.vocab) {
    thr = Bisect(v, 0.0f, 0.0f, false, static_cast<double>(sp.top_k), ds);
  }
  if (sp.top_p < 1.0f) {
    const double mass = KeptSum(v, thr, true, ds);
    thr = Bisect(v, thr, thr, true, static_cast<double>(sp.top_p) * mass, ds);
  }
  if (sp.min_p > 0.0f) thr = fmaxf(thr, sp.min_p);
  const double mass = KeptSum(v, thr, true, ds);
  const int32_t t = Draw(v, thr, static_cast<double>(sp.uniform) * mass, ds, is);
  if (threadIdx.x == 0) a.out_tokens[r] = t;
}

}  // namespace

absl::Status Sample(const SampleParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        cuda::Cat("Sample: bad sizes num_rows=", p.num_rows, " vocab_size=", p.vocab_size));
  }
  if (p.num_rows == 0) return absl::OkStatus();
  if (p.workspace == nullptr || p.logits == nullptr || p.rows == nullptr ||
      p.out_tokens == nullptr || (p.cu_history != nullptr && p.history == nullptr)) {
    return absl::InvalidArgumentError("Sample: a required pointer is null");
  }
  float* ws = static_cast<float*>(p.workspace);
  int32_t* counts =
      reinterpret_cast<int32_t*>(ws + static_cast<int64_t>(p.num_rows) * p.vocab_size);
  CUDA_RETURN_IF_ERROR(
      cuda::LaunchPdl(SampleKernel, dim3(p.num_rows), dim3(kThreads), 0, stream, p, ws, counts));
  return absl::OkStatus();
}

}  // namespace onecard::engine
