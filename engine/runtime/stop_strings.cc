// StopStringMatcher implementation (see stop_strings.h).
// Tested by tests/engine/runtime/stop_strings_test.cc.
#include "engine/runtime/stop_strings.h"

#include <algorithm>

namespace onecard::engine {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings) {
    if (s.empty()) continue;
    max_stop_size_ = std::max(max_stop_size_, s.size());
    stop_strings_.push_back(std::move(s));
  }
}

bool StopStringMatcher::Push(std::string_view text, std::string* emit) {
  std::string buffer = held_;
  buffer.append(text);
  held_.clear();
  size_t match = std::string::npos;
  for (const std::string& stop : stop_strings_) {
    match = std::min(match, buffer.find(stop));
  }
  if (match != std::string::npos) {
    *emit = buffer.substr(0, match);
    return true;
  }
  const size_t hold = HoldFrom(buffer);
  *emit = buffer.substr(0, hold);
  held_ = buffer.substr(hold);
  return false;
}

std::string StopStringMatcher::TakeHeld() {
  std::string out;
  out.swap(held_);
  return out;
}

size_t StopStringMatcher::HoldFrom(std::string_view text) const {
  // Only a suffix shorter than the longest stop string can be a proper prefix.
  const size_t first = text.size() >= max_stop_size_ ? text.size() - max_stop_size_ + 1 : 0;
  for (size_t p = first; p < text.size(); ++p) {
    const std::string_view suffix = text.substr(p);
    for (const std::string& stop : stop_strings_) {
      if (suffix.size() < stop.size() && std::string_view(stop).starts_with(suffix)) return p;
    }
  }
  return text.size();
}

}  // namespace onecard::engine
