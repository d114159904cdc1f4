// Request classes, mixes and load specs (see load_spec.h).
// Tested by tests/tools/bench/serve/load_spec_test.cc.
#include "tools/bench/serve/load_spec.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace onecard::bench::serve {
namespace {

absl::Status Bad(absl::string_view item, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("--mix: '", item, "': ", problem));
}

// "PROMPT/NEW[xTURNS][*BURST]"
absl::Status ParseShape(absl::string_view item, absl::string_view shape, RequestClass* c) {
  std::vector<absl::string_view> burst = absl::StrSplit(shape, absl::MaxSplits('*', 1));
  if (burst.size() == 2 && (!absl::SimpleAtoi(burst[1], &c->burst) || c->burst < 1)) {
    return Bad(item, "burst must be an integer >= 1");
  }
  std::vector<absl::string_view> turns = absl::StrSplit(burst[0], 'x');
  if (turns.size() > 2) return Bad(item, "expected PROMPT/NEW or PROMPT/NEWxTURNS");
  if (turns.size() == 2 && (!absl::SimpleAtoi(turns[1], &c->turns) || c->turns < 1)) {
    return Bad(item, "turns must be an integer >= 1");
  }
  std::vector<absl::string_view> parts = absl::StrSplit(turns[0], '/');
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &c->prompt_tokens) ||
      !absl::SimpleAtoi(parts[1], &c->max_tokens) || c->prompt_tokens < 1 || c->max_tokens < 1) {
    return Bad(item, "expected PROMPT/NEW token counts >= 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestClass> ParseClass(absl::string_view item) {
  RequestClass c;
  std::vector<absl::string_view> name_rest = absl::StrSplit(item, absl::MaxSplits('=', 1));
  if (name_rest.size() != 2 || name_rest[0].empty()) return Bad(item, "expected NAME=...");
  c.name = std::string(name_rest[0]);
  std::vector<absl::string_view> rest_priority =
      absl::StrSplit(name_rest[1], absl::MaxSplits('@', 1));
  if (rest_priority.size() == 2) {
    absl::StatusOr<onecard::v1::Priority> p = ParsePriority(std::string(rest_priority[1]));
    if (!p.ok()) return Bad(item, p.status().message());
    c.priority = *p;
  }
  std::vector<absl::string_view> weight_shape =
      absl::StrSplit(rest_priority[0], absl::MaxSplits(':', 1));
  if (weight_shape.size() != 2 || !absl::SimpleAtod(weight_shape[0], &c.weight) ||
      !(c.weight > 0)) {
    return Bad(item, "expected WEIGHT:PROMPT/NEW with a weight > 0");
  }
  if (absl::Status s = ParseShape(item, weight_shape[1], &c); !s.ok()) return s;
  return c;
}

}  // namespace

std::vector<RequestClass> ServeMixClasses() {
  return {
      RequestClass{.name = "short-qa", .prompt_tokens = 50, .max_tokens = 50},
      RequestClass{.name = "long-generation", .prompt_tokens = 200, .max_tokens = 1000},
      RequestClass{.name = "long-context", .prompt_tokens = 4000, .max_tokens = 200},
      RequestClass{.name = "multi-turn", .prompt_tokens = 100, .max_tokens = 100, .turns = 5},
  };
}

absl::StatusOr<onecard::v1::Priority> ParsePriority(const std::string& name) {
  std::string n = absl::AsciiStrToLower(name);
  if (n == "interactive" || n == "priority_interactive") return onecard::v1::PRIORITY_INTERACTIVE;
  if (n == "standard" || n == "priority_standard") return onecard::v1::PRIORITY_STANDARD;
  if (n == "batch" || n == "priority_batch") return onecard::v1::PRIORITY_BATCH;
  return absl::InvalidArgumentError(
      absl::StrCat("priority '", name, "': expected interactive, standard or batch"));
}

absl::StatusOr<std::vector<RequestClass>> ParseMix(const std::string& mix) {
  std::vector<RequestClass> presets = ServeMixClasses();
  if (mix.empty() || mix == "serve-mix") return presets;
  for (const RequestClass& c : presets) {
    if (c.name == mix) return std::vector<RequestClass>{c};
  }
  std::vector<RequestClass> classes;
  for (absl::string_view item : absl::StrSplit(mix, ',', absl::SkipWhitespace())) {
    absl::StatusOr<RequestClass> c = ParseClass(absl::StripAsciiWhitespace(item));
    if (!c.ok()) return c.status();
    for (const RequestClass& other : classes) {
      if (other.name == c->name) return Bad(item, "class name used twice");
    }
    classes.push_back(*c);
  }
  if (classes.empty()) return absl::InvalidArgumentError("--mix: no classes");
  return classes;
}

absl::Status ValidateLoadSpec(const LoadSpec& s) {
  if (s.target.empty()) return absl::InvalidArgumentError("--target: required (host:port)");
  if (s.mix.empty()) return absl::InvalidArgumentError("--mix: no classes");
  if (s.mode == ArrivalMode::kClosedLoop && s.users < 1) {
    return absl::InvalidArgumentError("--users: must be >= 1");
  }
  if (s.mode == ArrivalMode::kPoisson && !(s.rate_per_second > 0)) {
    return absl::InvalidArgumentError("--rate: must be > 0");
  }
  if (s.max_in_flight < 1) return absl::InvalidArgumentError("--max-in-flight: must be >= 1");
  if (s.num_requests <= 0 && s.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--requests or --duration: one must be set");
  }
  for (const RequestClass& c : s.mix) {
    if (c.burst < 1 || c.turns < 1 || !(c.weight > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mix: class ", c.name, " needs burst >= 1, turns >= 1 and a weight > 0"));
    }
    if (c.prompt_tokens * c.turns + c.max_tokens * c.turns > 1 << 20) {
      return absl::InvalidArgumentError(absl::StrCat("--mix: class ", c.name, " is too long"));
    }
  }
  return absl::OkStatus();
}

}  // namespace onecard::bench::serve
