// KvSwapCopier (see swap_copy.h).
// Tested by tests/engine/kv_cache/swap_copy_test.cc.
#include "engine/kv_cache/swap_copy.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace onecard::engine {

KvSwapCopier::KvSwapCopier(std::vector<KvPoolPart> parts, int32_t num_device_blocks, char* host,
                           int32_t num_host_blocks)
    : parts_(std::move(parts)),
      num_device_blocks_(num_device_blocks),
      host_(host),
      num_host_blocks_(num_host_blocks) {}

char* KvSwapCopier::HostPart(size_t i) const {
  char* part = host_;
  for (size_t p = 0; p < i; ++p) part += num_host_blocks_ * parts_[p].block_bytes;
  return part;
}

int64_t KvSwapCopier::BlockBytes(std::span<const KvPoolPart> parts) {
  int64_t bytes = 0;
  for (const KvPoolPart& part : parts) bytes += part.block_bytes;
  return bytes;
}

absl::Status KvSwapCopier::Check(std::span<const KvBlockCopy> copies) const {
  for (const KvBlockCopy& c : copies) {
    if (c.device_block < 0 || c.device_block >= num_device_blocks_ || c.host_block < 0 ||
        c.host_block >= num_host_blocks_) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV swap: block pair {device ", c.device_block, ", host ", c.host_block,
                       "} outside the pools (", num_device_blocks_, " device, ", num_host_blocks_,
                       " host blocks)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
