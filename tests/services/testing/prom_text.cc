// The Prometheus text format parser for tests. See prom_text.h.
#include "tests/services/testing/prom_text.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace onecard::testing {
namespace {

bool IsNameChar(char c, bool first) {
  return absl::ascii_isalpha(c) || c == '_' || c == ':' || (!first && absl::ascii_isdigit(c));
}

// Reads a metric or label name at text[*pos]; empty when none.
std::string ReadName(const std::string& text, size_t* pos) {
  const size_t start = *pos;
  while (*pos < text.size() && IsNameChar(text[*pos], *pos == start)) ++*pos;
  return text.substr(start, *pos - start);
}

std::optional<double> ParseValue(absl::string_view text) {
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  double v = 0;
  if (!absl::SimpleAtod(text, &v)) return std::nullopt;
  return v;
}

// Parses `{a="x",b="y"}` starting at text[*pos] == '{'.
bool ParseLabels(const std::string& text, size_t* pos, std::map<std::string, std::string>* out) {
  ++*pos;  // '{'
  while (*pos < text.size() && text[*pos] != '}') {
    const std::string name = ReadName(text, pos);
    if (name.empty() || *pos + 1 >= text.size() || text[*pos] != '=' || text[*pos + 1] != '"') {
      return false;
    }
    *pos += 2;
    std::string value;
    while (*pos < text.size() && text[*pos] != '"') {
      if (text[*pos] == '\\' && *pos + 1 < text.size()) {
        const char e = text[++*pos];
        if (e != '\\' && e != '"' && e != 'n') return false;
        value.push_back(e == 'n' ? '\n' : e);
      } else {
        value.push_back(text[*pos]);
      }
      ++*pos;
    }
    if (*pos >= text.size() || out->count(name) > 0) return false;
    (*out)[name] = value;
    ++*pos;  // closing quote
    if (*pos < text.size() && text[*pos] == ',') ++*pos;
  }
  if (*pos >= text.size()) return false;
  ++*pos;  // '}'
  return true;
}

std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  if (types.count(name) > 0) return name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (absl::EndsWith(name, suffix)) {
      const std::string base = name.substr(0, name.size() - std::strlen(suffix));
      if (types.count(base) > 0) return base;
    }
  }
  return "";
}

absl::Status ParseComment(const std::string& line, int line_no, PromText* out) {
  std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 3));
  if (parts.size() >= 3 && (parts[1] == "TYPE" || parts[1] == "HELP")) {
    if (parts[1] == "HELP") {
      out->help[parts[2]] = parts.size() == 4 ? parts[3] : "";
      return absl::OkStatus();
    }
    static const char* kTypes[] = {"counter", "gauge", "histogram", "summary", "untyped"};
    for (const char* t : kTypes) {
      if (parts.size() == 4 && parts[3] == t) {
        if (!out->types.emplace(parts[2], t).second) break;
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": bad TYPE: ", line));
  }
  return absl::OkStatus();  // other comments are allowed
}

absl::Status ParseSample(const std::string& line, int line_no, PromText* out) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": ", why, ": ", line));
  };
  PromSample sample;
  size_t pos = 0;
  sample.name = ReadName(line, &pos);
  if (sample.name.empty()) return bad("no metric name");
  if (pos < line.size() && line[pos] == '{' && !ParseLabels(line, &pos, &sample.labels)) {
    return bad("bad labels");
  }
  if (pos >= line.size() || line[pos] != ' ') return bad("no value");
  std::vector<std::string> rest = absl::StrSplit(line.substr(pos + 1), ' ', absl::SkipEmpty());
  if (rest.empty() || rest.size() > 2) return bad("expected a value and an optional timestamp");
  const std::optional<double> value = ParseValue(rest[0]);
  if (!value.has_value()) return bad("bad value");
  sample.value = *value;
  if (FamilyOf(sample.name, out->types).empty()) return bad("sample before its # TYPE");
  out->samples.push_back(std::move(sample));
  return absl::OkStatus();
}

// Buckets cumulative, +Inf present and equal to _count, per label set.
absl::Status CheckHistograms(const PromText& text) {
  for (const auto& [family, type] : text.types) {
    if (type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    for (const PromSample& s : text.samples) {
      if (s.name != family + "_bucket") continue;
      auto labels = s.labels;
      const std::optional<double> le = ParseValue(labels["le"]);
      if (!le.has_value()) return absl::InvalidArgumentError(family + ": bucket without le");
      labels.erase("le");
      buckets[labels].emplace_back(*le, s.value);
    }
    for (auto& [labels, series] : buckets) {
      std::sort(series.begin(), series.end());
      for (size_t i = 1; i < series.size(); ++i) {
        if (series[i].second < series[i - 1].second) {
          return absl::InvalidArgumentError(family + ": buckets not cumulative");
        }
      }
      const std::optional<double> count = text.Value(family + "_count", labels);
      if (!std::isinf(series.back().first) || !count.has_value() ||
          *count != series.back().second) {
        return absl::InvalidArgumentError(family + ": +Inf bucket differs from _count");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<double> PromText::Value(const std::string& name,
                                      const std::map<std::string, std::string>& labels) const {
  std::optional<double> found;
  for (const PromSample& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      const auto it = s.labels.find(k);
      match = match && it != s.labels.end() && it->second == v;
    }
    if (!match) continue;
    if (found.has_value()) return std::nullopt;
    found = s.value;
  }
  return found;
}

double PromText::Sum(const std::string& name) const {
  double sum = 0;
  for (const PromSample& s : samples) {
    if (s.name == name) sum += s.value;
  }
  return sum;
}

absl::StatusOr<PromText> ParsePromText(const std::string& text) {
  PromText out;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    const std::string line(absl::StripTrailingAsciiWhitespace(raw));
    if (line.empty()) continue;
    const absl::Status status =
        line[0] == '#' ? ParseComment(line, line_no, &out) : ParseSample(line, line_no, &out);
    if (!status.ok()) return status;
  }
  const absl::Status histograms = CheckHistograms(out);
  if (!histograms.ok()) return histograms;
  return out;
}

}  // namespace onecard::testing
