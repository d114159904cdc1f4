// Reads tests/golden/tokenizer/<name>/golden.json (written by
// tests/golden/tokenizer/make_tokenizer_goldens.py from HF tokenizers) and
// small helpers shared by the tokenizer tests. Test-only.
#ifndef ONECARD_TESTS_ENGINE_TOKENIZER_GOLDEN_READER_H_
#define ONECARD_TESTS_ENGINE_TOKENIZER_GOLDEN_READER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine::testing {

struct GoldenCase {
  std::string text;
  std::vector<int32_t> ids;               // encode(add_special_tokens=False)
  std::vector<int32_t> ids_with_special;  // encode(add_special_tokens=True)
  std::vector<std::string> words;         // pre_tokenize_str, byte-level strings
  std::string decoded;                    // decode(ids)
  std::string decoded_skip_special;       // decode(ids, skip_special_tokens=True)
};

struct GoldenChat {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = false;
  std::string text;          // apply_chat_template(tokenize=False)
  std::vector<int32_t> ids;  // apply_chat_template(tokenize=True)
};

struct Golden {
  int32_t vocab_size = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  std::vector<int32_t> special_ids;
  std::map<std::string, int32_t> token_ids;  // added tokens
  std::vector<GoldenCase> cases;
  std::vector<GoldenChat> chats;
};

// The directory of one golden tokenizer: tests/golden/tokenizer/<name>.
std::string GoldenDir(const std::string& name);
absl::StatusOr<Golden> ReadGolden(const std::string& name);
// FromHfJson on <dir>/tokenizer.json and <dir>/tokenizer_config.json.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGoldenTokenizer(const std::string& name);

std::string ReadFileOrDie(const std::string& path);
// Writes `contents` to a fresh file under the test temp dir; returns its path.
std::string WriteTempFile(const std::string& name, const std::string& contents);

}  // namespace onecard::engine::testing

#endif  // ONECARD_TESTS_ENGINE_TOKENIZER_GOLDEN_READER_H_
