// Who may talk to whom, end to end, in token mode and in TLS mode: an
// in-process metrics service, a worker (fake engine) and a router, all on
// 127.0.0.1:0, with tokens or certificates made at test time
// (tests/services/testing/service_credentials.h). A request through the
// router streams (the router proves its role to the metrics service and to
// the worker); a rogue registration, a takeover of the worker's id and a
// direct Generate to the worker without the router's identity are refused.
// In TLS mode the router's public ports (gRPC and the OpenAI-compatible
// HTTP API) serve TLS to a client that trusts the CA, and a client without a
// valid certificate cannot even connect to the worker or the metrics
// service.
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "onecard/v1/control.grpc.pb.h"
#include "onecard/v1/generation.grpc.pb.h"
#include "onecard/v1/worker.grpc.pb.h"
#include "router/api_keys.h"
#include "router/router_server.h"
#include "services/common/service_auth.h"
#include "services/metrics/metrics_service.h"
#include "tests/services/testing/service_credentials.h"
#include "tests/services/worker/fake_worker.h"

namespace onecard::testing {
namespace {

using services::ServiceAuth;

constexpr char kApiKey[] = "service-auth-test-key";
constexpr char kRouterModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

enum class Mode { kToken, kTls };
// Callers, by what they hold.
enum class Who { kNobody, kRogue, kStranger, kWorker, kRouter };

class ServiceAuthClusterTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    const std::string dir = MakeTestDir(GetParam() == Mode::kTls ? "auth_tls" : "auth_token");
    tokens_ = WriteTestTokens(dir);
    if (GetParam() == Mode::kTls) {
      absl::StatusOr<TestCertificates> certs = MakeTestCertificates(dir);
      ASSERT_TRUE(certs.ok()) << certs.status();
      certs_ = *certs;
    }
    StartMetrics();
    worker_ =
        std::make_unique<FakeWorker>(FakeWorkerOptions{.edit_config = [this](v1::WorkerConfig* c) {
          c->set_worker_id("w-1");
          c->set_control_plane_address(metrics_->grpc_address());
          *c->mutable_service_auth() = Auth(certs_.worker);
        }});
    StartRouter();
  }

  v1::ServiceAuthConfig Auth(const TestCertificate& own) const {
    return GetParam() == Mode::kTls ? TlsAuth(certs_, own) : TokenAuth(tokens_);
  }

  void StartMetrics() {
    v1::MetricsServiceConfig config;
    config.set_listen_address("127.0.0.1:0");
    config.set_metrics_listen_address("127.0.0.1:0");
    *config.mutable_service_auth() = Auth(certs_.metrics);
    absl::StatusOr<services::metrics::MetricsServiceOptions> options =
        services::metrics::ResolveOptions(config);
    ASSERT_TRUE(options.ok()) << options.status();
    options->registry.table_warmup = absl::ZeroDuration();
    auto metrics = services::metrics::MetricsService::Start(*options);
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = std::move(*metrics);
  }

  void StartRouter() {
    v1::RouterConfig c;
    c.set_model_path(kRouterModel);
    c.set_model_name("fake");  // the fake worker's model
    c.set_listen_address("127.0.0.1:0");
    c.set_metrics_listen_address("127.0.0.1:0");
    c.mutable_http()->set_listen_address("127.0.0.1:0");
    c.set_control_plane_address(metrics_->grpc_address());
    v1::TenantConfig* t = c.add_tenants();
    t->set_name("acme");
    t->add_api_key_sha256(router::Sha256Hex(kApiKey));
    *c.mutable_service_auth() = Auth(certs_.router);
    if (GetParam() == Mode::kTls) {
      c.mutable_public_tls()->set_cert_file(certs_.router.cert_file);
      c.mutable_public_tls()->set_key_file(certs_.router.key_file);
    }
    auto router = router::RouterServer::Start(c);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
  }

  // A channel to `address` for `who`, and the context metadata it sends.
  std::shared_ptr<grpc::Channel> Channel(const std::string& address, Who who) const {
    if (GetParam() == Mode::kToken || who == Who::kNobody) {
      return grpc::CreateChannel(address, GetParam() == Mode::kToken
                                              ? grpc::InsecureChannelCredentials()
                                              : CaOnlyCredentials(certs_.ca_file));
    }
    const TestCertificate* own[] = {nullptr, &certs_.rogue, &certs_.stranger, &certs_.worker,
                                    &certs_.router};
    auto auth = ServiceAuth::Create({TlsAuth(certs_, *own[static_cast<int>(who)]), "test", {}});
    EXPECT_TRUE(auth.ok()) << auth.status();
    return grpc::CreateChannel(address, (*auth)->ChannelCredentials());
  }
  std::unique_ptr<grpc::ClientContext> Context(Who who) const {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    const std::string tokens[] = {"", "not-one-of-the-tokens-at-all", "", tokens_.worker,
                                  tokens_.router};
    const std::string& token = tokens[static_cast<int>(who)];
    if (GetParam() == Mode::kToken && !token.empty()) {
      context->AddMetadata(services::kServiceTokenKey, token);
    }
    return context;
  }
  // What a caller with no valid credential gets: in TLS mode the handshake
  // fails, so it never reaches a method.
  grpc::StatusCode Unknown() const {
    return GetParam() == Mode::kTls ? grpc::StatusCode::UNAVAILABLE
                                    : grpc::StatusCode::UNAUTHENTICATED;
  }

  grpc::Status RegisterWorker(Who who, const std::string& address) {
    auto stub = v1::ControlPlane::NewStub(Channel(metrics_->grpc_address(), who));
    v1::RegisterWorkerRequest request;
    request.set_worker_id("w-1");
    request.set_address(address);
    v1::RegisterWorkerResponse response;
    return stub->RegisterWorker(Context(who).get(), request, &response);
  }

  grpc::Status DirectGenerate(Who who) {
    auto stub = v1::Worker::NewStub(Channel(worker_->server().address(), who));
    auto context = Context(who);
    auto reader = stub->Generate(context.get(), SmallWorkerRequest());
    v1::GenerateResponse chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  // Waits (bounded) until the router has the worker from the control plane:
  // a state the services reach on their own.
  bool RouterHasTheWorker() {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (!router_->core().dispatcher().AnyUsableWorker()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }

  TestTokens tokens_;
  TestCertificates certs_;
  std::unique_ptr<services::metrics::MetricsService> metrics_;
  std::unique_ptr<FakeWorker> worker_;
  std::unique_ptr<router::RouterServer> router_;
};

TEST_P(ServiceAuthClusterTest, RequestsThroughTheRouterStream) {
  ASSERT_TRUE(RouterHasTheWorker());
  const std::string address = GetParam() == Mode::kTls
                                  ? "localhost:" + std::to_string(router_->port())
                                  : router_->address();
  auto stub = v1::Generation::NewStub(
      grpc::CreateChannel(address, GetParam() == Mode::kTls ? CaOnlyCredentials(certs_.ca_file)
                                                            : grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + kApiKey);
  v1::GenerateRequest request;
  request.mutable_token_ids()->add_ids(5);
  request.mutable_stopping()->set_max_tokens(4);
  auto reader = stub->Generate(&context, request);
  ASSERT_TRUE(worker_->engine().WaitForSubmitted(1));
  worker_->engine().Finish(worker_->engine().ids()[0], engine::FinishReason::kStop);
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
  }
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// The HTTP API takes public_tls too: in TLS mode a client that trusts the CA
// lists the models over HTTPS, one that does not fails the handshake, and
// plain HTTP gets no answer; in token mode it is plain HTTP.
TEST_P(ServiceAuthClusterTest, HttpApiServesThePublicTls) {
  const size_t colon = router_->http_address().rfind(':');
  const int port = std::stoi(router_->http_address().substr(colon + 1));
  const httplib::Headers key = {{"Authorization", std::string("Bearer ") + kApiKey}};
  const auto expect_models = [](const httplib::Result& r) {
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200) << r->body;
    const nlohmann::json models = nlohmann::json::parse(r->body, nullptr, false);
    EXPECT_EQ(models["data"][0]["id"], "fake") << r->body;
  };
  httplib::Client plain("127.0.0.1", port);
  plain.set_connection_timeout(10, 0);
  plain.set_read_timeout(10, 0);
  if (GetParam() == Mode::kToken) return expect_models(plain.Get("/v1/models", key));

  const httplib::Result refused = plain.Get("/v1/models", key);
  EXPECT_FALSE(refused && refused->status == 200) << "plain HTTP answered on the TLS port";
  httplib::SSLClient trusting("localhost", port);
  trusting.set_ca_cert_path(certs_.ca_file.c_str());
  trusting.enable_server_certificate_verification(true);
  expect_models(trusting.Get("/v1/models", key));
  httplib::SSLClient untrusting("localhost", port);  // the system's CAs only
  untrusting.enable_server_certificate_verification(true);
  const httplib::Result unverified = untrusting.Get("/v1/models", key);
  EXPECT_FALSE(unverified);
  EXPECT_EQ(unverified.error(), httplib::Error::SSLServerVerification);
}

TEST_P(ServiceAuthClusterTest, RogueRegistrationAndIdTakeoverAreRefused) {
  EXPECT_EQ(RegisterWorker(Who::kNobody, "10.6.6.6:1").error_code(), Unknown());
  EXPECT_EQ(RegisterWorker(Who::kRogue, "10.6.6.6:1").error_code(), Unknown());
  EXPECT_EQ(RegisterWorker(Who::kRouter, "10.6.6.6:1").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  if (GetParam() == Mode::kTls) {
    EXPECT_EQ(RegisterWorker(Who::kStranger, "10.6.6.6:1").error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  ASSERT_TRUE(RouterHasTheWorker());  // the real worker is registered as w-1
  // Even with the worker's own credential, a live id keeps its address.
  EXPECT_EQ(RegisterWorker(Who::kWorker, "10.6.6.6:1").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  const v1::WorkerTable table = metrics_->registry().WorkerTable("");
  ASSERT_EQ(table.workers_size(), 1);
  EXPECT_EQ(table.workers(0).address(), worker_->server().advertised_address());
}

TEST_P(ServiceAuthClusterTest, DirectGenerateNeedsTheRoutersIdentity) {
  EXPECT_EQ(DirectGenerate(Who::kNobody).error_code(), Unknown());
  EXPECT_EQ(DirectGenerate(Who::kRogue).error_code(), Unknown());
  EXPECT_EQ(DirectGenerate(Who::kWorker).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(worker_->engine().ids().empty());
  std::thread finisher([this] {
    if (worker_->engine().WaitForSubmitted(1)) {
      worker_->engine().Finish(worker_->engine().ids()[0], engine::FinishReason::kStop);
    }
  });
  const grpc::Status routed = DirectGenerate(Who::kRouter);
  finisher.join();
  EXPECT_TRUE(routed.ok()) << routed.error_message();
}

// The health probe of the Helm chart's TLS mode: with the pod's certificate
// it reaches the worker's mutual-TLS port; without one it cannot.
TEST_P(ServiceAuthClusterTest, HealthProbeSpeaksMutualTls) {
  if (GetParam() != Mode::kTls) GTEST_SKIP() << "the health service is open in token mode";
  const std::string probe = std::string(ONECARD_PROBE_BIN) +
                            " --target=" + worker_->server().address() +
                            " --tls-ca=" + certs_.ca_file;
  EXPECT_EQ(std::system((probe + " --tls-cert=" + certs_.worker.cert_file +
                         " --tls-key=" + certs_.worker.key_file + " >/dev/null 2>&1")
                            .c_str()),
            0);
  EXPECT_NE(std::system((probe + " >/dev/null 2>&1").c_str()), 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, ServiceAuthClusterTest, ::testing::Values(Mode::kToken, Mode::kTls),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           return info.param == Mode::kTls ? "Tls" : "Token";
                         });

}  // namespace
}  // namespace onecard::testing
