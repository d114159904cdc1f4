// CopyKvBlocks (engine/kernels/kv_block_copy.cu) against CopyKvBlocksRef:
// device pools of random bytes and a swap space in pinned host memory laid
// out as KvSwap lays it out, both directions, over awkward shapes: parts of
// 32 KiB (a 70B layer's block), 80 bytes (the 16-byte path), 120 and 48
// (4-byte words), 37 / 5 / 64 (bytes), more pairs than one launch carries,
// grids of one block and of fewer blocks than items, and no pairs. Every
// byte of both sides is compared, so a block written that no pair names
// shows too. Also: the errors, with nothing launched.
#include "engine/kernels/kv_block_copy.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

struct CopyCase {
  std::string name;
  std::vector<int64_t> block_bytes;  // one a part
  int32_t device_blocks;
  int32_t host_blocks;
  int32_t pairs;
  KvCopyDirection direction;
  int32_t grid_blocks = 0;
};

std::ostream& operator<<(std::ostream& os, const CopyCase& c) { return os << c.name; }

class KvBlockCopyTest : public ::testing::TestWithParam<CopyCase> {};

// Pinned host memory, freed on scope exit.
struct Pinned {
  explicit Pinned(size_t n) {
    if (cudaHostAlloc(&p, std::max<size_t>(n, 1), cudaHostAllocDefault) != cudaSuccess) p = nullptr;
  }
  ~Pinned() {
    if (p != nullptr) cudaFreeHost(p);
  }
  char* p = nullptr;
};

TEST_P(KvBlockCopyTest, MatchesReference) {
  const CopyCase& c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.pairs * 131 + c.device_blocks));
  int64_t device_bytes = 0, host_bytes = 0;
  for (const int64_t b : c.block_bytes) {
    device_bytes += b * c.device_blocks;
    host_bytes += b * c.host_blocks;
  }
  std::vector<char> device_init(device_bytes), host_init(host_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (char& v : device_init) v = static_cast<char>(byte(rng));
  for (char& v : host_init) v = static_cast<char>(byte(rng));
  testing::DeviceBuf<char> device(device_init);
  Pinned host(host_bytes);
  ASSERT_NE(host.p, nullptr);
  std::memcpy(host.p, host_init.data(), host_bytes);
  // The reference's copies of both sides, at the same offsets.
  std::vector<char> device_ref = device_init, host_ref = host_init;
  std::vector<KvCopyPart> parts, parts_ref;
  int64_t d_off = 0, h_off = 0;
  for (const int64_t b : c.block_bytes) {
    parts.push_back({device.get() + d_off, host.p + h_off, b});
    parts_ref.push_back({device_ref.data() + d_off, host_ref.data() + h_off, b});
    d_off += b * c.device_blocks;
    h_off += b * c.host_blocks;
  }
  testing::DeviceBuf<KvCopyPart> device_parts(parts);
  // Distinct blocks on either side, in random order.
  std::vector<int32_t> d(c.device_blocks), h(c.host_blocks);
  std::iota(d.begin(), d.end(), 0);
  std::iota(h.begin(), h.end(), 0);
  std::shuffle(d.begin(), d.end(), rng);
  std::shuffle(h.begin(), h.end(), rng);
  std::vector<KvBlockPair> pairs(c.pairs);
  for (int32_t i = 0; i < c.pairs; ++i) pairs[i] = {d[i], h[i]};

  CopyKvBlocksParams p{.parts = parts_ref,
                       .pairs = pairs,
                       .num_device_blocks = c.device_blocks,
                       .num_host_blocks = c.host_blocks,
                       .direction = c.direction,
                       .grid_blocks = c.grid_blocks};
  ASSERT_TRUE(CopyKvBlocksRef(p).ok());
  p.parts = parts;
  p.device_parts = device_parts.get();
  ASSERT_TRUE(CopyKvBlocks(p, nullptr).ok());
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<char> device_out = device.Download();
  for (int64_t i = 0; i < device_bytes; ++i) {
    ASSERT_EQ(device_out[i], device_ref[i]) << "device byte " << i;
  }
  for (int64_t i = 0; i < host_bytes; ++i) {
    ASSERT_EQ(host.p[i], host_ref[i]) << "host byte " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KvBlockCopyTest,
    ::testing::Values(
        CopyCase{"b32k_out", {32768, 32768, 32768, 32768}, 40, 24, 17, KvCopyDirection::kToHost},
        CopyCase{"b32k_in", {32768, 32768, 32768, 32768}, 40, 24, 17, KvCopyDirection::kToDevice},
        CopyCase{"b80_out", {80, 80, 80}, 100, 64, 33, KvCopyDirection::kToHost},
        CopyCase{"b80_in", {80, 80, 80}, 100, 64, 33, KvCopyDirection::kToDevice},
        CopyCase{"words_out", {120, 48}, 50, 30, 29, KvCopyDirection::kToHost},
        CopyCase{"words_in", {120, 48}, 50, 30, 29, KvCopyDirection::kToDevice},
        CopyCase{"bytes_out", {37, 5, 64}, 21, 19, 19, KvCopyDirection::kToHost},
        CopyCase{"bytes_in", {37, 5, 64}, 21, 19, 19, KvCopyDirection::kToDevice},
        CopyCase{"fp8_mixed_in", {8192, 16384, 16384}, 12, 12, 12, KvCopyDirection::kToDevice},
        CopyCase{"many_pairs_out", {64, 64}, 9000, 8000, 7500, KvCopyDirection::kToHost, 7},
        CopyCase{"many_pairs_in", {64, 64}, 9000, 8000, 7500, KvCopyDirection::kToDevice, 7},
        CopyCase{"grid1_in", {4096, 1040}, 9, 5, 5, KvCopyDirection::kToDevice, 1},
        CopyCase{"no_pairs", {64}, 4, 4, 0, KvCopyDirection::kToHost}),
    [](const ::testing::TestParamInfo<CopyCase>& info) { return info.param.name; });

TEST(KvBlockCopyErrorTest, RefusedBeforeAnyLaunch) {
  testing::DeviceBuf<char> device(4 * 64);
  Pinned host(2 * 64);
  ASSERT_NE(host.p, nullptr);
  std::memset(host.p, 0x5A, 2 * 64);
  const std::vector<KvCopyPart> parts = {{device.get(), host.p, 64}};
  testing::DeviceBuf<KvCopyPart> device_parts(parts);
  const std::vector<KvBlockPair> pairs = {{3, 1}, {1, 2}};
  CopyKvBlocksParams p{.parts = parts,
                       .device_parts = device_parts.get(),
                       .pairs = pairs,
                       .num_device_blocks = 4,
                       .num_host_blocks = 2,
                       .direction = KvCopyDirection::kToHost};
  EXPECT_THAT(CopyKvBlocks(p, nullptr).message(),
              HasSubstr("pairs[1].host_block=2 is outside [0, 2)"));
  p.pairs = std::span<const KvBlockPair>(pairs).first(1);
  p.device_parts = nullptr;
  EXPECT_THAT(CopyKvBlocks(p, nullptr).message(), HasSubstr("device_parts"));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  for (int i = 0; i < 2 * 64; ++i) ASSERT_EQ(host.p[i], 0x5A) << "host byte " << i;
}

}  // namespace
}  // namespace onecard::engine
