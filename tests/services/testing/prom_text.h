// A strict parser of the Prometheus text exposition format (version 0.0.4)
// for tests: prometheus-cpp can write the format but not read it. Checks
// metric and label names, label value escapes, sample values, that every
// sample belongs to a family with a # TYPE line, and that each histogram's
// buckets are cumulative and end with le="+Inf" equal to _count.
// Tested by tests/services/testing/prom_text_test.cc.
#ifndef ONECARD_TESTS_SERVICES_TESTING_PROM_TEXT_H_
#define ONECARD_TESTS_SERVICES_TESTING_PROM_TEXT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace onecard::testing {

struct PromSample {
  std::string name;  // as written: x_bucket, x_sum, x_count for histograms
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromText {
  std::map<std::string, std::string> types;  // family name -> counter/gauge/...
  std::map<std::string, std::string> help;
  std::vector<PromSample> samples;

  // The value of the one sample with this name whose labels include
  // `labels`; nullopt when none or several match.
  std::optional<double> Value(const std::string& name,
                              const std::map<std::string, std::string>& labels = {}) const;
  // The sum over every sample with this name (e.g. across label values).
  double Sum(const std::string& name) const;
};

// InvalidArgument naming the line on any deviation from the format.
absl::StatusOr<PromText> ParsePromText(const std::string& text);

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_SERVICES_TESTING_PROM_TEXT_H_
