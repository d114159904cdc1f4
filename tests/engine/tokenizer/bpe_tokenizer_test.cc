// Tests of BpeTokenizer through FromHfJson: exact HF ids (with and without
// special tokens) and HF decodes on every golden string of four tokenizers
// (SmolLM2's real one, and tiny Llama-3 / Qwen2 / added-token / NFC ones trained
// by make_tokenizer_goldens.py), decode(encode(s)) == s, ids of specials, stop
// ids.
#include "engine/tokenizer/bpe_tokenizer.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/tokenizer/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/golden_reader.h"

namespace onecard::engine {
namespace {

using ::onecard::engine::testing::Golden;
using ::onecard::engine::testing::LoadGoldenTokenizer;
using ::onecard::engine::testing::ReadGolden;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::string Show(const std::string& text) { return nlohmann::json(text).dump(); }

class GoldenTokenizerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "tiny_nfc" && !NormalizerAvailable(NormalizerKind::kNfc)) {
      GTEST_SKIP() << "built without ICU: no NFC";
    }
    auto golden = ReadGolden(GetParam());
    ASSERT_TRUE(golden.ok()) << golden.status();
    golden_ = *std::move(golden);
    auto tok = LoadGoldenTokenizer(GetParam());
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = *std::move(tok);
  }
  Golden golden_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(GoldenTokenizerTest, EncodeMatchesHf) {
  for (const auto& c : golden_.cases) {
    EXPECT_THAT(tok_->Encode(c.text, false), ElementsAreArray(c.ids)) << Show(c.text);
    EXPECT_THAT(tok_->Encode(c.text, true), ElementsAreArray(c.ids_with_special)) << Show(c.text);
  }
}

TEST_P(GoldenTokenizerTest, DecodeMatchesHf) {
  for (const auto& c : golden_.cases) {
    EXPECT_EQ(tok_->Decode(c.ids, false), c.decoded) << Show(c.text);
    EXPECT_EQ(tok_->Decode(c.ids, true), c.decoded_skip_special) << Show(c.text);
  }
}

TEST_P(GoldenTokenizerTest, DecodeOfEncodeIsIdentity) {
  // tiny_added's lstrip/rstrip tokens swallow spaces by design (HF too), and
  // NFC changes text that is not NFC already.
  if (GetParam() == "tiny_added") GTEST_SKIP() << "lstrip/rstrip tokens drop spaces";
  if (GetParam() == "tiny_nfc") GTEST_SKIP() << "NFC rewrites text";
  for (const auto& c : golden_.cases) {
    EXPECT_EQ(tok_->Decode(tok_->Encode(c.text, false), false), c.text) << Show(c.text);
  }
}

TEST_P(GoldenTokenizerTest, VocabularyAndSpecialIds) {
  EXPECT_EQ(tok_->vocab_size(), golden_.vocab_size);
  EXPECT_EQ(tok_->bos_id(), golden_.bos_id);
  EXPECT_EQ(tok_->eos_id(), golden_.eos_id);
  for (const auto& [content, id] : golden_.token_ids) {
    EXPECT_EQ(tok_->TokenId(content), id) << content;
    EXPECT_EQ(tok_->TokenBytes(id), content) << content;
  }
  std::vector<int32_t> special;
  for (int32_t id = 0; id < tok_->vocab_size(); ++id) {
    if (tok_->IsSpecial(id)) special.push_back(id);
  }
  EXPECT_THAT(special, ElementsAreArray(golden_.special_ids));
  EXPECT_EQ(tok_->TokenBytes(-1), "");
  EXPECT_EQ(tok_->TokenBytes(tok_->vocab_size()), "");
  EXPECT_EQ(tok_->TokenId("no such token at all"), -1);
}

TEST_P(GoldenTokenizerTest, StopIdsHoldEosAndEndOfTurnTokens) {
  std::vector<int32_t> expected;
  if (golden_.eos_id >= 0) expected.push_back(golden_.eos_id);
  for (const char* name : {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>"}) {
    const auto it = golden_.token_ids.find(name);
    if (it != golden_.token_ids.end()) expected.push_back(it->second);
  }
  std::sort(expected.begin(), expected.end());
  expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
  EXPECT_THAT(tok_->stop_ids(), ElementsAreArray(expected));
}

TEST_P(GoldenTokenizerTest, ConcurrentEncodesAgree) {
  const auto& cases = golden_.cases;
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = t; i < cases.size() + t; ++i) {
          const auto& c = cases[i % cases.size()];
          if (tok_->Encode(c.text, false) != c.ids) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

INSTANTIATE_TEST_SUITE_P(All, GoldenTokenizerTest,
                         ::testing::Values("smollm2", "tiny_llama3", "tiny_qwen2", "tiny_added",
                                           "tiny_nfc"));

TEST(BpeTokenizerTest, InvalidUtf8InputIsEncodedBytewiseAndDecodesWithReplacement) {
  auto tok = LoadGoldenTokenizer("tiny_qwen2");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string bad = "ok \xFF\xC3 then";
  const std::vector<int32_t> ids = (*tok)->Encode(bad, false);
  std::string bytes;
  for (const int32_t id : ids) bytes += (*tok)->TokenBytes(id);
  EXPECT_EQ(bytes, bad);  // nothing lost
  EXPECT_EQ((*tok)->Decode(ids, false), "ok \xEF\xBF\xBD\xEF\xBF\xBD then");
}

TEST(BpeTokenizerTest, LongTextEncodesFastAndMatchesPiecewise) {
  auto tok = LoadGoldenTokenizer("smollm2");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto golden = ReadGolden("smollm2");
  ASSERT_TRUE(golden.ok());
  // The last golden case is a ~3k-token text; four copies make > 10k tokens.
  const auto& c = golden->cases.back();
  std::string text;
  std::vector<int32_t> expected;
  for (int i = 0; i < 4; ++i) {
    text += c.text + "<|im_end|>";
    expected.insert(expected.end(), c.ids.begin(), c.ids.end());
    expected.push_back(golden->token_ids.at("<|im_end|>"));
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = (*tok)->Encode(text, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_THAT(ids, ElementsAreArray(expected));
  EXPECT_GT(ids.size(), 10000u);
  // Reported, not asserted (no wall-clock assertions in unit tests).
  std::printf("encoded %zu tokens in %.1f ms\n", ids.size(), seconds * 1e3);
}

// 10k+ tokens of mostly distinct words (a cold cache): round-trips; the time
// is printed for the record.
TEST(BpeTokenizerTest, DistinctWordsRoundTripAndReportTime) {
  auto tok = LoadGoldenTokenizer("smollm2");
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::string text;
  uint32_t state = 12345;
  const std::string letters = "abcdefghijklmnopqrstuvwxyzéü科创😀 ,.\n";
  while (text.size() < 60000) {
    state = state * 1664525u + 1013904223u;  // a fixed LCG: the same text every run
    text += letters[(state >> 16) % letters.size()];
  }
  text = std::string(Utf8Lossy(text));  // the byte-wise pick can split characters
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = (*tok)->Encode(text, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(ids.size(), 10000u);
  EXPECT_EQ((*tok)->Decode(ids, false), text);
  std::printf("encoded %zu tokens of distinct words in %.1f ms\n", ids.size(), seconds * 1e3);
}

// Very long runs (one huge word, long whitespace the lookahead backtracks
// over) lose nothing and round-trip.
TEST(BpeTokenizerTest, HugeRunsRoundTrip) {
  for (const char* name : {"smollm2", "tiny_llama3", "tiny_qwen2"}) {
    auto tok = LoadGoldenTokenizer(name);
    ASSERT_TRUE(tok.ok()) << tok.status();
    std::string cjk;
    for (int i = 0; i < 50000; ++i) cjk += "\xE7\xA7\x91";  // 科
    for (const std::string& text :
         {std::string(300000, ' ') + "x", std::string(500000, 'a'), std::string(100000, '7'),
          std::string(200000, '!'), std::string(100000, '\n') + " y", cjk}) {
      const std::vector<int32_t> ids = (*tok)->Encode(text, false);
      std::string bytes;
      for (const int32_t id : ids) bytes += (*tok)->TokenBytes(id);
      EXPECT_EQ(bytes.size(), text.size()) << name;
      EXPECT_TRUE(bytes == text) << name << ": " << text.substr(0, 8);
    }
  }
}

}  // namespace
}  // namespace onecard::engine
