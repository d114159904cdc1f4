// Tests tools/bench/serve/load_runner.h against an in-process Generation
// service that streams max_tokens one-token chunks and records each prompt:
// closed-loop and Poisson runs send exactly the requests asked for, every
// record has its tokens, multi-turn prompts grow by the previous turn's
// prompt and answer, class choice follows the seed, and synthetic prompts
// are deterministic and clear of special ids.
#include "tools/bench/serve/load_runner.h"

#include <map>

#include "absl/synchronization/mutex.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "onecard/v1/generation.grpc.pb.h"

namespace onecard::bench::serve {
namespace {

class EchoService final : public onecard::v1::Generation::CallbackService {
 public:
  grpc::ServerWriteReactor<onecard::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext*, const onecard::v1::GenerateRequest* request) override {
    {
      absl::MutexLock lock(&mu_);
      prompt_lengths_.push_back(request->token_ids().ids_size());
    }
    return new Writer(request->stopping().max_tokens());
  }
  std::vector<int> prompt_lengths() {
    absl::MutexLock lock(&mu_);
    return prompt_lengths_;
  }

 private:
  class Writer : public grpc::ServerWriteReactor<onecard::v1::GenerateResponse> {
   public:
    explicit Writer(int n) : left_(n) { Next(); }
    void OnWriteDone(bool ok) override {
      if (ok)
        Next();
      else
        Finish(grpc::Status::CANCELLED);
    }
    void OnDone() override { delete this; }

   private:
    void Next() {
      if (left_-- == 0) {
        Finish(grpc::Status::OK);
        return;
      }
      chunk_.Clear();
      chunk_.add_token_ids(500 + left_);
      StartWrite(&chunk_);
    }
    int left_;
    onecard::v1::GenerateResponse chunk_;
  };
  absl::Mutex mu_;
  std::vector<int> prompt_lengths_;
};

class LoadRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    target_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override { server_->Shutdown(); }
  LoadSpec Spec(const std::string& mix) {
    LoadSpec s;
    s.target = target_;
    s.mix = *ParseMix(mix);
    s.progress = false;
    return s;
  }
  EchoService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
};

TEST_F(LoadRunnerTest, ClosedLoopSendsEveryRequestWithItsTokens) {
  LoadSpec s = Spec("a=1:8/3,b=1:16/5");
  s.users = 4;
  s.num_requests = 40;
  s.warmup_requests = 3;
  absl::StatusOr<LoadRun> run = RunLoad(s);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->records.size(), 40u);
  EXPECT_EQ(service_.prompt_lengths().size(), 43u);  // warm-up included
  EXPECT_EQ(run->result.total.ok, 40);
  for (const RequestRecord& r : run->records) {
    EXPECT_EQ(r.code, 0);
    EXPECT_EQ(r.output_tokens, r.class_name == "a" ? 3 : 5);
    ASSERT_TRUE(r.ttft.has_value());
    EXPECT_LE(*r.ttft, r.e2e);
  }
  EXPECT_EQ(run->result.classes[0].sent + run->result.classes[1].sent, 40);
  EXPECT_GT(run->result.classes[0].sent, 0);
  EXPECT_GT(run->result.classes[1].sent, 0);
}

TEST_F(LoadRunnerTest, PoissonSendsTheAskedNumber) {
  LoadSpec s = Spec("a=1:4/2");
  s.mode = ArrivalMode::kPoisson;
  s.rate_per_second = 500;
  s.num_requests = 30;
  absl::StatusOr<LoadRun> run = RunLoad(s);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->result.total.sent, 30);
  EXPECT_EQ(run->result.total.ok, 30);
  EXPECT_EQ(run->result.total.output_tokens, 60);
}

TEST_F(LoadRunnerTest, MultiTurnPromptsCarryTheConversation) {
  LoadSpec s = Spec("chat=1:10/4x3");
  s.num_requests = 1;
  absl::StatusOr<LoadRun> run = RunLoad(s);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->records.size(), 3u);
  // Turn k: everything before (k * (10 + 4)) plus 10 fresh tokens.
  EXPECT_EQ(service_.prompt_lengths(), (std::vector<int>{10, 24, 38}));
}

TEST_F(LoadRunnerTest, ClassChoiceFollowsTheSeed) {
  auto classes = [&](uint64_t seed) {
    LoadSpec s = Spec("a=1:4/1,b=1:4/1,c=1:4/1");
    s.num_requests = 30;
    s.seed = seed;
    std::map<std::string, int> count;
    absl::StatusOr<LoadRun> run = RunLoad(s);
    for (const RequestRecord& r : run->records) ++count[r.class_name];
    return count;
  };
  EXPECT_EQ(classes(5), classes(5));
  EXPECT_NE(classes(5), classes(6));
}

TEST_F(LoadRunnerTest, BurstsKeepTheRequestShares) {
  LoadSpec s = Spec("a=0.5:4/1,b=0.5:8/1*5");
  s.mode = ArrivalMode::kPoisson;
  s.rate_per_second = 2000;
  s.num_requests = 300;
  absl::StatusOr<LoadRun> run = RunLoad(s);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->result.total.sent, 300);
  const int64_t b = run->result.classes[1].sent;
  EXPECT_GT(b, 90);  // about half of the requests, in bursts of five
  EXPECT_LT(b, 210);
  // Bursts start together: each b request's conversation index is followed
  // by the rest of its burst, so the prompts (8 tokens) come in runs of 5.
  std::vector<int> lengths = service_.prompt_lengths();
  int run_length = 0, runs_of_five = 0;
  for (size_t i = 0; i <= lengths.size(); ++i) {
    if (i < lengths.size() && lengths[i] == 8) {
      ++run_length;
      continue;
    }
    runs_of_five += run_length > 0 && run_length % 5 == 0;
    run_length = 0;
  }
  EXPECT_GT(runs_of_five, 0);
}

TEST_F(LoadRunnerTest, UnreachableTargetCountsFailures) {
  LoadSpec s = Spec("a=1:4/1");
  s.target = "127.0.0.1:1";
  s.num_requests = 3;
  s.request_timeout = absl::Seconds(5);
  absl::StatusOr<LoadRun> run = RunLoad(s);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->result.total.sent, 3);
  EXPECT_EQ(run->result.total.ok, 0);
  EXPECT_EQ(run->result.total.errors.at("UNAVAILABLE"), 3);
}

TEST(SyntheticPromptTest, DeterministicAndClearOfSpecialIds) {
  std::vector<int32_t> a = SyntheticPrompt(1, 7, 64, 49152);
  EXPECT_EQ(a, SyntheticPrompt(1, 7, 64, 49152));
  EXPECT_NE(a, SyntheticPrompt(1, 8, 64, 49152));
  EXPECT_NE(a, SyntheticPrompt(2, 7, 64, 49152));
  for (int32_t id : a) {
    EXPECT_GE(id, 100);
    EXPECT_LT(id, 49152);
  }
}

// Two classes' prompts of one index share no prefix (a worker's prefix
// cache would find it); one class's are the same from run to run.
TEST(SyntheticPromptTest, ClassesShareNoPrefix) {
  const RequestClass short_qa{.name = "short-qa", .prompt_tokens = 50};
  const RequestClass single{.name = "single-stream", .prompt_tokens = 128};
  const RequestClass longer{.name = "short-qa", .prompt_tokens = 128};
  const std::vector<int32_t> a = SyntheticPrompt(ClassPromptSeed(1, short_qa), 0, 50, 49152);
  const std::vector<int32_t> b = SyntheticPrompt(ClassPromptSeed(1, single), 0, 128, 49152);
  const std::vector<int32_t> c = SyntheticPrompt(ClassPromptSeed(1, longer), 0, 128, 49152);
  EXPECT_NE(a.front(), b.front());
  EXPECT_NE(a.front(), c.front());
  EXPECT_EQ(ClassPromptSeed(1, short_qa), ClassPromptSeed(1, short_qa));
  EXPECT_NE(ClassPromptSeed(1, short_qa), ClassPromptSeed(2, short_qa));
}

}  // namespace
}  // namespace onecard::bench::serve
