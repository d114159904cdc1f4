// OffloadedLayers against DenseForward (tiny_model.h: the HF math in double)
// on a small decoder whose weights are exactly representable in the formats
// under test: BF16 weights ([Wq; Wk; Wv], [Wgate; Wup]), and 4-bit weights
// quantized by QuantizeInt4Rtn and packed into the CUDA layout (gate and up
// interleaved by 8 rows) with the reference given their dequantized values.
// The embedding, the final norm and the LM head (not OffloadedLayers' part)
// run here in double on the BF16 residual the layers leave. The layers round
// as the card does (BF16 activations), so logits agree to a BF16-sized
// tolerance; a prompt runs as one chunk and then as decode steps over the
// paged host pools, and K/V handed back equal the pools' rows.
#include "engine/runtime/cpu/offloaded_layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/kernels/bf16.h"
#include "engine/kernels/int4_matrix.h"
#include "tests/engine/runtime/cpu/tiny_model.h"

namespace onecard::engine {
namespace {

using testing::DenseForward;
using testing::RandomWeights;

ModelConfig Config(bool bias) {
  ModelConfig c;
  c.architecture = bias ? Architecture::kQwen2 : Architecture::kLlama;
  c.name = "offload-test";
  c.vocab_size = 61, c.hidden_size = 128, c.intermediate_size = 192, c.num_layers = 3;
  c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 32;
  c.rms_norm_eps = 1e-5f, c.rope_theta = 10000.0f, c.max_position_embeddings = 256;
  c.attention_bias = bias;
  return c;
}

void RoundBf16(std::vector<float>* v) {
  for (float& x : *v) x = Bf16ToFloat(FloatToBf16(x));
}

std::vector<uint16_t> Bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FloatToBf16(v[i]);
  return out;
}

std::vector<float> Concat(std::initializer_list<const std::vector<float>*> parts) {
  std::vector<float> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

// Host storage of one layer in the CUDA layout, and its OffloadedLayerWeights.
struct LayerStore {
  std::vector<uint16_t> qkv, o, gate_up, down, attn_norm, ffn_norm, bqkv;  // BF16
  Int4Packed qkv4, o4, gate_up4, down4;
};

HostWeight Bf16Weight(const std::vector<uint16_t>& w, int64_t n, int64_t k) {
  HostWeight h;
  h.format = HostWeight::Format::kBf16;
  h.n = n, h.k = k, h.data = w.data();
  return h;
}

HostWeight Int4Weight(const Int4Packed& p, int64_t n, int64_t k, int32_t group,
                      Int4Offsets offsets) {
  HostWeight h;
  h.format = HostWeight::Format::kInt4;
  h.n = n, h.k = k, h.group = group, h.offset_kind = offsets;
  h.data = p.codes.data();
  h.scales = p.scales.data();
  h.offsets = p.offsets.empty() ? nullptr : p.offsets.data();
  return h;
}

// Quantizes w [n, k] to 4 bits, packs it into rows `rows` of dst (n_dst rows)
// and replaces w by the dequantized values.
void Quantize(std::vector<float>* w, int64_t n, int64_t k, int32_t group, Int4Offsets offsets,
              std::span<const int64_t> rows, int64_t n_dst, Int4Packed* dst) {
  absl::StatusOr<Int4Matrix> m = QuantizeInt4Rtn(*w, n, k, group, offsets);
  ASSERT_TRUE(m.ok()) << m.status();
  if (dst->codes.empty()) *dst = MakeInt4Packed(n_dst, k, group, offsets);
  ASSERT_TRUE(PackInt4Rows(*m, rows, n_dst, dst).ok());
  *w = DequantizeInt4(*m);
}

class OffloadedLayersTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  void SetUp() override {
    const auto [int4, bias] = GetParam();
    config_ = Config(bias);
    weights_ = RandomWeights(config_, 7);
    const ModelConfig& c = config_;
    const int64_t h = c.hidden_size, inter = c.intermediate_size, q = c.num_heads * c.head_dim,
                  kv = c.num_kv_heads * c.head_dim, qkv = q + 2 * kv;
    constexpr int32_t kGroup = 64;
    const Int4Offsets kOffsets = Int4Offsets::kZero;
    stores_.resize(c.num_layers);
    for (int64_t l = 0; l < c.num_layers; ++l) {
      LayerWeightsF32& w = weights_.layers[l];
      LayerStore& s = stores_[l];
      for (auto* v : {&w.attn_norm, &w.ffn_norm, &w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up,
                      &w.w_down, &w.bq, &w.bk, &w.bv}) {
        RoundBf16(v);
      }
      OffloadedLayerWeights o;
      o.layer = l;
      if (int4) {
        Quantize(&w.wq, q, h, kGroup, kOffsets, ConcatRows(q, 0), qkv, &s.qkv4);
        Quantize(&w.wk, kv, h, kGroup, kOffsets, ConcatRows(kv, q), qkv, &s.qkv4);
        Quantize(&w.wv, kv, h, kGroup, kOffsets, ConcatRows(kv, q + kv), qkv, &s.qkv4);
        Quantize(&w.wo, h, q, kGroup, kOffsets, ConcatRows(h, 0), h, &s.o4);
        Quantize(&w.w_gate, inter, h, kGroup, kOffsets, InterleavedGateUpRows(inter, 0), 2 * inter,
                 &s.gate_up4);
        Quantize(&w.w_up, inter, h, kGroup, kOffsets, InterleavedGateUpRows(inter, 1), 2 * inter,
                 &s.gate_up4);
        Quantize(&w.w_down, h, inter, kGroup, kOffsets, ConcatRows(h, 0), h, &s.down4);
        o.qkv = Int4Weight(s.qkv4, qkv, h, kGroup, kOffsets);
        o.o = Int4Weight(s.o4, h, q, kGroup, kOffsets);
        o.gate_up = Int4Weight(s.gate_up4, 2 * inter, h, kGroup, kOffsets);
        o.down = Int4Weight(s.down4, h, inter, kGroup, kOffsets);
        o.gate_up_interleaved = true;
      } else {
        s.qkv = Bf16(Concat({&w.wq, &w.wk, &w.wv}));
        s.o = Bf16(w.wo);
        s.gate_up = Bf16(Concat({&w.w_gate, &w.w_up}));
        s.down = Bf16(w.w_down);
        o.qkv = Bf16Weight(s.qkv, qkv, h);
        o.o = Bf16Weight(s.o, h, q);
        o.gate_up = Bf16Weight(s.gate_up, 2 * inter, h);
        o.down = Bf16Weight(s.down, h, inter);
      }
      s.attn_norm = Bf16(w.attn_norm);
      s.ffn_norm = Bf16(w.ffn_norm);
      o.attn_norm = s.attn_norm.data();
      o.ffn_norm = s.ffn_norm.data();
      if (bias) {
        s.bqkv = Bf16(Concat({&w.bq, &w.bk, &w.bv}));
        o.bqkv = s.bqkv.data();
      }
      layers_.push_back(o);
    }
    RoundBf16(&weights_.embedding);
    RoundBf16(&weights_.final_norm);
    layout_ = {.num_blocks = 6,
               .block_size = 16,
               .num_kv_heads = static_cast<int32_t>(c.num_kv_heads),
               .head_dim = static_cast<int32_t>(c.head_dim)};
  }

  // Logits of the last token of residual rows (BF16 [t, hidden]) in double.
  std::vector<double> Logits(const std::vector<uint16_t>& residual, int32_t row) const {
    const ModelConfig& c = config_;
    const int64_t h = c.hidden_size;
    double ms = 0;
    for (int64_t i = 0; i < h; ++i) ms += std::pow(Bf16ToFloat(residual[row * h + i]), 2);
    const double inv = 1.0 / std::sqrt(ms / h + c.rms_norm_eps);
    std::vector<double> out(c.vocab_size);
    const std::vector<float>& head = weights_.output_weight();
    for (int64_t v = 0; v < c.vocab_size; ++v) {
      for (int64_t i = 0; i < h; ++i) {
        out[v] +=
            Bf16ToFloat(residual[row * h + i]) * inv * weights_.final_norm[i] * head[v * h + i];
      }
    }
    return out;
  }

  ModelConfig config_;
  ModelWeightsF32 weights_;
  std::vector<LayerStore> stores_;
  std::vector<OffloadedLayerWeights> layers_;
  KvLayout layout_;
};

TEST_P(OffloadedLayersTest, MatchesDenseForwardChunkThenDecode) {
  const ModelConfig& c = config_;
  const std::vector<int32_t> tokens = {3, 17, 42, 5,  60, 9,  33, 21, 8, 50,
                                       1, 29, 44, 12, 7,  38, 55, 2,  19};
  const std::vector<float> expected = DenseForward(c, weights_, tokens);
  absl::StatusOr<std::unique_ptr<OffloadedLayers>> made =
      OffloadedLayers::Create(c, layout_, layers_, 3, 4);
  ASSERT_TRUE(made.ok()) << made.status();
  OffloadedLayers& ol = **made;
  const int64_t h = c.hidden_size;
  const std::vector<int32_t> table = {4, 1};  // blocks of the one sequence
  const int32_t prefill = 14;
  int32_t pos = 0;
  double worst = 0, scale = 0;
  while (pos < static_cast<int32_t>(tokens.size())) {
    const int32_t t = pos == 0 ? prefill : 1;
    std::vector<int32_t> positions(t), slots(t);
    std::vector<uint16_t> residual(t * h);
    for (int32_t i = 0; i < t; ++i) {
      positions[i] = pos + i;
      slots[i] = table[positions[i] / 16] * 16 + positions[i] % 16;
      for (int64_t j = 0; j < h; ++j) {
        residual[i * h + j] = FloatToBf16(weights_.embedding[tokens[pos + i] * h + j]);
      }
    }
    const std::vector<int32_t> cu = {0, t}, start = {pos};
    const OffloadedStep step{.num_tokens = t,
                             .num_seqs = 1,
                             .positions = positions.data(),
                             .slots = slots.data(),
                             .cu_query_lens = cu.data(),
                             .start_pos = start.data(),
                             .block_tables = table.data(),
                             .max_blocks_per_seq = 2};
    std::vector<uint16_t> kv(c.num_layers * t * ol.kv_row());
    ASSERT_TRUE(ol.Run(0, c.num_layers - 1, step, residual.data(), kv.data()).ok());
    for (int32_t i = 0; i < t; ++i) {
      const std::vector<double> got = Logits(residual, i);
      for (int64_t v = 0; v < c.vocab_size; ++v) {
        const double want = expected[(pos + i) * c.vocab_size + v];
        worst = std::max(worst, std::abs(got[v] - want));
        scale = std::max(scale, std::abs(want));
      }
    }
    pos += t;
  }
  EXPECT_GT(scale, 0.5);
  EXPECT_LT(worst, 0.015 * scale) << "largest logit error " << worst << " of logits up to "
                                  << scale;
}

TEST_P(OffloadedLayersTest, KvRowsWrittenBackReadAsComputed) {
  // The K/V rows a span hands back, written into a second instance with
  // WriteKv, make that instance's next step equal the first's.
  const ModelConfig& c = config_;
  absl::StatusOr<std::unique_ptr<OffloadedLayers>> a =
      OffloadedLayers::Create(c, layout_, layers_, 2, 8);
  absl::StatusOr<std::unique_ptr<OffloadedLayers>> b =
      OffloadedLayers::Create(c, layout_, layers_, 1, 8);
  ASSERT_TRUE(a.ok() && b.ok());
  const int64_t h = c.hidden_size;
  const std::vector<int32_t> table = {2};
  auto step_at = [&](int32_t pos, int32_t t, std::vector<int32_t>* positions,
                     std::vector<int32_t>* slots, std::vector<int32_t>* cu,
                     std::vector<int32_t>* start) {
    positions->resize(t), slots->resize(t);
    for (int32_t i = 0; i < t; ++i) (*positions)[i] = pos + i, (*slots)[i] = 32 + pos + i;
    *cu = {0, t}, *start = {pos};
    return OffloadedStep{
        t, 1, positions->data(), slots->data(), cu->data(), start->data(), table.data(), 1};
  };
  std::vector<int32_t> positions, slots, cu, start;
  std::vector<uint16_t> residual(5 * h);
  for (int64_t i = 0; i < 5 * h; ++i) residual[i] = FloatToBf16(weights_.embedding[i]);
  std::vector<uint16_t> kv(c.num_layers * 5 * (*a)->kv_row());
  const OffloadedStep first = step_at(0, 5, &positions, &slots, &cu, &start);
  ASSERT_TRUE((*a)->Run(0, c.num_layers - 1, first, residual.data(), kv.data()).ok());
  for (int64_t l = 0; l < c.num_layers; ++l) {
    ASSERT_TRUE((*b)->WriteKv(l, first, kv.data() + l * 5 * (*a)->kv_row()).ok());
  }
  std::vector<uint16_t> ra(h), rb(h), kva(c.num_layers * (*a)->kv_row()), kvb(kva.size());
  for (int64_t i = 0; i < h; ++i) ra[i] = rb[i] = FloatToBf16(weights_.embedding[9 * h + i]);
  const OffloadedStep next = step_at(5, 1, &positions, &slots, &cu, &start);
  ASSERT_TRUE((*a)->Run(0, c.num_layers - 1, next, ra.data(), kva.data()).ok());
  ASSERT_TRUE((*b)->Run(0, c.num_layers - 1, next, rb.data(), kvb.data()).ok());
  EXPECT_EQ(ra, rb);
  EXPECT_EQ(kva, kvb);
}

TEST_P(OffloadedLayersTest, RefusesWrongShapesAndLayers) {
  std::vector<OffloadedLayerWeights> bad = layers_;
  bad[1].o.n += 16;
  absl::StatusOr<std::unique_ptr<OffloadedLayers>> made =
      OffloadedLayers::Create(config_, layout_, bad, 1, 4);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("offloaded layer 1 o"), std::string::npos)
      << made.status();
  bad = layers_;
  bad[2].layer = 0;
  made = OffloadedLayers::Create(config_, layout_, bad, 1, 4);
  EXPECT_FALSE(made.ok());
  made = OffloadedLayers::Create(config_, layout_, {layers_[1]}, 1, 4);
  ASSERT_TRUE(made.ok());
  EXPECT_TRUE((*made)->Holds(1));
  EXPECT_FALSE((*made)->Holds(0));
  std::vector<uint16_t> residual(config_.hidden_size), kv((*made)->kv_row());
  const OffloadedStep step{.num_tokens = 1};
  EXPECT_EQ((*made)->Run(0, 1, step, residual.data(), kv.data()).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Formats, OffloadedLayersTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Int4" : "Bf16") +
                                  (std::get<1>(info.param) ? "Bias" : "NoBias");
                         });

}  // namespace
}  // namespace onecard::engine
