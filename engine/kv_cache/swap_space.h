// SwapSpace: the ids of KV swap's host blocks (engine/scheduler/scheduler.h,
// "Preemption"). A host block has the shape of a device block: every
// layer's K and V of block_size tokens; the runner owns the memory
// (ModelRunner::AllocateSwapSpace), this class only hands out the ids.
// Also KvBlockCopy, the device <-> host pairs a step's swaps are made of, and
// KvBlockRuns, which coalesces them into runs of consecutive blocks on both
// sides (a runner copies a run a layer with one copy for K and one for V).
// Tested by tests/engine/kv_cache/swap_space_test.cc, and through the
// scheduler's randomized tests.
//
// Contract:
// - Allocate gives a sequence n host blocks, the lowest free ids in
//   ascending order (so that a fresh pool gives one run); running out is a
//   value (nullopt, no change), never an error.
// - Free gives a sequence's blocks back at once; Release gives them back at
//   the next EndStep(), so that within one scheduler step no host block is
//   both the source of a swap-in and the destination of a swap-out.
// Not thread-safe: one owner (the scheduler) drives it.
#ifndef ONECARD_ENGINE_KV_CACHE_SWAP_SPACE_H_
#define ONECARD_ENGINE_KV_CACHE_SWAP_SPACE_H_

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"

namespace onecard::engine {

// One block's copy between the device KV pool and the swap space: device to
// host for a swap-out, host to device for a swap-in.
struct KvBlockCopy {
  int32_t device_block = 0;
  int32_t host_block = 0;
  bool operator==(const KvBlockCopy&) const = default;
};

// Consecutive blocks on both sides: device [device_block, + num_blocks) and
// host [host_block, + num_blocks).
struct KvBlockRun {
  int32_t device_block = 0;
  int32_t host_block = 0;
  int32_t num_blocks = 0;
  bool operator==(const KvBlockRun&) const = default;
};

// The copies as the fewest runs: every copy is in exactly one run, and two
// copies whose device and host blocks both follow on are in the same one.
// Ordered by device - host block, then device block.
std::vector<KvBlockRun> KvBlockRuns(std::span<const KvBlockCopy> copies);

class SwapSpace {
 public:
  explicit SwapSpace(int32_t num_blocks);

  // Gives seq_id n > 0 host blocks (lowest free ids, ascending) and returns
  // its table of them, which the caller may reorder (e.g. to its device
  // blocks' order); nullopt (and no change) when fewer are free. seq_id must
  // hold none.
  std::optional<std::span<int32_t>> Allocate(int64_t seq_id, int32_t n);
  // seq_id's host blocks (empty for unknown ids); valid until its next change.
  std::span<const int32_t> Table(int64_t seq_id) const;
  bool HasSequence(int64_t seq_id) const { return tables_.contains(seq_id); }
  // Gives back seq_id's blocks now (no-op for unknown ids).
  void Free(int64_t seq_id);
  // Takes seq_id's blocks from it now; they are free after the next EndStep.
  void Release(int64_t seq_id);
  void EndStep();

  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_.size()); }
  // Held by sequences or released and not yet free.
  int32_t num_used_blocks() const { return num_blocks_ - num_free_blocks(); }

  // Every block is free, released or held by one sequence, exactly once.
  absl::Status CheckInvariants() const;

 private:
  int32_t num_blocks_;
  std::set<int32_t> free_;         // ascending: Allocate takes from the front
  std::vector<int32_t> released_;  // free at the next EndStep
  std::unordered_map<int64_t, std::vector<int32_t>> tables_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KV_CACHE_SWAP_SPACE_H_
