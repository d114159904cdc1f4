// The AMX kernels of HostLinearForward (host_linear_kernels.h),
// CpuIsa::kAmxBf16: 4-bit and BF16 weights through the tile unit's BF16
// products (TDPBF16PS). This file is
// compiled for AVX-512 BF16 with AMX-TILE and AMX-BF16 (see CMakeLists.txt)
// and includes no header with inline code shared elsewhere.
//
// A thread walks its tiles as host_linear_int4_walk.inc says. A tile's k
// tile (int4_layout.h) becomes two A operands of 16 W rows by 32 BF16 values
// (A buffer j, j = 0, 1): each 64-byte line (row pair gr) has its dwords
// reordered so that those of the k tile's columns 0..31 (lanes 4 t + i with
// i < 2) come first (kToA), then is decoded as the AVX-512 BF16 kernels
// decode it (vpermw of the line shifted by 4 S into q - 8, exact): nibble S
// gives row gr + 8 (S & 1) at column pair j = S >> 1 of each lane, stored as
// that row of A buffer j. x comes as the matching B operands (AmxInt4X): for
// k tile kt, pair set j and half h (columns 32 h .. 32 h + 31 of the tile),
// [8 pairs][rows of x] dwords, pair q the columns of A's dword 8 h + q. A k
// tile is four TDPBF16PS of K = 16 (half h of A buffer j against B (kt, j,
// h)) into C0, or, for groups of 32 columns, the h = 1 halves into C1, so
// that a C tile sums one group: C [16 W rows][rows of x] in fp32. At a
// group's end C is stored, scaled by the group's 16 scales into the tile's
// totals ([16][rows] in memory) and zeroed; a C whose group goes on past a
// block is kept in memory until the tile's next block. The outputs are the
// totals plus the offset terms (c . the sums of x over the groups).
// Tile registers: tmm0 C0, tmm1 C1 (16 rows x rows fp32), tmm2 / tmm3 A
// halves (16 rows x 16 BF16), tmm4 / tmm5 B halves (8 pairs x rows).
//
// A BF16 weight's 16-row tile is one TDPBF16PS a run of 32 columns: A (tmm2,
// 16 rows x 32 BF16) read straight from the weight's rows (stride 2 k bytes;
// a zero-padded copy for a short last tile or run), B (tmm4) the run's x
// pairs [16][rows]; C (tmm0) holds the tile's whole sums.
// The register numbers are literals because the intrinsics paste them into
// the assembly.
//
// Each output's sums see the same TDPBF16PS sequence whatever the rows of x
// in the call (they are C's columns: the products of one never meet
// another's) and whatever tiles a thread takes. TDPBF16PS treats denormal
// inputs and results as zero, as vdpbf16ps does.
// Tested by tests/engine/runtime/cpu/host_linear_test.cc (on processors
// with AMX; CpuSupports(CpuIsa::kAmxBf16) asks the kernel for the tile
// state first) and, over an emulated tile unit, host_linear_amx_test.cc.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "engine/runtime/cpu/host_linear_kernels.h"

namespace onecard::engine::host_linear {
namespace {

#include "engine/runtime/cpu/host_linear_amx.inc"

// The tile unit itself; the register numbers are pasted into the assembly,
// hence a branch a register.
struct AmxTiles {
  static void Configure(const TileConfig& config) { _tile_loadconfig(&config); }
  static void Release() { _tile_release(); }
  template <int T>
  static void Zero() {
    if constexpr (T == 0) _tile_zero(0);
    if constexpr (T == 1) _tile_zero(1);
  }
  template <int T>
  static void Load(const void* base, int64_t stride) {
    if constexpr (T == 0) _tile_loadd(0, base, stride);
    if constexpr (T == 2) _tile_loadd(2, base, stride);
    if constexpr (T == 3) _tile_loadd(3, base, stride);
    if constexpr (T == 4) _tile_loadd(4, base, stride);
    if constexpr (T == 5) _tile_loadd(5, base, stride);
  }
  template <int T>
  static void Store(void* base, int64_t stride) {
    if constexpr (T == 0) _tile_stored(0, base, stride);
    if constexpr (T == 1) _tile_stored(1, base, stride);
  }
  template <int C, int A, int B>
  static void Dot() {
    if constexpr (C == 0 && A == 2 && B == 4) _tile_dpbf16ps(0, 2, 4);
    if constexpr (C == 0 && A == 3 && B == 5) _tile_dpbf16ps(0, 3, 5);
    if constexpr (C == 1 && A == 3 && B == 5) _tile_dpbf16ps(1, 3, 5);
  }
};

}  // namespace

const Kernels& AmxBf16Kernels() {
  static const Kernels kernels = AmxKernelsOver<AmxTiles>();
  return kernels;
}

}  // namespace onecard::engine::host_linear
