// Responses out: engine StreamOutputs appended to a pending GenerateResponse
// chunk (several outputs coalesce into one chunk when the client reads
// slower than the engine writes), the finish reason in the proto, and the
// gRPC status that ends a stream for each way a request can end.
// Tested by tests/services/worker/response_convert_test.cc.
#ifndef ONECARD_SERVICES_WORKER_RESPONSE_CONVERT_H_
#define ONECARD_SERVICES_WORKER_RESPONSE_CONVERT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "onecard/v1/generation.pb.h"

namespace onecard::services {

// Appends the output's tokens, text and logprobs to *chunk; a final output
// also sets finish_reason, usage and timing (total_time = `total`).
void AppendOutput(const engine::StreamOutput& output, absl::Duration total,
                  v1::GenerateResponse* chunk);

v1::FinishReason ToProtoFinishReason(engine::FinishReason reason);

// How a stream ends after the engine's final output: OK for STOP, LENGTH,
// EOS and STOP_STRING; CANCELLED when the client cancelled; UNAVAILABLE when
// the worker cancelled it (drain timeout); DEADLINE_EXCEEDED; RESOURCE_EXHAUSTED
// when preempted and dropped; the engine's error (INTERNAL if it gave none).
absl::Status TerminalStatus(const engine::StreamOutput& final_output, bool cancelled_by_client);

// The `outcome` label of onecard_worker_requests_total: the finish reason
// in lower case ("stop", "length", "eos", "stop_string", "cancelled",
// "deadline", "preempted", "error") or, for requests refused before the
// engine saw them, "invalid_argument", "resource_exhausted", "unavailable",
// "unauthenticated", "permission_denied" (a caller without the router's
// identity).
std::string OutcomeLabel(engine::FinishReason reason);
std::string RejectionLabel(absl::StatusCode code);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_WORKER_RESPONSE_CONVERT_H_
