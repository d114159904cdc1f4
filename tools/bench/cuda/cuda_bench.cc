// The shared pieces of the CUDA presets (see cuda_bench.h).
#include "tools/bench/cuda/cuda_bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/blas_gemm.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/fp8_matmul.h"
#include "engine/model/synthetic_shapes.h"
#include "engine/runtime/cuda/cuda_weights.h"

namespace onecard::bench {
namespace {

// cudaMalloc'd bytes, freed at scope end.
struct DeviceBytes {
  void* p = nullptr;
  ~DeviceBytes() {
    if (p != nullptr) cudaFree(p);
  }
};

struct HostPinned {
  void* p = nullptr;
  ~HostPinned() {
    if (p != nullptr) cudaFreeHost(p);
  }
};

// The E4M3 GEMM rate at n^3 through Fp8Matmul (cuBLASLt, fp32 sums and
// output), on seeded random finite codes (`codes`: 2 n^2 bytes; `out`: the
// fp32 product, then cuBLASLt's workspace); 0 on a device without FP8 tensor
// cores (before sm_89).
absl::StatusOr<double> Fp8GemmFlopsPerS(int64_t n, char* codes, char* out, cudaStream_t stream) {
  int device = 0, major = 0, minor = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major * 10 + minor < 89) return 0.0;
  std::vector<uint8_t> host(2 * n * n);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (uint8_t& code : host) {  // sign and exponent 0..7: |value| < 2, never NaN
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    code = static_cast<uint8_t>(state >> 56) & 0xbf;
  }
  CUDA_RETURN_IF_ERROR(cudaMemcpy(codes, host.data(), host.size(), cudaMemcpyHostToDevice));
  const int64_t lt_workspace_bytes = 32LL << 20;
  ASSIGN_OR_RETURN(std::unique_ptr<engine::Fp8Matmul> matmul,
                   engine::Fp8Matmul::Create(out + n * n * 4, lt_workspace_bytes));
  const engine::Fp8MatmulArgs args{.x = codes,
                                   .w = codes + n * n,
                                   .acc = reinterpret_cast<float*>(out),
                                   .m = n,
                                   .n = n,
                                   .k = n,
                                   .acc_row_stride = n};
  RETURN_IF_ERROR(matmul->Prepare(args));
  ASSIGN_OR_RETURN(const double ms,
                   MedianMs(stream, 3, 10, [&]() { return matmul->Run(args, stream); }));
  return 2.0 * n * n * n / (ms * 1e-3);
}

absl::StatusOr<Ceilings> Measure() {
  Ceilings c;
  cudaStream_t stream;
  CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  const int64_t copy_bytes = 2LL << 30;
  DeviceBytes a, b;
  CUDA_RETURN_IF_ERROR(cudaMalloc(&a.p, copy_bytes));
  CUDA_RETURN_IF_ERROR(cudaMalloc(&b.p, copy_bytes));
  RETURN_IF_ERROR(engine::FillUniformBf16(a.p, copy_bytes / 2, 7, 0.0f, 1.0f, stream));
  ASSIGN_OR_RETURN(const double copy_ms, MedianMs(stream, 3, 20, [&]() -> absl::Status {
                     CUDA_RETURN_IF_ERROR(
                         cudaMemcpyAsync(b.p, a.p, copy_bytes, cudaMemcpyDeviceToDevice, stream));
                     return absl::OkStatus();
                   }));
  c.copy_bytes_per_s = 2.0 * copy_bytes / (copy_ms * 1e-3);
  // bf16 GEMM 8192^3 on random data (a.p holds x, b.p the weight, y after).
  const int64_t n = 8192;
  RETURN_IF_ERROR(engine::FillUniformBf16(b.p, n * n, 8, 0.0f, 1.0f, stream));
  cublasHandle_t blas;
  CUDA_RETURN_IF_ERROR(cublasCreate(&blas));
  char* y = static_cast<char*>(b.p) + n * n * 2;
  ASSIGN_OR_RETURN(const double gemm_ms, MedianMs(stream, 3, 10, [&]() {
                     return engine::BlasGemm(
                         blas, {.x = a.p, .w = b.p, .y = y, .m = n, .n = n, .k = n}, stream);
                   }));
  cublasDestroy(blas);
  c.gemm_flops_per_s = 2.0 * n * n * n / (gemm_ms * 1e-3);
  ASSIGN_OR_RETURN(c.gemm_fp8_flops_per_s,
                   Fp8GemmFlopsPerS(n, static_cast<char*>(a.p), static_cast<char*>(b.p), stream));
  const int64_t host_bytes = 1LL << 30;
  HostPinned h;
  CUDA_RETURN_IF_ERROR(cudaMallocHost(&h.p, host_bytes));
  std::memset(h.p, 1, host_bytes);
  ASSIGN_OR_RETURN(
      const double h2d_ms, MedianMs(stream, 2, 10, [&]() -> absl::Status {
        CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(a.p, h.p, host_bytes, cudaMemcpyHostToDevice, stream));
        return absl::OkStatus();
      }));
  ASSIGN_OR_RETURN(
      const double d2h_ms, MedianMs(stream, 2, 10, [&]() -> absl::Status {
        CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h.p, a.p, host_bytes, cudaMemcpyDeviceToHost, stream));
        return absl::OkStatus();
      }));
  c.h2d_bytes_per_s = host_bytes / (h2d_ms * 1e-3);
  c.d2h_bytes_per_s = host_bytes / (d2h_ms * 1e-3);
  CUDA_RETURN_IF_ERROR(cudaStreamDestroy(stream));
  return c;
}

}  // namespace

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

absl::StatusOr<double> MedianMs(cudaStream_t stream, int warmup, int runs,
                                const std::function<absl::Status()>& fn) {
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(fn());
  cudaEvent_t start, stop;
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
    RETURN_IF_ERROR(fn());
    CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
    float t = 0;
    CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return Median(ms);
}

absl::StatusOr<double> GraphMedianMs(cudaStream_t stream, int warmup, int runs,
                                     const std::function<absl::Status()>& fn) {
  RETURN_IF_ERROR(fn());  // first calls outside the capture (lazy setup, smem limits)
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status captured = fn();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  RETURN_IF_ERROR(captured);
  CUDA_RETURN_IF_ERROR(ended);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_RETURN_IF_ERROR(made);
  absl::StatusOr<double> ms = MedianMs(stream, warmup, runs, [&]() -> absl::Status {
    CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, stream));
    return absl::OkStatus();
  });
  cudaGraphExecDestroy(exec);
  return ms;
}

engine::CudaRunnerOptions& BenchRunnerOptions() {
  static engine::CudaRunnerOptions options;
  return options;
}

BenchSelection& CurrentBenchSelection() {
  static BenchSelection selection;
  return selection;
}

absl::StatusOr<std::vector<ProjectionCase>> SelectedProjectionCases() {
  std::vector<ProjectionCase> cases;
  for (const char* model : {"llama3-8b", "llama3-70b", "mistral-large-123b"}) {
    const engine::ModelConfig c = *engine::SyntheticModelConfig(model);
    for (const auto& [p, name] :
         {std::pair{engine::Projection::kQkv, "qkv"}, std::pair{engine::Projection::kO, "o"},
          std::pair{engine::Projection::kGateUp, "gate_up"},
          std::pair{engine::Projection::kDown, "down"}}) {
      const auto [n, k] = engine::ProjectionShape(c, p);
      cases.push_back({absl::StrCat(model, "_", name), n, k, p});
    }
  }
  if (const std::string& only = CurrentBenchSelection().shape; !only.empty()) {
    std::erase_if(cases, [&](const ProjectionCase& s) { return s.name != only; });
    if (cases.empty()) return absl::InvalidArgumentError(absl::StrCat("--shape: no shape ", only));
  }
  return cases;
}

absl::StatusOr<Ceilings> MeasureCeilings() {
  static absl::StatusOr<Ceilings>* cached = new absl::StatusOr<Ceilings>(Measure());
  return *cached;
}

std::string CudaDeviceDescription() {
  int device = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    return "unknown CUDA device";
  }
  return absl::StrFormat("%s (%d SMs, %.1f GiB)", prop.name, prop.multiProcessorCount,
                         static_cast<double>(prop.totalGlobalMem) / (1LL << 30));
}

double DecodeStepBytes(const engine::ModelConfig& c, const engine::ModelWeightsSpec& spec,
                       int64_t batch, int64_t context, int64_t kv_element_bytes) {
  const double kv_token =
      2.0 * c.num_layers * c.num_kv_heads * c.head_dim * static_cast<double>(kv_element_bytes);
  const absl::StatusOr<engine::WeightBytes> w = engine::CountWeightBytes(c, spec);
  const double embedding = c.tie_word_embeddings ? 0.0 : 2.0 * c.vocab_size * c.hidden_size;
  const double weights = w.ok() ? static_cast<double>(w->total) - embedding : 0.0;
  return weights + batch * (context + 1) * kv_token + batch * c.hidden_size * 2.0;
}

double DecodeStepFlops(const engine::ModelConfig& c, int64_t batch, int64_t context) {
  const double matmul = 2.0 * engine::MatmulParameters(c) * batch;
  return matmul + 4.0 * context * c.head_dim * c.num_heads * c.num_layers * batch;
}

double PrefillFlops(const engine::ModelConfig& c, int64_t tokens) {
  const double lm_head = static_cast<double>(c.vocab_size) * c.hidden_size;
  const double body = static_cast<double>(engine::MatmulParameters(c)) - lm_head;
  const double attention =
      2.0 * tokens * (tokens + 1) * c.head_dim * static_cast<double>(c.num_heads) * c.num_layers;
  return 2.0 * body * tokens + 2.0 * lm_head + attention;
}

std::vector<int32_t> SyntheticPrompt(int32_t tokens, int32_t index, int64_t vocab) {
  std::vector<int32_t> ids;
  uint64_t x = 0x9e3779b97f4a7c15ull * (index + 1);
  for (int32_t i = 0; i < tokens; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(vocab)));
  }
  return ids;
}

BatchDriver::BatchDriver(engine::CudaModelRunner* runner, int32_t batch, int32_t prompt_tokens,
                         int32_t max_tokens, int32_t first_block)
    : runner_(runner), batch_(batch), prompt_tokens_(prompt_tokens) {
  const int32_t bs = runner->kv_layout().block_size;
  const int32_t blocks = (max_tokens + bs - 1) / bs;
  for (int32_t s = 0; s < batch; ++s) {
    std::vector<int32_t> table(blocks);
    for (int32_t b = 0; b < blocks; ++b) table[b] = first_block + s * blocks + b;
    tables_.push_back(table);
    prompts_.push_back(SyntheticPrompt(prompt_tokens, s, runner->config().vocab_size));
  }
  last_.assign(batch, 0);
}

absl::Status BatchDriver::Prefill() {
  const engine::KvLayout& kv = runner_->kv_layout();
  // The tables hold consecutive blocks, the last sequence's last one highest.
  const int64_t needed =
      tables_.empty() || tables_.back().empty() ? 0 : int64_t{tables_.back().back()} + 1;
  if (needed > kv.num_blocks) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch ", batch_, ": ", batch_, " sequences of ",
        static_cast<int64_t>(tables_.back().size()) * kv.block_size, " tokens need ", needed,
        " KV blocks of ", kv.block_size, " tokens, the runner's plan holds ", kv.num_blocks,
        " on this card: a smaller --batches, or a card with more memory"));
  }
  const engine::MemoryPlan& plan = runner_->memory_plan();
  const int32_t per_step =
      std::max(1, std::min(plan.max_num_seqs, plan.max_batched_tokens / prompt_tokens_));
  for (int32_t s0 = 0; s0 < batch_; s0 += per_step) {
    const int32_t n = std::min(per_step, batch_ - s0);
    engine::BatchInput in;
    for (int32_t s = s0; s < s0 + n; ++s) {
      in.chunks.push_back({.seq_id = s, .token_ids = prompts_[s], .block_table = tables_[s]});
    }
    const std::vector<engine::SampleRowParams> rows(n);
    std::vector<int32_t> tokens;
    RETURN_IF_ERROR(runner_->ForwardSample(in, rows, {}, &tokens));
    for (int32_t i = 0; i < n; ++i) last_[s0 + i] = tokens[i];
  }
  position_ = prompt_tokens_;
  return absl::OkStatus();
}

absl::StatusOr<double> BatchDriver::DecodeStep() {
  const auto t0 = std::chrono::steady_clock::now();
  engine::BatchInput in;
  std::vector<std::vector<int32_t>> ids(batch_);
  for (int32_t s = 0; s < batch_; ++s) {
    ids[s] = {last_[s]};
    in.chunks.push_back(
        {.seq_id = s, .token_ids = ids[s], .start_pos = position_, .block_table = tables_[s]});
  }
  const std::vector<engine::SampleRowParams> rows(batch_);
  std::vector<int32_t> tokens;
  RETURN_IF_ERROR(runner_->ForwardSample(in, rows, {}, &tokens));
  last_ = tokens;
  ++position_;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void BatchDriver::Rewind(int32_t position) { position_ = position; }

}  // namespace onecard::bench
