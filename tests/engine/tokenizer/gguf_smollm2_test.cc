// Golden test of Tokenizer::FromGguf on the real SmolLM2-135M-Instruct GGUF
// (models/, fetched by scripts/fetch-model.sh): HF's ids (transformers'
// AutoTokenizer on the same GGUF) on every golden string, decodes, special
// ids, stop ids and the chat template with SmolLM2's default system prompt.
#include "engine/model/gguf.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/golden_reader.h"

namespace onecard::engine {
namespace {

using ::onecard::engine::testing::ReadGolden;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

class SmolLm2GgufTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto gguf = GgufFile::Open(kModel);
    ASSERT_TRUE(gguf.ok()) << gguf.status() << " (run scripts/fetch-model.sh)";
    auto tok = Tokenizer::FromGguf(**gguf);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = tok->release();
  }
  static void TearDownTestSuite() { delete tok_; }
  static Tokenizer* tok_;
};
Tokenizer* SmolLm2GgufTest::tok_ = nullptr;

TEST_F(SmolLm2GgufTest, IdsAndDecodesMatchHf) {
  ASSERT_NE(tok_, nullptr);
  auto golden = ReadGolden("smollm2");
  ASSERT_TRUE(golden.ok()) << golden.status();
  EXPECT_EQ(static_cast<const BpeTokenizer*>(tok_)->pre_tokenizer_kind(),
            PreTokenizerKind::kSmolLM);
  for (const auto& c : golden->cases) {
    EXPECT_THAT(tok_->Encode(c.text, false), ElementsAreArray(c.ids)) << c.text;
    EXPECT_THAT(tok_->Encode(c.text, true), ElementsAreArray(c.ids_with_special)) << c.text;
    EXPECT_EQ(tok_->Decode(c.ids, false), c.decoded) << c.text;
    EXPECT_EQ(tok_->Decode(c.ids, true), c.decoded_skip_special) << c.text;
    EXPECT_EQ(tok_->Decode(tok_->Encode(c.text, false), false), c.text);
  }
}

TEST_F(SmolLm2GgufTest, SpecialAndStopIds) {
  ASSERT_NE(tok_, nullptr);
  auto golden = ReadGolden("smollm2");
  ASSERT_TRUE(golden.ok());
  EXPECT_EQ(tok_->vocab_size(), golden->vocab_size);
  EXPECT_EQ(tok_->bos_id(), golden->bos_id);
  EXPECT_EQ(tok_->eos_id(), golden->eos_id);
  std::vector<int32_t> special;
  for (int32_t id = 0; id < tok_->vocab_size(); ++id) {
    if (tok_->IsSpecial(id)) special.push_back(id);
  }
  EXPECT_THAT(special, ElementsAreArray(golden->special_ids));
  // eos is <|im_end|>; <|endoftext|> also ends generation.
  EXPECT_THAT(tok_->stop_ids(), ElementsAre(golden->token_ids.at("<|endoftext|>"),
                                            golden->token_ids.at("<|im_end|>")));
}

TEST_F(SmolLm2GgufTest, ChatTemplateMatchesHf) {
  ASSERT_NE(tok_, nullptr);
  auto golden = ReadGolden("smollm2");
  ASSERT_TRUE(golden.ok());
  auto chat = ChatTemplate::ForTokenizer(*tok_);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->kind(), ChatTemplateKind::kChatML);
  for (const auto& c : golden->chats) {
    auto text = chat->Render(c.messages, c.add_generation_prompt);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, c.text);
    EXPECT_THAT(tok_->Encode(*text, false), ElementsAreArray(c.ids));
  }
}

}  // namespace
}  // namespace onecard::engine
