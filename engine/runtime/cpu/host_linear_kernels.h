// The kernels behind HostLinearForward (host_linear.h), one table per
// instruction set, over x already laid out in their lane order by
// host_linear.cc. The AVX-512 table lives in host_linear_avx512.cc, compiled
// for AVX-512 alone, which includes nothing that defines inline code shared
// with the rest of the program (this header has declarations and constants
// only); likewise the AVX-512 BF16 and AMX tables. Internal to the cpu backend. Tested through
// tests/engine/runtime/cpu/host_linear_test.cc.
//
// 4-bit lanes. One 64-byte line of a tile (int4_layout.h) at row pair gr
// (lanes 4 gr .. 4 gr + 3) holds rows gr and gr + 8 over the tile's 64
// columns: its dword d = 4 t + i is word i of lane 4 gr + t, and nibble m of
// every dword is the code of row gr + 8 (m & 1) at column 16 i + 4 t +
// kInt4NibbleColumn[m]. So with x in "lanes" (lane d of vector (kt, j) =
// x[64 kt + 16 i + 4 t + j]) each nibble position is one 16-wide multiply-add
// of the codes against one x vector, and a lane sums a fixed set of columns.
// A group of 32 columns covers lanes with i < 2 (its first half) or i >= 2.
// The BF16 dot-product kernels take x as BF16 pairs instead: dword d of pair
// vector (kt, p) = x[64 kt + 16 i + 4 t + 2 p] (low half), ... + 1 (high half).
//
// BF16 lanes. A 64-byte run of 32 columns of a weight row is 16 dwords, dword
// d = columns 2 d (low half) and 2 d + 1 (high half); x is laid out per run
// of 32 columns as an even vector (lane d = x[32 c + 2 d]) and an odd one,
// zero past k; or, for the BF16 dot products, as the run's BF16 pairs.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_HOST_LINEAR_KERNELS_H_
#define ONECARD_ENGINE_RUNTIME_CPU_HOST_LINEAR_KERNELS_H_

#include <cstdint>

namespace onecard {
class ThreadPool;
namespace engine {
struct HostWeight;
struct HostLinearScratch;
}  // namespace engine
}  // namespace onecard

namespace onecard::engine::host_linear {

inline constexpr int kMaxRows = 8;  // rows of x a kernel call takes
inline constexpr int kLanes = 16;
inline constexpr int kTileRows = 16;
inline constexpr int kTileCols = 64;
inline constexpr int kTileBytes = 512;
inline constexpr int kBf16RunCols = 32;  // columns of one 64-byte BF16 load
// Column j (within the 4 of a lane) of nibble m: the table of int4_layout.h.
inline constexpr int kInt4NibbleColumn[8] = {0, 0, 2, 2, 1, 1, 3, 3};
// The BF16 bits of q - 8 for a 16-bit index i whose low 5 bits vpermw reads
// (q = i & 15): the BF16 kernels' decoding table.
alignas(64) inline constexpr uint16_t kInt4CodeBf16[32] = {
    0xC100, 0xC0E0, 0xC0C0, 0xC0A0, 0xC080, 0xC040, 0xC000, 0xBF80,   // -8 .. -1
    0x0000, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0,   //  0 ..  7
    0xC100, 0xC0E0, 0xC0C0, 0xC0A0, 0xC080, 0xC040, 0xC000, 0xBF80,   // i >= 16:
    0x0000, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0};  // the same

// What a 4-bit group adds besides s * sum((q - 8) x): nothing (kSymmetric),
// s (8 - z) sum(x) (kZero, int16 z) or (8 s + m) sum(x) (kFloat, fp16 m).
enum class OffsetTerm : uint8_t { kNone, kZero, kFloat };

// How a 4-bit kernel set takes x: fp32 lanes, BF16 pairs (both above), or
// the AMX kernels' B tiles (host_linear_amx.cc; as many dwords as the pairs).
enum class XLayout : uint8_t { kF32Lanes, kBf16Pairs, kAmxPairs };

struct Int4Args {
  const uint8_t* codes = nullptr;     // int4_layout.h
  const uint32_t* scales = nullptr;   // [n / 128][k / group][tiles][8] fp16 pairs
  const uint32_t* offsets = nullptr;  // as scales; null for kNone
  int64_t n = 0;
  int64_t k = 0;
  int64_t group = 0;
  OffsetTerm offset_term = OffsetTerm::kNone;
  int rows = 0;                       // 1..kMaxRows
  const float* x_lanes = nullptr;     // kF32Lanes: [k / 64][4 (j)][rows][16], x (gathered) in lanes
  const uint32_t* x_pairs = nullptr;  // kBf16Pairs: [k / 64][2 (p)][rows][16] BF16 pairs;
                                      // kAmxPairs: [k / 64][2 (p)][16][rows]
  const float* x_sums = nullptr;      // [rows][k / group]: sum of the gathered x over each group
  float* y = nullptr;                 // [rows, y_stride]
  int64_t y_stride = 0;
};

// x for one call, and where its layout goes (the arrays of Int4Args or
// Bf16Args, written through these).
struct XArgs {
  const float* x = nullptr;  // [rows, k]
  const int32_t* columns =
      nullptr;  // [k]: 4-bit act order (stored column j is x's columns[j]) or null
  int64_t k = 0;
  int rows = 0;               // 1..kMaxRows
  float* lanes = nullptr;     // 4-bit kF32Lanes, or BF16 weights' lanes
  uint32_t* pairs = nullptr;  // 4-bit kBf16Pairs
  float* half_sums =
      nullptr;  // 4-bit: [rows][k / 32] sums of the rounded x over each 32 columns, or null
};

struct Bf16Args {
  const uint16_t* w = nullptr;  // [n, k]
  int64_t n = 0;
  int64_t k = 0;
  int rows = 0;                       // 1..kMaxRows
  const float* x_lanes = nullptr;     // kF32Lanes: [ceil(k / 32)][2 (even, odd)][rows][16]
  const uint32_t* x_pairs = nullptr;  // kBf16Pairs: [ceil(k / 32)][rows][16], columns in order
  float* y = nullptr;                 // [rows, y_stride]
  int64_t y_stride = 0;
};

// Rounds x to BF16 (as FloatToBf16 does), gathers it by `columns` and lays
// out 4-bit k tiles (64 columns) or BF16 runs (32 columns, zero past k)
// [begin, end) of every row; each half sum in a fixed order.
using LayOutX = void (*)(const XArgs& args, int64_t begin, int64_t end);

// y for the output rows of 16-row tiles [tile_begin, tile_end) (the last BF16
// tile may hold fewer rows). Each y[r][o] depends on x row r and W row o alone.
using Int4Tiles = void (*)(const Int4Args& args, int64_t tile_begin, int64_t tile_end);
using Bf16Tiles = void (*)(const Bf16Args& args, int64_t tile_begin, int64_t tile_end);

struct Kernels {
  Int4Tiles int4 = nullptr;
  Bf16Tiles bf16 = nullptr;
  XLayout int4_layout = XLayout::kF32Lanes;  // what int4 reads
  LayOutX int4_x = nullptr;                  // writes it
  XLayout bf16_layout = XLayout::kF32Lanes;  // what bf16 reads
  LayOutX bf16_x = nullptr;                  // writes it
};

const Kernels& GenericKernels();
const Kernels& Avx512Kernels();      // CpuIsa::kAvx512Vnni
const Kernels& Avx512Bf16Kernels();  // CpuIsa::kAvx512Bf16
const Kernels& AmxBf16Kernels();     // CpuIsa::kAmxBf16
// HostLinearForward (host_linear.h) through a given table: the tests'
// emulation of the AMX kernels' tile unit (host_linear_amx.inc).
void ForwardWith(ThreadPool& pool, const HostWeight& w, const float* x, int64_t rows, float* y,
                 HostLinearScratch* scratch, const Kernels& kernels);

// The x layouts of Avx512Bf16Kernels, in host_linear_avx512.cc.
LayOutX Avx512Int4PairsX();
LayOutX Avx512Bf16PairsX();

}  // namespace onecard::engine::host_linear

#endif  // ONECARD_ENGINE_RUNTIME_CPU_HOST_LINEAR_KERNELS_H_
