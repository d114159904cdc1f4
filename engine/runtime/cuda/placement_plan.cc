// PlanPlacement (placement_plan.h): the card's layers, then the split of the
// rest between streaming and the CPU by the predicted step.
#include "engine/runtime/cuda/placement_plan.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {
namespace {

double GiB(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(1LL << 30); }

// Multiply-add parameters of one layer (its four projections).
double LayerParams(const ModelConfig& c) {
  double params = 0;
  for (int p = 0; p < kNumProjections; ++p) {
    const auto [n, k] = ProjectionShape(c, static_cast<Projection>(p));
    params += static_cast<double>(n) * static_cast<double>(k);
  }
  return params;
}

double Time(double bytes, double read_rate, double flops, double flop_rate) {
  const double read = read_rate > 0 ? bytes / read_rate : std::numeric_limits<double>::infinity();
  const double math = flop_rate > 0 ? flops / flop_rate : 0.0;
  return std::max(read, math);
}

absl::Status CheckInput(const PlacementInput& in) {
  const OffloadRates& r = in.rates;
  if (in.device_weight_bytes <= 0 || in.host_weight_bytes < 0 || in.ring_layers < 1 ||
      in.expected_batch < 1 || r.device_read_bytes_per_s <= 0 || r.device_flops_per_s <= 0 ||
      r.h2d_bytes_per_s < 0 || r.host_read_bytes_per_s < 0 || r.host_flops_per_s < 0 ||
      r.span_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement: needs device_weight_bytes > 0 (", in.device_weight_bytes,
                     "), host_weight_bytes >= 0 (", in.host_weight_bytes, "), ring_layers >= 1 (",
                     in.ring_layers, "), expected_batch >= 1 (", in.expected_batch,
                     "), device rates > 0 and host rates >= 0"));
  }
  return absl::OkStatus();
}

std::string Range(const std::vector<LayerPlace>& layers, LayerPlace place) {
  int first = -1, last = -1;
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    if (layers[i] != place) continue;
    if (first < 0) first = i;
    last = i;
  }
  if (first < 0) return "none";
  if (first == last) return absl::StrCat("layer ", first);
  const int count = static_cast<int>(std::count(layers.begin(), layers.end(), place));
  return count == last - first + 1 ? absl::StrCat("layers ", first, "-", last)
                                   : absl::StrCat("spread over layers ", first, "-", last);
}

}  // namespace

const char* LayerPlaceName(LayerPlace place) {
  switch (place) {
    case LayerPlace::kDevice:
      return "device";
    case LayerPlace::kStreamed:
      return "streamed";
    case LayerPlace::kCpu:
      return "cpu";
  }
  return "?";
}

StepPrediction PredictStep(const PlacementInput& in, const std::vector<LayerPlace>& layers,
                           int32_t batch) {
  const ModelConfig& c = in.config;
  const OffloadRates& r = in.rates;
  const double flops = 2.0 * LayerParams(c) * batch;
  StepPrediction s;
  s.batch = batch;
  bool cpu = false;
  for (int64_t l = 0; l < static_cast<int64_t>(layers.size()); ++l) {
    const double bytes = static_cast<double>(LayerWeightBytes(c, in.weights, l));
    if (layers[l] == LayerPlace::kCpu) {
      s.cpu_s += Time(bytes, r.host_read_bytes_per_s, flops, r.host_flops_per_s);
      cpu = true;
    } else {
      s.device_s += Time(bytes, r.device_read_bytes_per_s, flops, r.device_flops_per_s);
      if (layers[l] == LayerPlace::kStreamed) {
        s.stream_s += r.h2d_bytes_per_s > 0 ? bytes / r.h2d_bytes_per_s
                                            : std::numeric_limits<double>::infinity();
      }
    }
  }
  // The LM head: its rows read once, batch rows multiplied.
  const double head_bytes = 2.0 * static_cast<double>(c.vocab_size) * c.hidden_size;
  s.device_s +=
      Time(head_bytes, r.device_read_bytes_per_s,
           2.0 * static_cast<double>(c.vocab_size) * c.hidden_size * batch, r.device_flops_per_s);
  if (cpu) s.cpu_s += r.span_s;
  s.chain_s = s.device_s + s.cpu_s;
  s.step_s = std::max(s.chain_s, s.stream_s);
  return s;
}

absl::StatusOr<PlacementPlan> PlanPlacement(const PlacementInput& input) {
  RETURN_IF_ERROR(CheckInput(input));
  PlacementInput in = input;
  const ModelConfig& c = in.config;
  if (in.weights.layers.empty()) in.weights = ModelWeightsSpec::Uniform(c, {});
  ASSIGN_OR_RETURN(const WeightBytes total, CountWeightBytes(c, in.weights));
  const int32_t num_layers = static_cast<int32_t>(c.num_layers);
  std::vector<int64_t> layer_bytes(num_layers);
  int64_t largest = 0;
  for (int32_t l = 0; l < num_layers; ++l) {
    layer_bytes[l] = LayerWeightBytes(c, in.weights, l);
    largest = std::max(largest, layer_bytes[l]);
  }
  const int64_t other = OtherWeightBytes(c);
  const int64_t ring = int64_t{in.ring_layers} * largest;
  // The most leading layers the card holds beside the other weights (and the
  // ring when something streams).
  auto device_layers = [&](bool with_ring) {
    int64_t used = other + (with_ring ? ring : 0);
    int32_t n = 0;
    const int32_t most =
        in.max_device_layers >= 0 ? std::min(in.max_device_layers, num_layers) : num_layers;
    while (n < most && used + layer_bytes[n] <= in.device_weight_bytes) used += layer_bytes[n++];
    return used <= in.device_weight_bytes ? n : -1;
  };
  const bool can_stream = in.rates.h2d_bytes_per_s > 0;
  const bool can_cpu = in.rates.host_read_bytes_per_s > 0;
  PlacementPlan best;
  bool found = false;
  for (int32_t n_cpu = 0; n_cpu <= num_layers; ++n_cpu) {
    // With the ring, then without it (every offloaded layer on the CPU).
    for (bool with_ring : {true, false}) {
      const int32_t n_dev = device_layers(with_ring);
      if (n_dev < 0 || n_dev + n_cpu > num_layers) continue;
      const int32_t n_stream = num_layers - n_dev - n_cpu;
      if (with_ring != (n_stream > 0)) continue;
      if ((n_stream > 0 && !can_stream) || (n_cpu > 0 && !can_cpu)) continue;
      std::vector<LayerPlace> layers(num_layers, LayerPlace::kDevice);
      for (int32_t l = n_dev; l < n_dev + n_stream; ++l) layers[l] = LayerPlace::kStreamed;
      for (int32_t l = n_dev + n_stream; l < num_layers; ++l) layers[l] = LayerPlace::kCpu;
      const StepPrediction expected = PredictStep(in, layers, in.expected_batch);
      // Ties keep the split with fewer CPU layers (the first found).
      if (found && expected.step_s >= best.expected.step_s) continue;
      found = true;
      best.layers = layers;
      best.device_layers = n_dev;
      best.streamed_layers = n_stream;
      best.cpu_layers = n_cpu;
      best.ring_bytes = int64_t{std::min(in.ring_layers, n_stream)} * largest;
      best.expected = expected;
    }
  }
  const int64_t offloaded_min = [&] {
    const int32_t n_dev = std::max(device_layers(false), 0);
    int64_t bytes = 0;
    for (int32_t l = n_dev; l < num_layers; ++l) bytes += layer_bytes[l];
    return bytes;
  }();
  if (!found) {
    if (device_layers(false) < 0) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: --gpu-memory-budget leaves %.2f GiB for weights; the embeddings, LM head and norms "
          "alone take %.2f GiB (weights %s)",
          c.name, GiB(in.device_weight_bytes), GiB(other), total.ToString()));
    }
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %.2f GiB of layers do not fit the %.2f GiB of device memory for weights, and "
        "neither streaming (pinned upload rate %.1f GB/s) nor the CPU (read rate %.1f GB/s) can "
        "take them, or the card cannot hold a ring of %d layers (%.2f GiB) beside the rest",
        c.name, GiB(offloaded_min), GiB(in.device_weight_bytes), in.rates.h2d_bytes_per_s / 1e9,
        in.rates.host_read_bytes_per_s / 1e9, in.ring_layers, GiB(ring)));
  }
  // The streamed layers spread evenly among the card's (the CPU's span stays
  // last): their copies then overlap the card's layers' compute in a long
  // prefill, where the ring alone would leave the link idle until the first
  // streamed layer. Kept in front where that would change the card's bytes
  // (layers of different sizes).
  if (best.streamed_layers > 0 && best.device_layers > 0) {
    const int32_t span = best.device_layers + best.streamed_layers;
    std::vector<LayerPlace> spread = best.layers;
    std::fill(spread.begin(), spread.begin() + span, LayerPlace::kDevice);
    for (int32_t j = 0; j < best.streamed_layers; ++j) {
      spread[(int64_t{j} + 1) * span / best.streamed_layers - 1] = LayerPlace::kStreamed;
    }
    int64_t front = 0, spread_bytes = 0;
    for (int32_t l = 0; l < span; ++l) {
      front += best.layers[l] == LayerPlace::kDevice ? layer_bytes[l] : 0;
      spread_bytes += spread[l] == LayerPlace::kDevice ? layer_bytes[l] : 0;
    }
    if (spread_bytes == front) best.layers = spread;
  }
  best.model = c.name;
  best.other_bytes = other;
  best.device_weight_bytes = in.device_weight_bytes;
  best.rates = in.rates;
  best.device_bytes = other;
  for (int32_t l = 0; l < num_layers; ++l) {
    switch (best.layers[l]) {
      case LayerPlace::kDevice:
        best.device_bytes += layer_bytes[l];
        break;
      case LayerPlace::kStreamed:
        best.streamed_bytes += layer_bytes[l];
        break;
      case LayerPlace::kCpu:
        best.cpu_bytes += layer_bytes[l];
        break;
    }
  }
  const int64_t host = best.streamed_bytes + best.cpu_bytes;
  if (host > in.host_weight_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %.2f GiB of layers (%d streamed, %d on the CPU) do not fit the card's %.2f GiB for "
        "weights, and --cpu-memory-budget gives %.2f GiB of host memory for them",
        c.name, GiB(host), best.streamed_layers, best.cpu_layers, GiB(in.device_weight_bytes),
        GiB(in.host_weight_bytes)));
  }
  best.batch1 = PredictStep(in, best.layers, 1);
  return best;
}

std::string PlacementPlan::ToString() const {
  auto line = [](const StepPrediction& s) {
    return absl::StrFormat(
        "  predicted step at batch %d: %.2f ms, %.1f tok/s (chain %.2f ms: card %.2f + CPU %.2f; "
        "stream %.2f ms)\n",
        s.batch, s.step_s * 1e3, s.tokens_per_s(), s.chain_s * 1e3, s.device_s * 1e3, s.cpu_s * 1e3,
        s.stream_s * 1e3);
  };
  std::string out = absl::StrFormat(
      "placement for %s (%.2f GiB of device memory for weights):\n"
      "  device     %3d layers (%s) + embeddings, LM head, norms: %8.2f GiB\n"
      "  streamed   %3d layers (%s): %8.2f GiB pinned, through a ring of %.2f GiB\n"
      "  cpu        %3d layers (%s): %8.2f GiB\n"
      "  rates: device read %.0f GB/s, %.0f TFLOP/s; host-to-device %.1f GB/s; host read %.1f "
      "GB/s, %.2f TFLOP/s; %.0f us a CPU span\n",
      model, GiB(device_weight_bytes), device_layers, Range(layers, LayerPlace::kDevice),
      GiB(device_bytes), streamed_layers, Range(layers, LayerPlace::kStreamed), GiB(streamed_bytes),
      GiB(ring_bytes), cpu_layers, Range(layers, LayerPlace::kCpu), GiB(cpu_bytes),
      rates.device_read_bytes_per_s / 1e9, rates.device_flops_per_s / 1e12,
      rates.h2d_bytes_per_s / 1e9, rates.host_read_bytes_per_s / 1e9, rates.host_flops_per_s / 1e12,
      rates.span_s * 1e6);
  absl::StrAppend(&out, line(batch1));
  if (expected.batch != 1) absl::StrAppend(&out, line(expected));
  return out;
}

}  // namespace onecard::engine
