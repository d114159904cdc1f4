// Tests of NormalizeFlagNames and ParseFlags (services/common/flag_names.h).
#include "services/common/flag_names.h"

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int32_t, max_tokens, 0, "a flag for ParseFlagsTest");

namespace onecard::services {
namespace {

using ::testing::ElementsAre;

TEST(FlagNamesTest, DashesInFlagNamesBecomeUnderscores) {
  std::vector<std::string> in = {"onecard", "generate",     "--max-tokens=5", "--top-p",
                                 "0.5",     "--prompt=a-b", "-x-y",           "--json",
                                 "--",      "--not-a-flag"};
  std::vector<char*> argv;
  for (std::string& s : in) argv.push_back(s.data());
  EXPECT_THAT(NormalizeFlagNames(static_cast<int>(argv.size()), argv.data()),
              ElementsAre("onecard", "generate", "--max_tokens=5", "--top_p", "0.5", "--prompt=a-b",
                          "-x-y", "--json", "--", "--not-a-flag"));
}

TEST(FlagNamesTest, ParseFlagsSetsDashedFlagsAndReturnsPositionals) {
  std::vector<std::string> in = {"onecard", "generate", "--max-tokens=5", "--", "--x-y"};
  std::vector<char*> argv;
  for (std::string& s : in) argv.push_back(s.data());
  EXPECT_THAT(ParseFlags(static_cast<int>(argv.size()), argv.data()),
              ElementsAre("onecard", "generate", "--x-y"));
  EXPECT_EQ(absl::GetFlag(FLAGS_max_tokens), 5);
}

}  // namespace
}  // namespace onecard::services
