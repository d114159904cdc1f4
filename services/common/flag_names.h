// NormalizeFlagNames: lets the services and tools take "--max-tokens" as
// well as absl's "--max_tokens": in every "--name" or "--name=value"
// argument, '-' inside the name becomes '_'. Values and positional
// arguments are untouched. Used by ParseCommandLine (command_line.h), which
// every main() calls.
// Tested by tests/services/common/flag_names_test.cc.
#ifndef ONECARD_SERVICES_COMMON_FLAG_NAMES_H_
#define ONECARD_SERVICES_COMMON_FLAG_NAMES_H_

#include <string>
#include <vector>

namespace onecard::services {

std::vector<std::string> NormalizeFlagNames(int argc, char** argv);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_FLAG_NAMES_H_
