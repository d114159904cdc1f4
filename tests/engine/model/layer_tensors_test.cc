// ResolveTensor / ReadTensorF32 / ReadTensorInt4 on an in-memory checkpoint:
// Q4_0 and Q4_1 tensors read as 4-bit matrices whose values equal the block
// dequantizers' (quant_blocks.h, themselves checked against the gguf package
// in dequantize_test.cc), with llama.cpp's Q/K row permutation undone for
// codes and scales alike; errors name the tensor, the file and the offset.
#include "engine/model/layer_tensors.h"

#include <map>
#include <memory>
#include <random>

#include "engine/model/dequantize.h"
#include "engine/model/quant_blocks.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace onecard::engine
