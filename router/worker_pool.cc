// WorkerPool: least-loaded dispatch with prefix-affinity ties, ejection and
// probing (see worker_pool.h). Tested by tests/router/worker_pool_test.cc.
#include "router/worker_pool.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace onecard::router {
namespace {

uint64_t Mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t Fnv1a(const void* data, size_t size, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

uint64_t PrefixAffinityHash(const std::vector<int32_t>& token_ids, size_t max_tokens) {
  size_t n = std::min(token_ids.size(), max_tokens);
  return Fnv1a(token_ids.data(), n * sizeof(int32_t));
}

void WorkerPool::SetWorkers(const std::vector<WorkerDesc>& workers) {
  std::map<std::string, State> next;
  for (const WorkerDesc& desc : workers) {
    auto old = workers_.find(desc.id);
    State state;
    if (old != workers_.end()) state = std::move(old->second);
    bool new_report = desc.load.has_value() && (!state.desc.load.has_value() ||
                                                state.desc.load->sequence != desc.load->sequence);
    if (new_report) state.in_flight_at_report = state.in_flight;
    state.desc = desc;
    state.departed = false;
    next.insert_or_assign(desc.id, std::move(state));
  }
  for (auto& [id, state] : workers_) {
    if (next.contains(id) || state.in_flight == 0) continue;
    state.departed = true;
    next.insert_or_assign(id, std::move(state));
  }
  workers_ = std::move(next);
}

int64_t WorkerPool::Capacity(const State& s) const {
  return s.desc.capacity > 0 ? s.desc.capacity : options_.default_capacity;
}

int64_t WorkerPool::EstimatedLoad(const State& s) const {
  if (!s.desc.load.has_value()) return s.in_flight;
  int64_t reported = s.desc.load->waiting + s.desc.load->running;
  return std::max(s.in_flight, reported + s.in_flight - s.in_flight_at_report);
}

bool WorkerPool::Eligible(const State& s, absl::Time now) const {
  if (!s.desc.healthy || s.departed) return false;
  if (s.desc.load.has_value() && s.desc.load->draining) return false;
  if (now < s.ejected_until) return false;
  return !s.probing || s.in_flight == 0;
}

bool WorkerPool::HasRoom(const State& s) const {
  if (EstimatedLoad(s) >= Capacity(s)) return false;
  if (options_.kv_watermark > 0 && s.desc.load.has_value() && s.desc.load->kv_blocks_total > 0) {
    double usage = static_cast<double>(s.desc.load->kv_blocks_used) /
                   static_cast<double>(s.desc.load->kv_blocks_total);
    if (usage >= options_.kv_watermark) return false;
  }
  return true;
}

std::optional<WorkerPool::Picked> WorkerPool::Pick(
    uint64_t affinity_hash, const absl::flat_hash_set<std::string>& exclude) {
  const absl::Time now = clock_->Now();
  State* best = nullptr;
  int64_t best_load = 0;
  uint64_t best_affinity = 0;
  for (auto& [id, s] : workers_) {
    if (exclude.contains(id) || !Eligible(s, now) || !HasRoom(s)) continue;
    int64_t load = EstimatedLoad(s);
    uint64_t affinity = Mix64(affinity_hash ^ Fnv1a(id.data(), id.size()));
    if (best == nullptr || load < best_load || (load == best_load && affinity > best_affinity)) {
      best = &s;
      best_load = load;
      best_affinity = affinity;
    }
  }
  if (best == nullptr) return std::nullopt;
  ++best->in_flight;
  return Picked{best->desc.id, best->desc.address};
}

void WorkerPool::Eject(State& s, absl::Time now) {
  ++s.ejections;
  absl::Duration backoff = options_.eject_base;
  for (int i = 1; i < s.ejections && backoff < options_.eject_max; ++i) backoff *= 2;
  s.ejected_until = now + std::min(backoff, options_.eject_max);
  s.probing = true;
  s.consecutive_failures = 0;
}

void WorkerPool::Finish(const std::string& worker_id, CallOutcome outcome) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  State& s = it->second;
  assert(s.in_flight > 0 && "Finish pairs with Pick");
  --s.in_flight;
  if (s.in_flight_at_report > s.in_flight) s.in_flight_at_report = s.in_flight;
  if (s.departed) {
    if (s.in_flight == 0) workers_.erase(it);
    return;
  }
  const absl::Time now = clock_->Now();
  if (outcome == CallOutcome::kSuccess) {
    s.consecutive_failures = 0;
    if (s.probing && now >= s.ejected_until) {
      s.probing = false;
      s.ejections = 0;
    }
    return;
  }
  if (outcome != CallOutcome::kFailure || now < s.ejected_until) return;
  ++s.consecutive_failures;
  if (s.probing || s.consecutive_failures >= options_.eject_after_failures) Eject(s, now);
}

bool WorkerPool::AnyUsable(const absl::flat_hash_set<std::string>& exclude) const {
  const absl::Time now = clock_->Now();
  for (const auto& [id, s] : workers_) {
    if (exclude.contains(id) || !s.desc.healthy || s.departed || now < s.ejected_until) {
      continue;
    }
    if (s.desc.load.has_value() && s.desc.load->draining) continue;
    return true;
  }
  return false;
}

absl::Time WorkerPool::NextProbeTime() const {
  const absl::Time now = clock_->Now();
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, s] : workers_) {
    if (s.ejected_until > now) next = std::min(next, s.ejected_until);
  }
  return next;
}

std::vector<WorkerSnapshot> WorkerPool::Snapshot() const {
  const absl::Time now = clock_->Now();
  std::vector<WorkerSnapshot> out;
  for (const auto& [id, s] : workers_) {
    out.push_back(WorkerSnapshot{id, s.desc.address, s.in_flight, EstimatedLoad(s), s.desc.healthy,
                                 now < s.ejected_until, s.probing});
  }
  return out;
}

int64_t WorkerPool::in_flight(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? 0 : it->second.in_flight;
}

std::string WorkerPool::CheckInvariants() const {
  for (const auto& [id, s] : workers_) {
    if (id != s.desc.id) return absl::StrCat("worker keyed ", id, " describes ", s.desc.id);
    if (s.in_flight < 0) return absl::StrCat("worker ", id, " in_flight < 0");
    if (s.in_flight_at_report < 0 || s.in_flight_at_report > s.in_flight) {
      return absl::StrCat("worker ", id, " in_flight_at_report out of [0, in_flight]");
    }
    if (EstimatedLoad(s) < s.in_flight) return absl::StrCat("worker ", id, " load < in_flight");
    if (s.departed && s.in_flight == 0) return absl::StrCat("worker ", id, " departed, idle");
    if (s.probing && s.ejections == 0) return absl::StrCat("worker ", id, " probing unejected");
    if (s.consecutive_failures >= options_.eject_after_failures) {
      return absl::StrCat("worker ", id, " should have been ejected");
    }
  }
  return "";
}

}  // namespace onecard::router
