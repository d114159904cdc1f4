// NormalizeFlagNames (see flag_names.h).
// Tested by tests/services/common/flag_names_test.cc.
#include "services/common/flag_names.h"

#include <algorithm>
#include <cctype>

namespace onecard::services {

std::vector<std::string> NormalizeFlagNames(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  bool after_double_dash = false;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") after_double_dash = true;
    if (after_double_dash || a.rfind("--", 0) != 0) continue;
    const size_t end = std::min(a.find('='), a.size());
    // Not a flag name (a value that starts with "--", e.g. "--a 1 --b 2"):
    // left as it is.
    const bool name = std::all_of(a.begin() + 2, a.begin() + end, [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
    if (name) std::replace(a.begin() + 2, a.begin() + end, '-', '_');
  }
  return args;
}

}  // namespace onecard::services
