// Tests tools/bench/serve/load_spec.h: the serve-mix preset is the four
// classes of benchmarks.md, custom mixes parse, and bad mixes or specs are
// refused naming the flag and the part.
#include "tools/bench/serve/load_spec.h"

#include "gtest/gtest.h"

namespace onecard::bench::serve {
namespace {

TEST(LoadSpecTest, ServeMixIsTheFourClassesOfBenchmarksMd) {
  std::vector<RequestClass> mix = ServeMixClasses();
  ASSERT_EQ(mix.size(), 4u);
  EXPECT_EQ(mix[0].name, "short-qa");
  EXPECT_EQ(mix[0].prompt_tokens, 50);
  EXPECT_EQ(mix[0].max_tokens, 50);
  EXPECT_EQ(mix[1].prompt_tokens, 200);
  EXPECT_EQ(mix[1].max_tokens, 1000);
  EXPECT_EQ(mix[2].prompt_tokens, 4000);
  EXPECT_EQ(mix[2].max_tokens, 200);
  EXPECT_EQ(mix[3].turns, 5);
  EXPECT_EQ(mix[3].prompt_tokens, 100);
  for (const RequestClass& c : mix) {
    EXPECT_EQ(c.weight, 1) << c.name;
    EXPECT_EQ(c.burst, 1) << c.name;  // a burst of 0 started no conversation at all
    EXPECT_EQ(c.turns, c.name == "multi-turn" ? 5 : 1) << c.name;
    EXPECT_EQ(c.priority, onecard::v1::PRIORITY_UNSPECIFIED) << c.name;
  }
  EXPECT_EQ(ParseMix("serve-mix")->size(), 4u);
  EXPECT_EQ(ParseMix("")->size(), 4u);
  std::vector<RequestClass> one = *ParseMix("long-context");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].prompt_tokens, 4000);
}

TEST(LoadSpecTest, CustomMixParses) {
  absl::StatusOr<std::vector<RequestClass>> mix =
      ParseMix("short=0.9:32/8@interactive, long=0.1:512/16*4@batch,chat=2:10/5x3");
  ASSERT_TRUE(mix.ok()) << mix.status();
  ASSERT_EQ(mix->size(), 3u);
  EXPECT_EQ((*mix)[0].name, "short");
  EXPECT_DOUBLE_EQ((*mix)[0].weight, 0.9);
  EXPECT_EQ((*mix)[0].prompt_tokens, 32);
  EXPECT_EQ((*mix)[0].max_tokens, 8);
  EXPECT_EQ((*mix)[0].priority, onecard::v1::PRIORITY_INTERACTIVE);
  EXPECT_EQ((*mix)[1].priority, onecard::v1::PRIORITY_BATCH);
  EXPECT_EQ((*mix)[1].burst, 4);
  EXPECT_EQ((*mix)[0].burst, 1);
  EXPECT_EQ((*mix)[2].turns, 3);
  EXPECT_EQ((*mix)[2].priority, onecard::v1::PRIORITY_UNSPECIFIED);
}

TEST(LoadSpecTest, BadMixesNameThePart) {
  for (const char* bad :
       {"short", "short=x:1/1", "short=0:1/1", "short=1:1", "short=1:0/1", "short=1:1/1x0",
        "short=1:1/1*0", "short=1:1/1@urgent", "a=1:1/1,a=1:2/2", "=1:1/1"}) {
    absl::StatusOr<std::vector<RequestClass>> mix = ParseMix(bad);
    ASSERT_FALSE(mix.ok()) << bad;
    EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(mix.status().message().find("--mix"), std::string::npos) << mix.status();
  }
  EXPECT_NE(ParseMix("s=1:1/1@urgent").status().message().find("urgent"), std::string::npos);
}

TEST(LoadSpecTest, ValidateNamesTheFlag) {
  LoadSpec s;
  s.mix = ServeMixClasses();
  EXPECT_NE(ValidateLoadSpec(s).message().find("--target"), std::string::npos);
  s.target = "127.0.0.1:1";
  EXPECT_TRUE(ValidateLoadSpec(s).ok());
  s.users = 0;
  EXPECT_NE(ValidateLoadSpec(s).message().find("--users"), std::string::npos);
  s.users = 1;
  s.mode = ArrivalMode::kPoisson;
  s.rate_per_second = 0;
  EXPECT_NE(ValidateLoadSpec(s).message().find("--rate"), std::string::npos);
  s.rate_per_second = 1;
  s.num_requests = 0;
  EXPECT_NE(ValidateLoadSpec(s).message().find("--requests"), std::string::npos);
  s.num_requests = 1;
  s.mix[0].burst = 0;
  EXPECT_NE(ValidateLoadSpec(s).message().find("class short-qa needs burst >= 1"),
            std::string::npos);
}

}  // namespace
}  // namespace onecard::bench::serve
