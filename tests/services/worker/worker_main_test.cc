// Tests of the onecard-worker process (services/worker/main.cc): with 8
// streams running, SIGTERM makes it refuse new requests (UNAVAILABLE)
// while all 8 complete, then exit 0; bad flags and a missing model exit
// with their codes and a message naming the problem. Real process, real
// engine (CPU backend, SmolLM2), loopback ports picked by the OS.
#include <signal.h>

#include <thread>

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

std::unique_ptr<ChildProcess> StartWorker(std::vector<std::string> extra) {
  std::vector<std::string> argv = {ONECARD_WORKER_BINARY, "--listen=127.0.0.1:0",
                                   "--metrics-listen=127.0.0.1:0", "--threads=2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(argv);
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

TEST(WorkerMainTest, SigtermFinishesEightStreamsRefusesNewOnesAndExitsZero) {
  if (!testing::SmolModelPresent()) GTEST_SKIP() << testing::kSmolModel << " is missing";
  std::unique_ptr<ChildProcess> worker =
      StartWorker({std::string("--model=") + testing::kSmolModel, "--grace-period=300s"});
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<std::string> listening = worker->WaitForLine("LISTENING grpc ");
  ASSERT_TRUE(listening.ok()) << listening.status();
  const std::string address = std::vector<std::string>(absl::StrSplit(*listening, ' '))[2];
  ASSERT_TRUE(worker->WaitForLine("READY").ok());
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = v1::Worker::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);

  v1::WorkerGenerateRequest request;
  for (int32_t id : {504, 3365, 282, 4649, 314}) request.add_prompt_token_ids(id);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(24);
  request.mutable_stopping()->set_ignore_eos(true);
  constexpr int kStreams = 8;
  absl::BlockingCounter started(kStreams);
  std::vector<grpc::Status> statuses(kStreams);
  std::vector<int> tokens(kStreams, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext context;
      auto reader = stub->Generate(&context, request);
      v1::GenerateResponse chunk;
      bool first = true;
      while (reader->Read(&chunk)) {
        tokens[i] += chunk.token_ids_size();
        if (first) started.DecrementCount();
        first = false;
      }
      if (first) started.DecrementCount();
      statuses[i] = reader->Finish();
    });
  }
  started.Wait();  // all 8 are streaming
  worker->Signal(SIGTERM);
  ASSERT_TRUE(WaitUntilNotServing(*health));
  grpc::ClientContext late;
  auto refused = stub->Generate(&late, request);
  v1::GenerateResponse chunk;
  EXPECT_FALSE(refused->Read(&chunk));
  EXPECT_EQ(refused->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);

  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
    EXPECT_EQ(tokens[i], 24) << i;
  }
  absl::StatusOr<int> code = worker->Wait();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

TEST(WorkerMainTest, BadConfigExitsTwo) {
  std::unique_ptr<ChildProcess> worker = StartWorker({"--model=m.gguf", "--kv-watermark=3"});
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<int> code = worker->Wait();
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 2);
}

TEST(WorkerMainTest, MissingModelExitsOne) {
  std::unique_ptr<ChildProcess> worker = StartWorker({"--model=models/does-not-exist.gguf"});
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->WaitForLine("LISTENING grpc ").ok());
  absl::StatusOr<int> code = worker->Wait();
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 1);
}

}  // namespace
}  // namespace onecard::services
