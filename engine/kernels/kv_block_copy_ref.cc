// CopyKvBlocksRef and the shared checks (see kv_block_copy.h).
// Tested by tests/engine/kernels/kv_block_copy_ref_test.cc.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/kernels/kv_block_copy.h"

namespace onecard::engine {

absl::Status CheckCopyKvBlocksParams(const CopyKvBlocksParams& p, absl::string_view op) {
  if (p.parts.empty()) return absl::InvalidArgumentError(absl::StrCat(op, ": no parts"));
  if (p.num_device_blocks < 1 || p.num_host_blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": num_device_blocks=", p.num_device_blocks,
                                                   " num_host_blocks=", p.num_host_blocks,
                                                   " (each must be at least 1)"));
  }
  for (size_t i = 0; i < p.parts.size(); ++i) {
    const KvCopyPart& part = p.parts[i];
    if (part.device == nullptr || part.host == nullptr || part.block_bytes < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": parts[", i, "] needs device and host memory and block_bytes >= 1 (block_bytes=",
          part.block_bytes, ")"));
    }
  }
  for (size_t i = 0; i < p.pairs.size(); ++i) {
    const KvBlockPair& pair = p.pairs[i];
    if (pair.device_block < 0 || pair.device_block >= p.num_device_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": pairs[", i,
                                                     "].device_block=", pair.device_block,
                                                     " is outside [0, ", p.num_device_blocks, ")"));
    }
    if (pair.host_block < 0 || pair.host_block >= p.num_host_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": pairs[", i,
                                                     "].host_block=", pair.host_block,
                                                     " is outside [0, ", p.num_host_blocks, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CopyKvBlocksRef(const CopyKvBlocksParams& p) {
  if (absl::Status s = CheckCopyKvBlocksParams(p, "CopyKvBlocksRef"); !s.ok()) return s;
  for (const KvBlockPair& pair : p.pairs) {
    for (const KvCopyPart& part : p.parts) {
      char* device = part.device + pair.device_block * part.block_bytes;
      char* host = part.host + pair.host_block * part.block_bytes;
      if (p.direction == KvCopyDirection::kToHost) {
        std::memcpy(host, device, static_cast<size_t>(part.block_bytes));
      } else {
        std::memcpy(device, host, static_cast<size_t>(part.block_bytes));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
