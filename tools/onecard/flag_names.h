// NormalizeFlagNames: lets the tools take "--max-tokens" as well as absl's
// "--max_tokens": in every "--name" or "--name=value" argument, '-' inside
// the name becomes '_'. Values and positional arguments are untouched.
// Tested by tests/tools/onecard/flag_names_test.cc.
#ifndef ONECARD_TOOLS_ONECARD_FLAG_NAMES_H_
#define ONECARD_TOOLS_ONECARD_FLAG_NAMES_H_

#include <string>
#include <vector>

namespace onecard::tools {

std::vector<std::string> NormalizeFlagNames(int argc, char** argv);

}  // namespace onecard::tools

#endif  // ONECARD_TOOLS_ONECARD_FLAG_NAMES_H_
