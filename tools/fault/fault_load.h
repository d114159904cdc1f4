// FaultLoad: the fault suite's load generator. It drives Generate streams
// against a router over the gRPC callback API (thousands of streams in one
// process) and records every request's terminal state: the status code, the
// tokens it received in order, the usage and finish reason of its last
// chunk. Clients may disconnect after their first tokens (TryCancel), read
// nothing at all until they give up (slow readers), or wait for a router
// that is restarting (wait_for_ready).
//
// CheckStreams then accounts for every request against reference answers
// (greedy decoding: each stream's tokens must be a prefix of its prompt's
// reference, so a replayed or duplicated token shows).
// Tested by tests/tools/fault/fault_load_test.cc (a fake Generation server).
#ifndef ONECARD_TOOLS_FAULT_FAULT_LOAD_H_
#define ONECARD_TOOLS_FAULT_FAULT_LOAD_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace onecard::fault {

struct FaultLoadSpec {
  std::string target;   // host:port of the router
  std::string api_key;  // "authorization: Bearer <key>"
  // Prompt token ids; request i uses prompts[i % prompts.size()].
  std::vector<std::vector<int32_t>> prompts;
  int32_t max_tokens = 16;  // with ignore_eos: a completed stream has exactly this many
  int64_t num_requests = 10;
  int32_t concurrency = 4;                      // closed loop: requests open at once
  absl::Duration deadline = absl::Seconds(60);  // each request's gRPC deadline
  // > 0: the client cancels its call once it holds this many tokens.
  int32_t cancel_after_tokens = 0;
  // > 0: the client never reads its stream and cancels after this long.
  absl::Duration slow_reader_for = absl::ZeroDuration();
  bool wait_for_ready = false;  // wait for the channel (a router restarting)
  // A request with no status this long after its deadline is given up and
  // counted lost.
  absl::Duration lost_after = absl::Seconds(30);
};

struct StreamRecord {
  int64_t index = 0;
  int prompt_index = 0;
  bool done = false;  // a status arrived
  int code = -1;      // grpc::StatusCode
  std::string message;
  std::vector<int32_t> tokens;     // every chunk's token ids, in order
  int32_t finish_reason = 0;       // onecard.v1.FinishReason of the last chunk
  int64_t completion_tokens = -1;  // usage of the last chunk; -1: none
};

// Runs the spec to the end; one record per request, in index order.
absl::StatusOr<std::vector<StreamRecord>> RunFaultLoad(const FaultLoadSpec& spec);

struct StreamAccount {
  int64_t sent = 0;
  int64_t completed = 0;                  // OK, max_tokens tokens, matching usage
  std::map<std::string, int64_t> failed;  // code name -> count
  int64_t lost = 0;                       // no status, or OK without a complete final chunk
  // Tokens that are not a prefix of the reference answer (a duplicate, a
  // replay, a wrong token), or more than max_tokens.
  int64_t bad_streams = 0;
  std::vector<std::string> problems;  // the first few, for the log
};

// `references[p]`: the greedy answer to prompts[p] (at least max_tokens long).
StreamAccount CheckStreams(const std::vector<StreamRecord>& records,
                           const std::vector<std::vector<int32_t>>& references, int32_t max_tokens);

// "UNAVAILABLE=3 CANCELLED=2", or "-" when none.
std::string FailedText(const std::map<std::string, int64_t>& failed);

}  // namespace onecard::fault

#endif  // ONECARD_TOOLS_FAULT_FAULT_LOAD_H_
