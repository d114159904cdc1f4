// A WorkerServer on loopback ports (127.0.0.1:0) around a FakeEngine, with
// stubs for its services, for the worker's unit tests.
#ifndef ONECARD_TESTS_SERVICES_WORKER_FAKE_WORKER_H_
#define ONECARD_TESTS_SERVICES_WORKER_FAKE_WORKER_H_

#include <functional>
#include <memory>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "onecard/v1/config.pb.h"
#include "onecard/v1/generation.grpc.pb.h"
#include "onecard/v1/worker.grpc.pb.h"
#include "services/worker/worker_server.h"
#include "tests/services/worker/fake_engine.h"

namespace onecard::testing {

struct FakeWorkerOptions {
  int32_t max_context = 64;
  int64_t kv_blocks_total = 100;
  bool load = true;            // call LoadEngine
  bool serve_metrics = false;  // /metrics on 127.0.0.1:0 (its shutdown takes ~2 s)
  std::function<void(v1::WorkerConfig*)> edit_config;
};

class FakeWorker {
 public:
  explicit FakeWorker(FakeWorkerOptions options = {});

  services::WorkerServer& server() { return *server_; }
  FakeEngine& engine() { return *engine_; }  // valid from LoadEngine to Shutdown/Drain
  v1::Worker::Stub& worker() { return *worker_stub_; }
  v1::Generation::Stub& generation() { return *generation_stub_; }
  // The health status of `service` ("" = the server), or UNKNOWN on error.
  grpc::health::v1::HealthCheckResponse::ServingStatus Health(const std::string& service = "");
  // Watches the health of `service` until it reads `want` (true) or the
  // watch ends or times out (false).
  bool WaitForHealth(grpc::health::v1::HealthCheckResponse::ServingStatus want,
                     const std::string& service = "", absl::Duration timeout = absl::Seconds(60));

 private:
  FakeEngine* engine_ = nullptr;  // owned by server_
  std::unique_ptr<services::WorkerServer> server_;
  std::unique_ptr<v1::Worker::Stub> worker_stub_;
  std::unique_ptr<v1::Generation::Stub> generation_stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_stub_;
};

// A small valid router -> worker request.
v1::WorkerGenerateRequest SmallWorkerRequest();

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_SERVICES_WORKER_FAKE_WORKER_H_
