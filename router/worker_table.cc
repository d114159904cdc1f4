// Worker table conversion and DNS resolution (see worker_table.h).
// Tested by tests/router/worker_table_test.cc.
#include "router/worker_table.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "services/common/server_main.h"

namespace onecard::router {
namespace {

int64_t CapacityFor(int32_t max_in_flight_per_worker, const onecard::v1::WorkerInfo* info) {
  if (max_in_flight_per_worker > 0) return max_in_flight_per_worker;
  if (info != nullptr && info->max_num_seqs() > 0) return info->max_num_seqs();
  return 0;  // the pool's default
}

}  // namespace

std::vector<WorkerDesc> FromWorkerTable(const onecard::v1::WorkerTable& table,
                                        const std::string& model,
                                        int32_t max_in_flight_per_worker) {
  std::vector<WorkerDesc> out;
  for (const onecard::v1::WorkerEntry& e : table.workers()) {
    if (!model.empty() && e.has_info() && !e.info().model().id().empty() &&
        e.info().model().id() != model) {
      continue;
    }
    WorkerDesc d;
    d.id = e.worker_id();
    d.address = e.address();
    d.healthy = e.healthy();
    d.capacity = CapacityFor(max_in_flight_per_worker, e.has_info() ? &e.info() : nullptr);
    d.context_length = e.info().model().context_length();
    if (e.has_load()) {
      const onecard::v1::WorkerLoadReport& r = e.load();
      d.load = WorkerLoad{r.waiting(),         r.running(),  r.kv_blocks_used(),
                          r.kv_blocks_total(), r.draining(), r.sequence()};
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<WorkerDesc> FromStaticEndpoints(
    const std::vector<std::string>& addresses,
    const absl::flat_hash_map<std::string, onecard::v1::WorkerInfo>& infos,
    int32_t max_in_flight_per_worker) {
  std::vector<WorkerDesc> out;
  std::set<std::string> seen;
  for (const std::string& address : addresses) {
    if (!seen.insert(address).second) continue;
    auto it = infos.find(address);
    WorkerDesc d;
    d.id = address;
    d.address = address;
    d.capacity = CapacityFor(max_in_flight_per_worker, it == infos.end() ? nullptr : &it->second);
    if (it != infos.end()) d.context_length = it->second.model().context_length();
    out.push_back(std::move(d));
  }
  return out;
}

int32_t ServedContext(const std::vector<WorkerDesc>& workers) {
  int32_t served = 0;
  for (const WorkerDesc& w : workers) {
    if (w.context_length > 0 && (served == 0 || w.context_length < served)) {
      served = w.context_length;
    }
  }
  return served;
}

absl::StatusOr<std::vector<std::string>> ResolveAll(const std::string& host_port) {
  absl::StatusOr<services::HostPort> hp = services::ParseHostPort(host_port);
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(hp->host.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("dns_workers ", host_port, ": ", gai_strerror(rc)));
  }
  std::set<std::string> out;
  for (addrinfo* a = result; a != nullptr; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {0};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, ip, sizeof(ip));
      out.insert(absl::StrCat(ip, ":", hp->port));
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, ip, sizeof(ip));
      out.insert(absl::StrCat("[", ip, "]:", hp->port));
    }
  }
  freeaddrinfo(result);
  return std::vector<std::string>(out.begin(), out.end());
}

}  // namespace onecard::router
