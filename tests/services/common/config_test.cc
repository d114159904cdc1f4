// Tests of config loading from files and text: YAML and JSON give the same
// typed message, and malformed documents, missing files and bad fields are
// errors naming the file, line and field. Expected values are the literals
// written in the documents.
#include "services/common/config.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onecard/v1/config.pb.h"

namespace onecard::services {
namespace {

using ::testing::HasSubstr;

constexpr char kWorkerYaml[] = R"(# a worker
worker:
  model_path: models/SmolLM2-135M-Instruct.Q4_1.gguf
  backend: cpu
  kv_cache:
    block_size: 16
    enable_prefix_caching: false
  admission: {max_waiting: 32, kv_watermark: 0.9}
  grace_period: 45s
router:
  tenants:
    - name: acme
      api_key_sha256: [abc, def]
      requests_per_second: 5
      max_priority: interactive
)";

constexpr char kWorkerJson[] = R"({
  "worker": {"modelPath": "models/SmolLM2-135M-Instruct.Q4_1.gguf", "backend": "cpu",
             "kvCache": {"blockSize": 16, "enablePrefixCaching": false},
             "admission": {"maxWaiting": 32, "kvWatermark": 0.9}, "gracePeriod": "45s"},
  "router": {"tenants": [{"name": "acme", "apiKeySha256": ["abc", "def"],
                          "requestsPerSecond": 5, "maxPriority": "PRIORITY_INTERACTIVE"}]}
})";

void ExpectWorkerFields(const v1::OnecardConfig& c) {
  EXPECT_EQ(c.worker().model_path(), "models/SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_EQ(c.worker().backend(), "cpu");
  EXPECT_EQ(c.worker().kv_cache().block_size(), 16);
  ASSERT_TRUE(c.worker().kv_cache().has_enable_prefix_caching());
  EXPECT_FALSE(c.worker().kv_cache().enable_prefix_caching());
  EXPECT_EQ(c.worker().admission().max_waiting(), 32);
  EXPECT_DOUBLE_EQ(c.worker().admission().kv_watermark(), 0.9);
  EXPECT_EQ(c.worker().grace_period().seconds(), 45);
  ASSERT_EQ(c.router().tenants_size(), 1);
  EXPECT_EQ(c.router().tenants(0).name(), "acme");
  EXPECT_THAT(c.router().tenants(0).api_key_sha256(), ::testing::ElementsAre("abc", "def"));
  EXPECT_DOUBLE_EQ(c.router().tenants(0).requests_per_second(), 5);
  EXPECT_EQ(c.router().tenants(0).max_priority(), v1::PRIORITY_INTERACTIVE);
}

TEST(ConfigTest, YamlAndJsonGiveTheSameMessage) {
  v1::OnecardConfig from_yaml, from_json;
  ASSERT_TRUE(ParseConfigText(kWorkerYaml, "a.yaml", &from_yaml).ok());
  absl::Status s = ParseConfigText(kWorkerJson, "a.json", &from_json);
  ASSERT_TRUE(s.ok()) << s;
  ExpectWorkerFields(from_yaml);
  ExpectWorkerFields(from_json);
  EXPECT_EQ(from_yaml.SerializeAsString(), from_json.SerializeAsString());
}

TEST(ConfigTest, EmptyDocumentIsTheDefaultMessage) {
  v1::WorkerConfig c;
  c.set_backend("stale");
  ASSERT_TRUE(ParseConfigText("", "empty.yaml", &c).ok());
  EXPECT_EQ(c.backend(), "") << "the message is cleared first";
}

TEST(ConfigTest, MalformedYamlNamesFileAndLine) {
  v1::WorkerConfig c;
  const absl::Status s = ParseConfigText("backend: cpu\nkv_cache: [1, 2\n", "w.yaml", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("w.yaml:"));
  EXPECT_THAT(s.message(), HasSubstr("not valid YAML or JSON"));
}

TEST(ConfigTest, MalformedJsonIsAnError) {
  v1::WorkerConfig c;
  const absl::Status s = ParseConfigText(R"({"backend": "cpu",, })", "w.json", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("w.json"));
}

TEST(ConfigTest, BadFieldNamesFileLineAndPath) {
  v1::OnecardConfig c;
  const absl::Status s =
      ParseConfigText(kWorkerYaml + std::string("      burst: lots\n"), "c.yaml", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("c.yaml:16: router.tenants[0].burst: unknown field"));
}

TEST(ConfigTest, LoadsFilesAndReportsMissingOnes) {
  const std::string path = ::testing::TempDir() + "/config_test_worker.yaml";
  {
    std::ofstream out(path);
    out << kWorkerYaml;
  }
  absl::StatusOr<v1::OnecardConfig> c = LoadConfig<v1::OnecardConfig>(path);
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectWorkerFields(*c);
  std::remove(path.c_str());
  const absl::Status missing = LoadConfigFile(path, &*c);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr(path));
}

// LoadServiceConfig: a whole cluster file gives its section (errors inside
// carry the full path), a bare section file gives itself, a whole file
// without the section gives an empty message.
TEST(ConfigTest, LoadServiceConfigReadsTheSectionOrTheBareMessage) {
  const std::string path = ::testing::TempDir() + "/config_test_service.yaml";
  const auto write = [&](const char* text) { std::ofstream(path) << text; };
  write("router:\n  model_name: a\nmetrics:\n  listen_address: x:1\n");
  absl::StatusOr<v1::RouterConfig> router = LoadServiceConfig<v1::RouterConfig>(path, "router");
  ASSERT_TRUE(router.ok()) << router.status();
  EXPECT_EQ(router->model_name(), "a");
  absl::StatusOr<v1::WorkerConfig> worker = LoadServiceConfig<v1::WorkerConfig>(path, "worker");
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->ByteSizeLong(), 0u);
  write("model_name: b\n");
  router = LoadServiceConfig<v1::RouterConfig>(path, "router");
  ASSERT_TRUE(router.ok()) << router.status();
  EXPECT_EQ(router->model_name(), "b");
  write("router:\n  tenants:\n    - max_priority: top\n");
  EXPECT_THAT(LoadServiceConfig<v1::RouterConfig>(path, "router").status().message(),
              HasSubstr(":3: router.tenants[0].max_priority: expected one of unspecified, "
                        "interactive, standard, batch"));
  write("worker:\n  log:\n    format: xml\n");
  EXPECT_THAT(LoadServiceConfig<v1::WorkerConfig>(path, "worker").status().message(),
              HasSubstr(":3: worker.log.format: expected one of unspecified, text, json"));
  write("metrics:\n  log: {level: warn, format: json}\n");
  absl::StatusOr<v1::MetricsServiceConfig> metrics =
      LoadServiceConfig<v1::MetricsServiceConfig>(path, "metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->log().level(), v1::LOG_LEVEL_WARN);
  EXPECT_EQ(metrics->log().format(), v1::LOG_FORMAT_JSON);
  v1::RouterConfig untouched;
  untouched.set_model_name("kept");
  ASSERT_TRUE(LoadServiceConfig("", "router", &untouched).ok());
  EXPECT_EQ(untouched.model_name(), "kept");
  std::remove(path.c_str());
}

// A config path that is a FIFO is refused at once (reading it would wait for
// a writer) and one that is a directory is named as such.
TEST(ConfigTest, FifoAndDirectoryAreRefusedNamingThePath) {
  const std::string fifo = ::testing::TempDir() + "/config_test_fifo.yaml";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  v1::OnecardConfig c;
  const absl::Status s = LoadConfigFile(fifo, &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), fifo + ": a FIFO, not a regular file");
  std::remove(fifo.c_str());
  EXPECT_THAT(LoadConfigFile(::testing::TempDir(), &c).message(), HasSubstr("a directory"));
}

TEST(ParseByteSizeTest, NumbersWithBinaryUnits) {
  EXPECT_EQ(*ParseByteSize("24GiB"), 24ll << 30);
  EXPECT_EQ(*ParseByteSize("81920MiB"), 80ll << 30);
  EXPECT_EQ(*ParseByteSize("1.5TiB"), 3ll << 39);
  EXPECT_EQ(*ParseByteSize("4096KiB"), 4ll << 20);
  EXPECT_EQ(*ParseByteSize(" 512 MiB "), 512ll << 20);
  EXPECT_EQ(*ParseByteSize("123B"), 123);
  EXPECT_EQ(*ParseByteSize("123"), 123);
  EXPECT_EQ(*ParseByteSize("0"), 0);
}

TEST(ParseByteSizeTest, RefusesWhatIsNotASize) {
  for (const char* bad : {"", "GiB", "-1GiB", "24GB", "24gib", "1..5GiB", "9000000TiB", "x"}) {
    const absl::StatusOr<int64_t> size = ParseByteSize(bad);
    EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(size.status().message(), ::testing::HasSubstr(std::string("\"") + bad + "\""))
        << bad;
  }
}

}  // namespace
}  // namespace onecard::services
