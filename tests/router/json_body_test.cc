// Tests router/json_body.h: bodies that are not JSON are refused naming where
// they stopped (the field whose string is not UTF-8, or "body"), and typed
// reads name the field whose value has the wrong type, with null as absent.
#include "router/json_body.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::router {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(JsonBodyTest, ParsesAnObject) {
  absl::StatusOr<nlohmann::json> body = ParseJsonBody(R"({"a": [1, 2], "b": "x"})");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ((*body)["b"], "x");
}

TEST(JsonBodyTest, NamesWhereTheBodyStoppedBeingJson) {
  EXPECT_THAT(Message(ParseJsonBody("{\"a\": ").status()), StartsWith("a: not valid JSON"));
  EXPECT_THAT(Message(ParseJsonBody("{\"a\": [1, }").status()), StartsWith("a[1]: not valid JSON"));
  EXPECT_THAT(Message(ParseJsonBody("").status()), StartsWith("body: not valid JSON"));
  EXPECT_EQ(Message(ParseJsonBody("[1, 2]").status()), "body: expected a JSON object");
  EXPECT_EQ(Message(ParseJsonBody("\"x\"").status()), "body: expected a JSON object");
  const std::string bad_utf8 =
      "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"ok\"}, "
      "{\"role\": \"user\", \"content\": \"a\xff\"}]}";
  absl::Status s = ParseJsonBody(bad_utf8).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), StartsWith("messages[1].content: not valid JSON:"));
  EXPECT_THAT(Message(s), HasSubstr("UTF-8"));
  s = ParseJsonBody("{\"stop\": [\"a\", \"\xc3\"]}").status();
  EXPECT_THAT(Message(s), StartsWith("stop[1]: not valid JSON:"));
}

TEST(JsonBodyTest, TypedReadsNameTheField) {
  const nlohmann::json o = nlohmann::json::parse(
      R"({"n": 2, "f": 0.5, "whole": 3.0, "s": "x", "b": true, "nil": null, "big": 1e12,
          "neg": -7, "list": ["a", "b"], "ids": [1, 2.0], "bad_ids": [1, "2"]})");
  const JsonObject r(o, "m.");
  EXPECT_EQ(*r.Int("n").value(), 2);
  EXPECT_EQ(*r.Int("whole").value(), 3);
  EXPECT_FALSE(r.Int("nil").value().has_value()) << "null reads as absent";
  EXPECT_FALSE(r.Int("absent").value().has_value());
  EXPECT_EQ(Message(r.Int("f").status()), "m.f: expected an integer, got 0.5");
  EXPECT_EQ(Message(r.Int("s").status()), "m.s: expected an integer, got a string");
  EXPECT_THAT(Message(r.Int("big").status()),
              AllOf(StartsWith("m.big: "), HasSubstr("out of range")));
  EXPECT_EQ(*r.Number("f").value(), 0.5);
  EXPECT_EQ(Message(r.Number("s").status()), "m.s: expected a number, got a string");
  EXPECT_EQ(*r.Bool("b").value(), true);
  EXPECT_EQ(Message(r.Bool("n").status()), "m.n: expected a boolean, got a number");
  EXPECT_EQ(*r.String("s").value(), "x");
  EXPECT_EQ(*r.Uint64Bits("neg").value(), static_cast<uint64_t>(-7));
  bool was_list = false;
  EXPECT_EQ(r.Strings("list", &was_list).value(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(was_list);
  EXPECT_EQ(r.Strings("s", &was_list).value(), (std::vector<std::string>{"x"}));
  EXPECT_FALSE(was_list);
  EXPECT_EQ(Message(r.Strings("n", &was_list).status()),
            "m.n: expected a string or an array of strings, got a number");
  EXPECT_EQ(r.Ints("ids").value(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(Message(r.Ints("bad_ids").status()), "m.bad_ids[1]: expected an integer, got a string");
  EXPECT_TRUE(r.Has("n"));
  EXPECT_FALSE(r.Has("nil"));
}

}  // namespace
}  // namespace onecard::router
