// Tests of int4_words.h: PackInt4WordRows against PackInt4Rows (int4_matrix.h,
// itself tested against the layout's own positions) on the same codes, scales
// and offsets, seeded random: partial row groups, groups of 32, 64, 96 and
// one a row, each offset kind, both word orders (GPTQ's [k / 8, n] and rows of
// words), alone and as the parts of fused weights (concatenated, interleaved
// gate / up, rows not on a tile boundary, rows left out), on one thread and
// in parallel, into poisoned destinations; and the checks of
// Int4WordMatrix::Validate and of the parts.
#include "engine/kernels/int4_words.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/int4_testing.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::RandomInt4Matrix;
using ::testing::HasSubstr;

// m's codes eight to a word, stored as GPTQ does ([k / 8, n], scales
// [G, n]) or by rows ([n, k / 8], scales [n, G]), and an Int4WordMatrix over
// them.
struct StoredWords {
  std::vector<uint32_t> codes;
  std::vector<uint16_t> scales;
  Int4WordMatrix view;
};

StoredWords StoreAsWords(const Int4Matrix& m, bool gptq) {
  StoredWords s;
  const int64_t words = m.k / 8, groups = m.num_groups();
  s.codes.assign(m.n * words, 0);
  s.scales.resize(m.scales.size());
  for (int64_t r = 0; r < m.n; ++r) {
    for (int64_t c = 0; c < m.k; ++c) {
      const int64_t w = gptq ? (c / 8) * m.n + r : r * words + c / 8;
      s.codes[w] |= uint32_t{m.q[r * m.k + c]} << (4 * (c % 8));
    }
    for (int64_t g = 0; g < groups; ++g) {
      s.scales[gptq ? g * m.n + r : r * groups + g] = m.scales[r * groups + g];
    }
  }
  Int4WordMatrix& v = s.view;
  v.n = m.n;
  v.k = m.k;
  v.group = m.group;
  v.offsets = m.offsets;
  v.codes = reinterpret_cast<const uint8_t*>(s.codes.data());
  v.code_row_stride = gptq ? 1 : words;
  v.code_word_stride = gptq ? m.n : 1;
  v.scales = reinterpret_cast<const uint8_t*>(s.scales.data());
  v.scale_row_stride = gptq ? 1 : groups;
  v.scale_group_stride = gptq ? m.n : 1;
  v.offset = m.offset;
  return s;
}

// A destination whose every byte is poisoned, so that a byte one packer
// writes and the other leaves shows.
Int4Packed PoisonedInt4Packed(int64_t n, int64_t k, int32_t group, Int4Offsets offsets) {
  Int4Packed p = MakeInt4Packed(n, k, group, offsets);
  std::fill(p.codes.begin(), p.codes.end(), 0xA5);
  std::fill(p.scales.begin(), p.scales.end(), 0xDEADBEEFu);
  std::fill(p.offsets.begin(), p.offsets.end(), 0xDEADBEEFu);
  return p;
}

struct Case {
  int64_t n, k;
  int32_t group;
  Int4Offsets offsets;
  bool gptq;  // the word order
};

class Int4WordsTest : public ::testing::TestWithParam<Case> {
 protected:
  // The parts (matrices and their maps) into a poisoned destination of n_dst
  // rows by both packers: the same bytes.
  void ExpectSameBytes(const std::vector<const Int4Matrix*>& matrices,
                       const std::vector<std::vector<int64_t>>& rows, int64_t n_dst,
                       const std::string& what) {
    const Case& c = GetParam();
    std::vector<StoredWords> stored;
    for (const Int4Matrix* m : matrices) stored.push_back(StoreAsWords(*m, c.gptq));
    std::vector<Int4WordPart> parts;
    for (size_t i = 0; i < stored.size(); ++i) {
      ASSERT_TRUE(stored[i].view.Validate(what).ok()) << stored[i].view.Validate(what);
      parts.push_back({&stored[i].view, rows[i]});
    }
    ThreadPool pool(3);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      const std::string where = absl::StrCat(what, p == nullptr ? ", 1 thread" : ", 3 threads");
      Int4Packed want = PoisonedInt4Packed(n_dst, c.k, c.group, c.offsets), got = want;
      for (size_t i = 0; i < matrices.size(); ++i) {
        ASSERT_TRUE(PackInt4Rows(*matrices[i], rows[i], n_dst, &want, p).ok()) << where;
      }
      const absl::Status packed = PackInt4WordRows(parts, n_dst, &got, p);
      ASSERT_TRUE(packed.ok()) << packed;
      EXPECT_EQ(got.codes, want.codes) << where;
      EXPECT_EQ(got.scales, want.scales) << where;
      EXPECT_EQ(got.offsets, want.offsets) << where;
    }
  }
};

TEST_P(Int4WordsTest, PacksPackInt4RowsBytes) {
  const Case& c = GetParam();
  const Int4Matrix a = RandomInt4Matrix(c.n, c.k, c.group, c.offsets, 21 + c.n);
  const Int4Matrix b = RandomInt4Matrix(c.n, c.k, c.group, c.offsets, 22 + c.n);
  const Int4Matrix v = RandomInt4Matrix(32, c.k, c.group, c.offsets, 23 + c.n);
  ExpectSameBytes({&a}, {ConcatRows(c.n, 0)}, c.n, "alone");
  ExpectSameBytes({&a, &b, &v}, {ConcatRows(c.n, 0), ConcatRows(c.n, c.n), ConcatRows(32, 2 * c.n)},
                  2 * c.n + 32, "q, k, v");
  ExpectSameBytes({&a, &b}, {InterleavedGateUpRows(c.n, 0), InterleavedGateUpRows(c.n, 1)}, 2 * c.n,
                  "gate, up");
  ExpectSameBytes({&a}, {InterleavedGateUpRows(c.n, 1)}, 2 * c.n, "up alone");
  // Rows 8 .. n + 7: every tile shared with the rows left out.
  ExpectSameBytes({&a}, {ConcatRows(c.n, 8)}, c.n + 16, "after 8 rows");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Int4WordsTest,
    ::testing::Values(Case{48, 192, 32, Int4Offsets::kSymmetric, true},
                      Case{160, 192, 96, Int4Offsets::kZero, true},  // 10 tiles: a partial group
                      Case{336, 256, 64, Int4Offsets::kFloat, false},
                      Case{144, 128, 128, Int4Offsets::kZero, true},  // one scale a row
                      Case{400, 512, 128, Int4Offsets::kSymmetric, false}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return absl::StrCat("n", info.param.n, "_k", info.param.k, "_g", info.param.group, "_",
                          static_cast<int>(info.param.offsets),
                          info.param.gptq ? "_gptq" : "_rows");
    });

TEST(Int4WordsCheckTest, ValidateNamesTheWeight) {
  const Int4Matrix m = RandomInt4Matrix(32, 128, 64, Int4Offsets::kZero, 5);
  StoredWords s = StoreAsWords(m, true);
  s.view.n = 24;
  const std::string short_rows(s.view.Validate("layer 0 qkv part 1").message());
  EXPECT_THAT(short_rows, HasSubstr("int4 weight layer 0 qkv part 1"));
  EXPECT_THAT(short_rows, HasSubstr("n = 24"));
  s.view.n = 32;
  s.view.offset[3] = 200;
  EXPECT_THAT(std::string(s.view.Validate("w").message()),
              HasSubstr("zero point 200 of group 3 is outside 0..127"));
  s.view.offset.pop_back();
  EXPECT_THAT(std::string(s.view.Validate("w").message()), HasSubstr("offsets has 63"));
  s.view.offset = m.offset;
  s.view.scales = nullptr;
  EXPECT_THAT(std::string(s.view.Validate("w").message()),
              HasSubstr("the codes or the scales are missing"));
}

TEST(Int4WordsCheckTest, PartsMustFitTheDestination) {
  const Int4Matrix m = RandomInt4Matrix(32, 128, 64, Int4Offsets::kZero, 6);
  const StoredWords s = StoreAsWords(m, true);
  const std::vector<int64_t> rows = ConcatRows(32, 0), shifted = ConcatRows(32, 8);
  Int4Packed p = MakeInt4Packed(32, 128, 64, Int4Offsets::kZero);
  const auto error = [&](std::vector<Int4WordPart> parts, int64_t n_dst) {
    return std::string(PackInt4WordRows(parts, n_dst, &p).message());
  };
  EXPECT_EQ(error({{&s.view, rows}}, 32), "");
  EXPECT_THAT(error({{&s.view, shifted}}, 32),
              HasSubstr("PackInt4WordRows: part 0 row 24 goes to 32, outside [0, 32)"));
  EXPECT_THAT(error({{&s.view, rows}, {&s.view, rows}}, 32),
              HasSubstr("part 1 row 0 goes to 0, as part 0 row 0 does"));
  EXPECT_THAT(error({{&s.view, std::span<const int64_t>(rows).first(16)}}, 32),
              HasSubstr("part 0 has 16 destination rows for 32"));
  EXPECT_THAT(error({{&s.view, rows}}, 48), HasSubstr("the destination is not 48 x 128"));
  EXPECT_THAT(error({}, 32), HasSubstr("no parts"));
  StoredWords other = StoreAsWords(RandomInt4Matrix(16, 128, 32, Int4Offsets::kZero, 7), true);
  EXPECT_THAT(error({{&s.view, rows}, {&other.view, std::span<const int64_t>(rows).first(16)}}, 32),
              HasSubstr("part 1 is 128 wide in groups of 32"));
  other = StoreAsWords(RandomInt4Matrix(16, 128, 64, Int4Offsets::kZero, 8), true);
  other.view.offset.clear();
  EXPECT_THAT(error({{&other.view, std::span<const int64_t>(rows).first(16)}}, 32),
              HasSubstr("not one offset a scale"));
}

}  // namespace
}  // namespace onecard::engine
