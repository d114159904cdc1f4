// Service main() helpers. See server_main.h.
#include "services/common/server_main.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"

namespace onecard::services {

absl::StatusOr<std::unique_ptr<ShutdownSignals>> ShutdownSignals::Install() {
  std::unique_ptr<ShutdownSignals> signals(new ShutdownSignals());
  sigemptyset(&signals->set_);
  sigaddset(&signals->set_, SIGTERM);
  sigaddset(&signals->set_, SIGINT);
  const int rc = pthread_sigmask(SIG_BLOCK, &signals->set_, nullptr);
  if (rc != 0) return absl::InternalError(absl::StrCat("pthread_sigmask failed: ", rc));
  signals->thread_ = std::thread([s = signals.get()] { s->Loop(); });
  return signals;
}

ShutdownSignals::~ShutdownSignals() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Wakes the sigwait thread; it sees stopping_ and leaves.
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void ShutdownSignals::Loop() {
  while (true) {
    int sig = 0;
    if (sigwait(&set_, &sig) != 0) continue;
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    if (signalled_) {
      Log(LogLevel::kWarn, "main", "second signal %d: exiting now", sig);
      std::_Exit(1);
    }
    Log(LogLevel::kInfo, "main", "signal %d: shutting down", sig);
    signalled_ = true;
    signal_ = sig;
  }
}

int ShutdownSignals::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&signalled_));
  return signal_;
}

void ShutdownSignals::Trigger() {
  absl::MutexLock lock(&mu_);
  signalled_ = true;
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  const size_t colon = address.rfind(':');
  HostPort out;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(address.substr(colon + 1), &out.port) ||
      out.port < 0 || out.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", address, "\": expected host:port"));
  }
  absl::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  out.host = std::string(host);
  return out;
}

std::string JoinHostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

void EnableStandardGrpcServices() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
}

absl::StatusOr<StartedServer> StartGrpcServer(
    grpc::ServerBuilder* builder, const std::string& listen_address,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(listen_address);
  if (!parsed.ok()) return parsed.status();
  if (credentials == nullptr) credentials = grpc::InsecureServerCredentials();
  StartedServer out;
  builder->AddListeningPort(listen_address, credentials, &out.port);
  out.server = builder->BuildAndStart();
  if (out.server == nullptr || out.port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen_address));
  }
  out.address = JoinHostPort(parsed->host, out.port);
  return out;
}

std::string AdvertisedAddress(const std::string& advertise, const std::string& bound_address) {
  if (!advertise.empty()) return advertise;
  absl::StatusOr<HostPort> parsed = ParseHostPort(bound_address);
  if (!parsed.ok()) return bound_address;
  if (parsed->host != "0.0.0.0" && parsed->host != "::" && !parsed->host.empty()) {
    return bound_address;
  }
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return JoinHostPort("127.0.0.1", parsed->port);
  return JoinHostPort(name, parsed->port);
}

void AnnounceListening(absl::string_view what, absl::string_view address) {
  std::printf("LISTENING %.*s %.*s\n", static_cast<int>(what.size()), what.data(),
              static_cast<int>(address.size()), address.data());
  std::fflush(stdout);
  Log(LogLevel::kInfo, "main", "listening %s on %s", std::string(what), std::string(address));
}

}  // namespace onecard::services
