// The first things a person types, binary by binary, as real processes:
// `--help` prints the binary's own flags in titled groups (and its
// subcommands) on stdout and exits 0; an unknown flag exits 2 naming the
// nearest flag; argument errors that need no model come before any model
// loads (a missing model file is never the reported problem); a config
// error names the file, line, full field path and the allowed values, in
// each service (services/common/config.h LoadServiceConfig).
// The expected texts are written here by hand from the flag and field
// names, not taken from the code under test.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/services/testing/child_process.h"

namespace onecard {
namespace {

using ::onecard::testing::ChildProcess;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

Result RunBinary(std::vector<std::string> argv) {
  Result result;
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(argv, true);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return result;
  while (true) {
    absl::StatusOr<std::string> line = (*child)->WaitForLine("", absl::Seconds(60));
    if (!line.ok()) break;
    result.output += *line + "\n";
  }
  absl::StatusOr<int> code = (*child)->Wait(absl::Seconds(60));
  EXPECT_TRUE(code.ok()) << code.status();
  result.exit_code = code.ok() ? *code : -1;
  return result;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/cli_test_", getpid(), "_", name);
  std::ofstream(path) << text;
  return path;
}

const char kMissingModel[] = "/nonexistent/model.gguf";

struct HelpCase {
  const char* binary;
  std::vector<std::string> expected;  // group titles, flags, subcommands
};

class HelpTest : public ::testing::TestWithParam<HelpCase> {};

TEST_P(HelpTest, HelpPrintsGroupedFlagsAndExitsZero) {
  for (const char* spelling : {"--help", "-h"}) {
    const Result r = RunBinary({GetParam().binary, spelling});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("Usage:\n"));
    for (const std::string& text : GetParam().expected) EXPECT_THAT(r.output, HasSubstr(text));
    EXPECT_THAT(r.output, HasSubstr("\nLogging:\n  --log-level\n"));
    EXPECT_THAT(r.output, HasSubstr("  --log-format\n"));
    // Only the binary's own flags: none of absl's, none of another binary's.
    EXPECT_THAT(r.output, Not(HasSubstr("--flagfile")));
    EXPECT_THAT(r.output, Not(HasSubstr("No flags matched")));
  }
}

TEST_P(HelpTest, UnknownFlagNamesTheNearestAndExitsTwo) {
  const Result r = RunBinary({GetParam().binary, "--lisen=1"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("unknown flag --lisen"));
  EXPECT_THAT(r.output, HasSubstr("--help"));
}

INSTANTIATE_TEST_SUITE_P(
    Binaries, HelpTest,
    ::testing::Values(
        HelpCase{ONECARD_CLI_BIN,
                 {"\nSubcommands:\n  generate  ", "\n  chat      ", "\n  inspect   ",
                  "\nModel (local engine):\n  --model\n", "\nRemote (a worker or router):\n",
                  "  --api-key\n", "ONECARD_API_KEY", "\nSampling:\n  --max-tokens=256\n",
                  "  --temperature=0.2\n", "\n  quantize  ", "\nQuantize:\n  --out\n",
                  "  --group-size=128\n", "  --kv-cache-dtype=auto\n", "  --fp8-compute=w8a8\n"}},
        HelpCase{ONECARD_BENCH_BIN,
                 {"\nSubcommands:\n  list ", "\n  cpu-decode ", "\n  serve ",
                  "\nResults:\n  --results=bench/results/local/results.jsonl\n",
                  "\nCPU scenarios:\n  --model="}},
        HelpCase{ONECARD_WORKER_BIN,
                 {"\nConfiguration:\n  --config\n", "\nKV cache:\n  --kv-block-size",
                  "\nCUDA backend:\n  --gpu-memory-budget", "\nShutdown:\n  --grace-period",
                  "  --cpu-memory-budget\n", "  --gpu-layers\n", "  --offload-ring-layers\n",
                  "  --offload-cpu-threads\n", "  --offload-cpu-layers\n", "  --swap-space\n",
                  "  --worker-token-file\n", "SIGTERM", "  --fp8-compute\n"}},
        HelpCase{ONECARD_ROUTER_BIN,
                 {"\nWorkers:\n  --control-plane\n", "  --static-workers\n",
                  "\nQueue:\n  --queue-max-depth", "\nAccess:\n  --allow-unauthenticated",
                  "  --router-token-file\n"}},
        HelpCase{ONECARD_METRICS_BIN,
                 {"\nNetwork:\n  --listen\n", "  --metrics-listen\n", "  --tls-ca\n"}},
        HelpCase{ONECARD_PROBE_BIN,
                 {"\nTarget:\n  --target\n", "  --service\n", "  --wait=0\n",
                  "\nTLS:\n  --tls-ca\n", "onecard.v1.Generation"}}
#ifdef ONECARD_FAULT_BIN
        ,
        HelpCase{ONECARD_FAULT_BIN,
                 {"\nScenarios:\n  --scenarios=all\n", "worker-sigkill",
                  "\nSoak:\n  --soak=", "  --samples\n", "\nOutput:\n  --out\n"}}
#endif
        ));

// A bad --log-level is a usage error naming the flag, in every binary
// (services/common/command_line.h applies the logging flags).
TEST(CliTest, BadLogLevelIsAUsageError) {
  for (const char* binary :
       {ONECARD_CLI_BIN, ONECARD_WORKER_BIN, ONECARD_ROUTER_BIN, ONECARD_METRICS_BIN}) {
    const Result r = RunBinary({binary, "--log-level=loud"});
    EXPECT_EQ(r.exit_code, 2) << binary << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("--log-level: unknown log level \"loud\" (debug, info, warn "
                                    "or error)"))
        << binary;
  }
}

TEST(CliTest, OnecardArgumentErrorsComeBeforeTheModelLoads) {
  const std::vector<std::vector<std::string>> bad = {
      {"generate", "--model", kMissingModel},  // no --prompt
      {"generate", "--model", kMissingModel, "--prompt=x", "--temperature=-1"},
      {"generate", "--model", kMissingModel, "--prompt=x", "--top-p=2"},
      {"generate", "--model", kMissingModel, "--prompt=x", "--max-tokens=0"},
      {"chat", "--model", kMissingModel, "--backend=tpu"},
      {"generate", "--model", kMissingModel, "--prompt=x", "--kv-cache-dtype=int8"},
      {"chat", "--model", kMissingModel, "--fp8-compute=w4a16"},
      {"chat", "--target", "127.0.0.1:1", "--prompt=x", "--priority=urgent"},
      {"generate", "--prompt=x"},              // neither --model nor --target
      {"quantize", "--model", kMissingModel},  // no --out
      {"quantize", "--model", kMissingModel, "--out=/tmp/q", "--group-size=12"},
      {"quantize", "--model", kMissingModel, "--out=/tmp/q", "--method=awq"},
      {"quantize", "--model", kMissingModel, "--out=/tmp/q", "--sym", "false"},
  };
  const std::vector<std::string> says = {"--prompt",
                                         "--temperature",
                                         "top_p",
                                         "--max-tokens",
                                         "--backend",
                                         "--kv-cache-dtype: unknown KV cache dtype \"int8\"",
                                         "--fp8-compute: unknown fp8 compute \"w4a16\"",
                                         "urgent",
                                         "--model",
                                         "--out",
                                         "--group-size",
                                         "--method",
                                         "unexpected argument \"false\""};
  for (size_t i = 0; i < bad.size(); ++i) {
    std::vector<std::string> argv = {ONECARD_CLI_BIN};
    argv.insert(argv.end(), bad[i].begin(), bad[i].end());
    const Result r = RunBinary(argv);
    EXPECT_EQ(r.exit_code, 2) << i << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr(says[i]), Not(HasSubstr("nonexistent")))) << i;
  }
}

// Input the quantizer refuses is a usage error too, naming the input.
TEST(CliTest, OnecardQuantizeOfAMissingModelExitsTwo) {
  const std::string out = absl::StrCat(::testing::TempDir(), "/cli_test_", getpid(), "_q");
  const Result r = RunBinary(
      {ONECARD_CLI_BIN, "quantize", "--model", kMissingModel, "--out", out, "--group-size", "64"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("/nonexistent/model.gguf"));
}

TEST(CliTest, OnecardSuggestsTheNearestSubcommand) {
  const Result r = RunBinary({ONECARD_CLI_BIN, "generat", "--prompt=x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown subcommand \"generat\"; did you mean generate?"));
}

TEST(CliTest, OnecardTakesTheApiKeyFromTheEnvironment) {
  // A router on a port nobody listens on: the call fails, but the help text
  // documents the variable and a missing key is not the error.
  ASSERT_EQ(setenv("ONECARD_API_KEY", "key-from-env", 1), 0);
  const Result r = RunBinary({ONECARD_CLI_BIN, "generate", "--target=127.0.0.1:1", "--prompt=x"});
  unsetenv("ONECARD_API_KEY");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // reached the connection, past the checks
  EXPECT_THAT(r.output, Not(HasSubstr("api")));
}

TEST(CliTest, BenchRejectsAnUnknownScenarioBeforeLoadingAModel) {
  const Result r = RunBinary({ONECARD_BENCH_BIN, "cpu-decod", "--model", kMissingModel});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("unknown scenario \"cpu-decod\""), HasSubstr("cpu-decode"),
                              Not(HasSubstr("nonexistent"))));
}

// One cluster file with a mistake in each service's section; each service
// reports its own with file, line, full path and the allowed values.
struct ConfigCase {
  const char* binary;
  const char* yaml;
  const char* expected;
};

class ConfigErrorTest : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(ConfigErrorTest, NamesFileLineFieldPathAndAllowedValues) {
  const std::string path = WriteFile("cluster.yaml", GetParam().yaml);
  std::vector<std::string> argv = {GetParam().binary, "--config", path, "--listen=127.0.0.1:0",
                                   "--metrics-listen=127.0.0.1:0"};
  // The worker and the router take a model; the config error comes first.
  if (std::string(GetParam().binary) != ONECARD_METRICS_BIN) {
    argv.insert(argv.end(), {"--model", kMissingModel});
  }
  const Result r = RunBinary(argv);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(path + GetParam().expected));
  EXPECT_THAT(r.output, Not(HasSubstr("nonexistent")));
}

INSTANTIATE_TEST_SUITE_P(
    Services, ConfigErrorTest,
    ::testing::Values(
        ConfigCase{ONECARD_ROUTER_BIN,
                   "router:\n  tenants:\n    - name: a\n      max_priority: urgent\n",
                   ":4: router.tenants[0].max_priority: expected one of unspecified, "
                   "interactive, standard, batch, got \"urgent\""},
        ConfigCase{ONECARD_ROUTER_BIN, "queue:\n  max_dept: 3\n",
                   ":2: queue.max_dept: unknown field (known: max_depth"},
        ConfigCase{ONECARD_WORKER_BIN, "worker:\n  kv_cache:\n    block_size: big\n",
                   ":3: worker.kv_cache.block_size: expected a 32-bit integer, got \"big\""},
        ConfigCase{ONECARD_WORKER_BIN, "metrics: {}\nworker:\n  backend: cpu\n  threds: 2\n",
                   ":4: worker.threds: unknown field (known: "},
        ConfigCase{ONECARD_METRICS_BIN, "metrics:\n  report_interval: soon\n",
                   ":2: metrics.report_interval: expected "}));

}  // namespace
}  // namespace onecard
