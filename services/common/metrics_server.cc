// The /metrics HTTP endpoint. See metrics_server.h.
#include "services/common/metrics_server.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "prometheus/gauge.h"
#include "services/common/server_main.h"

namespace onecard::services {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen_address, const std::string& component) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(listen_address);
  if (!parsed.ok()) return parsed.status();
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->registry_ = std::make_shared<prometheus::Registry>();
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(listen_address, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve /metrics on ", listen_address, ": ", e.what()));
  }
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve /metrics on ", listen_address));
  }
  server->port_ = ports.front();
  server->address_ = JoinHostPort(parsed->host, server->port_);
  server->exposer_->RegisterCollectable(server->registry_);
  if (!component.empty()) {
    prometheus::BuildGauge()
        .Name("onecard_build_info")
        .Help("Always 1; labels name the component, the version and the git commit.")
        .Register(*server->registry_)
        .Add({{"component", component},
              {"version", ONECARD_VERSION},
              {"commit", ONECARD_GIT_COMMIT}})
        .Set(1);
  }
  return server;
}

void MetricsServer::Add(const std::shared_ptr<prometheus::Collectable>& collectable) {
  exposer_->RegisterCollectable(collectable);
}

}  // namespace onecard::services
