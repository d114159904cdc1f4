// ControlPlaneClient: the router's link to the control plane (services/
// metrics), on two threads of its own:
// - watch: WatchWorkers, handing every WorkerTable to a callback; when the
//   stream breaks it reconnects with exponential backoff, and the router
//   keeps the last table meanwhile (the control plane is never on the token
//   path);
// - report: RegisterRouter, then one ReportRouterLoad stream with a report
//   every `report_interval` (queue depth by priority, in flight per worker,
//   admitted and rejected totals, draining), re-registering after a break.
// Tested by tests/router/control_plane_client_test.cc (a fake control plane
// in the test).
#ifndef ONECARD_ROUTER_CONTROL_PLANE_CLIENT_H_
#define ONECARD_ROUTER_CONTROL_PLANE_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "onecard/v1/control.grpc.pb.h"
#include "services/common/service_auth.h"

namespace onecard::router {

struct ControlPlaneOptions {
  std::string address;  // host:port of the control plane
  std::string router_id;
  std::string advertise_address;
  std::string metrics_address;
  std::string model;  // WatchWorkers filter; empty: every model
  absl::Duration report_interval = absl::Milliseconds(250);
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  absl::Duration rpc_timeout = absl::Seconds(2);
  // The router's credentials (token or certificate); null: none.
  std::shared_ptr<const services::ServiceAuth> auth;
};

class ControlPlaneClient {
 public:
  // `first_of_stream`: the first table since the watch (re)connected.
  using TableCallback =
      std::function<void(const onecard::v1::WorkerTable& table, bool first_of_stream)>;
  using LoadSource = std::function<onecard::v1::RouterLoadReport()>;

  // Callbacks run on the client's threads.
  ControlPlaneClient(ControlPlaneOptions options, TableCallback on_table, LoadSource load);
  ~ControlPlaneClient();  // Stop()

  void Start();
  // Sends a last report when connected, ends both streams, joins the threads.
  void Stop();

  int64_t tables_received() const;
  int64_t reports_sent() const;

 private:
  void WatchLoop();
  void ReportLoop();
  bool WatchOnce();   // true when a table arrived (resets the backoff)
  bool ReportOnce();  // true when a report was sent
  // Waits `d` or until Stop; false when stopping.
  bool SleepFor(absl::Duration d);
  bool Stopping();
  void Attach(grpc::ClientContext* context) const;  // the router's token

  ControlPlaneOptions options_;
  TableCallback on_table_;
  LoadSource load_;
  std::unique_ptr<onecard::v1::ControlPlane::Stub> stub_;
  std::thread watch_thread_;
  std::thread report_thread_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t tables_received_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reports_sent_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_CONTROL_PLANE_CLIENT_H_
