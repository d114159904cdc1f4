// The placement plan (plain C++; label unit, built with the CUDA backend): a
// model that fits stays on the card; llama3-70b int4 over 20 GiB for weights
// splits its other layers between streaming and the CPU at the count whose
// batch-1 step is within one layer's upload of the continuous optimum solved
// here in closed form (the chain card + CPU equal to the stream), no
// neighbouring split predicts less, the offloaded layers are spread evenly
// among the card's and the CPU's evenly among them; large batches stream the
// CPU's layers too, the sooner the slower the CPU's arithmetic; without a
// link offloading is refused; too little device or host memory is refused
// naming the flag and the bytes; untied embeddings leave the card once a
// layer does.
#include "engine/runtime/cuda/placement_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/model/synthetic_shapes.h"
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

std::vector<int64_t> LayerBytes(const PlacementInput& in) {
  std::vector<int64_t> out(in.config.num_layers);
  for (int64_t l = 0; l < in.config.num_layers; ++l) {
    out[l] = LayerWeightBytes(in.config, in.weights, l);
  }
  return out;
}

// Whether the leading p of `layers` hold p * count(place) / layers.size() of
// `place`, give or take one, for every p.
void ExpectEven(const std::vector<LayerPlace>& layers, LayerPlace place, const char* what) {
  const int64_t total = std::count(layers.begin(), layers.end(), place);
  int64_t before = 0;
  for (size_t p = 1; p <= layers.size(); ++p) {
    before += layers[p - 1] == place ? 1 : 0;
    const double even = static_cast<double>(p) * total / layers.size();
    EXPECT_LE(std::abs(before - even), 1.0) << what << ": first " << p;
  }
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
  // The offloaded layers spread evenly over all; among them, the CPU's.
  std::vector<LayerPlace> off_only = plan->layers;
  for (LayerPlace& p : off_only) p = p == LayerPlace::kDevice ? p : LayerPlace::kStreamed;
  ExpectEven(off_only, LayerPlace::kStreamed, "offloaded");
  std::vector<LayerPlace> offloaded;
  for (LayerPlace p : plan->layers) {
    if (p != LayerPlace::kDevice) offloaded.push_back(p);
  }
  ExpectEven(offloaded, LayerPlace::kCpu, "cpu among the offloaded");
  EXPECT_EQ(plan->layers, ArrangePlacement(LayerBytes(in), plan->device_layers,
                                           plan->streamed_layers, plan->cpu_layers));
  // No neighbouring split of the same offloaded layers predicts less at batch 1.
  for (int32_t d : {-1, 1}) {
    const int32_t streamed = plan->streamed_layers + d;
    const int32_t off = plan->streamed_layers + plan->cpu_layers;
    if (streamed < 0 || streamed > off) continue;
    const StepPrediction other = PredictStep(
        in, ArrangePlacement(LayerBytes(in), plan->device_layers, streamed, off - streamed), 1);
    EXPECT_GE(other.step_s, plan->batch1.step_s) << "streamed " << streamed;
  }
  EXPECT_GE(plan->cpu_max_rows, 1);
  EXPECT_NE(plan->ToString().find("computed by the CPU in steps of up to"), std::string::npos);
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

TEST(PlacementPlanTest, LargeStepsStreamTheCpuLayersToo) {
  PlacementInput in = Input("llama3-70b", "int4", 20, 100);
  in.expected_batch = 64;
  const auto fast = PlanPlacement(in);
  in.rates.host_flops_per_s = 0.2e12;  // the CPU's arithmetic binds from fewer rows
  const auto slow = PlanPlacement(in);
  ASSERT_TRUE(fast.ok() && slow.ok()) << fast.status() << slow.status();
  EXPECT_GE(fast->cpu_max_rows, 1);
  EXPECT_LE(fast->cpu_max_rows, kCpuMaxRows);
  EXPECT_LT(slow->cpu_max_rows, fast->cpu_max_rows);
  // Beyond cpu_max_rows the prediction is the all-streamed one.
  const StepPrediction streamed = PredictStep(in, StreamedInstead(slow->layers), 64);
  EXPECT_EQ(slow->expected.step_s, streamed.step_s);
  EXPECT_EQ(slow->expected.cpu_s, 0.0);
  EXPECT_EQ(PredictPlanStep(in, *slow, 1).step_s, slow->batch1.step_s);
  EXPECT_GT(slow->batch1.cpu_s, 0.0);
  EXPECT_NE(slow->ToString().find("predicted step at batch 64"), std::string::npos);
}

// The CPU kernels' rate at 2 rows bounds every step of 2 or more rows (the
// AMX tile kernels' time hardly grows with the rows), and the plan prints it.
TEST(PlacementPlanTest, TheTwoRowRateBoundsLargerSteps) {
  PlacementInput in = Input("llama3-70b", "int4", 20, 100);
  in.cpu_layers = 8;
  const auto plan = PlanPlacement(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  double cpu_bytes = 0;
  for (int64_t l = 0; l < in.config.num_layers; ++l) {
    if (plan->layers[l] == LayerPlace::kCpu) {
      cpu_bytes += static_cast<double>(LayerWeightBytes(in.config, in.weights, l));
    }
  }
  ASSERT_GT(cpu_bytes, 0);
  const StepPrediction one = PredictStep(in, plan->layers, 1);
  const StepPrediction two = PredictStep(in, plan->layers, 2);
  const double spans_s = one.cpu_s - cpu_bytes / in.rates.host_read_bytes_per_s;
  in.rates.host_rows2_bytes_per_s = 20e9;
  EXPECT_EQ(PredictStep(in, plan->layers, 1).cpu_s, one.cpu_s);
  for (int32_t rows : {2, 5, 8}) {
    EXPECT_NEAR(PredictStep(in, plan->layers, rows).cpu_s, cpu_bytes / 20e9 + spans_s, 1e-9)
        << rows;
  }
  EXPECT_GT(PredictStep(in, plan->layers, 2).cpu_s, two.cpu_s);
  const auto printed = PlanPlacement(in);
  ASSERT_TRUE(printed.ok()) << printed.status();
  EXPECT_NE(printed->ToString().find("(20.0 at 2 rows)"), std::string::npos) << printed->ToString();
}

TEST(PlacementPlanTest, WithoutALinkOffloadingIsRefused) {
  // Every offloaded layer must be able to pass through the ring (the steps
  // too large for the CPU stream them).
  PlacementInput in = Input("llama3-70b", "int4", 20, 100);
  in.rates.h2d_bytes_per_s = 0;
  auto plan = PlanPlacement(in);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("pinned upload rate 0.0 GB/s"), std::string::npos)
      << plan.status();
  PlacementInput fits = Input("llama3-8b", "bf16", 24, 0);
  fits.rates.h2d_bytes_per_s = 0;
  EXPECT_TRUE(PlanPlacement(fits).ok());  // a model that fits needs no link
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

// Untied embeddings: on the card while every layer fits, in pinned host
// memory once one does not, and the card holds layers in their place; tied
// ones (the LM head's table) stay.
TEST(PlacementPlanTest, UntiedEmbeddingsLeaveTheCardWithTheFirstLayer) {
  const auto fits = PlanPlacement(Input("llama3-8b", "bf16", 24, 0));
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->host_embedding_bytes, 0);
  EXPECT_EQ(fits->other_bytes, OtherWeightBytes(*SyntheticModelConfig("llama3-8b")));
  EXPECT_EQ(fits->ToString().find("token embeddings"), std::string::npos);

  PlacementInput in = Input("llama3-70b", "int4", 20, 100);
  const auto plan = PlanPlacement(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t table = EmbeddingTableBytes(in.config);
  EXPECT_EQ(table, int64_t{128256} * 8192 * 2);
  EXPECT_EQ(plan->host_embedding_bytes, table);
  EXPECT_EQ(plan->other_bytes, OtherWeightBytes(in.config) - table);
  EXPECT_NE(plan->ToString().find("host       token embeddings:     1.96 GiB pinned"),
            std::string::npos)
      << plan->ToString();
  EXPECT_NE(plan->ToString().find("+ LM head, norms:"), std::string::npos);
  // The card fills with layers where the table was: no further layer fits.
  const int64_t layer = LayerWeightBytes(in.config, in.weights, 0);
  EXPECT_LE(plan->device_bytes + plan->ring_bytes, in.device_weight_bytes);
  EXPECT_GT(plan->device_bytes + plan->ring_bytes + layer, in.device_weight_bytes);
  // Tied, the one table is the LM head's and stays on the card.
  in.config.tie_word_embeddings = true;
  const auto tied = PlanPlacement(in);
  ASSERT_TRUE(tied.ok()) << tied.status();
  EXPECT_EQ(tied->host_embedding_bytes, 0);
  EXPECT_EQ(tied->other_bytes, OtherWeightBytes(in.config));
  EXPECT_EQ(tied->other_bytes, plan->other_bytes);
  EXPECT_EQ(tied->ToString().find("token embeddings"), std::string::npos);
  // The host budget counts the table: refused naming both.
  in.config.tie_word_embeddings = false;
  in.host_weight_bytes = plan->streamed_bytes + plan->cpu_bytes + table - 1;
  const auto short_host = PlanPlacement(in);
  EXPECT_EQ(short_host.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(short_host.status().message().find("and 1.96 GiB of embeddings"), std::string::npos)
      << short_host.status();
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

// The ring: the streamed layers' slots, and as many of the CPU layers' own.
TEST(PlacementPlanTest, RingSlotsKeepAKindInItsOwnSlots) {
  EXPECT_EQ(RingSlots(2, 10, 0), 2);
  EXPECT_EQ(RingSlots(2, 1, 0), 1);
  EXPECT_EQ(RingSlots(2, 10, 5), 4);
  EXPECT_EQ(RingSlots(2, 10, 1), 3);
  EXPECT_EQ(RingSlots(2, 0, 5), 2);
  EXPECT_EQ(RingSlots(3, 0, 1), 1);
  EXPECT_EQ(RingSlots(2, 0, 0), 0);
  const PlacementInput in = Input("llama3-70b", "int4", 20, 100);
  auto plan = PlanPlacement(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->ring_bytes, int64_t{RingSlots(2, plan->streamed_layers, plan->cpu_layers)} *
                                  LayerWeightBytes(in.config, in.weights, 0));
}

}  // namespace
}  // namespace onecard::engine
