// Fuzz target: the chat-template renderer. The first byte picks the
// template (ChatML, Llama-3, or the choice from a Jinja source taken from
// the input), the rest is split at 0x00 into role/content pairs, rendered
// and then encoded with the SmolLM2 tokenizer.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onecard;
  if (size == 0) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '\0');
  engine::ChatTemplate chat(engine::ChatTemplateKind::kChatML);
  switch (data[0] % 3) {
    case 0:
      break;
    case 1:
      chat = engine::ChatTemplate(engine::ChatTemplateKind::kLlama3);
      break;
    default: {
      absl::StatusOr<engine::ChatTemplate> from =
          engine::ChatTemplate::FromSource(std::string_view(parts[0].data(), parts[0].size()));
      if (!from.ok()) return 0;
      chat = *from;
      parts.erase(parts.begin());
    }
  }
  std::vector<engine::ChatMessage> messages;
  for (size_t i = 0; i + 1 < parts.size(); i += 2) {
    messages.push_back({std::string(parts[i]), std::string(parts[i + 1])});
  }
  absl::StatusOr<std::string> text = chat.Render(messages, data[0] & 0x80);
  if (!text.ok()) return 0;
  (void)fuzz::SmolLm2Tokenizer().Encode(*text, false);
  return 0;
}
