// RouterServer: a whole router in one object (what main() runs and what
// in-process tests start): the model's tokenizer (no weights), the gRPC
// server (Generation and grpc.health.v1), the OpenAI-compatible HTTP API
// (http_server.h), /metrics, the dispatcher's ticker
// (queue timeouts, probe times), the worker table (control plane watch, with
// the static and DNS endpoints of the config as the fallback) and the load
// reports to the control plane.
//
// Worker table: while the control plane offers at least one worker for the
// model, its table is used (and kept while the control plane is away; after
// the watch reconnects, workers the restarted control plane does not list
// yet are kept for dispatch.stale_worker_grace: WorkerTableKeeper);
// otherwise the static/DNS endpoints, refreshed every `table_refresh`, with
// each worker's capacity from its GetInfo (max_num_seqs) unless
// dispatch.max_in_flight_per_worker is set. The table in use also gives the
// preparer the context the workers serve (the smallest ModelInfo
// context_length). A request that finds no healthy worker waits in the queue
// (Dispatcher) for the table to fill.
//
// Life cycle: Start binds the listeners (port 0 picks free ones) and serves
// (health SERVING). Drain (SIGTERM): health NOT_SERVING, new requests get
// UNAVAILABLE (HTTP 503), open calls of both APIs finish within the grace
// period; then Shutdown (open calls are cancelled). Shutdown is idempotent.
// Tested by tests/router/router_service_test.cc and the integration tests.
#ifndef ONECARD_ROUTER_ROUTER_SERVER_H_
#define ONECARD_ROUTER_ROUTER_SERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "onecard/v1/config.pb.h"
#include "router/control_plane_client.h"
#include "router/http_server.h"
#include "router/model_loader.h"
#include "router/router_core.h"
#include "router/router_metrics.h"
#include "router/router_service.h"
#include "router/table_keeper.h"
#include "services/common/metrics_server.h"
#include "services/common/service_auth.h"

namespace onecard::router {

class RouterServer {
 public:
  static absl::StatusOr<std::unique_ptr<RouterServer>> Start(
      const onecard::v1::RouterConfig& config);
  ~RouterServer();

  // Refuses new requests and waits for open calls up to `grace`; then shuts
  // down. OK when every call finished in time, DEADLINE_EXCEEDED otherwise.
  absl::Status Drain(absl::Duration grace);
  void Shutdown();

  const std::string& address() const { return address_; }  // host:bound port
  int port() const { return port_; }
  // The HTTP API's host:bound port; empty when http.listen_address is "none".
  const std::string& http_address() const { return http_address_; }
  const std::string& metrics_address() const { return metrics_address_; }
  RouterCore& core() { return *core_; }
  const RouterOptions& options() const { return options_; }

 private:
  RouterServer() = default;
  absl::Status Init(const onecard::v1::RouterConfig& config);
  absl::Status StartMetrics();
  absl::Status StartGrpc();
  absl::Status StartHttp();
  void StartControlPlane();
  void TickLoop();
  void TableLoop();
  void RefreshStaticTable();
  void OnControlPlaneTable(const onecard::v1::WorkerTable& table, bool first_of_stream);
  void ApplyTable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  onecard::v1::RouterLoadReport LoadReport();
  bool SleepFor(absl::Duration d);

  RouterOptions options_;
  std::optional<RoutingModel> model_;
  std::unique_ptr<RequestPreparer> preparer_;
  std::shared_ptr<const services::ServiceAuth> auth_;
  std::unique_ptr<services::MetricsServer> metrics_;
  std::unique_ptr<RouterMetrics> router_metrics_;
  std::shared_ptr<prometheus::Collectable> gauges_;
  std::unique_ptr<RouterCore> core_;
  std::unique_ptr<RouterService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<ControlPlaneClient> control_plane_;
  std::string address_;
  std::string http_address_;
  std::string metrics_address_;
  int port_ = 0;
  std::thread ticker_;
  std::thread table_thread_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<WorkerTableKeeper> control_plane_table_ ABSL_GUARDED_BY(mu_);
  std::vector<WorkerDesc> static_table_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, onecard::v1::WorkerInfo> infos_ ABSL_GUARDED_BY(mu_);
  int64_t last_admitted_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_report_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_ROUTER_SERVER_H_
