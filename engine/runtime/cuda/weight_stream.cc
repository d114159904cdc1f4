// WeightStream and MeasureOffloadRates (see weight_stream.h).
// Tested by tests/gpu/cuda_model_runner_offload_test.cc.
#include "engine/runtime/cuda/weight_stream.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/blas_gemm.h"
#include "engine/kernels/cuda_check.h"

namespace onecard::engine {

absl::StatusOr<std::unique_ptr<WeightStream>> WeightStream::Create(
    const std::vector<LayerPlace>& places, const std::vector<int64_t>& layer_bytes,
    int32_t ring_layers, DeviceArena* arena) {
  if (places.size() != layer_bytes.size() || ring_layers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("weight stream: ", places.size(), " places for ",
                                                   layer_bytes.size(), " layers, ring of ",
                                                   ring_layers));
  }
  std::unique_ptr<WeightStream> s(new WeightStream());
  s->index_.assign(places.size(), -1);
  for (size_t l = 0; l < places.size(); ++l) {
    if (places[l] == LayerPlace::kDevice) continue;
    s->index_[l] = static_cast<int64_t>(s->layers_.size());
    s->layers_.push_back(static_cast<int64_t>(l));
    s->cpu_.push_back(places[l] == LayerPlace::kCpu);
    s->bytes_.push_back(layer_bytes[l]);
    s->host_at_.push_back(s->host_bytes_);
    s->host_bytes_ += layer_bytes[l];
    s->slot_bytes_ = std::max(s->slot_bytes_, layer_bytes[l]);
  }
  if (s->layers_.empty()) return s;
  // Streamed layers take turns in their slots, CPU layers in theirs
  // (RingSlots), so that each kind cycles its own slots whether or not the
  // other runs on the card in a step.
  const int64_t num_streamed = std::count(s->cpu_.begin(), s->cpu_.end(), false);
  const int64_t num_cpu = static_cast<int64_t>(s->cpu_.size()) - num_streamed;
  const int64_t for_streamed = std::min<int64_t>(ring_layers, num_streamed);
  const int64_t slots = RingSlots(ring_layers, num_streamed, num_cpu);
  int64_t streamed_rank = 0, cpu_rank = 0;
  for (bool cpu : s->cpu_) {
    s->slot_of_.push_back(cpu ? for_streamed + cpu_rank++ % (slots - for_streamed)
                              : streamed_rank++ % for_streamed);
  }
  for (int64_t i = 0; i < slots; ++i) {
    ASSIGN_OR_RETURN(void* slot, arena->Take(s->slot_bytes_));
    s->slots_.push_back(static_cast<char*>(slot));
  }
  absl::StatusOr<std::unique_ptr<PinnedBuffer>> host = PinnedBuffer::CreateLarge(s->host_bytes_);
  if (!host.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(host.status().message(), " (", s->layers_.size(),
                     " offloaded layers); lower --cpu-memory-budget or raise --gpu-memory-budget"));
  }
  s->pinned_ = *std::move(host);
  s->host_ = s->pinned_->data();
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s->copy_, cudaStreamNonBlocking));
  const auto event = [](cudaEvent_t* e) {
    return cudaEventCreateWithFlags(e, cudaEventDisableTiming);
  };
  CUDA_RETURN_IF_ERROR(event(&s->start_));
  s->filled_.resize(s->layers_.size());
  for (cudaEvent_t& e : s->filled_) CUDA_RETURN_IF_ERROR(event(&e));
  s->freed_.resize(s->slots_.size());
  for (cudaEvent_t& e : s->freed_) CUDA_RETURN_IF_ERROR(event(&e));
  s->slot_user_.assign(s->slots_.size(), -1);
  s->slot_freed_.assign(s->slots_.size(), false);
  return s;
}

WeightStream::~WeightStream() {
  for (cudaEvent_t e : filled_) cudaEventDestroy(e);
  for (cudaEvent_t e : freed_) cudaEventDestroy(e);
  for (cudaEvent_t e : copy_begin_) cudaEventDestroy(e);
  for (cudaEvent_t e : copy_end_) cudaEventDestroy(e);
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (copy_ != nullptr) cudaStreamDestroy(copy_);
}

std::unique_ptr<DeviceArena> WeightStream::LayerArena(int64_t layer) const {
  const int64_t i = index_[layer];
  if (i < 0) return nullptr;
  return DeviceArena::View(slots_[slot_of_[i]], slot_bytes_, "streamed layer");
}

absl::Status WeightStream::StoreLayer(int64_t layer, cudaStream_t stream) {
  const int64_t i = index_[layer];
  if (i < 0) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(host_ + host_at_[i], slots_[slot_of_[i]], bytes_[i], cudaMemcpyDeviceToHost));
  return absl::OkStatus();
}

absl::Status WeightStream::Copy(int64_t i) {
  if (timed_) {
    CUDA_RETURN_IF_ERROR(cudaEventRecord(copy_begin_[i], copy_));
    timed_copies_.push_back(i);
  }
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slots_[slot_of_[i]], host_ + host_at_[i], bytes_[i],
                                       cudaMemcpyHostToDevice, copy_));
  CUDA_RETURN_IF_ERROR(cudaEventRecord(filled_[i], copy_));
  if (timed_) CUDA_RETURN_IF_ERROR(cudaEventRecord(copy_end_[i], copy_));
  return absl::OkStatus();
}

absl::StatusOr<WeightStream::CopyTimes> WeightStream::TakeCopyTimes() {
  CopyTimes t;
  const std::vector<int64_t> copied = std::move(timed_copies_);
  timed_copies_.clear();
  if (copied.empty()) return t;
  // The compute stream waited for each copy's filled_ event, not for the
  // copy stream's end events after it: the last one (in stream order) first.
  CUDA_RETURN_IF_ERROR(cudaEventSynchronize(copy_end_[copied.back()]));
  for (const int64_t i : copied) {
    float ms = 0.0f;
    CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, copy_begin_[i], copy_end_[i]));
    t.busy_us += 1e3 * ms;
    t.bytes += bytes_[i];
  }
  float span_ms = 0.0f;
  CUDA_RETURN_IF_ERROR(
      cudaEventElapsedTime(&span_ms, copy_begin_[copied.front()], copy_end_[copied.back()]));
  t.span_us = 1e3 * span_ms;
  t.copies = static_cast<int32_t>(copied.size());
  return t;
}

const void* WeightStream::HostAddress(int64_t layer, const void* device) const {
  const int64_t i = index_[layer];
  const char* slot = slots_[slot_of_[i]];
  return host_ + host_at_[i] + (static_cast<const char*>(device) - slot);
}

absl::Status WeightStream::IssueCopies() {
  const int64_t count = static_cast<int64_t>(layers_.size());
  while (next_copy_ < count) {
    if (!Runs(next_copy_)) {
      ++next_copy_;
      continue;
    }
    const int64_t slot = slot_of_[next_copy_];
    if (slot_user_[slot] >= 0) {
      if (!slot_freed_[slot]) return absl::OkStatus();  // its layer has not run yet
      CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_, freed_[slot], 0));
    }
    slot_user_[slot] = next_copy_;
    slot_freed_[slot] = false;
    RETURN_IF_ERROR(Copy(next_copy_++));
  }
  return absl::OkStatus();
}

absl::Status WeightStream::BeginStep(cudaStream_t compute, bool cpu_computes, bool timed) {
  cpu_computes_ = cpu_computes;
  timed_ = timed;
  timed_copies_.clear();
  while (timed && copy_end_.size() < layers_.size()) {  // the timing events, made once
    cudaEvent_t begin = nullptr, end = nullptr;
    CUDA_RETURN_IF_ERROR(cudaEventCreate(&begin));
    if (const cudaError_t made = cudaEventCreate(&end); made != cudaSuccess) {
      cudaEventDestroy(begin);
      CUDA_RETURN_IF_ERROR(made);
    }
    copy_begin_.push_back(begin);
    copy_end_.push_back(end);
  }
  next_copy_ = 0;
  std::fill(slot_user_.begin(), slot_user_.end(), -1);
  std::fill(slot_freed_.begin(), slot_freed_.end(), false);
  if (layers_.empty()) return absl::OkStatus();
  // The slots are free once the compute stream's earlier work has run.
  CUDA_RETURN_IF_ERROR(cudaEventRecord(start_, compute));
  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_, start_, 0));
  return IssueCopies();
}

absl::Status WeightStream::BeforeLayer(int64_t layer, cudaStream_t compute) {
  const int64_t i = index_[layer];
  if (i < 0 || !Runs(i)) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute, filled_[i], 0));
  return absl::OkStatus();
}

absl::Status WeightStream::AfterLayer(int64_t layer, cudaStream_t compute) {
  const int64_t i = index_[layer];
  if (i < 0 || !Runs(i) || next_copy_ >= static_cast<int64_t>(layers_.size())) {
    return absl::OkStatus();
  }
  const int64_t slot = slot_of_[i];
  CUDA_RETURN_IF_ERROR(cudaEventRecord(freed_[slot], compute));
  slot_freed_[slot] = true;
  return IssueCopies();
}

absl::StatusOr<OffloadRates> MeasureOffloadRates(cublasHandle_t cublas, cudaStream_t stream) {
  constexpr int64_t kCopyBytes = 256LL << 20;
  constexpr int64_t kDim = 4096;
  constexpr int kRuns = 4;
  char* a = nullptr;
  char* b = nullptr;
  char* host = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  absl::Cleanup freed = [&] {
    if (a != nullptr) cudaFree(a);
    if (b != nullptr) cudaFree(b);
    if (host != nullptr) cudaFreeHost(host);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  };
  CUDA_RETURN_IF_ERROR(cudaMalloc(&a, kCopyBytes));
  CUDA_RETURN_IF_ERROR(cudaMalloc(&b, kCopyBytes));
  CUDA_RETURN_IF_ERROR(cudaMallocHost(&host, kCopyBytes));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(a, 0, kCopyBytes, stream));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b, 0, kCopyBytes, stream));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  // The shortest of kRuns timed runs of `work` after one untimed (seconds).
  const auto best = [&](const std::function<absl::Status()>& work) -> absl::StatusOr<double> {
    RETURN_IF_ERROR(work());
    double best_s = 0;
    for (int run = 0; run < kRuns; ++run) {
      CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
      RETURN_IF_ERROR(work());
      CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
      CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
      float ms = 0;
      CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
      if (run == 0 || ms * 1e-3 < best_s) best_s = ms * 1e-3;
    }
    return best_s;
  };
  OffloadRates r;
  ASSIGN_OR_RETURN(
      const double d2d, best([&]() -> absl::Status {
        CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b, a, kCopyBytes, cudaMemcpyDeviceToDevice, stream));
        return absl::OkStatus();
      }));
  r.device_read_bytes_per_s = 2.0 * kCopyBytes / d2d;
  ASSIGN_OR_RETURN(
      const double h2d, best([&]() -> absl::Status {
        CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(a, host, kCopyBytes, cudaMemcpyHostToDevice, stream));
        return absl::OkStatus();
      }));
  r.h2d_bytes_per_s = kCopyBytes / h2d;
  // [kDim, kDim] BF16 operands in the copy buffers (zeros: the rate does not
  // depend on the values).
  const BlasGemmParams gemm{
      .x = a, .w = a + kDim * kDim * 2, .y = b, .m = kDim, .n = kDim, .k = kDim};
  ASSIGN_OR_RETURN(const double mm, best([&] { return BlasGemm(cublas, gemm, stream); }));
  r.device_flops_per_s = 2.0 * kDim * kDim * kDim / mm;
  return r;
}

}  // namespace onecard::engine
