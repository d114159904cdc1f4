// onecard-health-probe: a grpc.health.v1 client for scripts and container
// health checks (scripts/run.sh waits on it; Docker HEALTHCHECKs can call
// it; Kubernetes uses its native gRPC probes instead).
//   onecard-health-probe --target HOST:PORT [--service NAME] [--wait 60s]
//                        [--tls-ca CA.pem [--tls-cert CERT.pem --tls-key KEY.pem]]
// With --tls-ca it speaks TLS, trusting that CA (no host name check), and
// presents the certificate when given (mutual TLS ports: the Helm chart's
// exec probes use the pod's own certificate).
// Asks Check until the answer is SERVING or --wait passes (0: ask once).
// Exit 0 when SERVING, 1 otherwise (the last answer or error on stderr),
// 2 on bad flags. Tested by tests/integration/ops_run_script_test.cc (through
// scripts/run.sh).
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "onecard/v1/config.pb.h"
#include "services/common/command_line.h"
#include "services/common/service_auth.h"

ABSL_FLAG(std::string, target, "", "host:port of the gRPC server");
ABSL_FLAG(std::string, service, "", "health service name; empty = the server as a whole");
ABSL_FLAG(absl::Duration, wait, absl::ZeroDuration(), "keep asking until SERVING or this passes");
ABSL_FLAG(std::string, tls_ca, "", "TLS: the CA bundle the server's certificate chains to");
ABSL_FLAG(std::string, tls_cert, "", "TLS: a client certificate to present (mutual TLS)");
ABSL_FLAG(std::string, tls_key, "", "TLS: its private key");

namespace {

const onecard::services::CommandLineSpec kCommandLine = {
    .program = "onecard-health-probe",
    .usage = {"--target HOST:PORT [--service NAME] [--wait 60s] [flags]"},
    .description =
        "Asks a gRPC server's grpc.health.v1 service until it answers SERVING or\n"
        "--wait passes (0: once). For scripts and container health checks.",
    .groups = {{"Target", {"target", "service", "wait"}},
               {"TLS", {"tls_ca", "tls_cert", "tls_key"}}},
    .epilog =
        "Services: \"\" (the server), onecard.v1.Generation, onecard.v1.Worker,\n"
        "onecard.v1.ControlPlane (whichever the server serves).\n"
        "Exit status: 0 SERVING, 1 not serving or unreachable, 2 bad flags."};

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
  const onecard::services::CommandLine cli =
      onecard::services::ParseCommandLine(kCommandLine, argc, argv);
  if (cli.exit_code) return *cli.exit_code;
  const std::string target = absl::GetFlag(FLAGS_target);
  if (target.empty()) {
    std::fprintf(stderr, "onecard-health-probe: --target HOST:PORT is required\n");
    return 2;
  }
  onecard::v1::TlsConfig tls;
  tls.set_ca_file(absl::GetFlag(FLAGS_tls_ca));
  tls.set_cert_file(absl::GetFlag(FLAGS_tls_cert));
  tls.set_key_file(absl::GetFlag(FLAGS_tls_key));
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      target, tls.ca_file().empty() ? grpc::InsecureChannelCredentials()
                                    : onecard::services::TlsChannelCredentials(tls)));
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
