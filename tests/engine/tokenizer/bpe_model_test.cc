// Tests of BpeModel on hand-made vocabularies where BPE's definition fixes
// the answer (lowest rank first, leftmost on ties; every expectation was also
// checked with HF tokenizers' models.BPE on the same vocab), plus
// ignore_merges, bytes without tokens, merge errors, and the cache under
// concurrent use.
#include "engine/tokenizer/bpe_model.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Vocabulary: a b c d (ids 0..3), then merged tokens.
std::unique_ptr<BpeModel> MakeModel(bool ignore_merges = false) {
  std::vector<std::string> tokens = {"a", "b", "c", "d", "ab", "bc", "abc", "cd", "abcd", "dd"};
  std::vector<std::pair<std::string, std::string>> merges = {{"b", "c"}, {"a", "b"},   {"a", "bc"},
                                                             {"c", "d"}, {"ab", "cd"}, {"d", "d"}};
  auto model = BpeModel::Create(std::move(tokens), merges, ignore_merges, "merges");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

std::vector<int32_t> Encode(const BpeModel& model, std::string_view word) {
  std::vector<int32_t> ids;
  model.EncodeWord(word, &ids);
  return ids;
}

TEST(BpeModelTest, LowestRankMergesFirst) {
  auto model = MakeModel();
  // "abcd": (b,c) rank 0 -> a bc d; (a,bc) rank 2 -> abc d; no (abc,d): stop.
  EXPECT_THAT(Encode(*model, "abcd"), ElementsAre(6, 3));
  // "abd": (a,b) rank 1 -> ab d.
  EXPECT_THAT(Encode(*model, "abd"), ElementsAre(4, 3));
  // "cd" merges; "a" alone stays.
  EXPECT_THAT(Encode(*model, "cd"), ElementsAre(7));
  EXPECT_THAT(Encode(*model, "a"), ElementsAre(0));
}

TEST(BpeModelTest, EqualRanksMergeLeftmostFirst) {
  auto model = MakeModel();
  // "ddd": (d,d) at 0 and at 1; the leftmost merges, leaving "dd d".
  EXPECT_THAT(Encode(*model, "ddd"), ElementsAre(9, 3));
  EXPECT_THAT(Encode(*model, "dddd"), ElementsAre(9, 9));
}

TEST(BpeModelTest, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  auto merged = MakeModel(false);
  auto whole = MakeModel(true);
  EXPECT_THAT(Encode(*merged, "abcd"), ElementsAre(6, 3));  // merges never reach "abcd"
  EXPECT_THAT(Encode(*whole, "abcd"), ElementsAre(8));      // the word is a token
  EXPECT_THAT(Encode(*whole, "abd"), ElementsAre(4, 3));    // not a token: merges as usual
}

TEST(BpeModelTest, BytesWithoutATokenAreDropped) {
  auto model = MakeModel();
  // As in HF's BPE without an unk token: "x" is skipped, then "a b" merges.
  EXPECT_THAT(Encode(*model, "axb"), ElementsAre(4));
  EXPECT_THAT(Encode(*model, "x"), ElementsAre());
  EXPECT_THAT(Encode(*model, ""), ElementsAre());
}

TEST(BpeModelTest, MergeOfUnknownTokensIsAnErrorNamingTheMerge) {
  std::vector<std::pair<std::string, std::string>> merges = {{"a", "b"}, {"b", "q"}};
  auto model = BpeModel::Create({"a", "b", "ab"}, merges, false, "file.json: model.merges");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("file.json: model.merges[1]"));
  EXPECT_THAT(model.status().message(), HasSubstr("'q'"));
  auto no_result = BpeModel::Create({"a", "b"}, {{"a", "b"}}, false, "m");
  ASSERT_FALSE(no_result.ok());
  EXPECT_THAT(no_result.status().message(), HasSubstr("'ab' is not in the vocabulary"));
}

TEST(BpeModelTest, CachedAndConcurrentResultsAgree) {
  auto model = MakeModel();
  const std::vector<std::string> words = {"abcd", "ddd", "abd", "cdcd", std::string(300, 'd')};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& w : words) expected.push_back(Encode(*model, w));
  EXPECT_EQ(expected[4].size(),
            150u);  // 300 d -> 150 "dd", past the cached length
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const size_t k = (i + t) % words.size();
        if (Encode(*model, words[k]) != expected[k]) ++bad[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(bad, ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace onecard::engine
