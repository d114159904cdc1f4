// Tests of onecard-bench's registry and reporter: the JSON line format of
// benchmarks.md (null floors, pct_of_floor), appending, the table, the run
// info, and scenario registration.
#include "tools/bench/bench_report.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/bench/bench_registry.h"

namespace onecard::bench {
namespace {

using ::testing::HasSubstr;

const RunInfo kInfo = {
    .commit = "abc1234", .device = "Test CPU (2 cores)", .date = "2026-01-02T03:04:05Z"};

TEST(BenchReportTest, RecordJsonHasEveryFieldInOrder) {
  const std::string line = RecordJson({.scenario = "cpu-decode",
                                       .case_name = "batch1",
                                       .metric = "decode_tokens_per_second",
                                       .value = 12.5,
                                       .unit = "tok/s"},
                                      kInfo);
  EXPECT_EQ(line,
            "{\"scenario\":\"cpu-decode\",\"case\":\"batch1\",\"metric\":"
            "\"decode_tokens_per_second\",\"value\":12.5,\"unit\":\"tok/s\",\"floor\":null,"
            "\"pct_of_floor\":null,\"commit\":\"abc1234\",\"device\":\"Test CPU (2 cores)\","
            "\"date\":\"2026-01-02T03:04:05Z\"}");
}

TEST(BenchReportTest, FloorGivesPercent) {
  nlohmann::json j = nlohmann::json::parse(RecordJson({.scenario = "decode-8b-bf16",
                                                       .case_name = "batch1",
                                                       .metric = "tok/s",
                                                       .value = 250,
                                                       .unit = "tok/s",
                                                       .floor = 287.5},
                                                      kInfo));
  EXPECT_DOUBLE_EQ(j["floor"].get<double>(), 287.5);
  EXPECT_NEAR(j["pct_of_floor"].get<double>(), 86.9565, 1e-3);
}

TEST(BenchReportTest, AppendsLinesAndPrintsATable) {
  const std::string dir = ::testing::TempDir() + "/bench_report_test";
  std::filesystem::remove_all(dir);
  const std::string path = dir + "/sub/results.jsonl";
  BenchReporter reporter(kInfo);
  reporter.Add({.scenario = "cpu-decode",
                .case_name = "batch1",
                .metric = "m",
                .value = 1,
                .unit = "tok/s"});
  reporter.Add({.scenario = "cpu-decode",
                .case_name = "batch8",
                .metric = "m",
                .value = 2,
                .unit = "tok/s"});
  ASSERT_TRUE(reporter.AppendJsonLines(path).ok());
  ASSERT_TRUE(reporter.AppendJsonLines(path).ok());
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded());
    ++n;
  }
  EXPECT_EQ(n, 4);
  std::ostringstream table;
  reporter.PrintTable(table);
  EXPECT_THAT(table.str(), HasSubstr("batch8"));
  EXPECT_THAT(table.str(), HasSubstr("Test CPU (2 cores)"));
  EXPECT_FALSE(reporter.AppendJsonLines("/proc/no/such/dir/results.jsonl").ok());
}

TEST(BenchReportTest, CurrentRunInfoNamesTheMachine) {
  const RunInfo info = CurrentRunInfo();
  EXPECT_THAT(info.device, HasSubstr("cores)"));
  EXPECT_FALSE(info.commit.empty());
  EXPECT_EQ(info.date.size(), 20u);  // 2026-01-02T03:04:05Z
}

// $ONECARD_COMMIT first, then a bundle's COMMIT file, then git.
TEST(BenchReportTest, RunCommitPrefersTheEnvironmentThenTheBundle) {
  const char* saved = std::getenv("ONECARD_COMMIT");
  const std::string was = saved == nullptr ? "" : saved;
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / "run_commit_test_COMMIT";
  std::ofstream(file) << "abc1234-dirty\n";
  ASSERT_EQ(unsetenv("ONECARD_COMMIT"), 0);
  EXPECT_EQ(RunCommit(file), "abc1234-dirty");
  EXPECT_NE(RunCommit(file.string() + ".missing"), "abc1234-dirty");
  EXPECT_FALSE(RunCommit(file.string() + ".missing").empty());
  ASSERT_EQ(setenv("ONECARD_COMMIT", "fedcba9", 1), 0);
  EXPECT_EQ(RunCommit(file), "fedcba9");
  if (saved == nullptr) {
    unsetenv("ONECARD_COMMIT");
  } else {
    setenv("ONECARD_COMMIT", was.c_str(), 1);
  }
  std::filesystem::remove(file);
}

absl::Status Noop(const BenchOptions&, BenchReporter&) { return absl::OkStatus(); }

TEST(BenchRegistryTest, RegisterFindAndList) {
  EXPECT_EQ(FindScenario("test-noop"), nullptr);
  EXPECT_TRUE(RegisterScenario({"test-noop", "does nothing", &Noop}));
  const Scenario* s = FindScenario("test-noop");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->description, "does nothing");
  BenchReporter reporter(kInfo);
  EXPECT_TRUE(s->run({}, reporter).ok());
  bool listed = false;
  for (const Scenario* each : AllScenarios()) listed |= each->name == "test-noop";
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace onecard::bench
