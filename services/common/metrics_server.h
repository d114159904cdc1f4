// Prometheus /metrics for a service: a prometheus-cpp Exposer on a given
// address ("127.0.0.1:0" picks a free port; the bound one is reported) with
// one Registry for the service's metric families. Extra Collectables (gauges
// computed at scrape time) can be added. prometheus-cpp (civetweb) throws
// when it cannot bind; that is caught here and becomes UNAVAILABLE.
// Tested by tests/services/common/metrics_server_test.cc.
#ifndef ONECARD_SERVICES_COMMON_METRICS_SERVER_H_
#define ONECARD_SERVICES_COMMON_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace onecard::services {

class MetricsServer {
 public:
  // With a `component` ("worker", "router", "metrics"), the registry holds
  // onecard_build_info{component, version, commit} = 1: the project version
  // and the git commit the build was configured at ("unknown" outside git).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen_address,
                                                              const std::string& component = "");

  prometheus::Registry& registry() { return *registry_; }
  // The collectable must outlive this server or be removed first.
  void Add(const std::shared_ptr<prometheus::Collectable>& collectable);
  int port() const { return port_; }
  const std::string& address() const { return address_; }  // host:bound port

 private:
  MetricsServer() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  std::string address_;
};

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_METRICS_SERVER_H_
