// Tests of NormalizeFlagNames (services/common/flag_names.h).
#include "services/common/flag_names.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

// A flag's value that starts with "--" but is no flag name (the bench's
// --worker-args) is passed on untouched.
TEST(FlagNamesTest, ValuesThatAreNoFlagNameAreKept) {
  std::vector<std::string> in = {"onecard-bench", "--worker-args",
                                 "--max-num-seqs 128 --kv-blocks 200", "--x-y=--a b"};
  std::vector<char*> argv;
  for (std::string& s : in) argv.push_back(s.data());
  EXPECT_THAT(NormalizeFlagNames(static_cast<int>(argv.size()), argv.data()),
              ElementsAre("onecard-bench", "--worker_args", "--max-num-seqs 128 --kv-blocks 200",
                          "--x_y=--a b"));
}

}  // namespace
}  // namespace onecard::services
