// ControlService: onecard.v1.ControlPlane on the gRPC callback API, a thin
// layer over the Registry (handlers hold no logic; errors go through the one
// ToGrpcStatus of services/common/status.h).
//
// - RegisterWorker/RegisterRouter: unary; answer the report interval.
// - ReportWorkerLoad/ReportRouterLoad: client streams; each report is applied
//   as it arrives. An unknown id ends the stream with NOT_FOUND (the client
//   registers again); a client that half-closes gets OK.
// - WatchWorkers: the whole table at once, then the table again after each
//   change, at most one per `watch_min_interval` (a change inside the
//   interval is sent on the next Tick()); writes never queue up: a slow
//   router gets the newest table when its previous write completes. Nothing
//   is sent before the registry's published_from() (the table warm-up after
//   a start): a router watching a restarted control plane keeps its last
//   table until the workers that outlived the restart have registered again.
// Who may call: RegisterWorker and ReportWorkerLoad need the worker role,
// the router methods and WatchWorkers the router role (ServiceAuth); a
// refusal (UNAUTHENTICATED or PERMISSION_DENIED, also a registration that
// would take over a live worker id) is logged with the caller's address. A
// worker's report stream that ends takes the worker out of the table
// (Registry::WorkerLeft).
// Tick() must be called periodically (MetricsService does, every
// watch_min_interval) to flush rate-limited watch streams.
// Tested by tests/services/metrics/control_service_test.cc (in-process
// server on port 0, real gRPC clients).
#ifndef ONECARD_SERVICES_METRICS_CONTROL_SERVICE_H_
#define ONECARD_SERVICES_METRICS_CONTROL_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "onecard/v1/control.grpc.pb.h"
#include "services/common/service_auth.h"
#include "services/metrics/cluster_metrics.h"
#include "services/metrics/registry.h"

namespace onecard::services::metrics {

class ControlService final : public v1::ControlPlane::CallbackService {
 public:
  // `registry` and `metrics` must outlive the service and every call on it;
  // `auth` null: every caller is trusted.
  ControlService(Registry *registry, ClusterMetrics *metrics, absl::Duration watch_min_interval,
                 std::shared_ptr<const ServiceAuth> auth = nullptr);

  // Applies expiry, then lets rate-limited watch streams send what is due.
  void Tick();

  grpc::ServerUnaryReactor *RegisterWorker(grpc::CallbackServerContext *context,
                                           const v1::RegisterWorkerRequest *request,
                                           v1::RegisterWorkerResponse *response) override;
  grpc::ServerReadReactor<v1::WorkerLoadReport> *ReportWorkerLoad(
      grpc::CallbackServerContext *context, v1::ReportLoadResponse *response) override;
  grpc::ServerUnaryReactor *RegisterRouter(grpc::CallbackServerContext *context,
                                           const v1::RegisterRouterRequest *request,
                                           v1::RegisterRouterResponse *response) override;
  grpc::ServerReadReactor<v1::RouterLoadReport> *ReportRouterLoad(
      grpc::CallbackServerContext *context, v1::ReportLoadResponse *response) override;
  grpc::ServerWriteReactor<v1::WorkerTable> *WatchWorkers(
      grpc::CallbackServerContext *context, const v1::WatchWorkersRequest *request) override;

 private:
  // The caller's identity when it holds `role`; a refusal is logged.
  absl::StatusOr<std::string> Authorize(const grpc::CallbackServerContext &context,
                                        ServiceRole role, const char *method) const;

  Registry *const registry_;
  ClusterMetrics *const metrics_;
  const absl::Duration watch_min_interval_;
  const std::shared_ptr<const ServiceAuth> auth_;
};

}  // namespace onecard::services::metrics

#endif  // ONECARD_SERVICES_METRICS_CONTROL_SERVICE_H_
