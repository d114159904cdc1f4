// Tests of GenerateStream over real gRPC with a hand-driven fake engine:
// chunks carry exactly what the engine emitted, in order, with one final
// chunk; a client that does not read never blocks the engine and later gets
// everything coalesced; client cancels and passed deadlines cancel the
// engine request; each way of ending maps to its status. Expected values
// are what the test itself made the engine emit.
#include "services/worker/generate_stream.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "services/common/status.h"
#include "tests/services/worker/fake_worker.h"

namespace onecard::services {
namespace {

using ::onecard::testing::FakeWorker;
using ::onecard::testing::SmallWorkerRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Received {
  std::vector<v1::GenerateResponse> chunks;
  grpc::Status status;
  std::vector<int32_t> tokens() const {
    std::vector<int32_t> all;
    for (const auto& c : chunks) all.insert(all.end(), c.token_ids().begin(), c.token_ids().end());
    return all;
  }
  std::string text() const {
    std::string all;
    for (const auto& c : chunks) all += c.text();
    return all;
  }
  int finals() const {
    int n = 0;
    for (const auto& c : chunks) n += c.finish_reason() != v1::FINISH_REASON_UNSPECIFIED;
    return n;
  }
};

Received ReadAll(grpc::ClientReader<v1::GenerateResponse>* reader) {
  Received out;
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) out.chunks.push_back(chunk);
  out.status = reader->Finish();
  return out;
}

TEST(GenerateStreamTest, StreamsWhatTheEngineEmitsThenOneFinalChunk) {
  FakeWorker w;
  grpc::ClientContext context;
  v1::WorkerGenerateRequest request = SmallWorkerRequest();
  request.set_request_id("req-1");
  auto reader = w.worker().Generate(&context, request);
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  const uint64_t id = w.engine().ids()[0];
  EXPECT_THAT(w.engine().request(id).prompt_token_ids, ElementsAre('h', 'i'));
  w.engine().Emit(id, {'a'}, "a");
  w.engine().Emit(id, {'b', 'c'}, "bc");
  w.engine().Finish(id, engine::FinishReason::kLength);
  const Received got = ReadAll(reader.get());
  EXPECT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_THAT(got.tokens(), ElementsAre('a', 'b', 'c'));
  EXPECT_EQ(got.text(), "abc");
  ASSERT_FALSE(got.chunks.empty());
  EXPECT_EQ(got.finals(), 1);
  const v1::GenerateResponse& last = got.chunks.back();
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(last.usage().prompt_tokens(), 2);
  EXPECT_EQ(last.usage().completion_tokens(), 3);
  EXPECT_EQ(last.request_id(), "req-1");
  EXPECT_EQ(got.chunks.front().request_id(), "req-1");
}

TEST(GenerateStreamTest, SlowClientNeverBlocksTheEngineAndGetsCoalescedChunks) {
  FakeWorker w;
  grpc::ClientContext context;
  auto reader = w.worker().Generate(&context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  const uint64_t id = w.engine().ids()[0];
  // 4 MiB of output while the client reads nothing: far past gRPC's flow
  // control window, so writes stall; every Emit must still return at once.
  constexpr int kOutputs = 2048;
  const std::string text(2048, 'x');
  for (int i = 0; i < kOutputs; ++i) w.engine().Emit(id, {i % 256}, text);
  w.engine().Finish(id, engine::FinishReason::kEos);
  const Received got = ReadAll(reader.get());
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  ASSERT_EQ(got.tokens().size(), static_cast<size_t>(kOutputs));
  for (int i = 0; i < kOutputs; ++i) ASSERT_EQ(got.tokens()[i], i % 256) << i;
  EXPECT_EQ(got.text().size(), static_cast<size_t>(kOutputs) * text.size());
  EXPECT_LT(got.chunks.size(), static_cast<size_t>(kOutputs)) << "nothing was coalesced";
  for (const v1::GenerateResponse& chunk : got.chunks) {
    EXPECT_LE(chunk.ByteSizeLong(), 1100u * 1024) << "coalesced chunks stay near 1 MiB";
  }
  EXPECT_EQ(got.finals(), 1);
  EXPECT_EQ(got.chunks.back().finish_reason(), v1::FINISH_REASON_EOS);
}

TEST(GenerateStreamTest, ClientCancelCancelsTheEngineRequest) {
  FakeWorker w;
  grpc::ClientContext context;
  auto reader = w.worker().Generate(&context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  const uint64_t id = w.engine().ids()[0];
  w.engine().Emit(id, {'a'}, "a");
  v1::GenerateResponse chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  context.TryCancel();
  ASSERT_TRUE(w.engine().WaitForCancel(id));
  w.engine().ProcessCancels();  // the engine's next step
  EXPECT_TRUE(w.engine().finished(id));
  while (reader->Read(&chunk)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(w.server().core().WaitForStreams(absl::Seconds(30)));
}

TEST(GenerateStreamTest, PassedDeadlineCancelsTheEngineRequest) {
  FakeWorker w;
  grpc::ClientContext context;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(300);
  context.set_deadline(absl::ToChronoTime(deadline));
  auto reader = w.worker().Generate(&context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  const uint64_t id = w.engine().ids()[0];
  // The engine got the call's deadline (gRPC carries it with ms precision).
  EXPECT_LT(absl::AbsDuration(w.engine().request(id).deadline - deadline), absl::Seconds(1));
  ASSERT_TRUE(w.engine().WaitForCancel(id));  // gRPC cancels the call at the deadline
  w.engine().ProcessCancels();
  const Received got = ReadAll(reader.get());
  EXPECT_EQ(got.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(w.engine().finished(id));
  EXPECT_TRUE(w.server().core().WaitForStreams(absl::Seconds(30)));
}

TEST(GenerateStreamTest, EngineRefusalIsForwardedWithARetryHint) {
  FakeWorker w({.edit_config = [](v1::WorkerConfig* c) {
    c->mutable_admission()->set_max_waiting(1);
    c->mutable_admission()->mutable_retry_after()->set_nanos(250'000'000);
  }});
  grpc::ClientContext first_context;
  auto first = w.worker().Generate(&first_context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  grpc::ClientContext second_context;
  auto second = w.worker().Generate(&second_context, SmallWorkerRequest());
  const Received refused = ReadAll(second.get());
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(RetryAfterFromTrailers(second_context), absl::Milliseconds(250));
  w.engine().Finish(w.engine().ids()[0], engine::FinishReason::kStop);
  EXPECT_TRUE(ReadAll(first.get()).status.ok());
}

struct EndCase {
  engine::FinishReason reason;
  grpc::StatusCode code;
  v1::FinishReason proto_reason;
};

class GenerateStreamEndTest : public ::testing::TestWithParam<EndCase> {};

TEST_P(GenerateStreamEndTest, EachEndingHasItsStatusAndFinalChunk) {
  FakeWorker w;
  grpc::ClientContext context;
  auto reader = w.worker().Generate(&context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  const uint64_t id = w.engine().ids()[0];
  w.engine().Emit(id, {'a'}, "a");
  w.engine().Finish(id, GetParam().reason);
  const Received got = ReadAll(reader.get());
  EXPECT_EQ(got.status.error_code(), GetParam().code) << got.status.error_message();
  EXPECT_EQ(got.finals(), 1);
  EXPECT_EQ(got.chunks.back().finish_reason(), GetParam().proto_reason);
  EXPECT_THAT(got.tokens(), ElementsAre('a'));
}

INSTANTIATE_TEST_SUITE_P(
    Endings, GenerateStreamEndTest,
    ::testing::Values(EndCase{engine::FinishReason::kStop, grpc::StatusCode::OK,
                              v1::FINISH_REASON_STOP},
                      EndCase{engine::FinishReason::kStopString, grpc::StatusCode::OK,
                              v1::FINISH_REASON_STOP_STRING},
                      // Cancelled by the worker (drain timeout), not by the client.
                      EndCase{engine::FinishReason::kCancelled, grpc::StatusCode::UNAVAILABLE,
                              v1::FINISH_REASON_CANCELLED},
                      EndCase{engine::FinishReason::kDeadline, grpc::StatusCode::DEADLINE_EXCEEDED,
                              v1::FINISH_REASON_DEADLINE},
                      EndCase{engine::FinishReason::kPreempted,
                              grpc::StatusCode::RESOURCE_EXHAUSTED, v1::FINISH_REASON_PREEMPTED},
                      EndCase{engine::FinishReason::kError, grpc::StatusCode::INTERNAL,
                              v1::FINISH_REASON_ERROR}));

TEST(GenerateStreamTest, RefusedRequestsNeverReachTheEngine) {
  FakeWorker w;
  grpc::ClientContext context;
  v1::WorkerGenerateRequest request = SmallWorkerRequest();
  request.mutable_sampling()->set_top_p(0);
  const Received got = ReadAll(w.worker().Generate(&context, request).get());
  EXPECT_EQ(got.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(got.status.error_message(), HasSubstr("sampling.top_p"));
  EXPECT_TRUE(got.chunks.empty());
  EXPECT_TRUE(w.engine().ids().empty());
}

}  // namespace
}  // namespace onecard::services
