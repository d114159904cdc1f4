// Tests of engine outputs into chunks: coalescing appends in order, the
// final output adds finish reason, usage and timing; every engine finish
// reason has its proto value, terminal status and metric label. Expected
// values are written out from config.proto's and design.md's tables.
#include "services/worker/response_convert.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::services {
namespace {

using engine::FinishReason;
using ::testing::ElementsAre;

TEST(ResponseConvertTest, CoalescesOutputsInOrder) {
  engine::StreamOutput a;
  a.token_ids = {1, 2};
  a.text_delta = "ab";
  a.logprobs = {{1, -0.5f, {{1, -0.5f}, {3, -1.5f}}}, {2, -0.25f, {}}};
  engine::StreamOutput b;
  b.token_ids = {3};
  b.text_delta = "c";
  b.logprobs = {{3, -2.0f, {}}};
  v1::GenerateResponse chunk;
  AppendOutput(a, absl::Seconds(1), &chunk);
  AppendOutput(b, absl::Seconds(2), &chunk);
  EXPECT_THAT(chunk.token_ids(), ElementsAre(1, 2, 3));
  EXPECT_EQ(chunk.text(), "abc");
  ASSERT_EQ(chunk.logprobs_size(), 3);
  EXPECT_EQ(chunk.logprobs(0).token_id(), 1);
  EXPECT_FLOAT_EQ(chunk.logprobs(0).logprob(), -0.5f);
  ASSERT_EQ(chunk.logprobs(0).top_logprobs_size(), 2);
  EXPECT_EQ(chunk.logprobs(0).top_logprobs(1).token_id(), 3);
  EXPECT_FLOAT_EQ(chunk.logprobs(0).top_logprobs(1).logprob(), -1.5f);
  EXPECT_EQ(chunk.logprobs(2).token_id(), 3);
  EXPECT_EQ(chunk.finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_FALSE(chunk.has_usage());
}

TEST(ResponseConvertTest, FinalOutputAddsUsageAndTiming) {
  engine::StreamOutput last;
  last.finished = true;
  last.finish_reason = FinishReason::kEos;
  last.usage = {7, 3, 4};
  last.queue_time = absl::Milliseconds(1500);
  last.time_to_first_token = absl::Milliseconds(2250);
  v1::GenerateResponse chunk;
  AppendOutput(last, absl::Seconds(3), &chunk);
  EXPECT_EQ(chunk.finish_reason(), v1::FINISH_REASON_EOS);
  EXPECT_EQ(chunk.usage().prompt_tokens(), 7);
  EXPECT_EQ(chunk.usage().completion_tokens(), 3);
  EXPECT_EQ(chunk.usage().cached_tokens(), 4);
  EXPECT_EQ(chunk.timing().queue_time().seconds(), 1);
  EXPECT_EQ(chunk.timing().queue_time().nanos(), 500'000'000);
  EXPECT_EQ(chunk.timing().time_to_first_token().nanos(), 250'000'000);
  EXPECT_EQ(chunk.timing().total_time().seconds(), 3);
}

struct ReasonCase {
  FinishReason reason;
  v1::FinishReason proto;
  absl::StatusCode code;  // not cancelled by the client
  const char* label;
};

class ResponseConvertReasonTest : public ::testing::TestWithParam<ReasonCase> {};

TEST_P(ResponseConvertReasonTest, ProtoStatusAndLabel) {
  const ReasonCase& c = GetParam();
  EXPECT_EQ(ToProtoFinishReason(c.reason), c.proto);
  engine::StreamOutput out;
  out.finished = true;
  out.finish_reason = c.reason;
  if (c.reason == FinishReason::kError) out.error = absl::DataLossError("bad weights");
  EXPECT_EQ(TerminalStatus(out, /*cancelled_by_client=*/false).code(), c.code);
  EXPECT_EQ(OutcomeLabel(c.reason), c.label);
}

INSTANTIATE_TEST_SUITE_P(
    Reasons, ResponseConvertReasonTest,
    ::testing::Values(
        ReasonCase{FinishReason::kStop, v1::FINISH_REASON_STOP, absl::StatusCode::kOk, "stop"},
        ReasonCase{FinishReason::kLength, v1::FINISH_REASON_LENGTH, absl::StatusCode::kOk,
                   "length"},
        ReasonCase{FinishReason::kEos, v1::FINISH_REASON_EOS, absl::StatusCode::kOk, "eos"},
        ReasonCase{FinishReason::kStopString, v1::FINISH_REASON_STOP_STRING, absl::StatusCode::kOk,
                   "stop_string"},
        ReasonCase{FinishReason::kCancelled, v1::FINISH_REASON_CANCELLED,
                   absl::StatusCode::kUnavailable, "cancelled"},
        ReasonCase{FinishReason::kDeadline, v1::FINISH_REASON_DEADLINE,
                   absl::StatusCode::kDeadlineExceeded, "deadline"},
        ReasonCase{FinishReason::kPreempted, v1::FINISH_REASON_PREEMPTED,
                   absl::StatusCode::kResourceExhausted, "preempted"},
        ReasonCase{FinishReason::kError, v1::FINISH_REASON_ERROR, absl::StatusCode::kDataLoss,
                   "error"}));

TEST(ResponseConvertTest, ClientCancelIsCancelled) {
  engine::StreamOutput out;
  out.finished = true;
  out.finish_reason = FinishReason::kCancelled;
  EXPECT_EQ(TerminalStatus(out, /*cancelled_by_client=*/true).code(), absl::StatusCode::kCancelled);
}

TEST(ResponseConvertTest, ErrorWithoutStatusIsInternal) {
  engine::StreamOutput out;
  out.finished = true;
  out.finish_reason = FinishReason::kError;
  EXPECT_EQ(TerminalStatus(out, false).code(), absl::StatusCode::kInternal);
}

TEST(ResponseConvertTest, RejectionLabels) {
  EXPECT_EQ(RejectionLabel(absl::StatusCode::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(RejectionLabel(absl::StatusCode::kResourceExhausted), "resource_exhausted");
  EXPECT_EQ(RejectionLabel(absl::StatusCode::kUnavailable), "unavailable");
  EXPECT_EQ(RejectionLabel(absl::StatusCode::kUnauthenticated), "unauthenticated");
  EXPECT_EQ(RejectionLabel(absl::StatusCode::kPermissionDenied), "permission_denied");
  EXPECT_EQ(RejectionLabel(absl::StatusCode::kInternal), "error");
}

}  // namespace
}  // namespace onecard::services
