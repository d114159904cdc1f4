// Tests of Tokenizer::FromGguf on small GGUF files written here from the
// golden tiny Llama-3 / Qwen2 tokenizer.json files (as llama.cpp's converter
// would: tokens by id, "a b" merges, token_type 3 for special tokens, pre
// name): HF's golden ids and chat renderings must come out, and broken
// metadata gives errors naming the file and key. The real SmolLM2 GGUF is
// tested by gguf_smollm2_test.cc.
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/golden_reader.h"

namespace onecard::engine {
namespace {

using json = nlohmann::json;
using ::onecard::engine::testing::GoldenDir;
using ::onecard::engine::testing::ReadFileOrDie;
using ::onecard::engine::testing::ReadGolden;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// A GGUF v3 writer of metadata only (no tensors).
class GgufWriter {
 public:
  void String(const std::string& key, const std::string& value) {
    Key(key, 8);
    Str(value);
  }
  void Int32(const std::string& key, int32_t value) {
    Key(key, 5);
    Pod(value);
  }
  void Bool(const std::string& key, bool value) {
    Key(key, 7);
    Pod(static_cast<uint8_t>(value));
  }
  void Strings(const std::string& key, const std::vector<std::string>& values) {
    Key(key, 9);
    Pod(uint32_t{8});
    Pod(static_cast<uint64_t>(values.size()));
    for (const auto& v : values) Str(v);
  }
  void Int32s(const std::string& key, const std::vector<int32_t>& values) {
    Key(key, 9);
    Pod(uint32_t{5});
    Pod(static_cast<uint64_t>(values.size()));
    for (const int32_t v : values) Pod(v);
  }
  std::string Write(const std::string& name) const {
    std::string out = "GGUF";
    const uint32_t version = 3;
    const uint64_t tensors = 0;
    out.append(reinterpret_cast<const char*>(&version), 4);
    out.append(reinterpret_cast<const char*>(&tensors), 8);
    out.append(reinterpret_cast<const char*>(&count_), 8);
    out += body_;
    out.resize((out.size() + 31) / 32 * 32, '\0');
    return ::onecard::engine::testing::WriteTempFile(name, out);
  }

 private:
  template <typename T>
  void Pod(T v) {
    body_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void Str(const std::string& s) {
    Pod(static_cast<uint64_t>(s.size()));
    body_ += s;
  }
  void Key(const std::string& key, uint32_t type) {
    ++count_;
    Str(key);
    Pod(type);
  }
  std::string body_;
  uint64_t count_ = 0;
};

// The metadata llama.cpp's converter writes for a golden HF tokenizer.
struct TokenizerMetadata {
  std::vector<std::string> tokens;
  std::vector<std::string> merges;
  std::vector<int32_t> types;
  std::string chat_template;
};

TokenizerMetadata FromHf(const std::string& name) {
  const json doc = json::parse(ReadFileOrDie(GoldenDir(name) + "/tokenizer.json"));
  const json config = json::parse(ReadFileOrDie(GoldenDir(name) + "/tokenizer_config.json"));
  TokenizerMetadata m;
  for (const auto& [token, id] : doc["model"]["vocab"].items()) {
    if (id.get<size_t>() >= m.tokens.size()) m.tokens.resize(id.get<size_t>() + 1);
    m.tokens[id.get<size_t>()] = token;
  }
  m.types.assign(m.tokens.size(), 1);
  for (const json& t : doc["added_tokens"]) {
    const auto id = t["id"].get<size_t>();
    if (id >= m.tokens.size()) m.tokens.resize(id + 1), m.types.resize(id + 1, 1);
    m.tokens[id] = t["content"].get<std::string>();
    m.types[id] = t["special"].get<bool>() ? 3 : 4;
  }
  for (const json& merge : doc["model"]["merges"]) {
    m.merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
  }
  m.chat_template = config["chat_template"].get<std::string>();
  return m;
}

void WriteTokenizer(GgufWriter* w, const TokenizerMetadata& m, const std::string& pre) {
  w->String("general.architecture", "llama");
  w->String("tokenizer.ggml.model", "gpt2");
  w->String("tokenizer.ggml.pre", pre);
  w->Strings("tokenizer.ggml.tokens", m.tokens);
  w->Int32s("tokenizer.ggml.token_type", m.types);
  w->Strings("tokenizer.ggml.merges", m.merges);
  w->String("tokenizer.chat_template", m.chat_template);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path) {
  auto gguf = GgufFile::Open(path);
  if (!gguf.ok()) return gguf.status();
  return Tokenizer::FromGguf(**gguf);
}

struct Case {
  const char* golden;
  const char* pre;
  bool add_bos;
};

class GgufGoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(GgufGoldenTest, IdsAndChatRenderingsMatchHf) {
  auto golden = ReadGolden(GetParam().golden);
  ASSERT_TRUE(golden.ok()) << golden.status();
  GgufWriter w;
  WriteTokenizer(&w, FromHf(GetParam().golden), GetParam().pre);
  if (golden->bos_id >= 0) w.Int32("tokenizer.ggml.bos_token_id", golden->bos_id);
  w.Int32("tokenizer.ggml.eos_token_id", golden->eos_id);
  w.Bool("tokenizer.ggml.add_bos_token", GetParam().add_bos);
  auto tok = Load(w.Write(std::string(GetParam().golden) + ".gguf"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), golden->vocab_size);
  EXPECT_EQ((*tok)->bos_id(), golden->bos_id);
  EXPECT_EQ((*tok)->eos_id(), golden->eos_id);
  for (const auto& c : golden->cases) {
    EXPECT_THAT((*tok)->Encode(c.text, false), ElementsAreArray(c.ids)) << c.text;
    EXPECT_THAT((*tok)->Encode(c.text, true), ElementsAreArray(c.ids_with_special)) << c.text;
    EXPECT_EQ((*tok)->Decode(c.ids, true), c.decoded_skip_special) << c.text;
  }
  auto chat = ChatTemplate::ForTokenizer(**tok);
  ASSERT_TRUE(chat.ok()) << chat.status();
  for (const auto& c : golden->chats) {
    EXPECT_EQ(chat->Render(c.messages, c.add_generation_prompt).value_or(""), c.text);
  }
}

INSTANTIATE_TEST_SUITE_P(All, GgufGoldenTest,
                         ::testing::Values(Case{"tiny_llama3", "llama-bpe", true},
                                           Case{"tiny_qwen2", "qwen2", false}),
                         [](const auto& info) { return std::string(info.param.golden); });

// Writes tiny_qwen2 with one thing changed by `edit`; returns the load error.
template <typename Edit>
std::string ErrorOf(const std::string& name, Edit edit) {
  TokenizerMetadata m = FromHf("tiny_qwen2");
  std::string pre = "qwen2";
  std::string model = "gpt2";
  int32_t bos = 0;
  edit(&m, &pre, &model, &bos);
  GgufWriter w;
  w.String("tokenizer.ggml.model", model);
  w.String("tokenizer.ggml.pre", pre);
  w.Strings("tokenizer.ggml.tokens", m.tokens);
  w.Int32s("tokenizer.ggml.token_type", m.types);
  w.Strings("tokenizer.ggml.merges", m.merges);
  w.Int32("tokenizer.ggml.bos_token_id", bos);
  const std::string path = w.Write(name);
  auto tok = Load(path);
  if (tok.ok()) return "";
  EXPECT_THAT(tok.status().message(), HasSubstr(path));
  return std::string(tok.status().message());
}

TEST(FromGgufTest, BrokenMetadataNamesTheKey) {
  using M = TokenizerMetadata;
  EXPECT_EQ(ErrorOf("ok.gguf", [](M*, std::string*, std::string*, int32_t*) {}), "");
  EXPECT_THAT(
      ErrorOf("spm.gguf", [](M*, std::string*, std::string* model, int32_t*) { *model = "llama"; }),
      HasSubstr("tokenizer.ggml.model: 'llama' is not supported"));
  EXPECT_THAT(
      ErrorOf("pre.gguf", [](M*, std::string* pre, std::string*, int32_t*) { *pre = "falcon"; }),
      HasSubstr("tokenizer.ggml.pre: unsupported pre-tokenizer 'falcon'"));
  EXPECT_THAT(ErrorOf("types.gguf",
                      [](M* m, std::string*, std::string*, int32_t*) { m->types.pop_back(); }),
              HasSubstr("tokenizer.ggml.token_type"));
  EXPECT_THAT(
      ErrorOf("bos.gguf", [](M*, std::string*, std::string*, int32_t* bos) { *bos = 5000; }),
      HasSubstr("tokenizer.ggml.bos_token_id"));
  EXPECT_THAT(ErrorOf("merge.gguf",
                      [](M* m, std::string*, std::string*, int32_t*) { m->merges[2] = "nospace"; }),
              HasSubstr("tokenizer.ggml.merges[2]"));
  EXPECT_THAT(ErrorOf("merge2.gguf",
                      [](M* m, std::string*, std::string*, int32_t*) { m->merges[4] = "zz qq"; }),
              HasSubstr("tokenizer.ggml.merges[4]"));
}

TEST(FromGgufTest, MissingTokensAreAnError) {
  GgufWriter w;
  w.String("tokenizer.ggml.model", "gpt2");
  const std::string path = w.Write("notokens.gguf");
  auto tok = Load(path);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.tokens"));
  EXPECT_THAT(tok.status().message(), HasSubstr(path));
  GgufWriter none;
  none.String("general.architecture", "llama");
  auto no_model = Load(none.Write("nomodel.gguf"));
  ASSERT_FALSE(no_model.ok());
  EXPECT_THAT(no_model.status().message(), HasSubstr("tokenizer.ggml.model"));
}

}  // namespace
}  // namespace onecard::engine
