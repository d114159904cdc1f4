// Range checks of configured values. See config_bounds.h.
#include "services/common/config_bounds.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/common/host_info.h"

namespace onecard::services {
namespace {

absl::Status Outside(absl::string_view field, absl::string_view value, absl::string_view lo,
                     absl::string_view hi, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", value, " is outside [", lo, ", ", hi,
                                                 "]", why.empty() ? "" : " (", why,
                                                 why.empty() ? "" : ")"));
}

}  // namespace

absl::Status CheckRange(absl::string_view field, int64_t value, int64_t lo, int64_t hi,
                        absl::string_view why) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return Outside(field, absl::StrCat(value), absl::StrCat(lo), absl::StrCat(hi), why);
}

absl::Status CheckDurationRange(absl::string_view field, absl::Duration value, absl::Duration lo,
                                absl::Duration hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return Outside(field, absl::FormatDuration(value), absl::FormatDuration(lo),
                 absl::FormatDuration(hi), "");
}

absl::Status CheckDoubleRange(absl::string_view field, double value, double lo, double hi) {
  if (std::isfinite(value) && value >= lo && value <= hi) return absl::OkStatus();
  return Outside(field, absl::StrCat(value), absl::StrCat(lo), absl::StrCat(hi), "");
}

absl::Status CheckThreads(absl::string_view field, int64_t value) {
  return CheckRange(
      field, value, 0, MaxConfiguredThreads(),
      absl::StrCat("4 threads a core, at most 1024; this host has ", HostCores(), " cores"));
}

absl::Status CheckHostBytes(absl::string_view field, int64_t value) {
  return CheckRange(field, value, 0, HostMemoryBytes(),
                    absl::StrCat("the host's memory is ", HostMemoryBytes(), " bytes"));
}

}  // namespace onecard::services
