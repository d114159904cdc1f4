// The router's worker table from its two sources:
// - the control plane's WorkerTable (WatchWorkers), converted to WorkerDescs;
// - the configuration's static endpoints and DNS name (the fallback, used
//   while the control plane has no worker to offer or is not configured).
// Capacity (requests in flight from this router) is the configured
// max_in_flight_per_worker, else the worker's max_num_seqs, else the pool's
// default; the served context is the worker's ModelInfo.context_length.
// Tested by tests/router/worker_table_test.cc.
#ifndef ONECARD_ROUTER_WORKER_TABLE_H_
#define ONECARD_ROUTER_WORKER_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "onecard/v1/control.pb.h"
#include "onecard/v1/worker.pb.h"
#include "router/worker_pool.h"

namespace onecard::router {

// Workers of `table` serving `model` (empty: any), as the pool sees them.
std::vector<WorkerDesc> FromWorkerTable(const onecard::v1::WorkerTable& table,
                                        const std::string& model, int32_t max_in_flight_per_worker);

// Static endpoints: id = address, healthy, capacity from `infos` (GetInfo
// answers by address) unless max_in_flight_per_worker is set.
std::vector<WorkerDesc> FromStaticEndpoints(
    const std::vector<std::string>& addresses,
    const absl::flat_hash_map<std::string, onecard::v1::WorkerInfo>& infos,
    int32_t max_in_flight_per_worker);

// The context every worker of `workers` serves: the smallest known
// context_length; 0 when none is known.
int32_t ServedContext(const std::vector<WorkerDesc>& workers);

// "host:port" -> every "ip:port" the name resolves to (IPv6 as [ip]:port),
// sorted. UNAVAILABLE naming the name when it does not resolve.
absl::StatusOr<std::vector<std::string>> ResolveAll(const std::string& host_port);

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_WORKER_TABLE_H_
