// Tests deploy/docker without docker (it cannot run here): each Dockerfile
// builds CMake targets that exist and installs them from the paths CMake
// puts them at, its entrypoint is one of the installed binaries, its ports
// and config path match the Helm chart's defaults, and copy-runtime-libs.sh
// copies a binary's shared libraries but not the C library.
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_testing.h"

namespace onecard::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Image {
  std::string dockerfile;
  std::map<std::string, std::string> targets;  // CMake target -> built file
  std::string grpc_port;
  std::string metrics_port;
  std::string config_arg;  // as the chart passes it
};

std::vector<Image> Images() {
  return {
      {"router",
       {{"onecard-router", ONECARD_ROUTER_FILE},
        {"onecard", ONECARD_CLI_FILE},
        {"onecard-health-probe", ONECARD_PROBE_FILE}},
       "50050",
       "9401",
       "--config=/etc/onecard-router/router.yaml"},
      {"metrics",
       {{"onecard-metrics", ONECARD_METRICS_FILE}, {"onecard-health-probe", ONECARD_PROBE_FILE}},
       "50060",
       "9402",
       "--config=/etc/onecard/onecard.yaml"},
      {"worker",
       {{"onecard-worker", ONECARD_WORKER_FILE},
        {"onecard", ONECARD_CLI_FILE},
        {"onecard-health-probe", ONECARD_PROBE_FILE}},
       "50051",
       "9400",
       "--config=/etc/onecard/onecard.yaml"},
  };
}

// "/build/x/y" of the Dockerfile for a built file under the binary dir.
std::string InBuildStage(const std::string& built_file) {
  return "/build/" + fs::relative(built_file, ONECARD_BINARY_DIR).string();
}

TEST(DockerFilesTest, EachImageBuildsAndInstallsItsTargetsFromTheirBuildPaths) {
  for (const Image& image : Images()) {
    SCOPED_TRACE(image.dockerfile);
    absl::StatusOr<std::string> text =
        ReadTextFile(absl::StrCat("deploy/docker/", image.dockerfile, ".Dockerfile"));
    ASSERT_TRUE(text.ok()) << text.status();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(*text, m, std::regex(R"(--target ([^\\\n&]+))")));
    const std::vector<std::string> built =
        absl::StrSplit(std::string(m[1]), ' ', absl::SkipWhitespace());
    EXPECT_EQ(std::set<std::string>(built.begin(), built.end()).size(), image.targets.size());
    for (const auto& [target, file] : image.targets) {
      EXPECT_NE(std::find(built.begin(), built.end(), target), built.end()) << target;
      const std::string install =
          absl::StrCat("install -D ", InBuildStage(file), " /out/usr/local/bin/", target);
      EXPECT_THAT(*text, HasSubstr(install));
    }
    // Each image also carries onecard-health-probe (the chart's TLS probes).
    const std::string main_target = "onecard-" + image.dockerfile;
    EXPECT_THAT(*text,
                HasSubstr(absl::StrCat("ENTRYPOINT [\"/usr/local/bin/", main_target, "\"]")));
    EXPECT_THAT(*text,
                HasSubstr(absl::StrCat("EXPOSE ", image.grpc_port, " ", image.metrics_port)));
    EXPECT_THAT(*text, HasSubstr(absl::StrCat("CMD [\"", image.config_arg, "\"]")));
    EXPECT_THAT(*text, HasSubstr("USER 10001:10001"));  // the chart's runAsUser
    EXPECT_TRUE(
        fs::exists(absl::StrCat("deploy/docker/", image.dockerfile, ".Dockerfile.dockerignore")));
  }
}

TEST(DockerFilesTest, WorkerImageIsCudaAndBuildsTheCudaBackend) {
  absl::StatusOr<std::string> text = ReadTextFile("deploy/docker/worker.Dockerfile");
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr("FROM nvidia/cuda:${CUDA_VERSION}-devel-"));
  EXPECT_THAT(*text, HasSubstr("FROM nvidia/cuda:${CUDA_VERSION}-runtime-"));
  EXPECT_THAT(*text, HasSubstr("-DONECARD_CUDA=ON"));
}

TEST(DockerFilesTest, CopyRuntimeLibsTakesSharedLibrariesButNotLibc) {
  const fs::path out = fs::temp_directory_path() / ("onecard-libs-" + std::to_string(getpid()));
  absl::StatusOr<CommandResult> run = RunCommand(absl::StrCat(
      "bash deploy/docker/copy-runtime-libs.sh ", out.string(), " ", ONECARD_PROBE_FILE));
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->exit_code, 0) << run->errors;
  std::set<std::string> copied;
  for (const auto& entry : fs::recursive_directory_iterator(out)) {
    if (entry.is_regular_file()) copied.insert(entry.path().filename().string());
  }
  fs::remove_all(out);
  bool has_grpc = false;
  for (const std::string& name : copied) {
    has_grpc |= absl::StartsWith(name, "libgrpc++.so");
    EXPECT_FALSE(absl::StartsWith(name, "libc.so") || absl::StartsWith(name, "ld-linux")) << name;
  }
  EXPECT_TRUE(has_grpc) << "copied: " << copied.size() << " files";
}

}  // namespace
}  // namespace onecard::testing
