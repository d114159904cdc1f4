// ServiceAuth: who may talk to whom between the services (the config is
// onecard.v1.ServiceAuthConfig; the rules are in config.proto and
// docs/security.md). Two roles, worker and router, proven by one of:
//   token mode  a shared secret per role, read from a file; clients send it
//               as `onecard-service-token` metadata (Attach), servers hash
//               what they receive and compare it with each role's hash in
//               constant time (Authorize);
//   TLS mode    mutual TLS (gRPC's file-watcher certificate provider: rotated
//               files are picked up for new connections), the role read from
//               the peer certificate's common name or DNS/URI SAN;
//   open mode   nothing configured: every caller is trusted, and Create logs
//               a warning (local development).
// Servers build their listening credentials with ServerCredentials, clients
// their channels with ChannelCredentials; both are insecure in token and
// open modes.
// Tested by tests/services/common/service_auth_test.cc (tokens and
// certificates made at test time, in-process servers on port 0).
#ifndef ONECARD_SERVICES_COMMON_SERVICE_AUTH_H_
#define ONECARD_SERVICES_COMMON_SERVICE_AUTH_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"
#include "onecard/v1/config.pb.h"
#include "services/common/digest.h"

namespace onecard::services {

enum class ServiceRole { kWorker, kRouter };
const char* ServiceRoleName(ServiceRole role);  // "worker", "router"

// The metadata key of a role's token.
inline constexpr char kServiceTokenKey[] = "onecard-service-token";

// A caller that proved a role: `identity` is what a registration binds to
// ("token:worker", the certificate subject "CN=onecard-worker,O=...", or ""
// in open mode).
struct ServicePeer {
  ServiceRole role = ServiceRole::kWorker;
  std::string identity;
};

struct ServiceAuthOptions {
  v1::ServiceAuthConfig config;
  std::string service;  // "worker", "router", "metrics": logs
  // Token mode: the roles whose token file this service must have (to send
  // its own, or to check its callers').
  std::vector<ServiceRole> tokens_needed;
};

class ServiceAuth {
 public:
  enum class Mode { kOpen, kToken, kTls };

  // Reads the token files (or checks the certificate files). InvalidArgument
  // naming the field ("service_auth.router_token_file: ...") when a needed
  // file is missing, unreadable, or a token is shorter than 16 bytes.
  static absl::StatusOr<std::shared_ptr<const ServiceAuth>> Create(
      const ServiceAuthOptions& options);

  Mode mode() const { return mode_; }

  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  // The caller of `context` when it proved `role`: UNAUTHENTICATED when it
  // proved nothing, PERMISSION_DENIED when it proved another role (or a
  // certificate of no role). Open mode: always the role, identity "".
  absl::StatusOr<ServicePeer> Authorize(const grpc::ServerContextBase& context,
                                        ServiceRole role) const;

  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  // Adds the token of `role` (this service's own) to an outgoing call; no-op
  // outside token mode.
  void Attach(ServiceRole role, grpc::ClientContext* context) const;

 private:
  ServiceAuth() = default;
  absl::StatusOr<ServicePeer> AuthorizeToken(const grpc::ServerContextBase& context,
                                             ServiceRole role) const;
  absl::StatusOr<ServicePeer> AuthorizeCertificate(const grpc::ServerContextBase& context,
                                                   ServiceRole role) const;

  Mode mode_ = Mode::kOpen;
  // Token mode, indexed by ServiceRole.
  std::optional<std::string> tokens_[2];
  std::optional<Sha256Digest> token_digests_[2];
  // TLS mode.
  v1::TlsConfig tls_;
  std::string identities_[2];  // certificate names of each role
};

// TLS channel credentials trusting tls.ca_file and, when tls.cert_file is
// set, presenting that certificate (the files watched as above). The chain is
// verified; host names are not (peers are dialled by pod address).
std::shared_ptr<grpc::ChannelCredentials> TlsChannelCredentials(const v1::TlsConfig& tls);

// Credentials of the router's public port: TLS from `tls` (no client
// certificates), or insecure when tls.cert_file is empty. InvalidArgument
// naming `field` when a file is missing.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> PublicServerCredentials(
    const v1::TlsConfig& tls, const std::string& field);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_SERVICE_AUTH_H_
