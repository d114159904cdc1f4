// Tests of StopStringMatcher: stops inside one piece, spanning pieces,
// hold-back of possible prefixes and its release, several stop strings.
#include "engine/runtime/stop_strings.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

// Feeds pieces; returns everything emitted and whether a stop matched.
std::pair<std::string, bool> Feed(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  std::string all;
  for (const std::string& piece : pieces) {
    std::string emit;
    const bool stopped = m.Push(piece, &emit);
    all += emit;
    if (stopped) return {all, true};
  }
  return {all + m.TakeHeld(), false};
}

TEST(StopStringsTest, NoStopStringsPassesEverythingThrough) {
  StopStringMatcher m({});
  std::string emit;
  EXPECT_FALSE(m.Push("hello", &emit));
  EXPECT_EQ(emit, "hello");
  EXPECT_EQ(m.held(), "");
}

TEST(StopStringsTest, StopInsideOnePieceCutsBeforeIt) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(Feed(m, {"abc", "dENDxyz", "more"}), std::make_pair(std::string("abcd"), true));
}

TEST(StopStringsTest, StopSpanningPiecesIsHeldThenDropped) {
  StopStringMatcher m({"</s>"});
  std::string emit;
  EXPECT_FALSE(m.Push("hi <", &emit));
  EXPECT_EQ(emit, "hi ");
  EXPECT_EQ(m.held(), "<");
  EXPECT_FALSE(m.Push("/", &emit));
  EXPECT_EQ(emit, "");
  EXPECT_FALSE(m.Push("s", &emit));
  EXPECT_EQ(emit, "");
  EXPECT_TRUE(m.Push(">tail", &emit));
  EXPECT_EQ(emit, "");
}

TEST(StopStringsTest, AFalseStartIsReleased) {
  StopStringMatcher m({"</s>"});
  std::string emit;
  EXPECT_FALSE(m.Push("a</", &emit));
  EXPECT_EQ(emit, "a");
  EXPECT_FALSE(m.Push("b>", &emit));
  EXPECT_EQ(emit, "</b>");
  EXPECT_EQ(m.held(), "");
  EXPECT_FALSE(m.Push("x<", &emit));
  EXPECT_EQ(m.TakeHeld(), "<");  // the end of generation gives it up
}

TEST(StopStringsTest, EarliestOfSeveralStopsWins) {
  StopStringMatcher m({"world", "o w", ""});
  EXPECT_EQ(Feed(m, {"hell", "o world"}), std::make_pair(std::string("hell"), true));
}

TEST(StopStringsTest, OverlappingPrefixesHoldFromTheEarliest) {
  StopStringMatcher m({"aab"});
  std::string emit;
  EXPECT_FALSE(m.Push("xaa", &emit));
  EXPECT_EQ(emit, "x");
  EXPECT_FALSE(m.Push("a", &emit));  // "aaa": "aa" may still start "aab"
  EXPECT_EQ(emit, "a");
  EXPECT_TRUE(m.Push("b", &emit));
  EXPECT_EQ(emit, "");
}

TEST(StopStringsTest, MultiByteStopStrings) {
  StopStringMatcher m({"科创"});
  EXPECT_EQ(Feed(m, {"上海", "\xe7\xa7\x91", "\xe5\x88\x9b", "板"}),
            std::make_pair(std::string("上海"), true));
}

}  // namespace
}  // namespace onecard::engine
