// Tests of the reflection walk from YAML to protobuf: every scalar type,
// lists, maps, durations, enums by each spelling, and one test per kind of
// bad field, each checking that the error names the field's path and line.
// Expected values are the literals in the documents.
#include "services/common/proto_from_yaml.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "onecard/v1/config.pb.h"
#include "onecard/v1/generation.pb.h"

namespace onecard::services {
namespace {

using ::testing::HasSubstr;

template <typename T>
absl::Status Fill(const std::string& yaml, T* out) {
  return ProtoFromYaml(YAML::Load(yaml), "doc", out);
}

TEST(ProtoFromYamlTest, ScalarsListsAndDurations) {
  v1::WorkerConfig c;
  ASSERT_TRUE(Fill(R"(
model_name: smol
num_threads: -2
kv_cache: {num_blocks: 9000000000, cache_bytes: 1024}
admission: {kv_watermark: 0.5, retry_after: 250ms}
grace_period: 1.5
load_report_interval: 1m30s
)",
                   &c)
                  .ok());
  EXPECT_EQ(c.model_name(), "smol");
  EXPECT_EQ(c.num_threads(), -2);
  EXPECT_EQ(c.kv_cache().num_blocks(), 9000000000);
  EXPECT_DOUBLE_EQ(c.admission().kv_watermark(), 0.5);
  EXPECT_EQ(c.admission().retry_after().seconds(), 0);
  EXPECT_EQ(c.admission().retry_after().nanos(), 250000000);
  EXPECT_EQ(c.grace_period().seconds(), 1);
  EXPECT_EQ(c.grace_period().nanos(), 500000000);
  EXPECT_EQ(c.load_report_interval().seconds(), 90);
}

TEST(ProtoFromYamlTest, CamelCaseAndNullFields) {
  v1::WorkerConfig c;
  ASSERT_TRUE(Fill("modelName: smol\ncontrol_plane_address:\n", &c).ok());
  EXPECT_EQ(c.model_name(), "smol");
  EXPECT_EQ(c.control_plane_address(), "");
}

TEST(ProtoFromYamlTest, EnumsByFullShortNameAndNumber) {
  for (const char* spelling : {"PRIORITY_BATCH", "batch", "BATCH", "3"}) {
    v1::TenantConfig t;
    ASSERT_TRUE(Fill(std::string("max_priority: ") + spelling, &t).ok()) << spelling;
    EXPECT_EQ(t.max_priority(), v1::PRIORITY_BATCH) << spelling;
  }
}

TEST(ProtoFromYamlTest, RepeatedScalarsAndMessages) {
  v1::GenerateRequest r;
  ASSERT_TRUE(Fill(R"(
token_ids: {ids: [1, 2, 3]}
stopping: {stop_strings: ["a", "b"], max_tokens: 7}
)",
                   &r)
                  .ok());
  EXPECT_THAT(r.token_ids().ids(), ::testing::ElementsAre(1, 2, 3));
  EXPECT_THAT(r.stopping().stop_strings(), ::testing::ElementsAre("a", "b"));
  EXPECT_EQ(r.stopping().max_tokens(), 7);
  v1::RouterConfig rc;
  ASSERT_TRUE(Fill("tenants: [{name: a}, {name: b, token_burst: 8}]", &rc).ok());
  ASSERT_EQ(rc.tenants_size(), 2);
  EXPECT_EQ(rc.tenants(1).name(), "b");
  EXPECT_DOUBLE_EQ(rc.tenants(1).token_burst(), 8);
}

TEST(ProtoFromYamlTest, Maps) {
  google::protobuf::Struct s;
  ASSERT_TRUE(Fill("fields: {a: {string_value: x}, b: {number_value: 2}}", &s).ok());
  EXPECT_EQ(s.fields().at("a").string_value(), "x");
  EXPECT_EQ(s.fields().at("b").number_value(), 2);
}

struct BadCase {
  const char* yaml;
  const char* expected;  // substring of the error
};

class ProtoFromYamlBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ProtoFromYamlBadTest, NamesTheField) {
  v1::OnecardConfig c;
  const absl::Status s = Fill(GetParam().yaml, &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << GetParam().yaml;
  EXPECT_THAT(s.message(), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ProtoFromYamlBadTest,
    ::testing::Values(
        BadCase{"worker: {kv_cache: {block_sise: 16}}",
                "doc:1: worker.kv_cache.block_sise: unknown field (known: block_size"},
        BadCase{"worker:\n  kv_cache:\n    block_size: big",
                "doc:3: worker.kv_cache.block_size: expected a 32-bit integer, got \"big\""},
        BadCase{"worker: {num_threads: 3000000000}", "worker.num_threads: expected a 32-bit"},
        BadCase{"worker: {kv_cache: {num_blocks: 1.5}}", "worker.kv_cache.num_blocks"},
        BadCase{"worker: {kv_cache: {enable_prefix_caching: maybe}}",
                "enable_prefix_caching: expected true or false"},
        BadCase{"router: {tenants: [{max_priority: urgent}]}",
                "router.tenants[0].max_priority: expected one of unspecified, interactive, "
                "standard, batch"},
        BadCase{"worker: {grace_period: soon}", "worker.grace_period: expected a duration"},
        BadCase{"worker: {grace_period: -5s}", "worker.grace_period: must not be negative"},
        BadCase{"worker: {admission: {kv_watermark: lots}}", "expected a finite number"},
        BadCase{"worker: {admission: {kv_watermark: .nan}}", "expected a finite number"},
        BadCase{"worker: [1, 2]", "worker: expected a mapping, got a list"},
        BadCase{"worker: {backend: [cpu]}", "worker.backend: expected a single value, got a list"},
        BadCase{"router: {tenants: {name: a}}", "router.tenants: expected a list"},
        BadCase{"router: {dispatch: {static_workers: [[a]]}}",
                "router.dispatch.static_workers[0]: expected a single value"},
        BadCase{"worker: {backend: cpu, backend: cuda}", "worker.backend: set twice"},
        BadCase{"- just\n- a list", "(top level): expected a mapping"}));

TEST(ProtoFromYamlTest, OneofTakesOneMember) {
  v1::GenerateRequest r;
  const absl::Status s = Fill("prompt: hi\ntoken_ids: {ids: [1]}", &r);
  EXPECT_THAT(s.message(), HasSubstr("token_ids: only one field of \"input\" may be set"));
}

}  // namespace
}  // namespace onecard::services
