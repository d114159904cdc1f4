// PlanPlacement (placement_plan.h): the card's layers, then the split of the
// rest between streaming and the CPU by the predicted batch-1 step.
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
  if (in.cpu_layers > 0 && r.host_read_bytes_per_s <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement: ", in.cpu_layers,
        " layers asked of the CPU (offload_cpu_layers), which "
        "computes none here (offload_cpu_threads -1, an FP8 KV cache or FP8 weights)"));
  }
  if (in.device_weight_bytes <= 0 || in.host_weight_bytes < 0 || in.ring_layers < 1 ||
      in.expected_batch < 1 || r.device_read_bytes_per_s <= 0 || r.device_flops_per_s <= 0 ||
      r.h2d_bytes_per_s < 0 || r.host_read_bytes_per_s < 0 || r.host_flops_per_s < 0 ||
      r.host_rows2_bytes_per_s < 0 || r.span_s < 0) {
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
  // With layers both on the CPU and streamed, the two share host memory.
  const bool shared = std::count(layers.begin(), layers.end(), LayerPlace::kCpu) > 0 &&
                      std::count(layers.begin(), layers.end(), LayerPlace::kStreamed) > 0;
  const double host_read = shared && r.host_read_shared_bytes_per_s > 0
                               ? r.host_read_shared_bytes_per_s
                               : r.host_read_bytes_per_s;
  const double h2d =
      shared && r.h2d_shared_bytes_per_s > 0 ? r.h2d_shared_bytes_per_s : r.h2d_bytes_per_s;
  StepPrediction s;
  s.batch = batch;
  int32_t spans = 0;
  for (int64_t l = 0; l < static_cast<int64_t>(layers.size()); ++l) {
    const double bytes = static_cast<double>(LayerWeightBytes(c, in.weights, l));
    if (layers[l] == LayerPlace::kCpu) {
      double t = Time(bytes, host_read, flops, r.host_flops_per_s);
      if (batch >= 2 && r.host_rows2_bytes_per_s > 0) {
        t = std::max(t, bytes / r.host_rows2_bytes_per_s);
      }
      s.cpu_s += t;
      if (l == 0 || layers[l - 1] != LayerPlace::kCpu) ++spans;
    } else {
      s.device_s += Time(bytes, r.device_read_bytes_per_s, flops, r.device_flops_per_s);
      if (layers[l] == LayerPlace::kStreamed) {
        s.stream_s += h2d > 0 ? bytes / h2d : std::numeric_limits<double>::infinity();
      }
    }
  }
  // The LM head: its rows read once, batch rows multiplied.
  const double head_bytes = 2.0 * static_cast<double>(c.vocab_size) * c.hidden_size;
  s.device_s +=
      Time(head_bytes, r.device_read_bytes_per_s,
           2.0 * static_cast<double>(c.vocab_size) * c.hidden_size * batch, r.device_flops_per_s);
  s.cpu_s += spans * r.span_s;
  s.chain_s = s.device_s + s.cpu_s;
  s.step_s = std::max(s.chain_s, s.stream_s);
  return s;
}

int32_t RingSlots(int32_t ring_layers, int64_t n_stream, int64_t n_cpu) {
  const int64_t streamed = std::min<int64_t>(ring_layers, n_stream);
  const int64_t cpu = std::min<int64_t>(ring_layers, n_cpu);
  return static_cast<int32_t>(streamed + cpu);
}

std::vector<LayerPlace> StreamedInstead(std::vector<LayerPlace> layers) {
  for (LayerPlace& p : layers) {
    if (p == LayerPlace::kCpu) p = LayerPlace::kStreamed;
  }
  return layers;
}

StepPrediction PredictPlanStep(const PlacementInput& input, const PlacementPlan& plan,
                               int32_t batch) {
  return batch <= plan.cpu_max_rows ? PredictStep(input, plan.layers, batch)
                                    : PredictStep(input, StreamedInstead(plan.layers), batch);
}

std::vector<LayerPlace> ArrangePlacement(const std::vector<int64_t>& layer_bytes, int32_t n_dev,
                                         int32_t n_stream, int32_t n_cpu) {
  const int32_t num_layers = static_cast<int32_t>(layer_bytes.size());
  const int32_t n_off = n_stream + n_cpu;
  std::vector<int32_t> slots;  // the offloaded layers' positions
  int64_t front = 0, spread_bytes = 0;
  for (int32_t l = 0; l < n_dev; ++l) front += layer_bytes[l];
  std::vector<bool> off(num_layers, false);
  for (int32_t j = 0; j < n_off; ++j) off[(2 * int64_t{j} + 1) * num_layers / (2 * n_off)] = true;
  for (int32_t l = 0; l < num_layers; ++l) spread_bytes += off[l] ? 0 : layer_bytes[l];
  for (int32_t l = 0; l < num_layers; ++l) {
    if (spread_bytes == front ? off[l] : l >= n_dev) slots.push_back(l);
  }
  std::vector<LayerPlace> layers(num_layers, LayerPlace::kDevice);
  for (int32_t j = 0; j < n_off; ++j) {
    // The first offloaded layer is the CPU's (when it has any): the copy of
    // the first streamed one then runs beside it, not before the chain.
    const bool cpu =
        ((int64_t{j} + 1) * n_cpu + n_off - 1) / n_off > (int64_t{j} * n_cpu + n_off - 1) / n_off;
    layers[slots[j]] = cpu ? LayerPlace::kCpu : LayerPlace::kStreamed;
  }
  return layers;
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
  int64_t other = OtherWeightBytes(c);
  const bool can_cpu = in.rates.host_read_bytes_per_s > 0 && in.cpu_layers != 0;
  const int64_t ring = int64_t{in.ring_layers} * largest;
  // The most leading layers the card holds beside the other weights and a
  // ring of `rings` times ring_layers slots.
  auto device_layers = [&](int rings) {
    int64_t used = other + rings * ring;
    int32_t n = 0;
    const int32_t most =
        in.max_device_layers >= 0 ? std::min(in.max_device_layers, num_layers) : num_layers;
    while (n < most && used + layer_bytes[n] <= in.device_weight_bytes) used += layer_bytes[n++];
    return used <= in.device_weight_bytes ? n : -1;
  };
  // Untied embeddings leave the card once a layer must (placement_plan.h).
  int64_t host_embedding = 0;
  if (!c.tie_word_embeddings && device_layers(0) != num_layers) {
    host_embedding = EmbeddingTableBytes(c);
    other -= host_embedding;
  }
  const bool can_stream = in.rates.h2d_bytes_per_s > 0;
  PlacementPlan best;
  bool found = false;
  const auto consider = [&](int32_t n_dev, int32_t n_cpu) {
    const int32_t n_off = num_layers - n_dev;
    const std::vector<LayerPlace> layers =
        ArrangePlacement(layer_bytes, n_dev, n_off - n_cpu, n_cpu);
    const StepPrediction batch1 = PredictStep(in, layers, 1);
    if (found && batch1.step_s >= best.batch1.step_s) return;
    found = true;
    best.layers = layers;
    best.device_layers = n_dev;
    best.streamed_layers = n_off - n_cpu;
    best.cpu_layers = n_cpu;
    best.ring_bytes = int64_t{RingSlots(in.ring_layers, n_off - n_cpu, n_cpu)} * largest;
    best.batch1 = batch1;
  };
  // Every offloaded layer passes through the ring in the steps too large
  // for the CPU (ring_layers slots, and as many more when the CPU takes
  // some); of them, the CPU computes those that make the batch-1 step
  // shortest (ties: fewer CPU layers).
  const int32_t whole = device_layers(0);
  if (whole == num_layers) {
    consider(whole, 0);
  } else if (whole >= 0 && can_stream) {
    if (const int32_t n_dev = device_layers(1); n_dev >= 0 && in.cpu_layers <= 0) {
      consider(n_dev, 0);
    }
    if (const int32_t n_dev = device_layers(2); n_dev >= 0 && can_cpu) {
      const int32_t n_off = num_layers - n_dev;
      const int32_t lo = in.cpu_layers > 0 ? std::min(in.cpu_layers, n_off) : 1;
      const int32_t hi = in.cpu_layers > 0 ? lo : n_off;
      for (int32_t n_cpu = lo; n_cpu <= hi; ++n_cpu) consider(n_dev, n_cpu);
    }
  }
  const int64_t offloaded_min = [&] {
    const int32_t n = std::max(device_layers(0), 0);
    int64_t bytes = 0;
    for (int32_t l = n; l < num_layers; ++l) bytes += layer_bytes[l];
    return bytes;
  }();
  if (!found) {
    if (device_layers(0) < 0) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: --gpu-memory-budget leaves %.2f GiB for weights; the LM head%s and norms alone "
          "take %.2f GiB (weights %s)",
          c.name, GiB(in.device_weight_bytes), c.tie_word_embeddings ? " (the embeddings)" : "",
          GiB(other), total.ToString()));
    }
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %.2f GiB of layers do not fit the %.2f GiB of device memory for weights, and "
        "either nothing can stream them (pinned upload rate %.1f GB/s) or the card cannot hold "
        "a ring of %d layers (%.2f GiB) beside the rest",
        c.name, GiB(offloaded_min), GiB(in.device_weight_bytes), in.rates.h2d_bytes_per_s / 1e9,
        in.ring_layers, GiB(ring)));
  }
  // The steps of up to cpu_max_rows rows leave the CPU layers to the CPU
  // (where that is predicted faster than streaming them too; all up to
  // kCpuMaxRows when the count was given).
  if (in.cpu_layers >= 0 && best.cpu_layers > 0) best.cpu_max_rows = kCpuMaxRows;
  for (int32_t rows = 1; in.cpu_layers < 0 && best.cpu_layers > 0 && rows <= kCpuMaxRows; ++rows) {
    if (PredictStep(in, best.layers, rows).step_s >=
        PredictStep(in, StreamedInstead(best.layers), rows).step_s) {
      break;
    }
    best.cpu_max_rows = rows;
  }
  best.model = c.name;
  best.other_bytes = other;
  best.host_embedding_bytes = host_embedding;
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
  const int64_t host = best.streamed_bytes + best.cpu_bytes + host_embedding;
  if (host > in.host_weight_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %.2f GiB of layers (%d streamed, %d on the CPU) and %.2f GiB of embeddings do not "
        "fit the card's %.2f GiB for weights, and --cpu-memory-budget gives %.2f GiB of host "
        "memory for them",
        c.name, GiB(host - host_embedding), best.streamed_layers, best.cpu_layers,
        GiB(host_embedding), GiB(in.device_weight_bytes), GiB(in.host_weight_bytes)));
  }
  best.batch1 = PredictPlanStep(in, best, 1);
  best.expected = PredictPlanStep(in, best, in.expected_batch);
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
      "  device     %3d layers (%s) + %s: %8.2f GiB\n"
      "%s"
      "  streamed   %3d layers (%s): %8.2f GiB pinned\n"
      "  cpu        %3d layers (%s): %8.2f GiB pinned, computed by the CPU in steps of up to %d "
      "rows\n"
      "  ring       %.2f GiB on the card (the offloaded layers a step runs on the card pass "
      "through it)\n"
      "  rates: device read %.0f GB/s, %.0f TFLOP/s; host-to-device %.1f GB/s; host read %.1f "
      "GB/s (%.1f at 2 rows), %.2f TFLOP/s; %.0f us a CPU span; both at once: host read %.1f GB/s, "
      "host-to-device %.1f GB/s\n",
      model, GiB(device_weight_bytes), device_layers, Range(layers, LayerPlace::kDevice),
      host_embedding_bytes > 0 ? "LM head, norms" : "embeddings, LM head, norms", GiB(device_bytes),
      host_embedding_bytes > 0
          ? absl::StrFormat("  host       token embeddings: %8.2f GiB pinned, a step's rows "
                            "read by the card\n",
                            GiB(host_embedding_bytes))
          : "",
      streamed_layers, Range(layers, LayerPlace::kStreamed), GiB(streamed_bytes), cpu_layers,
      Range(layers, LayerPlace::kCpu), GiB(cpu_bytes), cpu_max_rows, GiB(ring_bytes),
      rates.device_read_bytes_per_s / 1e9, rates.device_flops_per_s / 1e12,
      rates.h2d_bytes_per_s / 1e9, rates.host_read_bytes_per_s / 1e9,
      rates.host_rows2_bytes_per_s / 1e9, rates.host_flops_per_s / 1e12, rates.span_s * 1e6,
      rates.host_read_shared_bytes_per_s / 1e9, rates.h2d_shared_bytes_per_s / 1e9);
  absl::StrAppend(&out, line(batch1));
  if (expected.batch != 1) absl::StrAppend(&out, line(expected));
  return out;
}

}  // namespace onecard::engine
