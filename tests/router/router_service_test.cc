// Tests the router over gRPC (router/router_service.h, generate_call.h,
// router_server.h) against in-process FakeWorkers: streaming through, retry
// before the first token, UNAVAILABLE after it, cancel and deadline reaching
// the worker, rate limits and a full queue with retry-after-ms, priority
// order at the router, no worker, API keys and bad input naming the field,
// draining, the queue timeout, and /metrics parsed back.
// Integration label: it starts gRPC servers on loopback (port 0).
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "onecard/v1/generation.grpc.pb.h"
#include "router/api_keys.h"
#include "router/router_server.h"
#include "services/common/proto_time.h"
#include "tests/router/testing/fake_worker.h"
#include "tests/router/testing/router_under_test.h"
#include "tests/services/testing/http_get.h"
#include "tests/services/testing/prom_text.h"

namespace onecard::router {
namespace {

using ::onecard::router::testing::FakeWorker;
using onecard::v1::GenerateRequest;
using onecard::v1::GenerateResponse;

constexpr char kKey[] = "test-key-standard";
constexpr char kVipKey[] = "test-key-vip";

struct Result {
  grpc::Status status;
  std::vector<GenerateResponse> chunks;
  std::multimap<std::string, std::string> trailers;
  int tokens() const {
    int n = 0;
    for (const auto& c : chunks) n += c.token_ids_size();
    return n;
  }
};

GenerateRequest Tokens(std::vector<int32_t> ids) {
  GenerateRequest r;
  for (int32_t id : ids) r.mutable_token_ids()->add_ids(id);
  r.mutable_stopping()->set_max_tokens(8);
  return r;
}

class RouterServiceTest : public ::testing::Test {
 protected:
  void StartRouter(std::vector<FakeWorker*> workers, int32_t max_in_flight = 2,
                   std::function<void(onecard::v1::RouterConfig&)> tweak = {}) {
    onecard::v1::RouterConfig c = testing::ConfigForFakeWorkers(workers, max_in_flight);
    onecard::v1::TenantConfig* t = c.add_tenants();
    t->set_name("acme");
    t->add_api_key_sha256(Sha256Hex(kKey));
    t = c.add_tenants();
    t->set_name("vip");
    t->add_api_key_sha256(Sha256Hex(kVipKey));
    t->set_max_priority(onecard::v1::PRIORITY_INTERACTIVE);
    if (tweak) tweak(c);
    absl::StatusOr<std::unique_ptr<RouterServer>> r = RouterServer::Start(c);
    ASSERT_TRUE(r.ok()) << r.status();
    router_ = std::move(*r);
    stub_ = onecard::v1::Generation::NewStub(
        grpc::CreateChannel(router_->address(), grpc::InsecureChannelCredentials()));
  }

  Result Generate(const GenerateRequest& request, const std::string& key = kKey,
                  absl::Duration timeout = absl::Seconds(30)) {
    grpc::ClientContext context;
    if (!key.empty()) context.AddMetadata("authorization", "Bearer " + key);
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    return Read(&context, request);
  }

  Result Read(grpc::ClientContext* context, const GenerateRequest& request) {
    Result result;
    auto reader = stub_->Generate(context, request);
    GenerateResponse chunk;
    while (reader->Read(&chunk)) result.chunks.push_back(chunk);
    result.status = reader->Finish();
    for (const auto& [k, v] : context->GetServerTrailingMetadata()) {
      result.trailers.emplace(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
    }
    return result;
  }

  // Starts a call that occupies a worker slot until released or cancelled;
  // returns once the worker has it.
  std::thread Occupy(FakeWorker* worker, int32_t behaviour, Result* out,
                     grpc::ClientContext* context) {
    int64_t before = worker->calls();
    context->AddMetadata("authorization", std::string("Bearer ") + kKey);
    std::thread t([this, behaviour, out, context] { *out = Read(context, Tokens({behaviour})); });
    EXPECT_TRUE(worker->AwaitCalls(before + 1, absl::Seconds(10)));
    return t;
  }

  onecard::testing::PromText Scrape() { return testing::ScrapeMetrics(router_->metrics_address()); }

  std::unique_ptr<RouterServer> router_;
  std::unique_ptr<onecard::v1::Generation::Stub> stub_;
};

TEST_F(RouterServiceTest, StreamsTokensThrough) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  Result r = Generate(Tokens({1003, 5, 6}));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.chunks.size(), 3u);
  EXPECT_EQ(r.chunks[0].token_ids(0), 10);
  EXPECT_EQ(r.chunks[2].token_ids(0), 12);
  EXPECT_EQ(r.chunks[2].finish_reason(), onecard::v1::FINISH_REASON_LENGTH);
  // The last chunk's timing is the client's view.
  const onecard::v1::Timing& t = r.chunks[2].timing();
  EXPECT_GT(services::FromProtoDuration(t.total_time()), absl::ZeroDuration());
  EXPECT_LE(services::FromProtoDuration(t.time_to_first_token()),
            services::FromProtoDuration(t.total_time()));
  EXPECT_EQ(worker->first_tokens(), (std::vector<int32_t>{1003}));
}

TEST_F(RouterServiceTest, TextPromptIsTokenizedAtTheRouter) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  GenerateRequest r;
  r.set_prompt("Hello world");  // HF ids: 19556, 905 -> behaviour 19556: INVALID_ARGUMENT
  Result got = Generate(r);
  EXPECT_EQ(got.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(worker->first_tokens(), (std::vector<int32_t>{19556}));
}

TEST_F(RouterServiceTest, RetriesOnAnotherWorkerBeforeTheFirstToken) {
  auto down = FakeWorker::Start();
  auto up = FakeWorker::Start();
  down->set_fail_all(true);
  StartRouter({down.get(), up.get()}, /*max_in_flight=*/4, [](onecard::v1::RouterConfig& c) {
    c.mutable_dispatch()->set_eject_after_failures(100);  // keep it in the table
  });
  // Different prefixes land on either worker; every request must succeed,
  // and each one that went to the dead worker first was retried.
  for (int i = 0; i < 16 && down->calls() == 0; ++i) {
    Result r = Generate(Tokens({1002, 100 + i}));
    ASSERT_TRUE(r.status.ok()) << i << ": " << r.status.error_message();
    EXPECT_EQ(r.tokens(), 2);
  }
  EXPECT_GE(down->calls(), 1) << "no request was ever sent to the dead worker first";
  EXPECT_EQ(Scrape().Value("onecard_router_retries_total"), down->calls());
}

TEST_F(RouterServiceTest, RetriesGoToWorkersNotTriedYet) {
  // Two dead workers and a live one that is busy: a request meets both dead
  // ones (dispatch.max_attempts 3, never one twice), then waits in the queue
  // for the live one.
  auto down1 = FakeWorker::Start();
  auto down2 = FakeWorker::Start();
  auto up = FakeWorker::Start();
  down1->set_fail_all(true);
  down2->set_fail_all(true);
  StartRouter({down1.get(), down2.get(), up.get()}, /*max_in_flight=*/1,
              [](onecard::v1::RouterConfig& c) {
                c.mutable_dispatch()->set_eject_after_failures(100);  // keep them in the table
              });
  Result held;
  grpc::ClientContext held_context;
  std::thread holder = Occupy(up.get(), 2006, &held, &held_context);
  const int64_t dead_before = down1->calls() + down2->calls();
  const double retries_before = Scrape().Value("onecard_router_retries_total").value_or(0);
  Result r;
  std::thread request([&] { r = Generate(Tokens({1002, 7})); });
  EXPECT_TRUE(down1->AwaitCalls(1, absl::Seconds(10)));
  EXPECT_TRUE(down2->AwaitCalls(1, absl::Seconds(10)));
  while (down1->calls() + down2->calls() < dead_before + 2) absl::SleepFor(absl::Milliseconds(5));
  up->Release();
  request.join();
  holder.join();
  ASSERT_TRUE(held.status.ok()) << held.status.error_message();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens(), 2);
  EXPECT_EQ(down1->calls() + down2->calls() - dead_before, 2);
  EXPECT_EQ(up->calls(), 2);
  EXPECT_EQ(Scrape().Value("onecard_router_retries_total").value_or(0) - retries_before, 2);
}

TEST_F(RouterServiceTest, MaxAttemptsBoundsTheRetries) {
  auto down1 = FakeWorker::Start();
  auto down2 = FakeWorker::Start();
  down1->set_fail_all(true);
  down2->set_fail_all(true);
  StartRouter({down1.get(), down2.get()}, /*max_in_flight=*/4, [](onecard::v1::RouterConfig& c) {
    c.mutable_dispatch()->set_eject_after_failures(100);
    c.mutable_dispatch()->set_max_attempts(1);
  });
  Result r = Generate(Tokens({1002, 7}));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(r.status.error_message().find("before the first token on attempt 1"), std::string::npos)
      << r.status.error_message();
  EXPECT_EQ(down1->calls() + down2->calls(), 1);  // not retried
  EXPECT_EQ(Scrape().Value("onecard_router_retries_total"), 0);
}

TEST_F(RouterServiceTest, FailureAfterFirstTokenIsUnavailableWithReason) {
  auto worker = FakeWorker::Start();
  auto other = FakeWorker::Start();
  StartRouter({worker.get(), other.get()});
  Result r = Generate(Tokens({2001}));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(r.status.error_message().find("after the first token"), std::string::npos)
      << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("crashed mid-stream"), std::string::npos);
  EXPECT_EQ(r.tokens(), 1);
  EXPECT_EQ(worker->calls() + other->calls(), 1);  // not retried
}

TEST_F(RouterServiceTest, ClientCancelReachesTheWorker) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + kKey);
  auto reader = stub_->Generate(&context, Tokens({2002}));
  GenerateResponse chunk;
  ASSERT_TRUE(reader->Read(&chunk));  // the stream is live at the worker
  context.TryCancel();
  EXPECT_TRUE(worker->AwaitCancelled(1, absl::Seconds(10)));
  while (reader->Read(&chunk)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(RouterServiceTest, DeadlineTravelsToTheWorker) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  const absl::Time deadline = absl::Now() + absl::Milliseconds(500);
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + kKey);
  context.set_deadline(absl::ToChronoTime(deadline));
  Result r = Read(&context, Tokens({2003}));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_EQ(worker->deadlines().size(), 1u);
  // Each hop sends what is left as a relative timeout, which the receiver adds
  // to its clock on arrival: the worker's deadline lies later by the two
  // hops' transit (over 5 ms on a loaded 2-core machine), far from none.
  EXPECT_LE(worker->deadlines()[0], deadline + absl::Milliseconds(100));
  EXPECT_GT(worker->deadlines()[0], deadline - absl::Seconds(5));
}

TEST_F(RouterServiceTest, WorkerResourceExhaustedKeepsItsHint) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  Result r = Generate(Tokens({2004}));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_EQ(r.trailers.count("retry-after-ms"), 1u);
  EXPECT_EQ(r.trailers.find("retry-after-ms")->second, "123");
}

TEST_F(RouterServiceTest, RateLimitedTenantGetsRetryAfter) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()}, 2, [](onecard::v1::RouterConfig& c) {
    c.mutable_tenants(0)->set_requests_per_second(0.5);
    c.mutable_tenants(0)->set_request_burst(1);
  });
  // Every configured tenant's series is exported at 0 before any refusal.
  onecard::testing::PromText before = Scrape();
  EXPECT_EQ(before.Value("onecard_router_rate_limited_total",
                         {{"tenant", "acme"}, {"limit", "requests"}}),
            0);
  EXPECT_EQ(
      before.Value("onecard_router_rate_limited_total", {{"tenant", "vip"}, {"limit", "tokens"}}),
      0);
  ASSERT_TRUE(Generate(Tokens({1001})).status.ok());
  Result r = Generate(Tokens({1001}));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(r.status.error_message().find("acme"), std::string::npos);
  ASSERT_EQ(r.trailers.count("retry-after-ms"), 1u);
  EXPECT_GT(std::stoi(r.trailers.find("retry-after-ms")->second), 0);
  EXPECT_EQ(Scrape().Value("onecard_router_rate_limited_total",
                           {{"tenant", "acme"}, {"limit", "requests"}}),
            1);
  EXPECT_TRUE(Generate(Tokens({1001}), kVipKey).status.ok());  // another tenant
}

TEST_F(RouterServiceTest, TenantConcurrentStreamsAreLimited) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()}, 4, [](onecard::v1::RouterConfig& c) {
    c.mutable_tenants(0)->set_max_concurrent_streams(1);
  });
  Result held;
  grpc::ClientContext held_context;
  std::thread holder = Occupy(worker.get(), 2006, &held, &held_context);
  Result second = Generate(Tokens({1001}));
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(second.status.error_message(), "tenant 'acme' has max_concurrent_streams open");
  ASSERT_EQ(second.trailers.count("retry-after-ms"), 1u);
  EXPECT_EQ(second.trailers.find("retry-after-ms")->second, "1000");
  EXPECT_TRUE(Generate(Tokens({1001}), kVipKey).status.ok());  // another tenant
  worker->Release();
  holder.join();
  EXPECT_TRUE(held.status.ok()) << held.status.error_message();
  // The finished stream is free again.
  EXPECT_TRUE(Generate(Tokens({1001})).status.ok());
  EXPECT_EQ(Scrape().Value("onecard_router_rate_limited_total",
                           {{"tenant", "acme"}, {"limit", "streams"}}),
            1);
}

TEST_F(RouterServiceTest, FullQueueIsResourceExhaustedAndPriorityOrdersTheQueue) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()}, /*max_in_flight=*/1,
              [](onecard::v1::RouterConfig& c) { c.mutable_queue()->set_max_depth(2); });
  Result held;
  grpc::ClientContext held_context;
  std::thread holder = Occupy(worker.get(), 2006, &held, &held_context);
  // Two queued: a batch request first, then an interactive one.
  Result batch, interactive;
  std::thread t1([&] {
    GenerateRequest r = Tokens({1001, 1});
    r.set_priority(onecard::v1::PRIORITY_BATCH);
    batch = Generate(r);
  });
  while (Scrape().Sum("onecard_router_queue_depth") < 1) std::this_thread::yield();
  std::thread t2([&] {
    GenerateRequest r = Tokens({1002, 2});
    r.set_priority(onecard::v1::PRIORITY_INTERACTIVE);
    interactive = Generate(r, kVipKey);
  });
  while (Scrape().Sum("onecard_router_queue_depth") < 2) std::this_thread::yield();
  Result full = Generate(Tokens({1001, 3}));
  EXPECT_EQ(full.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(full.trailers.count("retry-after-ms"), 1u);
  EXPECT_NE(full.status.error_message().find("queue full"), std::string::npos);
  worker->Release();
  holder.join();
  t1.join();
  t2.join();
  EXPECT_TRUE(batch.status.ok());
  EXPECT_TRUE(interactive.status.ok());
  // The worker saw the held call, then the interactive one, then the batch.
  EXPECT_EQ(worker->first_tokens(), (std::vector<int32_t>{2006, 1002, 1001}));
  onecard::testing::PromText text = Scrape();
  EXPECT_EQ(text.Value("onecard_router_requests_rejected_total", {{"reason", "queue_full"}}), 1);
  EXPECT_EQ(text.Value("onecard_router_queue_wait_seconds_count", {{"priority", "batch"}}), 1);
}

TEST_F(RouterServiceTest, InteractiveOvertakesQueuedBatch) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()}, /*max_in_flight=*/1);
  Result held, batch, interactive;
  grpc::ClientContext held_context;
  std::thread holder = Occupy(worker.get(), 2006, &held, &held_context);
  std::thread t1([&] {
    GenerateRequest r = Tokens({1001, 1});
    r.set_priority(onecard::v1::PRIORITY_BATCH);
    batch = Generate(r);
  });
  while (Scrape().Sum("onecard_router_queue_depth") < 1) std::this_thread::yield();
  std::thread t2([&] { interactive = Generate(Tokens({1002, 2}), kVipKey); });
  while (Scrape().Sum("onecard_router_queue_depth") < 2) std::this_thread::yield();
  worker->Release();
  holder.join();
  t1.join();
  t2.join();
  // Unspecified priority for the vip tenant is standard: still ahead of batch.
  EXPECT_EQ(worker->first_tokens(), (std::vector<int32_t>{2006, 1002, 1001}));
}

// Issue 22: "no healthy worker" failed at once; the request waits in the
// queue for one (up to the queue timeout), then fails UNAVAILABLE.
TEST_F(RouterServiceTest, NoWorkerWaitsForTheQueueTimeoutThenUnavailable) {
  StartRouter({}, 2, [](onecard::v1::RouterConfig& c) {
    services::ToProtoDuration(absl::Milliseconds(300), c.mutable_queue()->mutable_queue_timeout());
  });
  Result r = Generate(Tokens({1001}));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(r.status.error_message().find("no healthy worker within the queue timeout (300ms)"),
            std::string::npos)
      << r.status.error_message();
  EXPECT_EQ(Scrape().Value("onecard_router_requests_rejected_total", {{"reason", "no_worker"}}), 1);
}

TEST_F(RouterServiceTest, BadInputGetsTheRightCodeNamingTheField) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  Result r = Generate(Tokens({1001}), "wrong-key");
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(r.status.error_message().find("authorization"), std::string::npos);
  r = Generate(Tokens({1001}), "");
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  GenerateRequest high = Tokens({1001});
  high.set_priority(onecard::v1::PRIORITY_INTERACTIVE);
  r = Generate(high);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(r.status.error_message().rfind("priority:", 0), 0u) << r.status.error_message();
  GenerateRequest chat;
  chat.mutable_messages()->add_messages()->set_role("robot");
  r = Generate(chat);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message().rfind("messages[0].role:", 0), 0u);
  GenerateRequest long_prompt;
  for (int i = 0; i < 8200; ++i) long_prompt.mutable_token_ids()->add_ids(100);
  r = Generate(long_prompt);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message().rfind("token_ids.ids:", 0), 0u) << r.status.error_message();
  GenerateRequest unknown_model = Tokens({1001});
  unknown_model.set_model("gpt-9");
  EXPECT_EQ(Generate(unknown_model).status.error_code(), grpc::StatusCode::NOT_FOUND);
  GenerateRequest unknown_priority = Tokens({1001});
  unknown_priority.set_priority(static_cast<onecard::v1::Priority>(99));
  r = Generate(unknown_priority);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message().rfind("priority:", 0), 0u) << r.status.error_message();
  EXPECT_EQ(worker->calls(), 0);  // nothing reached the worker
  // Tokenize and ListModels need a key too.
  grpc::ClientContext context;
  onecard::v1::ListModelsResponse models;
  EXPECT_EQ(stub_->ListModels(&context, {}, &models).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext keyed;
  keyed.AddMetadata("authorization", std::string("Bearer ") + kKey);
  ASSERT_TRUE(stub_->ListModels(&keyed, {}, &models).ok());
  EXPECT_EQ(models.models(0).id(), "smol");
  onecard::testing::PromText text = Scrape();
  EXPECT_EQ(text.Value("onecard_router_requests_rejected_total", {{"reason", "unauthenticated"}}),
            2);
  // The robot, the long prompt, the unknown model and the unknown priority.
  EXPECT_EQ(text.Value("onecard_router_requests_rejected_total", {{"reason", "invalid_argument"}}),
            4);
}

// Issue 22: invalid UTF-8 in a string field came back as UNIMPLEMENTED with
// an empty message; now INVALID_ARGUMENT naming the field, at the router.
TEST_F(RouterServiceTest, InvalidUtf8IsInvalidArgumentNamingTheField) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  GenerateRequest prompt;
  prompt.set_prompt("caf\xe9");  // Latin-1, not UTF-8
  Result r = Generate(prompt);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << r.status.error_message();
  EXPECT_EQ(r.status.error_message().rfind("prompt: not valid UTF-8", 0), 0u)
      << r.status.error_message();
  GenerateRequest chat = Tokens({1001});
  chat.mutable_stopping()->add_stop_strings("\xff");
  r = Generate(chat);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message().rfind("stopping.stop_strings[0]: not valid UTF-8", 0), 0u)
      << r.status.error_message();
  // Without a key the caller learns nothing about the request.
  r = Generate(prompt, "");
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + kKey);
  onecard::v1::TokenizeRequest tokenize;
  tokenize.mutable_messages()->add_messages()->set_content("\xc0\x80");  // overlong NUL
  onecard::v1::TokenizeResponse tokens;
  grpc::Status s = stub_->Tokenize(&context, tokenize, &tokens);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(s.error_message().rfind("messages.messages[0].content: not valid UTF-8", 0), 0u)
      << s.error_message();
  EXPECT_EQ(worker->calls(), 0);
}

// Issue 22: a client's deadline passing was counted as CANCELLED by the
// router; it is DEADLINE_EXCEEDED, for a call at a worker and one queued.
TEST_F(RouterServiceTest, ClientDeadlineIsCountedAsDeadlineExceeded) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()}, 1);
  Result at_worker = Generate(Tokens({2003}), kKey, absl::Milliseconds(300));
  EXPECT_EQ(at_worker.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  Result held;
  grpc::ClientContext held_context;
  std::thread holder = Occupy(worker.get(), 2006, &held, &held_context);
  Result queued = Generate(Tokens({1001}), kKey, absl::Milliseconds(300));
  EXPECT_EQ(queued.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The router's deadline for a call is set when the call reaches it, a
  // moment after the client's: the worker is freed only once the router has
  // taken the call off its queue, or it could still start it there.
  const absl::Time until = absl::Now() + absl::Seconds(10);
  auto queued_calls = [&] {
    int64_t n = 0;
    for (int64_t depth : router_->core().dispatcher().QueueDepths()) n += depth;
    return n;
  };
  while (queued_calls() > 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(queued_calls(), 0);
  worker->Release();
  holder.join();
  // A call is counted when gRPC is done with it: wait until none is open.
  ASSERT_TRUE(router_->core().WaitIdle(absl::Now() + absl::Seconds(10)));
  onecard::testing::PromText text = Scrape();
  EXPECT_EQ(
      text.Value("onecard_router_requests_total", {{"api", "grpc"}, {"code", "DEADLINE_EXCEEDED"}}),
      2);
  EXPECT_EQ(text.Value("onecard_router_requests_total", {{"api", "grpc"}, {"code", "CANCELLED"}}),
            0);
}

TEST_F(RouterServiceTest, DrainRefusesNewAndFinishesOld) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  Result held;
  grpc::ClientContext held_context;
  std::thread holder = Occupy(worker.get(), 2006, &held, &held_context);
  absl::Status drained;
  std::thread drainer([&] { drained = router_->Drain(absl::Seconds(30)); });
  while (Scrape().Value("onecard_router_draining") != 1) std::this_thread::yield();
  Result refused = Generate(Tokens({1001}));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.status.error_message().find("draining"), std::string::npos);
  worker->Release();
  holder.join();
  drainer.join();
  EXPECT_TRUE(held.status.ok()) << held.status.error_message();
  EXPECT_TRUE(drained.ok()) << drained;
}

TEST_F(RouterServiceTest, QueueTimeoutEndsAWaitingRequest) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()}, 1, [](onecard::v1::RouterConfig& c) {
    services::ToProtoDuration(absl::Milliseconds(200), c.mutable_queue()->mutable_queue_timeout());
  });
  Result held;
  grpc::ClientContext held_context;
  std::thread holder = Occupy(worker.get(), 2006, &held, &held_context);
  Result r = Generate(Tokens({1001}));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(r.status.error_message().find("queue timeout"), std::string::npos);
  worker->Release();
  holder.join();
  EXPECT_EQ(Scrape().Value("onecard_router_requests_rejected_total", {{"reason", "queue_timeout"}}),
            1);
}

}  // namespace
}  // namespace onecard::router
