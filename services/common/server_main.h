// Helpers for a service's main(): shutdown signals, starting a gRPC server on
// a given address (port 0 picks a free one) and announcing the bound
// addresses on stdout, where scripts and tests read them:
//   LISTENING grpc 127.0.0.1:41235
//   LISTENING metrics 127.0.0.1:41236
// Tested by tests/services/common/server_main_test.cc.
#ifndef ONECARD_SERVICES_COMMON_SERVER_MAIN_H_
#define ONECARD_SERVICES_COMMON_SERVER_MAIN_H_

#include <csignal>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace onecard::services {

// SIGTERM and SIGINT, received by one sigwait thread. Install() blocks both
// signals in the calling thread, so call it first in main(), before any
// other thread starts (threads inherit the mask). A second signal while the
// first is being handled ends the process at once (exit code 1).
class ShutdownSignals {
 public:
  static absl::StatusOr<std::unique_ptr<ShutdownSignals>> Install();
  ~ShutdownSignals();

  // Blocks until a signal (or Trigger); returns its number (0 for Trigger).
  int Wait();
  // Acts as if a signal had arrived (tests, internal shutdowns).
  void Trigger();

 private:
  ShutdownSignals() = default;
  void Loop();

  sigset_t set_;
  std::thread thread_;
  absl::Mutex mu_;
  bool signalled_ ABSL_GUARDED_BY(mu_) = false;
  int signal_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

struct HostPort {
  std::string host;  // without brackets for IPv6
  int port = 0;
};
// "host:port", "[::1]:port" -> parts; InvalidArgument naming `address`.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);
std::string JoinHostPort(absl::string_view host, int port);

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address;  // listen host with the bound port
};
// Every server's built-in services: grpc.health.v1 (the default health
// service; each server sets its own per-service statuses) and server
// reflection (grpc.reflection.v1alpha, so grpcurl and similar clients need
// no proto files). Call before constructing the grpc::ServerBuilder: the
// builder picks its plugins up when it is made.
void EnableStandardGrpcServices();

// Adds a listening port for `listen_address` with `credentials` (null:
// insecure) to *builder, builds and starts the server. UNAVAILABLE naming
// the address when it cannot bind.
absl::StatusOr<StartedServer> StartGrpcServer(
    grpc::ServerBuilder* builder, const std::string& listen_address,
    std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);

// The address peers should dial: `advertise` when set, else the bound
// address with a wildcard host (0.0.0.0, ::) replaced by this host's name.
std::string AdvertisedAddress(const std::string& advertise, const std::string& bound_address);

// Prints "LISTENING <what> <address>" on stdout (flushed) and logs it.
void AnnounceListening(absl::string_view what, absl::string_view address);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_SERVER_MAIN_H_
