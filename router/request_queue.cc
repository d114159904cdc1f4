// RequestQueue (see request_queue.h for the order, the aging bound and the
// bounds). Tested by tests/router/request_queue_test.cc.
#include "router/request_queue.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace onecard::router {

const char* PriorityClassName(PriorityClass priority) {
  switch (priority) {
    case PriorityClass::kInteractive:
      return "interactive";
    case PriorityClass::kStandard:
      return "standard";
    case PriorityClass::kBatch:
      return "batch";
  }
  return "standard";
}

absl::Time RequestQueue::RankFor(PriorityClass priority, int64_t cost_tokens,
                                 absl::Time enqueued) const {
  if (options_.fifo) return enqueued;
  absl::Duration cost_term =
      std::min(options_.cost_per_token * std::max<int64_t>(cost_tokens, 0), options_.max_cost_term);
  return enqueued + options_.class_offset[static_cast<int>(priority)] + cost_term;
}

absl::Status RequestQueue::Push(QueueEntry entry, bool ignore_bounds) {
  assert(!entries_.contains(entry.id) && "queue ids are unique");
  const int cls = static_cast<int>(entry.priority);
  if (!ignore_bounds) {
    if (depth() >= options_.max_depth) {
      return absl::ResourceExhaustedError(
          absl::StrCat("router queue full (max_depth ", options_.max_depth, ")"));
    }
    int64_t class_max = options_.max_depth_per_class[cls];
    if (class_max > 0 && depth_by_class_[cls] >= class_max) {
      return absl::ResourceExhaustedError(absl::StrCat("router queue for priority ",
                                                       PriorityClassName(entry.priority),
                                                       " full (max ", class_max, ")"));
    }
  }
  entry.sequence = next_sequence_++;
  entry.rank = RankFor(entry.priority, entry.cost_tokens, entry.enqueued);
  entry.expires = std::min(entry.enqueued + options_.queue_timeout, entry.deadline);
  by_rank_.insert({{entry.rank, entry.sequence}, entry.id});
  by_expiry_.insert({{entry.expires, entry.sequence}, entry.id});
  ++depth_by_class_[cls];
  entries_.emplace(entry.id, std::move(entry));
  return absl::OkStatus();
}

std::vector<const QueueEntry*> RequestQueue::InOrder(size_t limit) const {
  std::vector<const QueueEntry*> out;
  for (auto it = by_rank_.begin(); it != by_rank_.end() && out.size() < limit; ++it) {
    out.push_back(&entries_.at(it->second));
  }
  return out;
}

std::optional<QueueEntry> RequestQueue::Take(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  QueueEntry entry = std::move(it->second);
  entries_.erase(it);
  by_rank_.erase({{entry.rank, entry.sequence}, entry.id});
  by_expiry_.erase({{entry.expires, entry.sequence}, entry.id});
  --depth_by_class_[static_cast<int>(entry.priority)];
  return entry;
}

std::optional<QueueEntry> RequestQueue::Pop() {
  if (by_rank_.empty()) return std::nullopt;
  return Take(by_rank_.begin()->second);
}

std::optional<QueueEntry> RequestQueue::Remove(uint64_t id) { return Take(id); }

std::vector<QueueEntry> RequestQueue::Expire(absl::Time now) {
  std::vector<QueueEntry> expired;
  while (!by_expiry_.empty() && by_expiry_.begin()->first.first <= now) {
    std::optional<QueueEntry> entry = Take(by_expiry_.begin()->second);
    assert(entry.has_value() && "by_expiry_ names only queued entries");
    expired.push_back(std::move(*entry));
  }
  return expired;
}

absl::Time RequestQueue::NextExpiry() const {
  return by_expiry_.empty() ? absl::InfiniteFuture() : by_expiry_.begin()->first.first;
}

std::string RequestQueue::CheckInvariants() const {
  if (by_rank_.size() != entries_.size() || by_expiry_.size() != entries_.size()) {
    return absl::StrCat("index sizes ", by_rank_.size(), "/", by_expiry_.size(), " != entries ",
                        entries_.size());
  }
  std::array<int64_t, kNumPriorityClasses> counts = {0, 0, 0};
  for (const auto& [key, id] : by_rank_) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return absl::StrCat("by_rank_ names unknown id ", id);
    const QueueEntry& e = it->second;
    if (key.first != e.rank || key.second != e.sequence) {
      return absl::StrCat("stale rank key for id ", id);
    }
    if (e.rank != RankFor(e.priority, e.cost_tokens, e.enqueued)) {
      return absl::StrCat("rank of id ", id, " is not its formula");
    }
    if (!by_expiry_.contains({{e.expires, e.sequence}, id})) {
      return absl::StrCat("id ", id, " missing from by_expiry_");
    }
    ++counts[static_cast<int>(e.priority)];
  }
  if (counts != depth_by_class_) return "per-class depths disagree with the entries";
  return "";
}

}  // namespace onecard::router
