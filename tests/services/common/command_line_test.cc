// Tests of the shared command line (services/common/command_line.h): help
// text layout, parsing of every flag form, the usage errors, and the logging
// flags with the config's `log` section under them (config.h).
#include "services/common/command_line.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "engine/common/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/config.h"

ABSL_FLAG(int32_t, cl_max_tokens, 7, "most tokens to generate");
ABSL_FLAG(bool, cl_json, false, "print JSON");
ABSL_FLAG(std::string, cl_prompt, "", "the prompt");
ABSL_FLAG(double, cl_ungrouped, 0.5, "a flag in no group");
ABSL_DECLARE_FLAG(std::string, log_level);
ABSL_DECLARE_FLAG(std::string, log_format);

namespace onecard::services {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

CommandLineSpec Spec() {
  return {.program = "prog",
          .usage = {"run --cl-prompt TEXT"},
          .description = "Does a thing.",
          .subcommands = {{"run", "runs it"}, {"inspect", "shows it"}},
          .groups = {{"Generation", {"cl_max_tokens", "cl_prompt"}},
                     {"Output", {"cl_json", "cl_missing"}}},
          .epilog = "Environment: PROG_KEY"};
}

TEST(CommandLineTest, HelpListsUsageSubcommandsAndGroupedFlagsInOrder) {
  const std::string help = HelpText(Spec());
  EXPECT_THAT(help, HasSubstr("Usage:\n  prog run --cl-prompt TEXT\n"));
  EXPECT_THAT(help, HasSubstr("\nSubcommands:\n  run      runs it\n  inspect  shows it\n"));
  EXPECT_THAT(help, HasSubstr("\nGeneration:\n  --cl-max-tokens=7\n      most tokens to generate\n"
                              "  --cl-prompt\n      the prompt\n"));
  EXPECT_THAT(help, HasSubstr("\nOutput:\n  --cl-json=false\n      print JSON\n"
                              "  --cl-missing  (not defined)\n"));
  EXPECT_THAT(help, HasSubstr("\nOther flags:\n"));
  EXPECT_THAT(help, HasSubstr("  --cl-ungrouped=0.5\n      a flag in no group\n"));
  EXPECT_THAT(help, HasSubstr("Environment: PROG_KEY"));
  EXPECT_THAT(help, Not(HasSubstr("--flagfile")));  // absl's own flags stay out
  EXPECT_LT(help.find("Subcommands:"), help.find("Generation:"));
  EXPECT_LT(help.find("Generation:"), help.find("Output:"));
  EXPECT_THAT(help, HasSubstr("\nLogging:\n  --log-level\n      debug, info, warn or error"));
  EXPECT_THAT(help, HasSubstr("  --log-format\n      text or json"));
  EXPECT_LT(help.find("Output:"), help.find("Logging:"));
  EXPECT_LT(help.find("Logging:"), help.find("Other flags:"));
}

TEST(CommandLineTest, WantsHelpForEveryHelpSpellingBeforeDoubleDash) {
  EXPECT_TRUE(WantsHelp({"prog", "--help"}));
  EXPECT_TRUE(WantsHelp({"prog", "run", "-h"}));
  EXPECT_TRUE(WantsHelp({"prog", "-help"}));
  EXPECT_TRUE(WantsHelp({"prog", "help"}));
  EXPECT_FALSE(WantsHelp({"prog", "run", "help"}));  // a prompt may say help
  EXPECT_FALSE(WantsHelp({"prog", "--", "--help"}));
  EXPECT_FALSE(WantsHelp({"prog", "run"}));
}

TEST(CommandLineTest, ParsesEveryFlagFormAndKeepsPositionals) {
  absl::StatusOr<std::vector<std::string>> args = ParseFlagArgs(
      {"prog", "run", "--cl_max_tokens", "12", "--cl_prompt=a b", "--cl_json", "x", "--", "--y"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(*args, ElementsAre("prog", "run", "x", "--y"));
  EXPECT_EQ(absl::GetFlag(FLAGS_cl_max_tokens), 12);
  EXPECT_EQ(absl::GetFlag(FLAGS_cl_prompt), "a b");
  EXPECT_TRUE(absl::GetFlag(FLAGS_cl_json));
  ASSERT_TRUE(ParseFlagArgs({"prog", "--nocl_json", "-cl_max_tokens=-3"}).ok());
  EXPECT_FALSE(absl::GetFlag(FLAGS_cl_json));
  EXPECT_EQ(absl::GetFlag(FLAGS_cl_max_tokens), -3);
}

TEST(CommandLineTest, UnknownFlagSuggestsTheNearestInDashes) {
  absl::StatusOr<std::vector<std::string>> args = ParseFlagArgs({"prog", "--cl_max_tokns=3"});
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.status().message(), "unknown flag --cl-max-tokns; did you mean --cl-max-tokens?");
  args = ParseFlagArgs({"prog", "--zzzzzzzzzzzz"});
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.status().message(), "unknown flag --zzzzzzzzzzzz");
}

TEST(CommandLineTest, BadOrMissingValueNamesTheFlag) {
  absl::StatusOr<std::vector<std::string>> args = ParseFlagArgs({"prog", "--cl_max_tokens=lots"});
  ASSERT_FALSE(args.ok());
  EXPECT_THAT(args.status().message(), HasSubstr("--cl-max-tokens=lots: "));
  args = ParseFlagArgs({"prog", "--cl_prompt"});
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.status().message(), "--cl-prompt: missing value");
}

TEST(CommandLineTest, NearestNameOnlyForPlausibleTypos) {
  const std::vector<std::string> names = {"model", "max_tokens", "temperature"};
  EXPECT_THAT(NearestName("modle", names), Optional(std::string("model")));
  EXPECT_THAT(NearestName("temprature", names), Optional(std::string("temperature")));
  EXPECT_EQ(NearestName("listen", names), std::nullopt);
}

TEST(CommandLineTest, ParseCommandLineReturnsExitCodesForHelpAndErrors) {
  std::vector<std::string> in = {"prog", "--help"};
  std::vector<char*> argv;
  for (std::string& s : in) argv.push_back(s.data());
  EXPECT_THAT(ParseCommandLine(Spec(), 2, argv.data()).exit_code, Optional(0));
  in = {"prog", "--cl-nope"};
  argv = {in[0].data(), in[1].data()};
  EXPECT_THAT(ParseCommandLine(Spec(), 2, argv.data()).exit_code, Optional(2));
  in = {"prog", "--cl-max-tokens=4", "run"};
  argv = {in[0].data(), in[1].data(), in[2].data()};
  const CommandLine ok = ParseCommandLine(Spec(), 3, argv.data());
  EXPECT_EQ(ok.exit_code, std::nullopt);
  EXPECT_THAT(ok.args, ElementsAre("prog", "run"));
  EXPECT_EQ(absl::GetFlag(FLAGS_cl_max_tokens), 4);
  // A service (flags only) refuses the positional argument.
  CommandLineSpec service = Spec();
  service.flags_only = true;
  EXPECT_THAT(ParseCommandLine(service, 3, argv.data()).exit_code, Optional(2));
  argv = {in[0].data(), in[1].data()};
  EXPECT_EQ(ParseCommandLine(service, 2, argv.data()).exit_code, std::nullopt);
}

// Runs ParseCommandLine on `in`; the exit code it asks for, if any.
std::optional<int> Parse(std::vector<std::string> in) {
  std::vector<char*> argv;
  for (std::string& s : in) argv.push_back(s.data());
  return ParseCommandLine(Spec(), static_cast<int>(argv.size()), argv.data()).exit_code;
}

class LoggingFlagsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    absl::SetFlag(&FLAGS_log_level, "");
    absl::SetFlag(&FLAGS_log_format, "");
    SetLogLevel(LogLevel::kInfo);
    SetLogFormat(LogFormat::kText);
  }
};

TEST_F(LoggingFlagsTest, FlagsSetTheLevelAndFormat) {
  EXPECT_EQ(Parse({"prog", "--log-level=warn", "--log-format", "json"}), std::nullopt);
  EXPECT_EQ(GetLogLevel(), LogLevel::kWarn);
  EXPECT_EQ(GetLogFormat(), LogFormat::kJson);
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
}

TEST_F(LoggingFlagsTest, UnknownValuesAreUsageErrors) {
  EXPECT_THAT(Parse({"prog", "--log-level=loud"}), Optional(2));
  EXPECT_EQ(GetLogLevel(), LogLevel::kInfo);
  absl::SetFlag(&FLAGS_log_level, "");
  EXPECT_THAT(Parse({"prog", "--log-format=xml"}), Optional(2));
  EXPECT_EQ(GetLogFormat(), LogFormat::kText);
  EXPECT_FALSE(ParseLogLevel("loud").ok());
  EXPECT_THAT(std::string(ParseLogFormat("xml").status().message()),
              HasSubstr("\"xml\" (text or json)"));
}

TEST_F(LoggingFlagsTest, ConfigAppliesWhereNoFlagWasGiven) {
  v1::LogConfig config;
  config.set_level(v1::LOG_LEVEL_DEBUG);
  config.set_format(v1::LOG_FORMAT_JSON);
  ApplyLogConfig(config);
  EXPECT_EQ(GetLogLevel(), LogLevel::kDebug);
  EXPECT_EQ(GetLogFormat(), LogFormat::kJson);

  ASSERT_EQ(Parse({"prog", "--log-level=error"}), std::nullopt);
  ApplyLogConfig(config);  // the flag wins over log.level; log.format applies
  EXPECT_EQ(GetLogLevel(), LogLevel::kError);
  EXPECT_EQ(GetLogFormat(), LogFormat::kJson);

  absl::SetFlag(&FLAGS_log_level, "");
  ApplyLogConfig(v1::LogConfig());  // unset fields: the defaults
  EXPECT_EQ(GetLogLevel(), LogLevel::kInfo);
  EXPECT_EQ(GetLogFormat(), LogFormat::kText);
}

}  // namespace
}  // namespace onecard::services
