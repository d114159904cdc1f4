// The command line of every onecard binary: its own --help (usage, what it
// does, subcommands one line each, its flags in titled groups with their
// defaults and descriptions, taken from the absl flag registry), flag
// parsing with "--max-tokens" = "--max_tokens" (flag_names.h), and errors
// that say what went wrong: an unknown flag names the nearest known one, a
// bad value quotes the flag. Each main() describes itself in a
// CommandLineSpec and calls ParseCommandLine first. Every binary also takes
// --log-level and --log-format (engine/common/log.h), listed under
// "Logging" in its help and applied by ParseCommandLine.
// Tested by tests/services/common/command_line_test.cc and, binary by
// binary, by tests/integration/cli_test.cc.
#ifndef ONECARD_SERVICES_COMMON_COMMAND_LINE_H_
#define ONECARD_SERVICES_COMMON_COMMAND_LINE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace onecard::services {

struct FlagGroup {
  std::string title;               // "Model", "Sampling", ...
  std::vector<std::string> flags;  // absl names (underscores)
};

struct Subcommand {
  std::string name;     // "generate"
  std::string summary;  // one line
};

struct CommandLineSpec {
  std::string program;             // "onecard-router"
  std::vector<std::string> usage;  // synopsis lines, without the program name
  std::string description;         // a paragraph; may hold newlines
  std::vector<Subcommand> subcommands;
  std::vector<FlagGroup> groups;
  std::string epilog;  // after the flags (environment variables, examples)
  // The services take flags only: a positional argument (a flag's value
  // passed on its own, a misspelt "-flag") is a usage error naming it.
  bool flags_only = false;
};

// The service-identity flags (service_auth_flags.h) as one group, and the
// closing lines of a service's help, shared by the three services.
FlagGroup ServiceIdentityFlagGroup();
std::string ServiceHelpEpilog();

// The logging flags, listed last in every help text.
FlagGroup LoggingFlagGroup();
// Whether --log-level / --log-format were given: a service applies its
// config's `log` section only to what the flags left unset.
bool LogLevelFlagGiven();
bool LogFormatFlagGiven();

// The --help text. A flag of a group that is not registered is listed as
// "(not defined)" (command_line_test keeps the specs honest); flags the
// binary registers outside absl and outside every group follow under
// "Other flags", so none is left out.
std::string HelpText(const CommandLineSpec& spec);

// The candidate closest to `name` by edit distance, when close enough to be
// a plausible typo (distance <= max(2, size / 3)); nullopt otherwise.
std::optional<std::string> NearestName(absl::string_view name,
                                       const std::vector<std::string>& candidates);

struct CommandLine {
  std::vector<std::string> args;  // the program name, then the positional arguments
  // Set when main() should return at once: 0 after --help (printed on
  // stdout), 2 after a usage error (printed on stderr).
  std::optional<int> exit_code;
};

// Whether `args` (program name first) ask for help: "-h", "--help",
// "-help" before a "--", or "help" as the first positional argument.
bool WantsHelp(const std::vector<std::string>& args);

// Sets the registered absl flags from `args` (program name first, names
// already normalized) and returns the program name and the positional
// arguments; InvalidArgument naming the flag otherwise.
absl::StatusOr<std::vector<std::string>> ParseFlagArgs(const std::vector<std::string>& args);

// Parses argv into the registered absl flags: "--name=value", "--name
// value", "--flag"/"--noflag" for booleans, "--" ends the flags; "-h",
// "--help", "-help" or a first positional "help" prints HelpText. An
// unknown flag or a value its flag rejects is a usage error naming it
// (with "did you mean --x?" when NearestName finds one); so is an unknown
// --log-level or --log-format, which are applied on success.
CommandLine ParseCommandLine(const CommandLineSpec& spec, int argc, char** argv);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_COMMAND_LINE_H_
