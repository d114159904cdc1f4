// The placement plan (plain C++; label unit, built with the CUDA backend): a
// model that fits stays on the card; llama3-70b int4 over 20 GiB for weights
// splits its other layers between streaming and the CPU at the count whose
// step is within one layer's upload of the continuous optimum solved here in
// closed form (the chain card + CPU equal to the stream), and no neighbouring
// split predicts less; a large batch moves layers from the CPU to the stream
// when the CPU's arithmetic binds; without a link every offloaded layer runs
// on the CPU (no ring); too little device or host memory is refused naming
// the flag and the bytes.
#include "engine/runtime/cuda/placement_plan.h"

#include <cmath>
#include <string>

#include "engine/runtime/cuda/synthetic_shapes.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

constexpr int64_t kGiB = 1LL << 30;

// The GPU machine's rates as the issue measured them (host read 86 GB/s,
// pinned uploads 55 GB/s) and the H200's copy and bf16 matrix ceilings.
OffloadRates MachineRates() {
  return {.device_read_bytes_per_s = 4.2e12,
          .device_flops_per_s = 790e12,
          .h2d_bytes_per_s = 55e9,
          .host_read_bytes_per_s = 86e9,
          .host_flops_per_s = 2e12,
          .span_s = 30e-6};
}

PlacementInput Input(const char* model, const char* weights, int64_t device_gib, int64_t host_gib) {
  PlacementInput in;
  in.config = *SyntheticModelConfig(model);
  in.weights = ModelWeightsSpec::Uniform(in.config, *ParseProjectionSpec(weights));
  in.device_weight_bytes = device_gib * kGiB;
  in.host_weight_bytes = host_gib * kGiB;
  in.rates = MachineRates();
  return in;
}

std::vector<LayerPlace> Split(int32_t layers, int32_t device, int32_t streamed) {
  std::vector<LayerPlace> out(layers, LayerPlace::kCpu);
  for (int32_t l = 0; l < device + streamed; ++l) {
    out[l] = l < device ? LayerPlace::kDevice : LayerPlace::kStreamed;
  }
  return out;
}

TEST(PlacementPlanTest, AModelThatFitsStaysOnTheCard) {
  const PlacementInput in = Input("llama3-8b", "bf16", 24, 0);
  auto plan = PlanPlacement(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->offloads());
  EXPECT_EQ(plan->device_layers, 32);
  EXPECT_EQ(plan->ring_bytes, 0);
  EXPECT_EQ(plan->batch1.stream_s, 0.0);
  // Every layer's bytes and the LM head's rows over the read rate.
  const WeightBytes w = *CountWeightBytes(in.config, in.weights);
  const double head = 2.0 * 128256 * 4096;
  const double want = (static_cast<double>(w.total - OtherWeightBytes(in.config)) + head) / 4.2e12;
  EXPECT_NEAR(plan->batch1.step_s, want, 1e-9 * want);
  EXPECT_NE(plan->ToString().find("device      32 layers (layers 0-31)"), std::string::npos)
      << plan->ToString();
}

TEST(PlacementPlanTest, Llama70bSplitsItsRestBetweenStreamAndCpu) {
  const PlacementInput in = Input("llama3-70b", "int4", 20, 100);
  auto plan = PlanPlacement(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::printf("%s", plan->ToString().c_str());
  ASSERT_TRUE(plan->offloads());
  EXPECT_GT(plan->streamed_layers, 0);
  EXPECT_GT(plan->cpu_layers, 0);
  EXPECT_EQ(plan->device_layers + plan->streamed_layers + plan->cpu_layers, 80);
  EXPECT_LE(plan->device_bytes + plan->ring_bytes, 20 * kGiB);
  // The CPU's layers last; the streamed ones spread evenly over the rest: any
  // leading p of those layers hold p S / span of them, give or take one.
  const int32_t span = plan->device_layers + plan->streamed_layers;
  for (int32_t l = span; l < 80; ++l) EXPECT_EQ(plan->layers[l], LayerPlace::kCpu) << l;
  int32_t streamed_before = 0;
  for (int32_t p = 1; p <= span; ++p) {
    streamed_before += plan->layers[p - 1] == LayerPlace::kStreamed ? 1 : 0;
    const double even = static_cast<double>(p) * plan->streamed_layers / span;
    EXPECT_LE(std::abs(streamed_before - even), 1.0) << "first " << p << " layers";
  }
  EXPECT_EQ(streamed_before, plan->streamed_layers);
  // No neighbouring split of the same offloaded layers predicts less.
  for (int32_t d : {-1, 1}) {
    const int32_t streamed = plan->streamed_layers + d;
    if (streamed < 1 || streamed > plan->streamed_layers + plan->cpu_layers) continue;
    const StepPrediction other =
        PredictStep(in, Split(80, plan->device_layers, streamed), in.expected_batch);
    EXPECT_GE(other.step_s, plan->expected.step_s) << "streamed " << streamed;
  }
  // The continuous optimum: S streamed bytes such that the chain (card: its
  // layers D, the streamed ones and the LM head H; CPU: the rest of the
  // offloaded bytes B, and one span) equals the stream S / r_p.
  const OffloadRates r = MachineRates();
  const double layer = static_cast<double>(LayerWeightBytes(in.config, in.weights, 0));
  const double d_bytes = static_cast<double>(plan->device_bytes - plan->other_bytes);
  const double h_bytes = 2.0 * 128256 * 8192;
  const double b_bytes = static_cast<double>(plan->streamed_bytes + plan->cpu_bytes);
  const double s_bytes =
      ((d_bytes + h_bytes) / r.device_read_bytes_per_s + b_bytes / r.host_read_bytes_per_s +
       r.span_s) /
      (1 / r.h2d_bytes_per_s - 1 / r.device_read_bytes_per_s + 1 / r.host_read_bytes_per_s);
  const double optimum = s_bytes / r.h2d_bytes_per_s;
  EXPECT_NEAR(plan->batch1.step_s, optimum, layer / r.h2d_bytes_per_s);
  EXPECT_NEAR(plan->batch1.chain_s, plan->batch1.stream_s, layer / r.h2d_bytes_per_s);
}

TEST(PlacementPlanTest, ALargeBatchStreamsMoreWhenTheCpuArithmeticBinds) {
  PlacementInput in = Input("llama3-70b", "int4", 20, 100);
  in.rates.host_flops_per_s = 0.5e12;
  const auto one = PlanPlacement(in);
  in.expected_batch = 64;
  const auto many = PlanPlacement(in);
  ASSERT_TRUE(one.ok() && many.ok()) << one.status() << many.status();
  EXPECT_LT(many->cpu_layers, one->cpu_layers);
  EXPECT_EQ(many->expected.batch, 64);
  EXPECT_NE(many->ToString().find("predicted step at batch 64"), std::string::npos);
}

TEST(PlacementPlanTest, WithoutALinkTheCpuTakesEveryOffloadedLayer) {
  PlacementInput in = Input("llama3-70b", "int4", 20, 100);
  in.rates.h2d_bytes_per_s = 0;
  auto plan = PlanPlacement(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->streamed_layers, 0);
  EXPECT_EQ(plan->ring_bytes, 0);
  EXPECT_GT(plan->cpu_layers, 0);
  // The card holds more layers without a ring.
  in.rates = MachineRates();
  auto streaming = PlanPlacement(in);
  ASSERT_TRUE(streaming.ok());
  EXPECT_GT(plan->device_layers, streaming->device_layers);
}

TEST(PlacementPlanTest, TooLittleMemoryIsRefusedNamingTheFlag) {
  auto host = PlanPlacement(Input("mistral-large-123b", "int4", 26, 16));
  EXPECT_EQ(host.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(host.status().message().find("--cpu-memory-budget gives 16.00 GiB"), std::string::npos)
      << host.status();
  auto device = PlanPlacement(Input("llama3-70b", "int4", 1, 100));
  EXPECT_EQ(device.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(device.status().message().find("--gpu-memory-budget leaves 1.00 GiB"),
            std::string::npos)
      << device.status();
  PlacementInput bad = Input("llama3-8b", "bf16", 24, 0);
  bad.rates.device_read_bytes_per_s = 0;
  EXPECT_EQ(PlanPlacement(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// --gpu-layers: at most that many leading layers stay on the card even where
// more would fit; the rest go to the stream and the CPU as before.
TEST(PlacementPlanTest, MaxDeviceLayersCapsTheCardsShare) {
  PlacementInput in = Input("llama3-70b", "int4", 20, 100);
  in.max_device_layers = 5;
  auto plan = PlanPlacement(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->device_layers, 5);
  EXPECT_EQ(plan->streamed_layers + plan->cpu_layers, 75);
  in.max_device_layers = 0;
  in.rates.host_read_bytes_per_s = 0;  // no CPU: every layer streamed
  plan = PlanPlacement(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->device_layers, 0);
  EXPECT_EQ(plan->streamed_layers, 80);
}

}  // namespace
}  // namespace onecard::engine
