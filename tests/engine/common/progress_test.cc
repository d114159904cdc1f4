// Tests of Progress (engine/common/progress.h) with a fake clock and
// captured output: a terminal gets a bar redrawn in place only when it
// moves and a final newline; a log gets a line at most every interval and
// one at the end of long work, none for short work.
#include "engine/common/progress.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard {
namespace {

using ::testing::ElementsAre;

struct Capture {
  absl::Time now = absl::UnixEpoch();
  std::vector<std::string> drawn;
  std::vector<std::string> logged;

  ProgressOptions Options(bool terminal) {
    return {.terminal = terminal,
            .log_interval = absl::Seconds(5),
            .now = [this] { return now; },
            .draw = [this](const std::string& s) { drawn.push_back(s); },
            .log = [this](const std::string& s) { logged.push_back(s); }};
  }
};

TEST(ProgressTest, TerminalBarRedrawsWhenItMovesAndEndsTheLine) {
  Capture c;
  {
    Progress p("loading", 40, "tensors", c.Options(true));
    p.Add();  // 1/40: 0 cells, first draw
    p.Add();  // 2/40: 1 cell
    p.Add();  // 3/40: still 1 cell, no redraw
    c.now += absl::Seconds(2);
    p.Add(37);  // 40/40
  }             // destructor: Done
  EXPECT_THAT(c.drawn, ElementsAre("\rloading [....................] 1/40 tensors  0.0 s",
                                   "\rloading [#...................] 2/40 tensors  0.0 s",
                                   "\rloading [####################] 40/40 tensors  2.0 s",
                                   "\rloading [####################] 40/40 tensors  2.0 s\n"));
  EXPECT_TRUE(c.logged.empty());
}

TEST(ProgressTest, LogGetsALineEveryIntervalAndOneAtTheEndOfLongWork) {
  Capture c;
  Progress p("converting", 10, "layers", c.Options(false));
  p.Add(2);
  c.now += absl::Seconds(4);
  p.Add(2);  // 4 s: not yet
  c.now += absl::Seconds(2);
  p.Add(1);  // 6 s: a line
  c.now += absl::Seconds(1);
  p.Add(5);  // 7 s: 1 s after the last line
  p.Done();
  p.Done();  // once
  EXPECT_THAT(c.logged, ElementsAre("converting [##########..........] 5/10 layers  6.0 s",
                                    "converting [####################] 10/10 layers  7.0 s done"));
  EXPECT_TRUE(c.drawn.empty());
}

TEST(ProgressTest, ShortWorkLogsNothing) {
  Capture c;
  Progress p("loading", 3, "tensors", c.Options(false));
  p.Add(3);
  p.Done();
  EXPECT_TRUE(c.logged.empty());
}

}  // namespace
}  // namespace onecard
