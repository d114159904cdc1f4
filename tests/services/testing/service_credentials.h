// Service identities made at test time (nothing secret is committed):
// role tokens written to files, and a CA with certificates made by the
// openssl command-line tool (Debian's `openssl`):
//   worker   CN=onecard-worker     router  CN=onecard-router
//   metrics  CN=onecard-metrics    stranger CN=onecard-stranger (no role)
//   rogue    CN=onecard-worker, signed by another CA
// Each leaf certificate names DNS:localhost and IP:127.0.0.1 and serves as
// client and server certificate. Used by the service-identity tests.
#ifndef ONECARD_TESTS_SERVICES_TESTING_SERVICE_CREDENTIALS_H_
#define ONECARD_TESTS_SERVICES_TESTING_SERVICE_CREDENTIALS_H_

#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "onecard/v1/config.pb.h"

namespace onecard::testing {

struct TestTokens {
  std::string worker;  // the tokens themselves
  std::string router;
  std::string worker_file;  // files holding them
  std::string router_file;
};

// Writes two fresh random tokens into `dir` (which must exist).
TestTokens WriteTestTokens(const std::string& dir);
// service_auth in token mode with both files.
v1::ServiceAuthConfig TokenAuth(const TestTokens& tokens);

struct TestCertificate {
  std::string cert_file;
  std::string key_file;
};

struct TestCertificates {
  std::string ca_file;  // the CA every certificate below but rogue chains to
  TestCertificate worker, router, metrics, stranger;
  TestCertificate rogue;  // CN=onecard-worker from another CA
};

// Makes the CAs and certificates in `dir` (which must exist) with openssl.
absl::StatusOr<TestCertificates> MakeTestCertificates(const std::string& dir);
// service_auth in TLS mode for a service holding `own`.
v1::ServiceAuthConfig TlsAuth(const TestCertificates& certs, const TestCertificate& own);
// TLS channel credentials that trust `ca_file` and present no certificate
// (grpc::SslCredentials: the host name is checked, so dial "localhost:PORT").
std::shared_ptr<grpc::ChannelCredentials> CaOnlyCredentials(const std::string& ca_file);
// A folder for one test's files, made under the test temp dir.
std::string MakeTestDir(const std::string& name);

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_SERVICES_TESTING_SERVICE_CREDENTIALS_H_
