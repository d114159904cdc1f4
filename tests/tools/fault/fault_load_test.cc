// CheckStreams: the fault suite's accounting of hand-made stream records
// against hand-written references (a duplicated token, a replayed stream, a
// stream with no status, an OK stream cut short are each caught).
#include "tools/fault/fault_load.h"

#include "gtest/gtest.h"

namespace onecard::fault {
namespace {

const std::vector<std::vector<int32_t>> kReferences = {{5, 6, 7, 8}, {9, 10, 11, 12}};

StreamRecord Ok(int64_t index, int prompt, std::vector<int32_t> tokens) {
  StreamRecord r;
  r.index = index;
  r.prompt_index = prompt;
  r.done = true;
  r.code = 0;
  r.completion_tokens = static_cast<int64_t>(tokens.size());
  r.tokens = std::move(tokens);
  r.finish_reason = 2;  // LENGTH
  return r;
}

StreamRecord Failed(int64_t index, int prompt, int code, std::vector<int32_t> tokens) {
  StreamRecord r = Ok(index, prompt, std::move(tokens));
  r.code = code;
  r.finish_reason = 0;
  r.completion_tokens = -1;
  return r;
}

TEST(CheckStreamsTest, CompletedAndFailedAddUpToSent) {
  const StreamAccount a =
      CheckStreams({Ok(0, 0, {5, 6, 7, 8}), Ok(1, 1, {9, 10, 11, 12}), Failed(2, 0, 14, {5, 6}),
                    Failed(3, 1, 1, {}), Failed(4, 1, 1, {9})},
                   kReferences, 4);
  EXPECT_EQ(a.sent, 5);
  EXPECT_EQ(a.completed, 2);
  EXPECT_EQ(a.failed, (std::map<std::string, int64_t>{{"UNAVAILABLE", 1}, {"CANCELLED", 2}}));
  EXPECT_EQ(a.lost, 0);
  EXPECT_EQ(a.bad_streams, 0);
  EXPECT_TRUE(a.problems.empty());
}

TEST(CheckStreamsTest, DuplicatedOrReplayedTokensAreBadStreams) {
  const StreamAccount a = CheckStreams(
      {Ok(0, 0, {5, 5, 6, 7}), Failed(1, 1, 14, {9, 10, 9, 10}), Failed(2, 0, 14, {5, 6, 7, 8, 8})},
      kReferences, 4);
  EXPECT_EQ(a.bad_streams, 3);
  EXPECT_EQ(a.problems.size(), 3u);
}

TEST(CheckStreamsTest, NoStatusOrAShortOkStreamIsLost) {
  StreamRecord silent;
  silent.index = 0;
  StreamRecord short_ok = Ok(1, 0, {5, 6});
  StreamRecord no_final = Ok(2, 1, {9, 10, 11, 12});
  no_final.finish_reason = 0;
  StreamRecord wrong_usage = Ok(3, 1, {9, 10, 11, 12});
  wrong_usage.completion_tokens = 5;
  const StreamAccount a = CheckStreams(
      {silent, short_ok, no_final, wrong_usage, Ok(4, 0, {5, 6, 7, 8})}, kReferences, 4);
  EXPECT_EQ(a.sent, 5);
  EXPECT_EQ(a.lost, 4);
  EXPECT_EQ(a.completed, 1);
}

TEST(FailedTextTest, ListsCodesInOrder) {
  EXPECT_EQ(FailedText({}), "-");
  EXPECT_EQ(FailedText({{"UNAVAILABLE", 3}, {"CANCELLED", 2}}), "CANCELLED=2 UNAVAILABLE=3");
}

}  // namespace
}  // namespace onecard::fault
