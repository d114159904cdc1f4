// WorkerTableKeeper (see table_keeper.h).
#include "router/table_keeper.h"

#include <algorithm>
#include <set>

namespace onecard::router {

const std::vector<WorkerDesc>& WorkerTableKeeper::Apply(std::vector<WorkerDesc> table,
                                                        bool first_of_stream, absl::Time now) {
  std::set<std::string> listed;
  for (const WorkerDesc& w : table) {
    listed.insert(w.id);
    stale_until_.erase(w.id);  // fresh again
  }
  for (const WorkerDesc& w : workers_) {
    if (listed.contains(w.id)) continue;
    if (first_of_stream && had_table_ && !stale_until_.contains(w.id)) {
      stale_until_[w.id] = now + grace_;  // the control plane may not know it yet
    }
    auto stale = stale_until_.find(w.id);
    if (stale == stale_until_.end()) continue;  // it left
    if (now < stale->second) {
      table.push_back(w);
    } else {
      stale_until_.erase(stale);
    }
  }
  had_table_ = true;
  workers_ = std::move(table);
  return workers_;
}

bool WorkerTableKeeper::Expire(absl::Time now) {
  std::set<std::string> dropped;
  for (auto it = stale_until_.begin(); it != stale_until_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    dropped.insert(it->first);
    it = stale_until_.erase(it);
  }
  if (dropped.empty()) return false;
  std::erase_if(workers_, [&](const WorkerDesc& w) { return dropped.contains(w.id); });
  return true;
}

}  // namespace onecard::router
