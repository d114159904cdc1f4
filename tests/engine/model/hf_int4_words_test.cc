// ReadHfInt4Words (hf_int4.h) with PackInt4WordRows (int4_matrix.h), the
// direct path from GPTQ's words to the device layout, against the path
// through an Int4Matrix (ReadHfInt4, then PackInt4Rows; tested against the
// upstream dequantizations by hf_int4_test.cc): the same code, scale and
// offset bytes over seeded random GPTQ tensors of awkward shapes (partial
// row groups; groups of 32, 64, 128 and one a row; zero points of v1 and v2
// files, symmetric and not; with and without a g_idx), packed alone and as
// the fused projections' parts, on one thread and in parallel, and over the
// golden checkpoints of tests/golden/hf_int4/. What the direct path leaves
// to ReadHfInt4 (act order, AWQ, compressed-tensors, BF16 scales) gives
// nullopt; truncated and mismatched tensors, bad zero points and g_idx give
// ReadHfInt4's errors, naming the file, the tensor and the field.
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/fp16.h"
#include "engine/model/hf_int4.h"
#include "engine/model/layer_tensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

constexpr char kFile[] = "/tmp/shard-00001.safetensors";

enum class Zeros { kSymV1, kSymV2, kZeroV1, kZeroV2 };

// A GPTQ module's tensors in memory, as GPTQModel stores them: qweight I32
// [k / 8, n] of random words, scales F16 [G, n], qzeros I32 [G, n / 8]
// (symmetric: every zero point 8, stored as 7 in v1 files; otherwise random
// words), g_idx I32 [k] = c / group when asked for. `tensors` points at the
// views: the module does not move.
struct GptqModule {
  std::vector<uint32_t> qweight, qzeros;
  std::vector<uint16_t> scales;
  std::vector<int32_t> g_idx;
  TensorView packed, scale, zero, group_index;
  HfInt4Tensors tensors;
};

TensorView View(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                uint64_t bytes) {
  TensorView v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.data = static_cast<const uint8_t*>(data);
  v.size_bytes = bytes;
  v.file_path = kFile;
  return v;
}

// group 0: one scale a row (the config's group_size -1).
std::unique_ptr<GptqModule> MakeGptq(const std::string& module, int64_t n, int64_t k, int32_t group,
                                     Zeros zeros, bool with_g_idx, uint32_t seed) {
  auto m = std::make_unique<GptqModule>();
  const int32_t g = group > 0 ? group : static_cast<int32_t>(k);
  const int64_t groups = k / g;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  m->qweight.resize(k / 8 * n);
  for (uint32_t& w : m->qweight) w = rng();
  m->scales.resize(groups * n);
  for (uint16_t& s : m->scales) s = FloatToHalf(scale(rng));
  const bool symmetric = zeros == Zeros::kSymV1 || zeros == Zeros::kSymV2;
  const bool v1 = zeros == Zeros::kSymV1 || zeros == Zeros::kZeroV1;
  m->qzeros.resize(groups * n / 8);
  for (uint32_t& z : m->qzeros) z = symmetric ? (v1 ? 0x77777777u : 0x88888888u) : rng();
  for (int64_t c = 0; with_g_idx && c < k; ++c) m->g_idx.push_back(static_cast<int32_t>(c / g));
  m->packed =
      View(module + ".qweight", DType::kI32, {k / 8, n}, m->qweight.data(), m->qweight.size() * 4);
  m->scale =
      View(module + ".scales", DType::kF16, {groups, n}, m->scales.data(), m->scales.size() * 2);
  m->zero = View(module + ".qzeros", DType::kI32, {groups, n / 8}, m->qzeros.data(),
                 m->qzeros.size() * 4);
  m->group_index = View(module + ".g_idx", DType::kI32, {k}, m->g_idx.data(), m->g_idx.size() * 4);
  HfInt4Tensors& t = m->tensors;
  t.method = HfQuantMethod::kGptq;
  t.module = module;
  t.packed = &m->packed;
  t.scales = &m->scale;
  t.zeros = &m->zero;
  t.g_idx = with_g_idx ? &m->group_index : nullptr;
  t.n = n;
  t.k = k;
  t.group = g;
  t.symmetric = symmetric;
  t.zeros_minus_one = v1;
  return m;
}

// The parts packed into one destination of n_dst rows (rows[i]: part i's
// map) by both paths; the bytes must be equal.
void ExpectSameBytes(const std::vector<const HfInt4Tensors*>& parts,
                     const std::vector<std::vector<int64_t>>& rows, int64_t n_dst, ThreadPool* pool,
                     const std::string& where) {
  const HfInt4Tensors& first = *parts[0];
  Int4Packed want = MakeInt4Packed(n_dst, first.k, first.group, first.offsets());
  Int4Packed got = want;
  std::vector<Int4WordMatrix> words;
  for (size_t i = 0; i < parts.size(); ++i) {
    absl::StatusOr<Int4Matrix> m = ReadHfInt4(*parts[i]);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE(m->Validate(where).ok()) << m->Validate(where);
    ASSERT_TRUE(PackInt4Rows(*m, rows[i], n_dst, &want, pool).ok()) << where;
    absl::StatusOr<std::optional<Int4WordMatrix>> w = ReadHfInt4Words(*parts[i]);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE(w->has_value()) << where;
    ASSERT_TRUE((*w)->Validate(where).ok()) << (*w)->Validate(where);
    EXPECT_EQ((*w)->offset, m->offset) << where;
    words.push_back(std::move(**w));
  }
  std::vector<Int4WordPart> word_parts;
  for (size_t i = 0; i < words.size(); ++i) word_parts.push_back({&words[i], rows[i]});
  ASSERT_TRUE(PackInt4WordRows(word_parts, n_dst, &got, pool).ok()) << where;
  EXPECT_EQ(got.codes, want.codes) << where;
  EXPECT_EQ(got.scales, want.scales) << where;
  EXPECT_EQ(got.offsets, want.offsets) << where;
}

struct Case {
  int64_t n, k;
  int32_t group;  // 0: one a row
  Zeros zeros;
  bool g_idx;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.n << "x" << c.k << "_g" << c.group << "_zeros" << static_cast<int>(c.zeros)
      << (c.g_idx ? "_g_idx" : "");
}

class HfInt4WordsTest : public ::testing::TestWithParam<Case> {};

TEST_P(HfInt4WordsTest, PacksThePathThroughInt4MatrixBytes) {
  const Case& c = GetParam();
  const auto a = MakeGptq("a", c.n, c.k, c.group, c.zeros, c.g_idx, 1 + c.n);
  const auto b = MakeGptq("b", c.n, c.k, c.group, c.zeros, c.g_idx, 2 + c.n);
  const auto v = MakeGptq("v", 32, c.k, c.group, c.zeros, c.g_idx, 3 + c.n);
  ThreadPool pool(3);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    const std::string threads = p == nullptr ? "1 thread" : "3 threads";
    ExpectSameBytes({&a->tensors}, {ConcatRows(c.n, 0)}, c.n, p, "alone, " + threads);
    // [a; b; v] as q, k and v are fused, and a, b as gate and up.
    ExpectSameBytes({&a->tensors, &b->tensors, &v->tensors},
                    {ConcatRows(c.n, 0), ConcatRows(c.n, c.n), ConcatRows(32, 2 * c.n)},
                    2 * c.n + 32, p, "qkv, " + threads);
    ExpectSameBytes({&a->tensors, &b->tensors},
                    {InterleavedGateUpRows(c.n, 0), InterleavedGateUpRows(c.n, 1)}, 2 * c.n, p,
                    "gate_up, " + threads);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, HfInt4WordsTest,
    ::testing::Values(Case{144, 256, 32, Zeros::kSymV1, true},  // 9 row tiles
                      Case{48, 192, 64, Zeros::kZeroV1, false},
                      Case{400, 256, 128, Zeros::kSymV2, true},  // 25 row tiles
                      Case{176, 128, 0, Zeros::kZeroV2, true},   // one scale a row
                      Case{336, 512, 128, Zeros::kZeroV1, true}));

TEST(HfInt4WordsFormTest, LeavesWhatItCannotPackToReadHfInt4) {
  auto act = MakeGptq("act", 64, 128, 32, Zeros::kSymV1, true, 4);
  std::swap(act->g_idx[0], act->g_idx[127]);  // column 0 in group 3, column 127 in group 0
  auto bf16 = MakeGptq("bf16", 64, 128, 32, Zeros::kSymV1, false, 5);
  bf16->scale.dtype = DType::kBF16;
  auto awq = MakeGptq("awq", 64, 128, 32, Zeros::kSymV1, false, 6);
  awq->tensors.method = HfQuantMethod::kAwq;
  for (const GptqModule* m : {act.get(), bf16.get(), awq.get()}) {
    absl::StatusOr<std::optional<Int4WordMatrix>> words = ReadHfInt4Words(m->tensors);
    ASSERT_TRUE(words.ok()) << words.status();
    EXPECT_FALSE(words->has_value()) << m->tensors.module;
  }
}

// The error of ReadHfInt4Words, which must name the file, the tensor and
// the field.
std::string WordsError(const GptqModule& m) {
  absl::StatusOr<std::optional<Int4WordMatrix>> words = ReadHfInt4Words(m.tensors);
  EXPECT_FALSE(words.ok());
  EXPECT_EQ(words.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(words.status().message());
}

TEST(HfInt4WordsErrorTest, TruncatedAndMismatchedTensorsNameTheTensorAndField) {
  auto m = MakeGptq("model.layers.3.mlp.up_proj", 64, 128, 64, Zeros::kSymV1, true, 7);
  m->packed.size_bytes -= 4;
  EXPECT_THAT(WordsError(*m),
              HasSubstr(absl::StrCat(kFile,
                                     ": tensor 'model.layers.3.mlp.up_proj.qweight' (GPTQ field "
                                     "qweight): holds 4092 bytes; I32 [16, 64] needs 4096")));
  m->packed.size_bytes += 4;
  m->scale.shape = {2, 56};
  EXPECT_THAT(WordsError(*m),
              HasSubstr("tensor 'model.layers.3.mlp.up_proj.scales' (GPTQ field scales): has "
                        "shape [2, 56], expected [k / group, n] = [2, 64]"));
  m->scale.shape = {2, 64};
  m->zero.dtype = DType::kF16;
  EXPECT_THAT(WordsError(*m),
              HasSubstr("tensor 'model.layers.3.mlp.up_proj.qzeros' (GPTQ field qzeros): has "
                        "dtype F16, expected I32"));
}

// Zero points and g_idx are checked as ReadHfInt4 checks them: the same
// errors.
TEST(HfInt4WordsErrorTest, BadZeroPointsAndGIdxGiveReadHfInt4sErrors) {
  auto sym = MakeGptq("q", 64, 128, 64, Zeros::kSymV2, true, 8);
  sym->qzeros[9] = 0x88868888;  // group 1, rows 8 .. 15: row 12's zero point is 6
  const std::string zero_error = WordsError(*sym);
  EXPECT_THAT(zero_error, HasSubstr("tensor 'q.qzeros' (GPTQ field qzeros): zero point 6 of "
                                    "row 12, group 1 is not 8, though the config says sym = true"));
  EXPECT_EQ(zero_error, ReadHfInt4(sym->tensors).status().message());
  auto gi = MakeGptq("q", 64, 128, 64, Zeros::kZeroV1, true, 9);
  gi->g_idx[70] = 2;
  const std::string g_idx_error = WordsError(*gi);
  EXPECT_THAT(g_idx_error,
              HasSubstr("tensor 'q.g_idx' (GPTQ field g_idx): g_idx[70] = 2 is outside [0, 2)"));
  EXPECT_EQ(g_idx_error, ReadHfInt4(gi->tensors).status().message());
}

// The golden checkpoints through ResolveTensor: GPTQ v2 (symmetric, columns
// in order) packs directly, to the same bytes; the act-order, AWQ and
// compressed-tensors ones are left to ReadTensorInt4.
TEST(HfInt4WordsGoldenTest, CheckpointsPackTheSameBytes) {
  for (const char* dir : {"gptq_v2_sym", "gptq_v1_act", "awq", "compressed"}) {
    auto ckpt =
        OpenCheckpoint(::onecard::testing::SourcePath(std::string("tests/golden/hf_int4/") + dir));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    for (TensorPart part : {TensorPart::kQ, TensorPart::kK, TensorPart::kGate, TensorPart::kDown}) {
      auto t = ResolveTensor(*ckpt, part, 0);
      ASSERT_TRUE(t.ok()) << t.status();
      auto words = ReadTensorInt4Words(*t);
      ASSERT_TRUE(words.ok()) << words.status();
      EXPECT_EQ(words->has_value(), std::string(dir) == "gptq_v2_sym") << dir << " " << t->name;
      if (!words->has_value()) continue;
      auto m = ReadTensorInt4(*t);
      ASSERT_TRUE(m.ok()) << m.status();
      Int4Packed want = MakeInt4Packed(m->n, m->k, m->group, m->offsets);
      Int4Packed got = want;
      const std::vector<int64_t> rows = ConcatRows(m->n, 0);
      ASSERT_TRUE(PackInt4Rows(*m, rows, m->n, &want).ok());
      const Int4WordPart word_part{&**words, rows};
      ASSERT_TRUE(PackInt4WordRows({&word_part, 1}, m->n, &got).ok());
      EXPECT_EQ(got.codes, want.codes) << t->name;
      EXPECT_EQ(got.scales, want.scales) << t->name;
    }
  }
}

}  // namespace
}  // namespace onecard::engine
