// `onecard generate|chat --target HOST:PORT`: the same subcommands against a
// worker or a router over gRPC (RemoteGenerate, remote_generate.h) instead of
// an in-process engine. Text streams to `out`; with json, one JSON object
// like the local one (text, token ids, finish reason, usage, timings; the
// timings add the client-side TTFT and total).
// Tested by tests/tools/onecard/remote_command_test.cc.
#ifndef ONECARD_TOOLS_ONECARD_REMOTE_COMMAND_H_
#define ONECARD_TOOLS_ONECARD_REMOTE_COMMAND_H_

#include <iosfwd>
#include <string>

#include "absl/status/status.h"
#include "tools/onecard/generate_command.h"
#include "tools/onecard/remote_generate.h"

namespace onecard::tools {

struct RemoteTarget {
  std::string address;       // host:port
  std::string api_key;       // empty: none
  std::string priority;      // "", "interactive", "standard", "batch"
  bool random_seed = false;  // true: leave the seed to the server
};

// The JSON report of a remote completion (one line, no newline).
std::string RemoteCompletionJson(const RemoteCompletion& completion);

// generate --target: completes options.prompt (raw text).
absl::Status RunRemoteGenerate(const RemoteTarget& target, const GenerateOptions& options,
                               std::ostream& out, std::ostream& err);

// chat --target: with a prompt, answers it once; otherwise reads one user
// message per line from `in` until end of input or "/exit". The server
// renders the conversation with the model's chat template.
absl::Status RunRemoteChat(const RemoteTarget& target, const GenerateOptions& options,
                           std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace onecard::tools

#endif  // ONECARD_TOOLS_ONECARD_REMOTE_COMMAND_H_
