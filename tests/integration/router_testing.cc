// Router integration helpers (see router_testing.h).
#include "tests/integration/router_testing.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tests/services/testing/http_get.h"
#include "tests/testing/time_scale.h"

namespace onecard::router::testing {

using onecard::testing::ScaledTime;

std::string LogDir() {
  static const std::string dir = [] {
    std::string d = absl::StrCat("/tmp/onecard-router-it-", getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> StartWorker(const std::string& name,
                                                          std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model",          kModel,       "--listen", "127.0.0.1:0",
                                   "--metrics-listen", "127.0.0.1:0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return ChildProcess::Start(ONECARD_WORKER_BIN, args, absl::StrCat(LogDir(), "/", name, ".log"),
                             ScaledTime(absl::Seconds(120)));
}

absl::StatusOr<std::unique_ptr<ChildProcess>> StartRouter(
    const std::string& name, const std::vector<const ChildProcess*>& workers,
    std::vector<std::string> extra) {
  std::vector<std::string> addresses;
  for (const ChildProcess* w : workers) addresses.push_back(w->grpc_address());
  std::vector<std::string> args = {
      "--model",          kModel,        "--listen",         "127.0.0.1:0",
      "--metrics-listen", "127.0.0.1:0", "--static-workers", absl::StrJoin(addresses, ","),
      "--http-listen",    "127.0.0.1:0"};
  args.push_back("--allow-unauthenticated=true");  // no effect when `extra` names tenants
  // The default, scaled; a later --queue-timeout in `extra` wins.
  args.push_back("--queue-timeout=" + absl::FormatDuration(ScaledTime(absl::Seconds(30))));
  args.insert(args.end(), extra.begin(), extra.end());
  return ChildProcess::Start(ONECARD_ROUTER_BIN, args, absl::StrCat(LogDir(), "/", name, ".log"),
                             ScaledTime(absl::Seconds(120)));
}

std::unique_ptr<onecard::v1::Generation::Stub> Connect(const std::string& address) {
  return onecard::v1::Generation::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

absl::StatusOr<onecard::testing::PromText> Scrape(const std::string& metrics_address) {
  absl::StatusOr<onecard::testing::HttpResponse> r =
      onecard::testing::HttpGet(metrics_address, "/metrics");
  if (!r.ok()) return r.status();
  return onecard::testing::ParsePromText(r->body);
}

bool AwaitMetrics(const std::string& metrics_address,
                  const std::function<bool(const onecard::testing::PromText&)>& ready,
                  absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + ScaledTime(timeout);
  while (absl::Now() < deadline) {
    absl::StatusOr<onecard::testing::PromText> text = Scrape(metrics_address);
    if (text.ok() && ready(*text)) return true;
    absl::SleepFor(absl::Milliseconds(50));  // polling another process's state
  }
  return false;
}

}  // namespace onecard::router::testing
