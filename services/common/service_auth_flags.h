// The command-line flags of onecard.v1.ServiceAuthConfig, shared by the
// three service binaries (onecard-worker, onecard-router, onecard-metrics),
// which link this library into their main() only:
//   --worker-token-file, --router-token-file   token mode
//   --tls-cert, --tls-key, --tls-ca            mutual TLS between services
// Each flag given overrides its field of the config file's service_auth.
// Tested through the binaries (tests/services/worker/worker_main_test.cc).
#ifndef ONECARD_SERVICES_COMMON_SERVICE_AUTH_FLAGS_H_
#define ONECARD_SERVICES_COMMON_SERVICE_AUTH_FLAGS_H_

#include "onecard/v1/config.pb.h"

namespace onecard::services {

void OverrideServiceAuthFromFlags(v1::ServiceAuthConfig* config);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_SERVICE_AUTH_FLAGS_H_
