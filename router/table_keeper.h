// WorkerTableKeeper: the control plane's worker table as the router keeps
// it, across a restart of the control plane.
//
// A restarted control plane knows only the workers that have registered
// with it again (each after its own reconnect backoff), so the first tables
// after the router's watch reconnects may lack live workers. After a
// reconnect, a worker the router had but the new table lacks is kept, stale
// (dispatchable with its last load), for `grace`; a table that lists it
// again makes it fresh, and when the grace passes (Expire) it is dropped.
// Outside that window a table is taken as it is: a worker it lacks has left.
// Not thread-safe (RouterServer holds its lock). Tested by
// tests/router/table_keeper_test.cc.
#ifndef ONECARD_ROUTER_TABLE_KEEPER_H_
#define ONECARD_ROUTER_TABLE_KEEPER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "router/worker_pool.h"

namespace onecard::router {

class WorkerTableKeeper {
 public:
  explicit WorkerTableKeeper(absl::Duration grace) : grace_(grace) {}

  // A table from the watch; `first_of_stream`: the first since the watch
  // (re)connected. Returns the workers to use.
  const std::vector<WorkerDesc>& Apply(std::vector<WorkerDesc> table, bool first_of_stream,
                                       absl::Time now);
  // Drops the stale workers whose grace has passed; true when any was.
  bool Expire(absl::Time now);

  const std::vector<WorkerDesc>& workers() const { return workers_; }
  int stale() const { return static_cast<int>(stale_until_.size()); }

 private:
  const absl::Duration grace_;
  bool had_table_ = false;
  std::vector<WorkerDesc> workers_;
  std::map<std::string, absl::Time> stale_until_;  // worker id -> dropped after
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_TABLE_KEEPER_H_
