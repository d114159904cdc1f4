// ResolveTensor / ReadTensorF32 / ReadTensorInt4 on an in-memory checkpoint:
// Q4_0 and Q4_1 tensors read as 4-bit matrices whose values equal the block
// dequantizers' (quant_blocks.h, themselves checked against the gguf package
// in dequantize_test.cc), with llama.cpp's Q/K row permutation undone for
// codes and scales alike; Q4_K super-blocks read as groups of 32 whose
// values, in the Int4Matrix and in the packed device layout, equal the gguf
// package's dequantization (tests/golden/model/dequant_Q4_K.*) within the
// fp16 rounding of the package's own group scales and mins
// (dequant_Q4_K_groups.json); errors name the tensor, the file and the offset.
// ReadTensorBlocks (Q6_K, Q8_0, Q4_K) gives blocks that dequantize to
// ReadTensorF32's values, llama.cpp's Q/K permutation undone on whole rows.
#include "engine/model/layer_tensors.h"

#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "engine/common/thread_pool.h"
#include "engine/model/dequantize.h"
#include "engine/model/quant_blocks.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

class MemorySource : public WeightSource {
 public:
  const TensorView* Find(const std::string& name) const override {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> TensorNames() const override {
    std::vector<std::string> names;
    for (const auto& [name, view] : tensors_) names.push_back(name);
    return names;
  }
  void Add(const std::string& name, DType dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes) {
    data_.push_back(std::move(bytes));
    TensorView& v = tensors_[name];
    v.name = name;
    v.dtype = dtype;
    v.shape = std::move(shape);
    v.data = data_.back().data();
    v.size_bytes = data_.back().size();
    v.file_offset = 4096;
    v.file_path = "memory.gguf";
  }

 private:
  std::map<std::string, TensorView> tensors_;
  std::vector<std::vector<uint8_t>> data_;
};

// Random blocks (fp16 scales in 0.01..0.1, mins -0.5..0).
template <typename Block>
std::vector<uint8_t> RandomBlocks(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(0.01f, 0.1f), m(-0.5f, 0.0f);
  std::vector<Block> blocks(count);
  for (Block& b : blocks) {
    b.d = FloatToHalf(d(rng));
    if constexpr (requires { b.m; }) b.m = FloatToHalf(m(rng));
    for (uint8_t& q : b.qs) q = static_cast<uint8_t>(rng());
  }
  std::vector<uint8_t> bytes(count * sizeof(Block));
  std::memcpy(bytes.data(), blocks.data(), bytes.size());
  return bytes;
}

Checkpoint TinyCheckpoint(DType q_dtype, DType o_dtype) {
  Checkpoint c;
  c.path = "memory.gguf";
  c.format = CheckpointFormat::kGguf;
  c.config.architecture = Architecture::kLlama;
  c.config.hidden_size = 64;
  c.config.num_heads = 2;
  c.config.num_kv_heads = 1;
  c.config.head_dim = 32;
  auto source = std::make_unique<MemorySource>();
  auto add = [&](const std::string& name, DType dtype, int64_t rows) {
    const int64_t blocks = rows * 64 / 32;
    source->Add(name, dtype, {rows, 64},
                dtype == DType::kQ4_0 ? RandomBlocks<BlockQ4_0>(blocks, rows)
                                      : RandomBlocks<BlockQ4_1>(blocks, rows + 1));
  };
  add("blk.0.attn_q.weight", q_dtype, 64);
  add("blk.0.attn_output.weight", o_dtype, 64);
  c.weights = std::move(source);
  return c;
}

void ExpectInt4EqualsF32(const Checkpoint& c, TensorPart part) {
  absl::StatusOr<ResolvedTensor> t = ResolveTensor(c, part, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<Int4Matrix> q = ReadTensorInt4(*t);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_TRUE(q->Validate(t->name).ok());
  absl::StatusOr<std::vector<float>> f = ReadTensorF32(*t);
  ASSERT_TRUE(f.ok()) << f.status();
  for (int64_t r = 0; r < q->n; ++r) {
    for (int64_t col = 0; col < q->k; ++col) {
      ASSERT_EQ(q->Value(r, col), (*f)[r * q->k + col]) << t->name << " " << r << "," << col;
    }
  }
}

TEST(LayerTensorsTest, Q4BlocksReadExactlyWithTheirPermutation) {
  const Checkpoint c = TinyCheckpoint(DType::kQ4_1, DType::kQ4_0);
  ExpectInt4EqualsF32(c, TensorPart::kQ);  // permuted (llama GGUF)
  ExpectInt4EqualsF32(c, TensorPart::kO);
  absl::StatusOr<ResolvedTensor> q = ResolveTensor(c, TensorPart::kQ, 0);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->unpermute_heads, 2);
  EXPECT_EQ(ReadTensorInt4(*q)->offsets, Int4Offsets::kFloat);
  EXPECT_EQ(ReadTensorInt4(*ResolveTensor(c, TensorPart::kO, 0))->offsets, Int4Offsets::kSymmetric);
}

TEST(LayerTensorsTest, LlamaCppRowSourcesInterleavePairs) {
  // 1 head of 8 rows: HF row j * 4 + i comes from stored row i * 2 + j.
  EXPECT_EQ(LlamaCppRowSources(1, 8), (std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7}));
}

TEST(LayerTensorsTest, ErrorsNameTheTensor) {
  const Checkpoint c = TinyCheckpoint(DType::kQ4_0, DType::kQ4_0);
  absl::StatusOr<ResolvedTensor> missing = ResolveTensor(c, TensorPart::kK, 0);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("blk.0.attn_k.weight"), std::string::npos);
  // A truncated tensor: the file, the tensor and its offset.
  ResolvedTensor t = *ResolveTensor(c, TensorPart::kO, 0);
  TensorView shorter = *t.view;
  shorter.size_bytes -= 18;
  t.view = &shorter;
  absl::StatusOr<Int4Matrix> m = ReadTensorInt4(t);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("memory.gguf"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("attn_output"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("offset 4096"), std::string::npos) << m.status();
}

// The golden Q4_K blocks (3 super-blocks of 256) as a [16, 768] tensor: row r
// holds blocks (r + b) % 3 for b = 0, 1, 2, so rows differ and each block
// sits in every column position. Its golden value at (r, c) is
// values[Block(r, c) * 256 + c % 256].
struct Q4KGolden {
  static constexpr int64_t kRows = 16, kCols = 768;
  std::vector<uint8_t> bytes;       // the tensor
  std::vector<float> values;        // [768] the gguf package's dequantization
  std::vector<float> group_scales;  // [24] its d * sc, a group of 32
  std::vector<float> group_mins;    // [24] its dmin * m
  static int64_t Block(int64_t r, int64_t c) { return (r + c / 256) % 3; }
  float Value(int64_t r, int64_t c) const { return values[Block(r, c) * 256 + c % 256]; }
  // The largest |onecard - gguf| that rounding the group's scale and min to
  // fp16 allows (half an fp16 ulp of each, the scale's times q <= 15), plus
  // the fp32 roundings of both sides' product and sum (2^-24 relative each).
  double Bound(int64_t r, int64_t c) const {
    const int64_t g = Block(r, c) * 8 + (c % 256) / 32;
    const double s = std::fabs(group_scales[g]), m = std::fabs(group_mins[g]);
    return 15 * HalfUlpOfHalf(s) + HalfUlpOfHalf(m) + std::ldexp(15 * s + m, -22);
  }
  // Half the spacing of fp16 values at x >= 0 (2^-25 below the normal range).
  static double HalfUlpOfHalf(double x) {
    if (x < std::ldexp(1.0, -14)) return std::ldexp(1.0, -25);
    int e = 0;
    std::frexp(x, &e);  // x = f 2^e, f in [0.5, 1)
    return std::ldexp(1.0, e - 1 - 11);
  }
};

Q4KGolden LoadQ4KGolden() {
  const std::string base = ::onecard::testing::SourcePath("tests/golden/model/dequant_Q4_K");
  const std::string raw = ::onecard::testing::ReadTestFile(base + ".bin");
  Q4KGolden g;
  g.values = ::onecard::testing::LoadTestJson(base + ".json")["values"].get<std::vector<float>>();
  const nlohmann::json groups = ::onecard::testing::LoadTestJson(base + "_groups.json");
  g.group_scales = groups["group_scales"].get<std::vector<float>>();
  g.group_mins = groups["group_mins"].get<std::vector<float>>();
  EXPECT_EQ(raw.size(), 3 * sizeof(BlockQ4_K));
  EXPECT_EQ(g.values.size(), 768u);
  EXPECT_EQ(g.group_scales.size(), 24u);
  EXPECT_EQ(g.group_mins.size(), 24u);
  for (int64_t r = 0; r < Q4KGolden::kRows; ++r) {
    for (int64_t b = 0; b < 3; ++b) {
      const char* block = raw.data() + Q4KGolden::Block(r, 256 * b) * sizeof(BlockQ4_K);
      g.bytes.insert(g.bytes.end(), block, block + sizeof(BlockQ4_K));
    }
  }
  return g;
}

// Every value of `m` within the golden's bound; counts those not equal.
void ExpectQ4KValues(const Int4Matrix& m, const Q4KGolden& g, const std::string& what) {
  int64_t rounded = 0;
  for (int64_t r = 0; r < m.n; ++r) {
    for (int64_t c = 0; c < m.k; ++c) {
      const float got = m.Value(r, c), want = g.Value(r, c);
      ASSERT_LE(std::fabs(static_cast<double>(got) - want), g.Bound(r, c))
          << what << " (" << r << ", " << c << "): " << got << " vs gguf " << want;
      rounded += got != want;
    }
  }
  std::printf("%s: %lld of %lld values differ from gguf's by their scale's fp16 rounding\n",
              what.c_str(), static_cast<long long>(rounded), static_cast<long long>(m.n * m.k));
}

TEST(LayerTensorsTest, Q4KMatchesTheGgufPackageWithinTheFp16RoundingOfItsScales) {
  const Q4KGolden g = LoadQ4KGolden();
  ASSERT_FALSE(HasFailure());
  MemorySource source;
  source.Add("golden_q4_k", DType::kQ4_K, {Q4KGolden::kRows, Q4KGolden::kCols}, g.bytes);
  ResolvedTensor t;
  t.name = "golden_q4_k";
  t.view = source.Find(t.name);
  t.shape = {Q4KGolden::kRows, Q4KGolden::kCols};
  absl::StatusOr<std::optional<Int4Form>> form = Int4FormOf(t);
  ASSERT_TRUE(form.ok() && form->has_value()) << form.status();
  EXPECT_EQ((*form)->group, 32);
  EXPECT_EQ((*form)->offsets, Int4Offsets::kFloat);
  absl::StatusOr<Int4Matrix> m = ReadTensorInt4(t);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->Validate(t.name).ok()) << m->Validate(t.name);
  ASSERT_EQ(m->group, 32);
  ASSERT_EQ(m->offsets, Int4Offsets::kFloat);
  ExpectQ4KValues(*m, g, "Int4Matrix");
  // Read over a pool: the same matrix.
  ThreadPool pool(3);
  absl::StatusOr<Int4Matrix> parallel = ReadTensorInt4(t, &pool);
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  EXPECT_EQ(parallel->q, m->q);
  EXPECT_EQ(parallel->scales, m->scales);
  EXPECT_EQ(parallel->offset, m->offset);
  // The device layout the CUDA kernels read, unpacked again.
  Int4Packed packed = MakeInt4Packed(m->n, m->k, m->group, m->offsets);
  ASSERT_TRUE(PackInt4Rows(*m, ConcatRows(m->n, 0), m->n, &packed).ok());
  ExpectQ4KValues(UnpackInt4(packed, m->n, m->k, m->group, m->offsets), g, "packed");
}

TEST(LayerTensorsTest, Q4KScalesBeyondFp16AreRefusedNamingTheTensor) {
  Q4KGolden g = LoadQ4KGolden();
  ASSERT_FALSE(HasFailure());
  BlockQ4_K block;
  std::memcpy(&block, g.bytes.data(), sizeof(block));
  block.d = FloatToHalf(60000.0f);
  block.scales[0] = 63;  // sub-block 0: sc = 63, d sc > 65504
  std::memcpy(g.bytes.data(), &block, sizeof(block));
  MemorySource source;
  source.Add("blk.3.attn_q.weight", DType::kQ4_K, {Q4KGolden::kRows, Q4KGolden::kCols}, g.bytes);
  ResolvedTensor t;
  t.name = "blk.3.attn_q.weight";
  t.view = source.Find(t.name);
  t.shape = {Q4KGolden::kRows, Q4KGolden::kCols};
  absl::StatusOr<Int4Matrix> m = ReadTensorInt4(t);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("blk.3.attn_q.weight"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("memory.gguf"), std::string::npos) << m.status();
}

// Random bytes for every field of `count` blocks, then finite fp16 scales
// (d, and dmin or m where the block has one) in 0.01..0.1.
template <typename Block>
std::vector<uint8_t> RandomBlockBytes(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.01f, 0.1f);
  std::vector<Block> blocks(count);
  for (Block& b : blocks) {
    auto* bytes = reinterpret_cast<uint8_t*>(&b);
    for (size_t i = 0; i < sizeof(Block); ++i) bytes[i] = static_cast<uint8_t>(rng());
    b.d = FloatToHalf(scale(rng));
    if constexpr (requires { b.dmin; }) b.dmin = FloatToHalf(scale(rng));
    if constexpr (requires { b.m; }) b.m = FloatToHalf(-scale(rng));
  }
  std::vector<uint8_t> out(count * sizeof(Block));
  std::memcpy(out.data(), blocks.data(), out.size());
  return out;
}

// A llama GGUF layer whose Q (Q6_K), K (Q8_0) and V (Q4_K) are k-quant
// sized: hidden 256, 2 heads and 1 KV head of 128.
Checkpoint BlockCheckpoint() {
  Checkpoint c;
  c.path = "memory.gguf";
  c.format = CheckpointFormat::kGguf;
  c.config.architecture = Architecture::kLlama;
  c.config.hidden_size = 256;
  c.config.num_heads = 2;
  c.config.num_kv_heads = 1;
  c.config.head_dim = 128;
  auto source = std::make_unique<MemorySource>();
  source->Add("blk.0.attn_q.weight", DType::kQ6_K, {256, 256}, RandomBlockBytes<BlockQ6_K>(256, 1));
  source->Add("blk.0.attn_k.weight", DType::kQ8_0, {128, 256},
              RandomBlockBytes<BlockQ8_0>(128 * 8, 2));
  source->Add("blk.0.attn_v.weight", DType::kQ4_K, {128, 256}, RandomBlockBytes<BlockQ4_K>(128, 3));
  c.weights = std::move(source);
  return c;
}

// ReadTensorBlocks' blocks, dequantized, equal ReadTensorF32's values: the
// rows are reordered as whole rows of blocks, exactly as the fp32 rows.
TEST(LayerTensorsTest, BlocksReadInTheHfRowOrderDequantizeToReadTensorF32) {
  const Checkpoint c = BlockCheckpoint();
  for (TensorPart part : {TensorPart::kQ, TensorPart::kK, TensorPart::kV}) {
    absl::StatusOr<ResolvedTensor> t = ResolveTensor(c, part, 0);
    ASSERT_TRUE(t.ok()) << t.status();
    SCOPED_TRACE(t->name);
    EXPECT_EQ(t->unpermute_heads, part == TensorPart::kQ ? 2 : part == TensorPart::kK ? 1 : 0);
    absl::StatusOr<std::vector<uint8_t>> blocks = ReadTensorBlocks(*t);
    ASSERT_TRUE(blocks.ok()) << blocks.status();
    ASSERT_EQ(blocks->size(), t->view->size_bytes);
    TensorView view = *t->view;
    view.data = blocks->data();
    std::vector<float> got(view.NumElements());
    ASSERT_TRUE(DequantizeInto(view, got.data()).ok());
    absl::StatusOr<std::vector<float>> want = ReadTensorF32(*t);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(got, *want);
    if (t->unpermute_heads > 0) {  // the permutation moved rows
      EXPECT_NE(std::memcmp(blocks->data(), t->view->data, blocks->size()), 0);
    }
  }
}

TEST(LayerTensorsTest, ReadTensorBlocksErrorsNameTheTensorAndFile) {
  const Checkpoint c = BlockCheckpoint();
  ResolvedTensor t = *ResolveTensor(c, TensorPart::kK, 0);
  TensorView shorter = *t.view;
  shorter.size_bytes -= 34;
  t.view = &shorter;
  absl::StatusOr<std::vector<uint8_t>> truncated = ReadTensorBlocks(t);
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(truncated.status().message().find("blk.0.attn_k.weight"), std::string::npos)
      << truncated.status();
  EXPECT_NE(truncated.status().message().find("memory.gguf"), std::string::npos)
      << truncated.status();
  MemorySource source;
  source.Add("blk.0.attn_norm.weight", DType::kF32, {4, 32}, std::vector<uint8_t>(4 * 32 * 4));
  ResolvedTensor f32;
  f32.name = "blk.0.attn_norm.weight";
  f32.view = source.Find(f32.name);
  f32.shape = {4, 32};
  const absl::Status not_blocks = ReadTensorBlocks(f32).status();
  EXPECT_EQ(not_blocks.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(not_blocks.message().find("blk.0.attn_norm.weight"), std::string::npos) << not_blocks;
  EXPECT_NE(not_blocks.message().find("F32"), std::string::npos) << not_blocks;
}

TEST(LayerTensorsTest, OnlyQ4QuantsAreInt4) {
  EXPECT_TRUE(IsInt4Dtype(DType::kQ4_0));
  EXPECT_TRUE(IsInt4Dtype(DType::kQ4_1));
  EXPECT_TRUE(IsInt4Dtype(DType::kQ4_K));
  for (DType d : {DType::kQ5_K, DType::kQ6_K, DType::kQ8_0, DType::kBF16, DType::kF32}) {
    EXPECT_FALSE(IsInt4Dtype(d)) << DTypeName(d);
  }
}

}  // namespace
}  // namespace onecard::engine
