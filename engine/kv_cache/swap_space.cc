// SwapSpace and KvBlockRuns (contract in swap_space.h).
// Tested by tests/engine/kv_cache/swap_space_test.cc.
#include "engine/kv_cache/swap_space.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"

namespace onecard::engine {

std::vector<KvBlockRun> KvBlockRuns(std::span<const KvBlockCopy> copies) {
  std::vector<KvBlockCopy> sorted(copies.begin(), copies.end());
  // By diagonal (device - host), then device block: the pairs of one run
  // are neighbours.
  auto key = [](const KvBlockCopy& c) {
    return std::pair<int64_t, int32_t>(int64_t{c.device_block} - c.host_block, c.device_block);
  };
  std::sort(sorted.begin(), sorted.end(),
            [&](const KvBlockCopy& a, const KvBlockCopy& b) { return key(a) < key(b); });
  std::vector<KvBlockRun> runs;
  for (const KvBlockCopy& c : sorted) {
    if (!runs.empty()) {
      KvBlockRun& last = runs.back();
      if (c.device_block == last.device_block + last.num_blocks &&
          c.host_block == last.host_block + last.num_blocks) {
        ++last.num_blocks;
        continue;
      }
    }
    runs.push_back({.device_block = c.device_block, .host_block = c.host_block, .num_blocks = 1});
  }
  return runs;
}

SwapSpace::SwapSpace(int32_t num_blocks) : num_blocks_(std::max(num_blocks, 0)) {
  for (int32_t i = 0; i < num_blocks_; ++i) free_.insert(free_.end(), i);
}

std::optional<std::span<int32_t>> SwapSpace::Allocate(int64_t seq_id, int32_t n) {
  assert(n > 0 && "Allocate: at least one block");
  assert(!tables_.contains(seq_id) && "Allocate: the sequence already holds host blocks");
  if (n > num_free_blocks()) return std::nullopt;
  std::vector<int32_t>& table = tables_[seq_id];
  table.reserve(n);
  for (int32_t i = 0; i < n; ++i) table.push_back(free_.extract(free_.begin()).value());
  return std::span<int32_t>(table);
}

std::span<const int32_t> SwapSpace::Table(int64_t seq_id) const {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return {};
  return it->second;
}

void SwapSpace::Free(int64_t seq_id) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return;
  free_.insert(it->second.begin(), it->second.end());
  tables_.erase(it);
}

void SwapSpace::Release(int64_t seq_id) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return;
  released_.insert(released_.end(), it->second.begin(), it->second.end());
  tables_.erase(it);
}

void SwapSpace::EndStep() {
  free_.insert(released_.begin(), released_.end());
  released_.clear();
}

absl::Status SwapSpace::CheckInvariants() const {
  std::vector<int32_t> seen(num_blocks_, 0);
  auto count = [&](int32_t id, const char* where) -> absl::Status {
    if (id < 0 || id >= num_blocks_) {
      return absl::InternalError(absl::StrCat("host block ", id, " ", where, ": out of range"));
    }
    ++seen[id];
    return absl::OkStatus();
  };
  for (int32_t id : free_) {
    if (absl::Status s = count(id, "free"); !s.ok()) return s;
  }
  for (int32_t id : released_) {
    if (absl::Status s = count(id, "released"); !s.ok()) return s;
  }
  for (const auto& [seq_id, table] : tables_) {
    if (table.empty()) return absl::InternalError(absl::StrCat("seq ", seq_id, ": no host blocks"));
    for (int32_t id : table) {
      if (absl::Status s = count(id, "held"); !s.ok()) return s;
    }
  }
  for (int32_t id = 0; id < num_blocks_; ++id) {
    if (seen[id] != 1) {
      return absl::InternalError(
          absl::StrCat("host block ", id, ": free, released or held ", seen[id], " times"));
    }
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
