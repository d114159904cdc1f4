// Help text and flag parsing for every main(). See command_line.h.
#include "services/common/command_line.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/common/log.h"
#include "services/common/flag_names.h"

ABSL_FLAG(std::string, log_level, "",
          "debug, info, warn or error: log lines below it are dropped (default info; overrides "
          "the config's log.level)");
ABSL_FLAG(std::string, log_format, "",
          "text or json (one JSON object a line, for log collectors; default text; overrides "
          "the config's log.format)");

namespace onecard::services {
namespace {

// Applies --log-level / --log-format; InvalidArgument naming the flag.
absl::Status ApplyLogFlags() {
  if (const std::string level = absl::GetFlag(FLAGS_log_level); !level.empty()) {
    absl::StatusOr<LogLevel> parsed = ParseLogLevel(level);
    if (!parsed.ok())
      return absl::InvalidArgumentError(absl::StrCat("--log-level: ", parsed.status().message()));
    SetLogLevel(*parsed);
  }
  if (const std::string format = absl::GetFlag(FLAGS_log_format); !format.empty()) {
    absl::StatusOr<LogFormat> parsed = ParseLogFormat(format);
    if (!parsed.ok())
      return absl::InvalidArgumentError(absl::StrCat("--log-format: ", parsed.status().message()));
    SetLogFormat(*parsed);
  }
  return absl::OkStatus();
}

std::string Dashed(absl::string_view name) { return absl::StrReplaceAll(name, {{"_", "-"}}); }

// Flags the binary registers itself (absl's own, such as --flagfile, are not
// listed).
std::vector<std::string> ProgramFlagNames() {
  std::vector<std::string> names;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->IsRetired() || absl::StrContains(flag->Filename(), "absl/")) continue;
    names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

void AppendFlag(absl::string_view name, std::string* out) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr) {
    absl::StrAppend(out, "  --", Dashed(name), "  (not defined)\n");
    return;
  }
  const std::string def = flag->DefaultValue();
  absl::StrAppend(out, "  --", Dashed(name), def.empty() ? "" : absl::StrCat("=", def), "\n      ",
                  flag->Help(), "\n");
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "--name=value" / "--name" [value]: the name and, when inline, the value.
struct FlagArg {
  std::string name;
  std::optional<std::string> value;
};
FlagArg SplitFlagArg(absl::string_view arg) {
  arg.remove_prefix(arg.size() > 1 && arg[1] == '-' ? 2 : 1);
  const size_t eq = arg.find('=');
  if (eq == absl::string_view::npos) return {std::string(arg), std::nullopt};
  return {std::string(arg.substr(0, eq)), std::string(arg.substr(eq + 1))};
}

absl::Status UnknownFlag(absl::string_view name) {
  std::string message = absl::StrCat("unknown flag --", Dashed(name));
  if (std::optional<std::string> near = NearestName(name, ProgramFlagNames())) {
    absl::StrAppend(&message, "; did you mean --", Dashed(*near), "?");
  }
  return absl::InvalidArgumentError(message);
}

// Sets one flag from args[*i] (and args[*i + 1] when the value follows).
absl::Status SetFlag(const std::vector<std::string>& args, size_t* i) {
  FlagArg arg = SplitFlagArg(args[*i]);
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(arg.name);
  if (flag == nullptr && !arg.value && absl::StartsWith(arg.name, "no")) {
    absl::CommandLineFlag* positive = absl::FindCommandLineFlag(arg.name.substr(2));
    if (positive != nullptr && positive->IsOfType<bool>()) {
      flag = positive;
      arg.value = "false";
    }
  }
  if (flag == nullptr || flag->IsRetired()) return UnknownFlag(arg.name);
  if (!arg.value && flag->IsOfType<bool>()) arg.value = "true";
  if (!arg.value) {
    if (*i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--", Dashed(arg.name), ": missing value"));
    }
    arg.value = args[++*i];
  }
  std::string error;
  if (!flag->ParseFrom(*arg.value, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", Dashed(arg.name), "=", *arg.value, ": ", error));
  }
  return absl::OkStatus();
}

}  // namespace

FlagGroup ServiceIdentityFlagGroup() {
  return {"Service identity (docs/security.md)",
          {"worker_token_file", "router_token_file", "tls_cert", "tls_key", "tls_ca"}};
}

FlagGroup LoggingFlagGroup() { return {"Logging", {"log_level", "log_format"}}; }

bool LogLevelFlagGiven() { return !absl::GetFlag(FLAGS_log_level).empty(); }
bool LogFormatFlagGiven() { return !absl::GetFlag(FLAGS_log_format).empty(); }

std::string ServiceHelpEpilog() {
  return "Flags override single fields of --config (docs/config.md).\n"
         "gRPC: grpc.health.v1 per service name, server reflection.\n"
         "Exit status: 0 after SIGTERM or Ctrl-C (the service drains first), 1 when it cannot\n"
         "start, 2 on a bad flag or config.";
}

std::string HelpText(const CommandLineSpec& spec) {
  std::string out = absl::StrCat("Usage:\n");
  for (const std::string& line : spec.usage)
    absl::StrAppend(&out, "  ", spec.program, " ", line, "\n");
  if (!spec.description.empty()) absl::StrAppend(&out, "\n", spec.description, "\n");
  if (!spec.subcommands.empty()) {
    size_t width = 0;
    for (const Subcommand& c : spec.subcommands) width = std::max(width, c.name.size());
    absl::StrAppend(&out, "\nSubcommands:\n");
    for (const Subcommand& c : spec.subcommands) {
      absl::StrAppend(&out, "  ", c.name, std::string(width + 2 - c.name.size(), ' '), c.summary,
                      "\n");
    }
  }
  std::vector<std::string> listed;
  std::vector<FlagGroup> groups = spec.groups;
  groups.push_back(LoggingFlagGroup());
  for (const FlagGroup& group : groups) {
    absl::StrAppend(&out, "\n", group.title, ":\n");
    for (const std::string& name : group.flags) AppendFlag(name, &out);
    listed.insert(listed.end(), group.flags.begin(), group.flags.end());
  }
  std::string others;
  for (const std::string& name : ProgramFlagNames()) {
    if (std::find(listed.begin(), listed.end(), name) == listed.end()) AppendFlag(name, &others);
  }
  if (!others.empty()) absl::StrAppend(&out, "\nOther flags:\n", others);
  absl::StrAppend(&out, "\nFlag names take dashes or underscores (--max-tokens, --max_tokens).\n");
  if (!spec.epilog.empty()) absl::StrAppend(&out, "\n", spec.epilog, "\n");
  return out;
}

std::optional<std::string> NearestName(absl::string_view name,
                                       const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(name, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

bool WantsHelp(const std::vector<std::string>& args) {
  bool first_positional = true;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return false;
    if (a == "-h" || a == "--help" || a == "-help") return true;
    if (a.empty() || a[0] != '-') {
      if (first_positional && a == "help") return true;
      first_positional = false;
    }
  }
  return false;
}

absl::StatusOr<std::vector<std::string>> ParseFlagArgs(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  if (!args.empty()) positional.push_back(args[0]);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      positional.insert(positional.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      positional.push_back(a);
      continue;
    }
    if (absl::Status s = SetFlag(args, &i); !s.ok()) return s;
  }
  return positional;
}

CommandLine ParseCommandLine(const CommandLineSpec& spec, int argc, char** argv) {
  const std::vector<std::string> args = NormalizeFlagNames(argc, argv);
  if (WantsHelp(args)) {
    std::cout << HelpText(spec) << std::flush;
    return {.args = args, .exit_code = 0};
  }
  absl::StatusOr<std::vector<std::string>> parsed = ParseFlagArgs(args);
  absl::Status status = parsed.status();
  if (status.ok() && spec.flags_only && parsed->size() > 1) {
    status = absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", (*parsed)[1], "': it takes flags only"));
  }
  if (status.ok()) status = ApplyLogFlags();
  if (!status.ok()) {
    std::cerr << spec.program << ": " << status.message() << " (see " << spec.program
              << " --help)\n";
    return {.args = args, .exit_code = 2};
  }
  return {.args = *std::move(parsed), .exit_code = std::nullopt};
}

}  // namespace onecard::services
