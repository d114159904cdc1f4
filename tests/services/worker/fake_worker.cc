// The worker unit tests' fixture. See fake_worker.h.
#include "tests/services/worker/fake_worker.h"

#include <utility>

#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace onecard::testing {

FakeWorker::FakeWorker(FakeWorkerOptions options) {
  services::WorkerServerOptions server_options;
  v1::WorkerConfig& config = server_options.config;
  config.set_model_path("fake.gguf");
  config.set_listen_address("127.0.0.1:0");
  config.set_metrics_listen_address(options.serve_metrics ? "127.0.0.1:0" : "none");
  if (options.edit_config) options.edit_config(&config);
  server_options.engine_factory = [this, options](const engine::EngineOptions& engine_options)
      -> absl::StatusOr<std::unique_ptr<engine::Engine>> {
    auto engine = std::make_unique<FakeEngine>(options.max_context, options.kv_blocks_total,
                                               engine_options.max_waiting);
    engine_ = engine.get();
    return engine;
  };
  absl::StatusOr<std::unique_ptr<services::WorkerServer>> server =
      services::WorkerServer::Create(std::move(server_options));
  EXPECT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  if (options.load) {
    const absl::Status loaded = server_->LoadEngine();
    EXPECT_TRUE(loaded.ok()) << loaded;
  }
  auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  worker_stub_ = v1::Worker::NewStub(channel);
  generation_stub_ = v1::Generation::NewStub(channel);
  health_stub_ = grpc::health::v1::Health::NewStub(channel);
}

grpc::health::v1::HealthCheckResponse::ServingStatus FakeWorker::Health(
    const std::string& service) {
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  if (!health_stub_->Check(&context, request, &response).ok()) {
    return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  }
  return response.status();
}

bool FakeWorker::WaitForHealth(grpc::health::v1::HealthCheckResponse::ServingStatus want,
                               const std::string& service, absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  auto reader = health_stub_->Watch(&context, request);
  grpc::health::v1::HealthCheckResponse response;
  while (reader->Read(&response)) {
    if (response.status() == want) {
      context.TryCancel();
      (void)reader->Finish();
      return true;
    }
  }
  (void)reader->Finish();
  return false;
}

v1::WorkerGenerateRequest SmallWorkerRequest() {
  v1::WorkerGenerateRequest request;
  request.add_prompt_token_ids('h');
  request.add_prompt_token_ids('i');
  request.mutable_stopping()->set_max_tokens(8);
  return request;
}

}  // namespace onecard::testing
