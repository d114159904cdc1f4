// Fuzz target: a service config (YAML or JSON) of arbitrary bytes parsed
// into the typed OnecardConfig, then each section checked as its service
// does at start (the worker's bounds, the router's resolved options).
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "onecard/v1/config.pb.h"
#include "router/router_config.h"
#include "services/common/config.h"
#include "services/worker/worker_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onecard;
  v1::OnecardConfig config;
  const absl::Status parsed = services::ParseConfigText(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz.yaml", &config);
  if (!parsed.ok()) return 0;
  (void)services::ValidateWorkerConfig(config.worker());
  (void)router::ResolveRouterOptions(config.router());
  return 0;
}
