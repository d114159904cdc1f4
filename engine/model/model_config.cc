// ModelConfig::Validate and ArchitectureName. Sizes are bounded so that a
// corrupt config cannot ask for absurd allocations.
// Tested by tests/engine/model/model_config_test.cc.
#include "engine/model/model_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace onecard::engine {
namespace {

absl::Status FieldError(const char* field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("ModelConfig.", field, ": ", what));
}

absl::Status CheckRange(const char* field, int64_t value, int64_t max) {
  if (value <= 0 || value > max) {
    return FieldError(field, absl::StrCat(value, " is outside [1, ", max, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(const char* field, float value) {
  if (!std::isfinite(value) || value <= 0) {
    return FieldError(field, absl::StrCat(value, " is not a positive finite number"));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenId(const char* field, int32_t id, int64_t vocab_size) {
  if (id < -1 || id >= vocab_size) {
    return FieldError(field, absl::StrCat(id, " is outside [-1, vocab_size ", vocab_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateSizes(const ModelConfig& c) {
  struct Bound {
    const char* field;
    int64_t value;
    int64_t max;
  };
  const Bound bounds[] = {
      {"vocab_size", c.vocab_size, int64_t{1} << 24},
      {"hidden_size", c.hidden_size, int64_t{1} << 18},
      {"intermediate_size", c.intermediate_size, int64_t{1} << 20},
      {"num_layers", c.num_layers, 4096},
      {"num_heads", c.num_heads, 4096},
      {"num_kv_heads", c.num_kv_heads, 4096},
      {"head_dim", c.head_dim, 4096},
      {"max_position_embeddings", c.max_position_embeddings, int64_t{1} << 24},
  };
  for (const Bound& b : bounds) {
    absl::Status status = CheckRange(b.field, b.value, b.max);
    if (!status.ok()) return status;
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return FieldError("num_kv_heads",
                      absl::StrCat(c.num_kv_heads, " does not divide num_heads ", c.num_heads));
  }
  if (c.head_dim % 2 != 0) {
    return FieldError("head_dim", absl::StrCat(c.head_dim, " is odd (RoPE rotates pairs)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRopeScaling(const RopeScaling& r) {
  if (!r.enabled) return absl::OkStatus();
  if (!std::isfinite(r.factor) || r.factor < 1.0f) {
    return FieldError("rope_scaling.factor", absl::StrCat(r.factor, " is not >= 1"));
  }
  absl::Status status = CheckPositive("rope_scaling.low_freq_factor", r.low_freq_factor);
  if (!status.ok()) return status;
  if (!std::isfinite(r.high_freq_factor) || r.high_freq_factor <= r.low_freq_factor) {
    return FieldError(
        "rope_scaling.high_freq_factor",
        absl::StrCat(r.high_freq_factor, " is not above low_freq_factor ", r.low_freq_factor));
  }
  return CheckRange("rope_scaling.original_max_position_embeddings",
                    r.original_max_position_embeddings, int64_t{1} << 24);
}

}  // namespace

absl::Status ModelConfig::Validate() const {
  absl::Status status = ValidateSizes(*this);
  if (status.ok()) status = CheckPositive("rms_norm_eps", rms_norm_eps);
  if (status.ok()) status = CheckPositive("rope_theta", rope_theta);
  if (status.ok()) status = ValidateRopeScaling(rope_scaling);
  if (status.ok()) status = CheckTokenId("bos_token_id", bos_token_id, vocab_size);
  if (status.ok()) status = CheckTokenId("eos_token_id", eos_token_id, vocab_size);
  return status;
}

std::string ArchitectureName(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kMistral:
      return "mistral";
  }
  return "unknown";
}

}  // namespace onecard::engine
