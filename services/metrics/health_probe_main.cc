// onecard-health-probe: a grpc.health.v1 client for scripts and container
// health checks (scripts/run.sh waits on it; Docker HEALTHCHECKs can call
// it; Kubernetes uses its native gRPC probes instead).
//   onecard-health-probe --target HOST:PORT [--service NAME] [--wait 60s]
// Asks Check until the answer is SERVING or --wait passes (0: ask once).
// Exit 0 when SERVING, 1 otherwise (the last answer or error on stderr),
// 2 on bad flags. Tested by tests/integration/ops_run_script_test.cc (through
// scripts/run.sh).
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, target, "", "host:port of the gRPC server");
ABSL_FLAG(std::string, service, "", "health service name; empty = the server as a whole");
ABSL_FLAG(absl::Duration, wait, absl::ZeroDuration(), "keep asking until SERVING or this passes");

namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Check call; the answer as text ("SERVING", "NOT_SERVING", or the error).
std::string CheckOnce(grpc::health::v1::Health::Stub& stub, const std::string& service) {
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  const grpc::Status status = stub.Check(&context, request, &response);
  if (!status.ok())
    return "error " + std::to_string(status.error_code()) + ": " + status.error_message();
  return HealthCheckResponse::ServingStatus_Name(response.status());
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string target = absl::GetFlag(FLAGS_target);
  if (target.empty()) {
    std::fprintf(stderr, "onecard-health-probe: --target HOST:PORT is required\n");
    return 2;
  }
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  const absl::Time deadline = absl::Now() + absl::GetFlag(FLAGS_wait);
  std::string answer;
  while (true) {
    answer = CheckOnce(*stub, absl::GetFlag(FLAGS_service));
    if (answer == "SERVING") return 0;
    if (absl::Now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // retry interval
  }
  std::fprintf(stderr, "onecard-health-probe: %s: %s\n", target.c_str(), answer.c_str());
  return 1;
}
