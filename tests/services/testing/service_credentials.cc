// Test tokens and certificates. See service_credentials.h.
#include "tests/services/testing/service_credentials.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace onecard::testing {
namespace {

std::string RandomToken() {
  absl::BitGen gen;
  std::string token;
  for (int i = 0; i < 40; ++i)
    token.push_back("abcdefghijklmnopqrstuvwxyz0123456789"[absl::Uniform(gen, 0, 36)]);
  return token;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

absl::Status Run(const std::string& command) {
  const int rc = std::system((command + " >/dev/null 2>&1").c_str());
  if (rc != 0) return absl::InternalError(absl::StrCat("failed (", rc, "): ", command));
  return absl::OkStatus();
}

constexpr char kKeyArgs[] = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

absl::Status MakeCa(const std::string& prefix, const std::string& name) {
  return Run(absl::StrCat("openssl req -x509 ", kKeyArgs, " -keyout ", prefix, ".key -out ", prefix,
                          ".pem -days 2 -subj /CN=", name));
}

// A leaf certificate `prefix`.pem/.key for CN=`cn`, signed by CA `ca`.
absl::StatusOr<TestCertificate> MakeLeaf(const std::string& dir, const std::string& prefix,
                                         const std::string& cn, const std::string& ca) {
  const std::string p = absl::StrCat(dir, "/", prefix);
  std::ofstream(p + ".ext") << "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                            << "extendedKeyUsage=serverAuth,clientAuth\n";
  absl::Status made = Run(absl::StrCat("openssl req ", kKeyArgs, " -keyout ", p, ".key -out ", p,
                                       ".csr -subj /CN=", cn));
  if (made.ok()) {
    made = Run(absl::StrCat("openssl x509 -req -in ", p, ".csr -CA ", ca, ".pem -CAkey ", ca,
                            ".key -CAcreateserial -out ", p, ".pem -days 2 -extfile ", p, ".ext"));
  }
  if (!made.ok()) return made;
  return TestCertificate{p + ".pem", p + ".key"};
}

}  // namespace

std::string MakeTestDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name, "_", getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

TestTokens WriteTestTokens(const std::string& dir) {
  TestTokens t{RandomToken(), RandomToken(), dir + "/worker.token", dir + "/router.token"};
  std::ofstream(t.worker_file) << t.worker << "\n";
  std::ofstream(t.router_file) << t.router << "\n";
  return t;
}

v1::ServiceAuthConfig TokenAuth(const TestTokens& tokens) {
  v1::ServiceAuthConfig c;
  c.set_worker_token_file(tokens.worker_file);
  c.set_router_token_file(tokens.router_file);
  return c;
}

absl::StatusOr<TestCertificates> MakeTestCertificates(const std::string& dir) {
  const std::string ca = dir + "/ca", rogue_ca = dir + "/rogue-ca";
  if (absl::Status s = MakeCa(ca, "onecard-test-ca"); !s.ok()) return s;
  if (absl::Status s = MakeCa(rogue_ca, "rogue-ca"); !s.ok()) return s;
  TestCertificates c;
  c.ca_file = ca + ".pem";
  const std::pair<TestCertificate*, std::string> leaves[] = {{&c.worker, "onecard-worker"},
                                                             {&c.router, "onecard-router"},
                                                             {&c.metrics, "onecard-metrics"},
                                                             {&c.stranger, "onecard-stranger"}};
  for (const auto& [out, cn] : leaves) {
    absl::StatusOr<TestCertificate> leaf = MakeLeaf(dir, cn, cn, ca);
    if (!leaf.ok()) return leaf.status();
    *out = *leaf;
  }
  absl::StatusOr<TestCertificate> rogue = MakeLeaf(dir, "rogue", "onecard-worker", rogue_ca);
  if (!rogue.ok()) return rogue.status();
  c.rogue = *rogue;
  return c;
}

v1::ServiceAuthConfig TlsAuth(const TestCertificates& certs, const TestCertificate& own) {
  v1::ServiceAuthConfig c;
  c.mutable_tls()->set_cert_file(own.cert_file);
  c.mutable_tls()->set_key_file(own.key_file);
  c.mutable_tls()->set_ca_file(certs.ca_file);
  return c;
}

std::shared_ptr<grpc::ChannelCredentials> CaOnlyCredentials(const std::string& ca_file) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadFile(ca_file);
  return grpc::SslCredentials(options);
}

}  // namespace onecard::testing
