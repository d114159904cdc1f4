// Service identity flags. See service_auth_flags.h.
#include "services/common/service_auth_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, worker_token_file, "",
          "File holding the worker role's token (service_auth.worker_token_file)");
ABSL_FLAG(std::string, router_token_file, "",
          "File holding the router role's token (service_auth.router_token_file)");
ABSL_FLAG(std::string, tls_cert, "",
          "This service's certificate, PEM (service_auth.tls.cert_file)");
ABSL_FLAG(std::string, tls_key, "", "Its private key, PEM (service_auth.tls.key_file)");
ABSL_FLAG(std::string, tls_ca, "", "CA bundle of the peers, PEM (service_auth.tls.ca_file)");

namespace onecard::services {

void OverrideServiceAuthFromFlags(v1::ServiceAuthConfig* c) {
  const auto set = [](const std::string& flag, std::string* field) {
    if (!flag.empty()) *field = flag;
  };
  set(absl::GetFlag(FLAGS_worker_token_file), c->mutable_worker_token_file());
  set(absl::GetFlag(FLAGS_router_token_file), c->mutable_router_token_file());
  set(absl::GetFlag(FLAGS_tls_cert), c->mutable_tls()->mutable_cert_file());
  set(absl::GetFlag(FLAGS_tls_key), c->mutable_tls()->mutable_key_file());
  set(absl::GetFlag(FLAGS_tls_ca), c->mutable_tls()->mutable_ca_file());
}

}  // namespace onecard::services
