// Tests of services/common/service_auth.h over real gRPC on 127.0.0.1:0: a
// test service whose one method demands the role the request names
// (grpc.health.v1 Check, service "worker" or "router"). Token mode: the
// token of the role passes, the other role's is PERMISSION_DENIED, none or
// an unknown one UNAUTHENTICATED, and bad token files are refused at
// Create naming the field. TLS mode (certificates made at test time): the
// role comes from the client certificate; a client with a certificate from
// another CA cannot even connect; a replaced CA bundle is reloaded.
#include "services/common/service_auth.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/common/status.h"
#include "tests/services/testing/service_credentials.h"

namespace onecard::services {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::onecard::testing::TestCertificates;
using ::onecard::testing::TestTokens;
using ::testing::HasSubstr;

// Check(service = "worker" | "router") answers SERVING when the caller holds
// that role, else the refusal.
class RoleService final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit RoleService(std::shared_ptr<const ServiceAuth> auth) : auth_(std::move(auth)) {}
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const HealthCheckRequest* request,
                                  HealthCheckResponse* response) override {
    const ServiceRole role =
        request->service() == "worker" ? ServiceRole::kWorker : ServiceRole::kRouter;
    absl::StatusOr<ServicePeer> peer = auth_->Authorize(*context, role);
    if (peer.ok()) response->set_status(HealthCheckResponse::SERVING);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(peer.status()));
    return reactor;
  }

 private:
  const std::shared_ptr<const ServiceAuth> auth_;
};

class Server {
 public:
  Server(std::shared_ptr<const ServiceAuth> auth,
         std::shared_ptr<grpc::ServerCredentials> credentials)
      : service_(std::move(auth)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", std::move(credentials), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~Server() { server_->Shutdown(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  RoleService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// One Check for `role` over `channel`, with `metadata_token` when not empty.
grpc::Status Call(const std::shared_ptr<grpc::Channel>& channel, const std::string& role,
                  const std::string& metadata_token = "", const ServiceAuth* client = nullptr) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  if (!metadata_token.empty()) context.AddMetadata(kServiceTokenKey, metadata_token);
  if (client != nullptr) {
    client->Attach(role == "worker" ? ServiceRole::kWorker : ServiceRole::kRouter, &context);
  }
  HealthCheckRequest request;
  request.set_service(role);
  HealthCheckResponse response;
  return stub->Check(&context, request, &response);
}

std::shared_ptr<const ServiceAuth> MustCreate(const ServiceAuthOptions& options) {
  absl::StatusOr<std::shared_ptr<const ServiceAuth>> auth = ServiceAuth::Create(options);
  EXPECT_TRUE(auth.ok()) << auth.status();
  return auth.ok() ? *auth : nullptr;
}

TEST(ServiceAuthTest, OpenModeTrustsEveryCaller) {
  std::shared_ptr<const ServiceAuth> auth = MustCreate({{}, "test", {}});
  ASSERT_NE(auth, nullptr);
  EXPECT_EQ(auth->mode(), ServiceAuth::Mode::kOpen);
  Server server(auth, auth->ServerCredentials());
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  EXPECT_TRUE(Call(channel, "worker").ok());
  EXPECT_TRUE(Call(channel, "router").ok());
}

TEST(ServiceAuthTest, TokenModeAdmitsOnlyTheRolesToken) {
  const TestTokens tokens = testing::WriteTestTokens(testing::MakeTestDir("auth_tokens"));
  std::shared_ptr<const ServiceAuth> auth = MustCreate(
      {testing::TokenAuth(tokens), "test", {ServiceRole::kWorker, ServiceRole::kRouter}});
  ASSERT_NE(auth, nullptr);
  EXPECT_EQ(auth->mode(), ServiceAuth::Mode::kToken);
  Server server(auth, auth->ServerCredentials());
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  EXPECT_TRUE(Call(channel, "worker", tokens.worker).ok());
  EXPECT_TRUE(Call(channel, "router", tokens.router).ok());
  EXPECT_TRUE(Call(channel, "router", "", auth.get()).ok()) << "Attach sends the role's token";
  const grpc::Status crossed = Call(channel, "router", tokens.worker);
  EXPECT_EQ(crossed.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(crossed.error_message(), HasSubstr("the caller is a worker"));
  EXPECT_EQ(Call(channel, "worker").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call(channel, "worker", tokens.worker + "x").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(ServiceAuthTest, BadTokenFilesAreRefusedNamingTheField) {
  const std::string dir = testing::MakeTestDir("auth_bad_tokens");
  const TestTokens tokens = testing::WriteTestTokens(dir);
  std::ofstream(dir + "/short.token") << "abc\n";
  v1::ServiceAuthConfig config = testing::TokenAuth(tokens);
  config.set_router_token_file(dir + "/short.token");
  absl::Status s = ServiceAuth::Create({config, "test", {}}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("service_auth.router_token_file: "));
  EXPECT_THAT(s.message(), HasSubstr("at least 16"));
  config.set_router_token_file(dir + "/missing.token");
  EXPECT_THAT(ServiceAuth::Create({config, "test", {}}).status().message(),
              HasSubstr("service_auth.router_token_file: " + dir + "/missing.token"));
  config.clear_router_token_file();
  EXPECT_THAT(ServiceAuth::Create({config, "test", {ServiceRole::kRouter}}).status().message(),
              HasSubstr("service_auth.router_token_file: required"));
}

// A channel of its own (no connection shared with earlier channels).
std::shared_ptr<grpc::Channel> FreshChannel(const std::string& address,
                                            std::shared_ptr<grpc::ChannelCredentials> creds) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, std::move(creds), args);
}

TEST(ServiceAuthTest, TlsModeTakesTheRoleFromTheCertificate) {
  const std::string dir = testing::MakeTestDir("auth_tls_roles");
  absl::StatusOr<TestCertificates> certs = testing::MakeTestCertificates(dir);
  ASSERT_TRUE(certs.ok()) << certs.status();
  std::shared_ptr<const ServiceAuth> server_auth =
      MustCreate({testing::TlsAuth(*certs, certs->metrics), "test", {}});
  ASSERT_NE(server_auth, nullptr);
  EXPECT_EQ(server_auth->mode(), ServiceAuth::Mode::kTls);
  Server server(server_auth, server_auth->ServerCredentials());
  const auto client = [&](const testing::TestCertificate& own) {
    return MustCreate({testing::TlsAuth(*certs, own), "test", {}})->ChannelCredentials();
  };
  auto worker = FreshChannel(server.address(), client(certs->worker));
  EXPECT_TRUE(Call(worker, "worker").ok());
  const grpc::Status crossed = Call(worker, "router");
  EXPECT_EQ(crossed.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(crossed.error_message(), HasSubstr("CN=onecard-worker"));
  EXPECT_EQ(Call(FreshChannel(server.address(), client(certs->stranger)), "worker").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Call(FreshChannel(server.address(), client(certs->rogue)), "worker").error_code(),
            grpc::StatusCode::UNAVAILABLE);  // no handshake with another CA's certificate
}

// Certificates come from files that are watched: a server whose CA bundle is
// replaced accepts clients of the new CA without a restart.
TEST(ServiceAuthTest, RotatedFilesAreReloaded) {
  const std::string dir = testing::MakeTestDir("auth_tls_reload");
  absl::StatusOr<TestCertificates> certs = testing::MakeTestCertificates(dir);
  ASSERT_TRUE(certs.ok()) << certs.status();
  const std::string bundle = dir + "/server-ca.pem";
  std::filesystem::copy_file(dir + "/rogue-ca.pem", bundle,
                             std::filesystem::copy_options::overwrite_existing);
  v1::ServiceAuthConfig config = testing::TlsAuth(*certs, certs->metrics);
  config.mutable_tls()->set_ca_file(bundle);
  config.mutable_tls()->mutable_reload_interval()->set_seconds(1);
  std::shared_ptr<const ServiceAuth> server_auth = MustCreate({config, "test", {}});
  Server server(server_auth, server_auth->ServerCredentials());
  auto worker_creds =
      MustCreate({testing::TlsAuth(*certs, certs->worker), "test", {}})->ChannelCredentials();
  EXPECT_EQ(Call(FreshChannel(server.address(), worker_creds), "worker").error_code(),
            grpc::StatusCode::UNAVAILABLE);  // the server trusts only the other CA
  std::filesystem::copy_file(certs->ca_file, bundle + ".new");
  std::filesystem::rename(bundle + ".new", bundle);
  // The provider reads the files again each second: a state the server
  // reaches on its own, waited for with a bound.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  grpc::Status status;
  do {
    status = Call(FreshChannel(server.address(), worker_creds), "worker");
  } while (!status.ok() && absl::Now() < deadline);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

}  // namespace
}  // namespace onecard::services
