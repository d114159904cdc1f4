// Tests of services/common/wire_message.h: requests parsed from raw bytes,
// a string field of invalid UTF-8 named by its path (top level, in a oneof,
// in a repeated field, nested in repeated messages), malformed bytes, and a
// round trip through ToByteBuffer.
#include "services/common/wire_message.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onecard/v1/generation.pb.h"
#include "onecard/v1/worker.pb.h"

namespace onecard::services {
namespace {

using ::testing::HasSubstr;

constexpr char kBad[] = "ok \xff\xfe then";  // not UTF-8

// The message's encoding (serialized as is: protobuf only logs the invalid
// UTF-8 it writes) as gRPC would hand it to a raw method.
grpc::ByteBuffer Wire(const google::protobuf::Message& m) { return ToByteBuffer(m); }

TEST(WireMessageTest, ParsesValidRequests) {
  v1::GenerateRequest request;
  request.set_prompt("héllo");
  request.mutable_stopping()->add_stop_strings("\n");
  v1::GenerateRequest parsed;
  ASSERT_TRUE(ParseWireMessage(Wire(request), &parsed).ok());
  EXPECT_EQ(parsed.prompt(), "héllo");
  EXPECT_EQ(parsed.stopping().stop_strings(0), "\n");
}

TEST(WireMessageTest, NamesTheFieldOfInvalidUtf8) {
  struct Case {
    v1::GenerateRequest request;
    std::string field;
  };
  std::vector<Case> cases(5);
  cases[0].request.set_prompt(kBad);
  cases[0].field = "prompt";
  cases[1].request.set_model(kBad);
  cases[1].field = "model";
  cases[2].request.mutable_stopping()->add_stop_strings("fine");
  cases[2].request.mutable_stopping()->add_stop_strings(kBad);
  cases[2].field = "stopping.stop_strings[1]";
  cases[3].request.mutable_messages()->add_messages()->set_content("hi");
  cases[3].request.mutable_messages()->add_messages()->set_content(kBad);
  cases[3].field = "messages.messages[1].content";
  cases[4].request.set_request_id(kBad);
  cases[4].field = "request_id";
  for (const Case& c : cases) {
    v1::GenerateRequest parsed;
    const absl::Status s = ParseWireMessage(Wire(c.request), &parsed);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(s.message().substr(0, c.field.size() + 2), c.field + ": ") << s;
    EXPECT_THAT(s.message(), HasSubstr("not valid UTF-8"));
  }
}

TEST(WireMessageTest, WorkerRequests) {
  v1::WorkerGenerateRequest request;
  request.add_prompt_token_ids(5);
  request.set_request_id(kBad);
  v1::WorkerGenerateRequest parsed;
  EXPECT_THAT(ParseWireMessage(Wire(request), &parsed).message(),
              HasSubstr("request_id: not valid UTF-8"));
}

TEST(WireMessageTest, MalformedBytesNameTheType) {
  const std::string junk = "\x0a\xff\xff\xff";  // a length past the end
  grpc::Slice slice(junk);
  v1::GenerateRequest parsed;
  const absl::Status s = ParseWireMessage(grpc::ByteBuffer(&slice, 1), &parsed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("onecard.v1.GenerateRequest"));
  EXPECT_EQ(FindInvalidUtf8(*v1::GenerateRequest::descriptor(), junk), "");
}

}  // namespace
}  // namespace onecard::services
