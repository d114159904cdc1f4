// Tests of ChatTemplate: renderings equal HF apply_chat_template output
// (tokenize=False) and their encodings equal its ids (tokenize=True) for
// SmolLM2's own template (with its default system prompt), Qwen2's ChatML
// and Llama-3's; the kind is chosen from the template source; bad messages
// give errors naming messages[i].role / .content.
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/golden_reader.h"

namespace onecard::engine {
namespace {

using ::onecard::engine::testing::LoadGoldenTokenizer;
using ::onecard::engine::testing::ReadGolden;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct Case {
  const char* golden;
  ChatTemplateKind kind;
  const char* default_system;
};

class ChatTemplateGoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(ChatTemplateGoldenTest, RendersAndEncodesLikeHf) {
  auto golden = ReadGolden(GetParam().golden);
  ASSERT_TRUE(golden.ok()) << golden.status();
  auto tok = LoadGoldenTokenizer(GetParam().golden);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto chat = ChatTemplate::ForTokenizer(**tok);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->kind(), GetParam().kind);
  EXPECT_EQ(chat->default_system(), GetParam().default_system);
  ASSERT_FALSE(golden->chats.empty());
  for (const auto& c : golden->chats) {
    auto text = chat->Render(c.messages, c.add_generation_prompt);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, c.text);
    EXPECT_THAT((*tok)->Encode(*text, false), ElementsAreArray(c.ids)) << c.text;
  }
}

INSTANTIATE_TEST_SUITE_P(All, ChatTemplateGoldenTest,
                         ::testing::Values(Case{"smollm2", ChatTemplateKind::kChatML,
                                                "You are a helpful AI assistant named SmolLM, "
                                                "trained by Hugging Face"},
                                           Case{"tiny_qwen2", ChatTemplateKind::kChatML,
                                                "You are a helpful assistant."},
                                           Case{"tiny_llama3", ChatTemplateKind::kLlama3, ""}),
                         [](const auto& info) { return std::string(info.param.golden); });

TEST(ChatTemplateTest, ChoosesFromSource) {
  EXPECT_EQ(ChatTemplate::FromSource("{{'<|im_start|>' + m['role']}}")->kind(),
            ChatTemplateKind::kChatML);
  EXPECT_EQ(ChatTemplate::FromSource("{{'<|im_start|>' + m['role']}}")->default_system(), "");
  EXPECT_EQ(ChatTemplate::FromSource("<|start_header_id|>")->kind(), ChatTemplateKind::kLlama3);
  // Qwen2.5's style: the default prompt sits beside a system-content branch.
  const auto qwen25 = ChatTemplate::FromSource(
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
      "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- "
      "'<|im_start|>system\\nYou are "
      "Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\\n' }}");
  ASSERT_TRUE(qwen25.ok());
  EXPECT_EQ(qwen25->default_system(),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  const auto unknown = ChatTemplate::FromSource("{% for m in messages %}[INST]{% endfor %}");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("chat_template"));
  EXPECT_FALSE(ChatTemplate::FromSource("<|start_header_id|>Cutting Knowledge Date").ok());
}

TEST(ChatTemplateTest, BadMessagesNameTheField) {
  const ChatTemplate chat(ChatTemplateKind::kChatML);
  const auto empty = chat.Render({}, true);
  EXPECT_THAT(empty.status().message(), HasSubstr("messages"));
  const auto role = chat.Render({{"user", "hi"}, {"robot", "beep"}}, true);
  ASSERT_FALSE(role.ok());
  EXPECT_THAT(role.status().message(), HasSubstr("messages[1].role"));
  EXPECT_THAT(role.status().message(), HasSubstr("robot"));
  const auto content = ChatTemplate(ChatTemplateKind::kLlama3).Render({{"user", "\xC3("}}, true);
  ASSERT_FALSE(content.ok());
  EXPECT_THAT(content.status().message(), HasSubstr("messages[0].content"));
}

TEST(ChatTemplateTest, ForTokenizerWithoutTemplateUsesTheVocabulary) {
  auto tok = Tokenizer::FromHfJson(::onecard::engine::testing::GoldenDir("tiny_llama3") +
                                   "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  ASSERT_EQ((*tok)->chat_template(), "");
  auto chat = ChatTemplate::ForTokenizer(**tok);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->kind(), ChatTemplateKind::kLlama3);
  EXPECT_EQ(*chat->Render({{"user", " hi "}}, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|"
            "eot_id|>");
}

}  // namespace
}  // namespace onecard::engine
