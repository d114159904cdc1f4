// The CPU's layers of an offloaded model in the CUDA runner's steps (see
// cpu_span.h): MeasureCpuRates and CudaRunnerImpl's span methods.
// Tested by tests/gpu/cuda_model_runner_offload_test.cc.
#include "engine/runtime/cuda/cpu_span.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/kv_cache_write.h"
#include "engine/runtime/cpu/host_linear.h"
#include "engine/runtime/cuda/cuda_runner_impl.h"
#include "engine/runtime/cuda/runner_kernels.h"

namespace onecard::engine {
namespace {

void NoOp(void*) {}

// Seconds a call of fn takes: the mean of the calls made over 0.2 s, after
// one untimed (a single call of a few milliseconds varies by half on a
// shared host).
template <typename Fn>
double MeanCall(Fn fn) {
  fn();
  int64_t calls = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double s = 0;
  while (s < 0.2) {
    fn();
    ++calls;
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return s / static_cast<double>(calls);
}

}  // namespace

absl::Status MeasureCpuRates(ThreadPool& pool, int64_t hidden, cudaStream_t stream,
                             OffloadRates* rates) {
  // A 4-bit weight of 256 MiB of codes (symmetric, groups of 128): fp16
  // scales of 1 and codes of a fixed pattern (the rate does not depend on
  // the values).
  // In memory like the offloaded weights' (PinnedBuffer::CreateLarge).
  constexpr int64_t kN = 32768, kK = 16384, kGroup = 128;
  constexpr int64_t kCodeBytes = kN * kK / 2, kScaleCount = kN * (kK / kGroup);
  ASSIGN_OR_RETURN(std::unique_ptr<PinnedBuffer> weight,
                   PinnedBuffer::CreateLarge(kCodeBytes + 2 * kScaleCount));
  std::memset(weight->data(), 0x5a, kCodeBytes);
  auto* scales = reinterpret_cast<uint16_t*>(weight->data() + kCodeBytes);
  std::fill(scales, scales + kScaleCount, uint16_t{0x3c00});
  HostWeight w;
  w.format = HostWeight::Format::kInt4;
  w.n = kN;
  w.k = kK;
  w.data = weight->data();
  w.scales = scales;
  w.group = kGroup;
  w.offset_kind = Int4Offsets::kSymmetric;
  std::vector<float> x(int64_t{kCpuMaxRows} * kK, 0.5f), y(int64_t{kCpuMaxRows} * kN);
  HostLinearScratch scratch;
  const double one = MeanCall([&] { HostLinearForward(pool, w, x.data(), 1, y.data(), &scratch); });
  const double two = MeanCall([&] { HostLinearForward(pool, w, x.data(), 2, y.data(), &scratch); });
  const double most =
      MeanCall([&] { HostLinearForward(pool, w, x.data(), kCpuMaxRows, y.data(), &scratch); });
  const int64_t weight_bytes = kCodeBytes + 2 * kScaleCount;
  rates->host_read_bytes_per_s = static_cast<double>(weight_bytes) / one;
  rates->host_rows2_bytes_per_s = static_cast<double>(weight_bytes) / two;
  rates->host_flops_per_s = 2.0 * kN * kK * kCpuMaxRows / most;

  // Both at once: kCopies pinned uploads of kCopy bytes queued on `stream` while
  // the kernel runs over and over until they are done.
  constexpr int64_t kCopy = 256LL << 20, kCopies = 24;
  void* device = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  absl::Cleanup freed = [&] {
    if (device != nullptr) cudaFree(device);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  };
  CUDA_RETURN_IF_ERROR(cudaMalloc(&device, kCopy));
  ASSIGN_OR_RETURN(std::unique_ptr<PinnedBuffer> pinned, PinnedBuffer::Create(kCopy));
  char* host = pinned->data();
  std::memset(host, 0, kCopy);
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
  for (int64_t i = 0; i < kCopies; ++i) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device, host, kCopy, cudaMemcpyHostToDevice, stream));
  }
  CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
  int64_t passes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (cudaEventQuery(stop) == cudaErrorNotReady) {
    HostLinearForward(pool, w, x.data(), 1, y.data(), &scratch);
    ++passes;
  }
  const double cpu_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
  float copy_ms = 0;
  CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&copy_ms, start, stop));
  rates->h2d_shared_bytes_per_s = static_cast<double>(kCopy * kCopies) / (copy_ms * 1e-3);
  rates->host_read_shared_bytes_per_s = static_cast<double>(passes * weight_bytes) / cpu_s;

  const int64_t bytes = int64_t{kCpuMaxRows} * hidden * 2;
  absl::Status status;
  const auto call = [&](cudaError_t e, const char* what) {
    status.Update(CudaCallStatus(e, what, __FILE__, __LINE__));
  };
  rates->span_s = MeanCall([&] {
    if (!status.ok()) return;
    call(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream), "span down");
    call(cudaLaunchHostFunc(stream, NoOp, nullptr), "span host node");
    call(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream), "span up");
    call(cudaStreamSynchronize(stream), "span sync");
  });
  return status;
}

bool CudaRunnerImpl::CpuCanCompute() const {
  if (options_.offload_cpu_threads < 0 || options_.kv_cache_dtype == KvCacheDtype::kFp8E4m3) {
    return false;
  }
  for (const auto& layer : spec_.layers) {
    for (const ProjectionSpec& p : layer) {
      if (p.format == WeightFormat::kFp8) return false;
      if (p.format == WeightFormat::kInt4 && !HostLinearTakesGroup(p.group)) return false;
    }
  }
  return config_.hidden_size % 8 == 0 && (config_.num_kv_heads * config_.head_dim) % 8 == 0;
}

int CudaRunnerImpl::CpuThreads() const {
  // By default every hardware thread but one (the runner's thread, which
  // sleeps on a blocking-sync event through a CPU step; 16 threads on the
  // 16-core H200 host were slower than 15, and 12 slower still: the kernel
  // is bound by each core's arithmetic as much as by memory).
  return options_.offload_cpu_threads > 0
             ? options_.offload_cpu_threads
             : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);
}

HostWeight CudaRunnerImpl::HostCopy(const CudaWeight& w, int64_t layer) const {
  const auto host = [&](const void* p) {
    return p == nullptr ? nullptr : weight_stream_->HostAddress(layer, p);
  };
  HostWeight h;
  h.n = w.n;
  h.k = w.k;
  h.data = host(w.data);
  if (w.spec.format == WeightFormat::kInt4) {
    h.format = HostWeight::Format::kInt4;
    h.scales = host(w.scales);
    h.offsets = host(w.offsets);
    h.group = w.spec.group;
    h.offset_kind = w.spec.offsets;
    h.columns = static_cast<const int32_t*>(host(w.columns));
  }
  return h;
}

absl::Status CudaRunnerImpl::PrepareCpuLayers() {
  if (!placement_.has_value() || placement_->cpu_layers == 0) return absl::OkStatus();
  std::vector<OffloadedLayerWeights> layers;
  int64_t first = -1;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const bool cpu = placement_->layers[l] == LayerPlace::kCpu;
    if (cpu) {
      const CudaLayerWeights& w = weights_.layers[l];
      OffloadedLayerWeights o;
      o.layer = l;
      o.qkv = HostCopy(w[Projection::kQkv], l);
      o.o = HostCopy(w[Projection::kO], l);
      o.gate_up = HostCopy(w[Projection::kGateUp], l);
      o.down = HostCopy(w[Projection::kDown], l);
      o.gate_up_interleaved = w[Projection::kGateUp].spec.format == WeightFormat::kInt4;
      o.attn_norm = static_cast<const uint16_t*>(weight_stream_->HostAddress(l, w.attn_norm));
      o.ffn_norm = static_cast<const uint16_t*>(weight_stream_->HostAddress(l, w.ffn_norm));
      o.bqkv = w.bqkv == nullptr
                   ? nullptr
                   : static_cast<const uint16_t*>(weight_stream_->HostAddress(l, w.bqkv));
      cpu_index_[l] = static_cast<int64_t>(layers.size());
      layers.push_back(o);
      if (first < 0) first = l;
    }
    if (first >= 0 && (!cpu || l + 1 == config_.num_layers)) {
      cpu_spans_.push_back(std::make_unique<CpuSpan>(CpuSpan{this, first, cpu ? l : l - 1}));
      first = -1;
    }
  }
  ASSIGN_OR_RETURN(cpu_layers_, OffloadedLayers::Create(config_, kv_layout_, std::move(layers),
                                                        CpuThreads(), kCpuMaxRows));
  const int64_t kv_row = cpu_layers_->kv_row();
  const int64_t n = placement_->cpu_layers;
  CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&cpu_step_done_, cudaEventBlockingSync | cudaEventDisableTiming));
  ASSIGN_OR_RETURN(cpu_io_,
                   PinnedBuffer::Create(2 * kCpuMaxRows * (config_.hidden_size + n * kv_row)));
  ASSIGN_OR_RETURN(kv_mirror_, PinnedBuffer::Create(2 * n * plan_.max_batched_tokens * kv_row));
  return absl::OkStatus();
}

OffloadedStep CudaRunnerImpl::HostStep(const StepShape& shape) const {
  const char* base = meta_host_->data();
  const auto at = [base](int64_t offset) {
    return reinterpret_cast<const int32_t*>(base + offset);
  };
  const StepLayout& l = shape.layout;
  return {.num_tokens = shape.tokens,
          .num_seqs = shape.seqs,
          .positions = at(l.positions),
          .slots = at(l.slots),
          .cu_query_lens = at(l.cu_query_lens),
          .start_pos = at(l.start_pos),
          .block_tables = at(l.block_tables),
          .max_blocks_per_seq = l.max_blocks_per_seq};
}

uint16_t* CudaRunnerImpl::CpuKvRows(int64_t first) const {
  auto* rows = reinterpret_cast<uint16_t*>(cpu_io_->data()) + kCpuMaxRows * config_.hidden_size;
  // A span's layers write consecutive [tokens, kv_row] blocks from its first
  // layer's place (kCpuMaxRows rows a layer).
  return rows + cpu_index_.at(first) * kCpuMaxRows * cpu_layers_->kv_row();
}

void CudaRunnerImpl::RunCpuSpan(void* data) {
  const CpuSpan& span = *static_cast<const CpuSpan*>(data);
  CudaRunnerImpl& r = *span.runner;
  if (!r.cpu_status_.ok()) return;
  const auto t0 = std::chrono::steady_clock::now();
  const OffloadedStep step = r.HostStep(r.cpu_shape_);
  r.cpu_status_ =
      r.cpu_layers_->Run(span.first, span.last, step,
                         reinterpret_cast<uint16_t*>(r.cpu_io_->data()), r.CpuKvRows(span.first));
  r.cpu_us_ +=
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

absl::Status CudaRunnerImpl::EnqueueCpuSpan(CpuSpan& span, const StepShape& shape,
                                            int32_t* partials) {
  cudaStream_t stream = ctx_->stream();
  const int32_t t = shape.tokens;
  const int64_t residual_bytes = int64_t{t} * config_.hidden_size * 2;
  if (*partials > 1) RETURN_IF_ERROR(NormResidual(weights_.final_norm, t, *partials));
  *partials = 1;
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(cpu_io_->data(), buf_.residual, residual_bytes,
                                       cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR(cudaLaunchHostFunc(stream, &CudaRunnerImpl::RunCpuSpan, &span));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buf_.residual, cpu_io_->data(), residual_bytes,
                                       cudaMemcpyHostToDevice, stream));
  const int64_t kv_row = cpu_layers_->kv_row();
  const int64_t kv_dim = kv_row / 2;
  const uint16_t* rows = CpuKvRows(span.first);
  for (int64_t l = span.first; l <= span.last; ++l) {
    const uint16_t* layer_rows = rows + (l - span.first) * t * kv_row;
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buf_.qkv, layer_rows, int64_t{t} * kv_row * 2,
                                         cudaMemcpyHostToDevice, stream));
    const auto* qkv = static_cast<const uint16_t*>(buf_.qkv);
    RETURN_IF_ERROR(KvCacheWrite(
        {.dtype = DType::kBF16,
         .k = qkv,
         .v = qkv + kv_dim,
         .k_token_stride = kv_row,
         .v_token_stride = kv_row,
         .k_cache = k_cache_[l],
         .v_cache = v_cache_[l],
         .layout = kv_layout_,
         .slot_mapping = reinterpret_cast<const int32_t*>(buf_.meta + shape.layout.slots),
         .num_tokens = t},
        stream));
  }
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::EnqueueKvMirror(int64_t layer, const StepShape& shape) {
  cudaStream_t stream = ctx_->stream();
  const int32_t t = shape.tokens;
  const int64_t kv_row = cpu_layers_->kv_row();
  RETURN_IF_ERROR(GatherKvRowsBf16(k_cache_[layer], v_cache_[layer],
                                   reinterpret_cast<const int32_t*>(buf_.meta + shape.layout.slots),
                                   buf_.qkv, t, kv_row / 2, stream));
  auto* dst = reinterpret_cast<uint16_t*>(kv_mirror_->data()) + cpu_index_.at(layer) * t * kv_row;
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, buf_.qkv, int64_t{t} * kv_row * 2, cudaMemcpyDeviceToHost, stream));
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::FinishCpuStep(const StepShape& shape) {
  if (cpu_layers_ == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(cpu_status_);
  if (CpuComputes(shape)) return absl::OkStatus();
  // The card ran the CPU's layers: their K/V rows into the CPU's pools.
  const OffloadedStep step = HostStep(shape);
  const int64_t kv_row = cpu_layers_->kv_row();
  for (const auto& [layer, index] : cpu_index_) {
    const auto* rows =
        reinterpret_cast<const uint16_t*>(kv_mirror_->data()) + index * shape.tokens * kv_row;
    RETURN_IF_ERROR(cpu_layers_->WriteKv(layer, step, rows));
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
