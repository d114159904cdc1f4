// offloaded_layer_time: where OffloadedLayers::Run (engine/runtime/cpu/
// offloaded_layers.h, the CPU's share of an offloaded model) spends a decode
// step outside its four products: a span of synthetic 4-bit layers (g128,
// symmetric, random codes; gate and up interleaved as the CUDA layout holds
// them) of a synthetic model's shapes, decode steps of `rows` sequences over
// a context of `context` tokens each; prints the median over repetitions of
// a step's wall time, its products' time (HostLinearForward) and the rest.
// Usage: offloaded_layer_time [--model llama3-70b] [--layers 4] [--rows 8]
//        [--context 160] [--threads N] [--reps 9]
// (the numbers go in notes, not in bench/results).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/kernels/bf16.h"
#include "engine/kernels/int4_layout.h"
#include "engine/model/synthetic_shapes.h"
#include "engine/runtime/cpu/offloaded_layers.h"

namespace {

using namespace onecard::engine;

// One 4-bit weight [n, k]: random codes, scales of ~0.01 (fp16 pairs).
struct Int4Store {
  std::vector<uint8_t> codes;
  std::vector<uint32_t> scales;
  HostWeight Weight(int64_t n, int64_t k) const {
    return {.format = HostWeight::Format::kInt4,
            .n = n,
            .k = k,
            .data = codes.data(),
            .scales = scales.data(),
            .group = 128};
  }
};

Int4Store MakeInt4(int64_t n, int64_t k, std::mt19937& rng) {
  Int4Store s;
  s.codes.resize(Int4CodeBytes(n, k));
  for (uint8_t& b : s.codes) b = static_cast<uint8_t>(rng());
  s.scales.assign(Int4ScaleBytes(n, k, 128) / 4, 0x211e211eu);  // fp16 0.01 twice
  return s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "llama3-70b";
  int layers = 4, rows = 8, context = 160, reps = 9;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--model")
      model = v;
    else if (flag == "--layers")
      layers = std::atoi(v);
    else if (flag == "--rows")
      rows = std::atoi(v);
    else if (flag == "--context")
      context = std::atoi(v);
    else if (flag == "--threads")
      threads = std::atoi(v);
    else if (flag == "--reps")
      reps = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  absl::StatusOr<ModelConfig> config = SyntheticModelConfig(model);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  ModelConfig c = *config;
  c.num_layers = layers;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  const int64_t qkv = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  const int64_t q_dim = c.num_heads * c.head_dim;
  std::mt19937 rng(7);
  std::vector<Int4Store> stores;
  std::vector<uint16_t> norm(h, FloatToBf16(1.0f));
  std::vector<OffloadedLayerWeights> weights;
  for (int l = 0; l < layers; ++l) {
    stores.push_back(MakeInt4(qkv, h, rng));
    stores.push_back(MakeInt4(h, q_dim, rng));
    stores.push_back(MakeInt4(2 * inter, h, rng));
    stores.push_back(MakeInt4(h, inter, rng));
    const Int4Store* s = &stores[stores.size() - 4];
    weights.push_back({.layer = l,
                       .qkv = s[0].Weight(qkv, h),
                       .o = s[1].Weight(h, q_dim),
                       .gate_up = s[2].Weight(2 * inter, h),
                       .down = s[3].Weight(h, inter),
                       .gate_up_interleaved = true,
                       .attn_norm = norm.data(),
                       .ffn_norm = norm.data()});
  }
  KvLayout layout;
  layout.block_size = 16;
  layout.num_kv_heads = static_cast<int32_t>(c.num_kv_heads);
  layout.head_dim = static_cast<int32_t>(c.head_dim);
  const int32_t blocks_per_seq = (context + 1 + 15) / 16;
  layout.num_blocks = rows * blocks_per_seq;
  absl::StatusOr<std::unique_ptr<OffloadedLayers>> run =
      OffloadedLayers::Create(c, layout, std::move(weights), threads, rows);
  if (!run.ok()) {
    std::fprintf(stderr, "%s\n", run.status().ToString().c_str());
    return 1;
  }
  // Decode steps: sequence s at position `context`, its blocks s * blocks_per_seq on.
  std::vector<int32_t> positions(rows, context), slots(rows), cu(rows + 1), start(rows, context);
  std::vector<int32_t> tables(int64_t{rows} * blocks_per_seq);
  std::iota(cu.begin(), cu.end(), 0);
  std::iota(tables.begin(), tables.end(), 0);
  for (int s = 0; s < rows; ++s) {
    slots[s] = (s * blocks_per_seq + context / 16) * 16 + context % 16;
  }
  const OffloadedStep step{.num_tokens = rows,
                           .num_seqs = rows,
                           .positions = positions.data(),
                           .slots = slots.data(),
                           .cu_query_lens = cu.data(),
                           .start_pos = start.data(),
                           .block_tables = tables.data(),
                           .max_blocks_per_seq = blocks_per_seq};
  std::vector<uint16_t> residual(int64_t{rows} * h);
  for (uint16_t& x : residual) x = FloatToBf16(std::uniform_real_distribution<float>(-1, 1)(rng));
  const std::vector<uint16_t> residual0 = residual;
  std::vector<uint16_t> kv(int64_t{layers} * rows * (*run)->kv_row());
  std::vector<double> wall, products;
  for (int r = 0; r <= reps; ++r) {
    residual = residual0;
    (*run)->TakeLinearMicros();
    const auto t0 = std::chrono::steady_clock::now();
    const absl::Status st = (*run)->Run(0, layers - 1, step, residual.data(), kv.data());
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    const double lin = (*run)->TakeLinearMicros();
    if (r == 0) continue;  // untimed: first touches
    wall.push_back(us / layers);
    products.push_back(lin / layers);
  }
  const double w = Median(wall), p = Median(products);
  std::printf(
      "%s, %d rows, context %d, %d threads: a layer %.3f ms, products %.3f ms, rest %.3f ms\n",
      model.c_str(), rows, context, threads, w / 1e3, p / 1e3, (w - p) / 1e3);
  return 0;
}
