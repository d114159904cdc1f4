// Tests that the documentation matches the repository:
// - docs/config.md has a section for every message of
//   proto/onecard/v1/config.proto and a row, with a meaning, for each of its
//   fields; a row for a field the proto does not have fails too.
// - every repository path that a tracked Markdown or YAML file names
//   (engine/..., docs/..., helm/..., ...) exists, as a file or a folder
//   (tests/golden/ holds data, not docs, and is left out).
// The proto side comes from the generated descriptors, the file list from
// `git ls-files`; nothing is read from the code the docs describe.
// Runs from the source root (ctest's working directory).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "onecard/v1/config.pb.h"

namespace onecard {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "## `Name`" sections of docs/config.md: name -> the field names of its
// table rows ("| `field` | type | meaning |") and whether each has a meaning.
std::map<std::string, std::map<std::string, bool>> ConfigSections(const std::string& text) {
  std::map<std::string, std::map<std::string, bool>> sections;
  std::string current;
  const std::regex heading("^## `(\\w+)`$");
  const std::regex row("^\\| `(\\w+)` \\| `[^`]+` \\|(.*)\\|$");
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const std::string l(line);
    std::smatch m;
    if (std::regex_match(l, m, heading)) {
      current = m[1];
      sections[current];
    } else if (!current.empty() && std::regex_match(l, m, row)) {
      sections[current][m[1]] = !absl::StripAsciiWhitespace(std::string(m[2])).empty();
    }
  }
  return sections;
}

TEST(DocsTest, ConfigReferenceDocumentsEveryFieldOfConfigProto) {
  const std::string text = ReadFile("docs/config.md");
  ASSERT_FALSE(text.empty()) << "docs/config.md is missing";
  const auto sections = ConfigSections(text);
  const google::protobuf::FileDescriptor& file = *v1::OnecardConfig::descriptor()->file();
  ASSERT_GT(file.message_type_count(), 5);
  for (int i = 0; i < file.message_type_count(); ++i) {
    const google::protobuf::Descriptor& message = *file.message_type(i);
    const auto section = sections.find(message.name());
    ASSERT_NE(section, sections.end()) << "docs/config.md has no section for " << message.name();
    std::set<std::string> fields;
    for (int f = 0; f < message.field_count(); ++f) {
      const std::string& name = message.field(f)->name();
      fields.insert(name);
      const auto row = section->second.find(name);
      ASSERT_NE(row, section->second.end())
          << "docs/config.md: " << message.name() << "." << name << " is not documented";
      EXPECT_TRUE(row->second) << message.name() << "." << name << " has no meaning written";
    }
    for (const auto& [name, described] : section->second) {
      EXPECT_TRUE(fields.count(name) > 0) << "docs/config.md documents " << message.name() << "."
                                          << name << ", which config.proto does not have";
    }
  }
}

std::vector<std::string> TrackedDocFiles() {
  std::vector<std::string> files;
  FILE* pipe = popen("git ls-files '*.md' '*.yml' '*.yaml' ':!tests/golden/'", "r");
  if (pipe == nullptr) return files;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    files.emplace_back(absl::StripTrailingAsciiWhitespace(buffer));
  }
  pclose(pipe);
  return files;
}

// Paths that exist only once something has run (git-ignored outputs).
bool MadeAtRunTime(const std::string& path) {
  for (const char* prefix : {"bench/results/local/", "build/", "models/"}) {
    if (path.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

TEST(DocsTest, EveryRepositoryPathTheDocsNameExists) {
  const std::vector<std::string> files = TrackedDocFiles();
  ASSERT_FALSE(files.empty()) << "git ls-files found no docs (not run from the source root?)";
  // A path starts at a top-level folder of the repository, after a space,
  // a backtick, a parenthesis or the line's start.
  const std::regex path_re(
      "(^|[\\s`(\\[])((engine|services|router|tools|deploy|helm|tests|bench|scripts|docs|proto|"
      "cmake)/[A-Za-z0-9_./-]*[A-Za-z0-9_/])([*{<]?)");
  int checked = 0;
  for (const std::string& file : files) {
    const std::string text = ReadFile(file);
    for (std::sregex_iterator it(text.begin(), text.end(), path_re), end; it != end; ++it) {
      const std::string path = (*it)[2];
      if (!(*it)[4].str().empty() || MadeAtRunTime(path)) continue;  // a pattern, an output
      ++checked;
      // A test named by its binary (tests/x/y_test) counts when y_test.cc exists.
      const bool exists = std::filesystem::exists(path) || std::filesystem::exists(path + ".cc");
      EXPECT_TRUE(exists) << file << " names " << path << ", which does not exist";
    }
  }
  EXPECT_GT(checked, 50);
}

}  // namespace
}  // namespace onecard
