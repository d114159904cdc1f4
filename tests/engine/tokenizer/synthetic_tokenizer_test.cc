// The synthetic models' tokenizer: bytes in, ids out and back, the special
// tokens, the chat template it selects, streaming, and the vocabulary bound.
// Expected values follow the layout documented in synthetic_tokenizer.h.
#include "engine/tokenizer/synthetic_tokenizer.h"

#include <string>
#include <vector>

#include "engine/model/synthetic_shapes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Tokenizer> Llama8b() {
  auto t = MakeSyntheticTokenizer(*SyntheticModelConfig("llama3-8b"));
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(SyntheticTokenizerTest, TextIsOneTokenAByteAndDecodesBack) {
  auto t = Llama8b();
  EXPECT_THAT(t->Encode("Hi!", /*add_special_tokens=*/false), ElementsAre(72, 105, 33));
  // "é" is 0xc3 0xa9; "✓" is 0xe2 0x9c 0x93.
  EXPECT_THAT(t->Encode("\xc3\xa9\xe2\x9c\x93", false), ElementsAre(0xc3, 0xa9, 0xe2, 0x9c, 0x93));
  const std::string text = "The capital of France is \xc3\xa9\xe2\x9c\x93\n";
  EXPECT_EQ(t->Decode(t->Encode(text, false), false), text);
  // Llama-3's bos (128000) comes first with the special tokens.
  EXPECT_THAT(t->Encode("a", true), ElementsAre(128000, 97));
  EXPECT_EQ(t->vocab_size(), 128256);
}

TEST(SyntheticTokenizerTest, SpecialTokensAndOtherIds) {
  auto t = Llama8b();
  EXPECT_THAT(t->Encode("<|im_start|>x<|im_end|>", false), ElementsAre(256, 120, 257));
  EXPECT_EQ(t->bos_id(), 128000);
  EXPECT_EQ(t->eos_id(), 128001);
  EXPECT_THAT(t->stop_ids(), ElementsAre(128001, 257));
  EXPECT_EQ(t->TokenBytes(128001), "<|end_of_text|>");
  EXPECT_EQ(t->TokenId("<|im_start|>"), 256);
  EXPECT_EQ(t->TokenId("nope"), -1);
  EXPECT_TRUE(t->IsSpecial(256));
  EXPECT_FALSE(t->IsSpecial(48213));
  EXPECT_EQ(t->TokenBytes(48213), "<48213>");
  EXPECT_EQ(t->TokenBytes(128256), "");  // past the vocabulary
  EXPECT_EQ(t->Decode({72, 256, 48213, 128001}, /*skip_special_tokens=*/true), "H<48213>");
  EXPECT_EQ(t->Decode({72, 256, 48213}, false), "H<|im_start|><48213>");
}

TEST(SyntheticTokenizerTest, ModelsWithoutUsableSpecialIdsEndAtImEnd) {
  ModelConfig c = *SyntheticModelConfig("qwen2-72b");  // eos 151643, no bos
  auto qwen = MakeSyntheticTokenizer(c);
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ((*qwen)->bos_id(), -1);
  EXPECT_THAT((*qwen)->Encode("a", true), ElementsAre(97));
  c.eos_token_id = 2;  // a byte's id: not usable
  auto low = MakeSyntheticTokenizer(c);
  ASSERT_TRUE(low.ok());
  EXPECT_EQ((*low)->eos_id(), 257);
  EXPECT_THAT((*low)->stop_ids(), ElementsAre(257));
  EXPECT_EQ((*low)->TokenBytes(2), "\x02");
}

TEST(SyntheticTokenizerTest, ChatRequestsRenderWithChatML) {
  auto t = Llama8b();
  auto chat = ChatTemplate::ForTokenizer(*t);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->kind(), ChatTemplateKind::kChatML);
  auto text = chat->Render({{"user", "hi"}}, /*add_generation_prompt=*/true);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(t->Encode(*text, false),
              ElementsAre(256, 'u', 's', 'e', 'r', '\n', 'h', 'i', 257, '\n', 256, 'a', 's', 's',
                          'i', 's', 't', 'a', 'n', 't', '\n'));
}

TEST(SyntheticTokenizerTest, StreamsTheSameTextAsDecode) {
  auto t = Llama8b();
  const std::vector<int32_t> ids = {0xe2, 0x9c, 48213, 0x93, 65, 0xc3, 0xa9, 90000};
  IncrementalDetokenizer stream(t.get(), /*skip_special_tokens=*/false);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.Add(id);
  streamed += stream.Flush();
  EXPECT_EQ(streamed, t->Decode(ids, false));
}

TEST(SyntheticTokenizerTest, RefusesATooSmallVocabulary) {
  ModelConfig c = *SyntheticModelConfig("llama3-8b");
  c.vocab_size = 257;
  auto t = MakeSyntheticTokenizer(c);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("vocab_size 257"));
}

}  // namespace
}  // namespace onecard::engine
