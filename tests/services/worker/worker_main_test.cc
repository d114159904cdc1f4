// Tests of the onecard-worker process (services/worker/main.cc): with 8
// streams running, SIGTERM makes it refuse new requests (UNAVAILABLE)
// while all 8 complete, then exit 0; bad flags and a missing model exit
// with their codes and a message naming the problem; flags override the
// config file (the cuda offload ones too, each value checked); an fp8 KV
// cache serves on the cpu backend. Real process, real
// engine (CPU backend, SmolLM2), loopback ports picked by the OS.
#include <signal.h>

#include <fstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/blocking_counter.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "onecard/v1/worker.grpc.pb.h"
#include "tests/services/testing/child_process.h"
#include "tests/services/worker/smol_worker.h"

namespace onecard::services {
namespace {

using ::onecard::testing::ChildProcess;
using ::testing::HasSubstr;

std::unique_ptr<ChildProcess> StartWorker(std::vector<std::string> extra,
                                          bool merge_stderr = false) {
  std::vector<std::string> argv = {ONECARD_WORKER_BINARY, "--listen=127.0.0.1:0",
                                   "--metrics-listen=127.0.0.1:0", "--threads=2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(argv, merge_stderr);
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? *std::move(child) : nullptr;
}

// Reads the health of the server until it reads NOT_SERVING or the server
// goes away; false if neither happens in time.
bool WaitUntilNotServing(grpc::health::v1::Health::Stub& health) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  auto reader = health.Watch(&context, grpc::health::v1::HealthCheckRequest());
  grpc::health::v1::HealthCheckResponse response;
  while (reader->Read(&response)) {
    if (response.status() == grpc::health::v1::HealthCheckResponse::NOT_SERVING) {
      context.TryCancel();
      break;
    }
  }
  const grpc::Status status = reader->Finish();
  return status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED;
}

// `n` copies of one request streamed on their own threads.
class ParallelStreams {
 public:
  ParallelStreams(v1::Worker::Stub* stub, const v1::WorkerGenerateRequest& request, int n)
      : started_(n), statuses_(n), tokens_(n, 0) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([=, this] { Run(stub, request, i); });
  }
  // Returns once every stream has its first chunk (or has ended).
  void WaitUntilStreaming() { started_.Wait(); }
  void Join() {
    for (std::thread& t : threads_) t.join();
  }
  const std::vector<grpc::Status>& statuses() const { return statuses_; }
  const std::vector<int>& tokens() const { return tokens_; }

 private:
  void Run(v1::Worker::Stub* stub, const v1::WorkerGenerateRequest& request, int i) {
    grpc::ClientContext context;
    auto reader = stub->Generate(&context, request);
    v1::GenerateResponse chunk;
    bool first = true;
    while (reader->Read(&chunk)) {
      tokens_[i] += chunk.token_ids_size();
      if (first) started_.DecrementCount();
      first = false;
    }
    if (first) started_.DecrementCount();
    statuses_[i] = reader->Finish();
  }

  absl::BlockingCounter started_;
  std::vector<grpc::Status> statuses_;
  std::vector<int> tokens_;
  std::vector<std::thread> threads_;
};

// The worker's gRPC address once it has printed READY (empty if it did not).
std::string WaitUntilReady(ChildProcess& worker) {
  absl::StatusOr<std::string> listening = worker.WaitForLine("LISTENING grpc ");
  EXPECT_TRUE(listening.ok()) << listening.status();
  if (!listening.ok()) return "";
  const absl::Status ready = worker.WaitForLine("READY").status();
  EXPECT_TRUE(ready.ok()) << ready;
  if (!ready.ok()) return "";
  return std::vector<std::string>(absl::StrSplit(*listening, ' '))[2];
}

// A greedy request for `max_tokens` tokens of a five-token prompt.
v1::WorkerGenerateRequest GreedyRequest(int32_t max_tokens) {
  v1::WorkerGenerateRequest request;
  for (int32_t id : {504, 3365, 282, 4649, 314}) request.add_prompt_token_ids(id);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(max_tokens);
  request.mutable_stopping()->set_ignore_eos(true);
  return request;
}

TEST(WorkerMainTest, SigtermFinishesEightStreamsRefusesNewOnesAndExitsZero) {
  if (!testing::SmolModelPresent()) GTEST_SKIP() << testing::kSmolModel << " is missing";
  std::unique_ptr<ChildProcess> worker =
      StartWorker({std::string("--model=") + testing::kSmolModel, "--grace-period=300s"});
  ASSERT_NE(worker, nullptr);
  const std::string address = WaitUntilReady(*worker);
  ASSERT_FALSE(address.empty());
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = v1::Worker::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);

  const v1::WorkerGenerateRequest request = GreedyRequest(24);
  ParallelStreams streams(stub.get(), request, 8);
  streams.WaitUntilStreaming();
  worker->Signal(SIGTERM);
  ASSERT_TRUE(WaitUntilNotServing(*health));
  grpc::ClientContext late;
  auto refused = stub->Generate(&late, request);
  v1::GenerateResponse chunk;
  EXPECT_FALSE(refused->Read(&chunk));
  EXPECT_EQ(refused->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);

  streams.Join();
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(streams.statuses()[i].ok()) << i << ": " << streams.statuses()[i].error_message();
    EXPECT_EQ(streams.tokens()[i], 24) << i;
  }
  absl::StatusOr<int> code = worker->Wait();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

TEST(WorkerMainTest, BadFlagExitsTwoNamingTheField) {
  std::unique_ptr<ChildProcess> worker =
      StartWorker({"--model=m.gguf", "--kv-watermark=3"}, /*merge_stderr=*/true);
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<std::string> error = worker->WaitForLine("onecard-worker: ");
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_THAT(*error, HasSubstr("admission.kv_watermark"));
  absl::StatusOr<int> code = worker->Wait();
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 2);
}

TEST(WorkerMainTest, BadGpuMemoryBudgetExitsTwoNamingTheField) {
  std::unique_ptr<ChildProcess> worker = StartWorker(
      {"--model=m.gguf", "--backend=cuda", "--gpu-memory-budget=24GB"}, /*merge_stderr=*/true);
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<std::string> error = worker->WaitForLine("onecard-worker: ");
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_THAT(*error, HasSubstr("cuda.memory_budget"));
  EXPECT_THAT(*error, HasSubstr("\"24GB\""));
  absl::StatusOr<int> code = worker->Wait();
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 2);
}

// Starts onecard-worker with `args` and expects it to refuse them at start:
// a stderr line with `message` and `exit_code` (2: a bad flag or config; 1:
// it cannot start).
void ExpectRefusedAtStart(const std::vector<std::string>& args, const std::string& message,
                          int exit_code = 2) {
  SCOPED_TRACE(message);
  std::unique_ptr<ChildProcess> worker = StartWorker(args, /*merge_stderr=*/true);
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<std::string> error = worker->WaitForLine("onecard-worker: ");
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_THAT(*error, HasSubstr(message));
  absl::StatusOr<int> code = worker->Wait();
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, exit_code);
}

// Issue 22: these values ended the process with std::bad_alloc or
// std::system_error, or let an idle worker spin; now each exits 2 at start
// naming the field.
TEST(WorkerMainTest, ValuesThatWouldExhaustTheHostExitTwoNamingTheField) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--model=m.gguf", "--kv-cache-mib=100000000"}, "kv_cache.cache_bytes: "},
      {{"--model=m.gguf", "--kv-cache-mib=9223372036854775807"}, "--kv-cache-mib: "},
      {{"--model=m.gguf", "--threads=100000"}, "num_threads: 100000 is outside"},
      {{"--model=m.gguf", "--swap-space=1000000TiB"}, "kv_cache.swap_space: "},
      {{"--model=m.gguf", "--swap-space=16GB"}, "kv_cache.swap_space: \"16GB\" is not a size"},
  };
  for (const auto& [args, field] : cases) ExpectRefusedAtStart(args, field);
}

TEST(WorkerMainTest, BadAgingIntervalExitsTwoNamingTheFlagOrField) {
  ExpectRefusedAtStart({"--model=m.gguf", "--aging-interval=soon"},
                       "--aging-interval: expected a duration such as 30s");
  ExpectRefusedAtStart({"--model=m.gguf", "--aging-interval=48h"},
                       "worker config: scheduler.aging_interval: 48h is outside [0, 24h]");
}

TEST(WorkerMainTest, BadCpuWeightsExitsTwoNamingTheField) {
  ExpectRefusedAtStart({"--model=m.gguf", "--cpu-weights=q4"},
                       "worker config: cpu_weights: unknown cpu weight format \"q4\"");
}

TEST(WorkerMainTest, BadKvCacheDtypeOrFp8ComputeExitsTwoNamingTheField) {
  ExpectRefusedAtStart({"--model=m.gguf", "--kv-cache-dtype=int8"},
                       "worker config: kv_cache_dtype: unknown KV cache dtype \"int8\"");
  ExpectRefusedAtStart({"--model=m.gguf", "--fp8-compute=w4a16"},
                       "worker config: fp8_compute: unknown fp8 compute \"w4a16\"");
}

// The cpu backend holds K and V rounded to FP8 E4M3; fp8_compute is for the
// cuda backend and the cpu one takes it without effect.
TEST(WorkerMainTest, CpuWorkerServesWithAnFp8KvCache) {
  if (!testing::SmolModelPresent()) GTEST_SKIP() << testing::kSmolModel << " is missing";
  std::unique_ptr<ChildProcess> worker =
      StartWorker({std::string("--model=") + testing::kSmolModel, "--kv-cache-dtype=fp8",
                   "--fp8-compute=w8a16"});
  ASSERT_NE(worker, nullptr);
  const std::string address = WaitUntilReady(*worker);
  ASSERT_FALSE(address.empty());
  auto stub = v1::Worker::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, GreedyRequest(8));
  v1::GenerateResponse chunk;
  int tokens = 0;
  while (reader->Read(&chunk)) tokens += chunk.token_ids_size();
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, 8);
  worker->Signal(SIGTERM);
  absl::StatusOr<int> code = worker->Wait();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(WorkerMainTest, ConfigFileErrorsNameFileLineAndField) {
  // A whole-cluster file with a `worker:` section, and a bare WorkerConfig.
  const std::string sectioned =
      WriteFile("worker_main_sectioned.yaml", "worker:\n  kv_cache:\n    block_sise: 16\n");
  const std::string bare = WriteFile("worker_main_bare.yaml", "model_path: m.gguf\nbackend: tpu\n");
  const std::string huge_kv =
      WriteFile("worker_main_huge_kv.yaml",
                "model_path: m.gguf\nkv_cache: {cache_bytes: 1000000000000000}\n");
  const std::string fast_report =
      WriteFile("worker_main_fast_report.yaml", "model_path: m.gguf\nload_report_interval: 1ns\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {sectioned, sectioned + ":3: worker.kv_cache.block_sise: unknown field"},
      {bare, "backend: \"tpu\" is not one of cpu, cuda"},
      {huge_kv, "kv_cache.cache_bytes: 1000000000000000 is outside [0, "},
      {fast_report, "load_report_interval: 1ns is outside [10ms, 1h]"},
  };
  for (const auto& [path, message] : cases) ExpectRefusedAtStart({"--config=" + path}, message);
}

// The offload flags override the file's cuda fields: each value given is
// checked with the config (gpu_layers -1 is a value, so no sentinel hides
// one), and a flag can supply what the file lacks.
TEST(WorkerMainTest, OffloadFlagsOverrideTheConfigFile) {
  const std::string offload =
      WriteFile("worker_main_offload.yaml",
                "model_path: models/does-not-exist.gguf\nbackend: cuda\n"
                "cuda: {cpu_memory_budget: 1GiB, gpu_layers: 20, offload_ring_layers: 3}\n");
  const std::string config = "--config=" + offload;
  ExpectRefusedAtStart({config, "--cpu-memory-budget=96GB"},
                       "worker config: cuda.cpu_memory_budget: \"96GB\" is not a size");
  ExpectRefusedAtStart({config, "--cpu-memory-budget=0"},
                       "worker config: cuda.gpu_layers: 20 needs cuda.cpu_memory_budget");
  ExpectRefusedAtStart({config, "--gpu-layers=-2"},
                       "worker config: cuda.gpu_layers: -2 is outside [-1, ");
  ExpectRefusedAtStart({config, "--offload-ring-layers", "-1"},
                       "worker config: cuda.offload_ring_layers: -1 is outside [1, ");
  ExpectRefusedAtStart({config, "--offload-cpu-threads=-2"},
                       "worker config: cuda.offload_cpu_threads: -2 is outside [-1, 4096]");
  ExpectRefusedAtStart({config, "--offload-cpu-threads=-1", "--offload-cpu-layers=5"},
                       "worker config: cuda.offload_cpu_layers: 5 layers on the CPU");
  // The file's gpu_layers without a budget is refused; the flag's budget
  // lets it start, and the missing model then exits 1.
  const std::string no_budget =
      WriteFile("worker_main_no_budget.yaml",
                "model_path: models/does-not-exist.gguf\nbackend: cuda\ncuda: {gpu_layers: 20}\n");
  ExpectRefusedAtStart({"--config=" + no_budget},
                       "worker config: cuda.gpu_layers: 20 needs cuda.cpu_memory_budget");
  ExpectRefusedAtStart({"--config=" + no_budget, "--cpu-memory-budget=1GiB"},
                       "onecard-worker: cannot load the model", /*exit_code=*/1);
}

TEST(WorkerMainTest, FlagsOverrideTheConfigFile) {
  // The file's listen address would fail to bind; the flag's wins. The
  // missing model then ends the process with exit code 1.
  const std::string path = WriteFile(
      "worker_main_good.yaml",
      "worker:\n  model_path: models/does-not-exist.gguf\n  listen_address: 192.0.2.1:1\n");
  std::unique_ptr<ChildProcess> worker = StartWorker({"--config=" + path}, true);
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<std::string> listening = worker->WaitForLine("LISTENING grpc 127.0.0.1:");
  ASSERT_TRUE(listening.ok()) << listening.status();
  absl::StatusOr<std::string> error = worker->WaitForLine("onecard-worker: cannot load the model");
  EXPECT_TRUE(error.ok()) << error.status();
  absl::StatusOr<int> code = worker->Wait();
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 1);
}

}  // namespace
}  // namespace onecard::services
