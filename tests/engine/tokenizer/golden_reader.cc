// Golden file reader for the tokenizer tests (see golden_reader.h).
#include "tests/engine/tokenizer/golden_reader.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace onecard::engine::testing {
namespace {

using json = nlohmann::json;

std::vector<int32_t> Ids(const json& array) {
  std::vector<int32_t> ids;
  for (const json& v : array) ids.push_back(v.get<int32_t>());
  return ids;
}

int32_t IdOrNone(const json& v) { return v.is_null() ? -1 : v.get<int32_t>(); }

}  // namespace

std::string GoldenDir(const std::string& name) {
  return absl::StrCat("tests/golden/tokenizer/", name);
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  return path;
}

absl::StatusOr<Golden> ReadGolden(const std::string& name) {
  const std::string path = GoldenDir(name) + "/golden.json";
  const json doc = json::parse(ReadFileOrDie(path), nullptr, false);
  if (doc.is_discarded()) return absl::InvalidArgumentError(path + ": not JSON");
  Golden g;
  const json& info = doc["info"];
  g.vocab_size = info["vocab_size"].get<int32_t>();
  g.bos_id = IdOrNone(info["bos_id"]);
  g.eos_id = IdOrNone(info["eos_id"]);
  g.special_ids = Ids(info["special_ids"]);
  for (const auto& [content, id] : info["token_ids"].items())
    g.token_ids[content] = id.get<int32_t>();
  for (const json& c : doc["cases"]) {
    GoldenCase gc{c["text"].get<std::string>(),    Ids(c["ids"]),
                  Ids(c["ids_with_special"]),      c["words"].get<std::vector<std::string>>(),
                  c["decoded"].get<std::string>(), c["decoded_skip_special"].get<std::string>()};
    g.cases.push_back(std::move(gc));
  }
  for (const json& c : doc["chats"]) {
    GoldenChat chat;
    for (const json& m : c["messages"]) {
      chat.messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    chat.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    chat.text = c["text"].get<std::string>();
    chat.ids = Ids(c["ids"]);
    g.chats.push_back(std::move(chat));
  }
  return g;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGoldenTokenizer(const std::string& name) {
  const std::string dir = GoldenDir(name);
  return Tokenizer::FromHfJson(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
}

}  // namespace onecard::engine::testing
