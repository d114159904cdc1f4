// FakeTokenizer: a tiny hand-made vocabulary for engine tests (no files):
//   0..25 "a".."z", 26 " ", 27 "<eos>" (special, the eos and only stop id),
//   28..30 the three bytes of "€" one per token, 31 "END", 32 "\n",
//   33..58 "q" + "a".."z", 59 "!", 60 "?", 61 ".", 62 ",", 63 "<pad>" (special).
// Encode is greedy longest match (characters outside the vocabulary are
// dropped). The chat template names <|im_start|>, so ChatTemplate picks
// ChatML. Used by tests/engine/runtime/ and tests/tools/.
#ifndef ONECARD_TESTS_ENGINE_RUNTIME_FAKE_TOKENIZER_H_
#define ONECARD_TESTS_ENGINE_RUNTIME_FAKE_TOKENIZER_H_

#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine::testing {

class FakeTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kVocabSize = 64;
  static constexpr int32_t kSpace = 26;
  static constexpr int32_t kEos = 27;
  static constexpr int32_t kEuroByte0 = 28;  // 28, 29, 30: "€" split in bytes
  static constexpr int32_t kEnd = 31;        // "END"

  FakeTokenizer();
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const override;
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  std::string TokenBytes(int32_t id) const override;
  int32_t TokenId(std::string_view token) const override;
  bool IsSpecial(int32_t id) const override { return id == kEos || id == 63; }
  int32_t vocab_size() const override { return kVocabSize; }
  int32_t bos_id() const override { return -1; }
  int32_t eos_id() const override { return kEos; }
  const std::vector<int32_t>& stop_ids() const override { return stop_ids_; }
  const std::string& chat_template() const override { return chat_template_; }

 private:
  std::vector<std::string> tokens_;
  std::vector<int32_t> stop_ids_ = {kEos};
  std::string chat_template_ = "{{ '<|im_start|>' + message['role'] }}";
};

}  // namespace onecard::engine::testing

#endif  // ONECARD_TESTS_ENGINE_RUNTIME_FAKE_TOKENIZER_H_
