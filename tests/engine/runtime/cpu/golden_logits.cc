// The golden logits' loader and checks (see golden_logits.h).
#include "tests/engine/runtime/cpu/golden_logits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <span>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace onecard::engine {

using onecard::testing::SourcePath;
using onecard::testing::Tolerance;

namespace {

// Reads field `key` of `j` into *out; false (with a test failure) when absent
// or of another type. No exceptions: types are checked before get<>.
template <typename T>
bool Read(const nlohmann::json& j, const char* key, T* out);

bool IsNumberArray(const nlohmann::json& j) {
  return j.is_array() &&
         std::all_of(j.begin(), j.end(), [](const auto& x) { return x.is_number(); });
}

template <typename T>
bool ReadVector(const nlohmann::json& j, std::vector<T>* out) {
  if (!IsNumberArray(j)) return false;
  out->clear();
  for (const auto& x : j) out->push_back(x.get<T>());
  return true;
}

template <typename T>
bool Read(const nlohmann::json& j, const char* key, T* out) {
  if (!j.is_object() || !j.contains(key)) {
    ADD_FAILURE() << "golden field " << key << " is missing";
    return false;
  }
  const nlohmann::json& v = j[key];
  bool ok = false;
  if constexpr (std::is_same_v<T, std::string>) {
    ok = v.is_string();
    if (ok) *out = v.get<std::string>();
  } else if constexpr (std::is_same_v<T, std::vector<typename T::value_type>> &&
                       std::is_arithmetic_v<typename T::value_type>) {
    ok = ReadVector(v, out);
  } else {  // a vector of vectors
    ok = v.is_array();
    out->resize(ok ? v.size() : 0);
    for (size_t i = 0; ok && i < v.size(); ++i) ok = ReadVector(v[i], &(*out)[i]);
  }
  if (!ok) ADD_FAILURE() << "golden field " << key << " has the wrong type";
  return ok;
}

std::vector<float> ReadF32File(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::vector<float> v(static_cast<size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), v.size() * sizeof(float));
  return v;
}

int32_t ArgMax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

}  // namespace

bool LoadGolden(const std::string& dir, Golden* golden) {
  std::ifstream in(SourcePath(dir + "/logits.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.contains("prompts") || !doc["prompts"].is_array()) {
    ADD_FAILURE() << dir << "/logits.json is missing or not a golden file";
    return false;
  }
  if (!Read(doc, "sample_ids", &golden->sample_ids)) return false;
  for (const nlohmann::json& p : doc["prompts"]) {
    GoldenPrompt g;
    std::string last_file;
    if (!Read(p, "name", &g.name) || !Read(p, "input_ids", &g.input_ids) ||
        !Read(p, "top5_ids", &g.top5_ids) || !Read(p, "top5_logits", &g.top5_logits) ||
        !Read(p, "sample_logits", &g.sample_logits) || !Read(p, "greedy_ids", &g.greedy_ids) ||
        !Read(p, "greedy_top2_ids", &g.greedy_top2_ids) ||
        !Read(p, "greedy_top2_logits", &g.greedy_top2_logits) ||
        !Read(p, "last_logits_file", &last_file)) {
      return false;
    }
    if (p.contains("text") && p["text"].is_string()) g.text = p["text"].get<std::string>();
    g.last_logits = ReadF32File(SourcePath(dir + "/" + last_file));
    golden->prompts.push_back(std::move(g));
  }
  return true;
}

std::pair<std::vector<int32_t>, std::vector<int32_t>> TwoBlockTables(int32_t num_blocks,
                                                                     int32_t needed,
                                                                     uint32_t seed) {
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  return {std::vector<int32_t>(ids.begin(), ids.begin() + needed),
          std::vector<int32_t>(ids.begin() + needed, ids.begin() + 2 * needed)};
}

std::vector<float> Prefill(ModelRunner& runner, int64_t seq_id, const std::vector<int32_t>& tokens,
                           const std::vector<int32_t>& table, const std::vector<int32_t>& sizes) {
  std::vector<float> all, logits;
  int32_t start = 0;
  for (size_t i = 0; start < static_cast<int32_t>(tokens.size()); ++i) {
    const int32_t left = static_cast<int32_t>(tokens.size()) - start;
    const int32_t size = i < sizes.size() ? std::min(sizes[i], left) : left;
    BatchInput batch;
    batch.all_logits = true;
    batch.chunks.push_back({seq_id, std::span(tokens).subspan(start, size), start, table});
    const absl::Status status = runner.Forward(batch, &logits);
    EXPECT_TRUE(status.ok()) << status;
    all.insert(all.end(), logits.begin(), logits.end());
    start += size;
  }
  return all;
}

void ExpectPrefillMatches(const Golden& golden, const GoldenPrompt& p,
                          const std::vector<float>& got, int64_t vocab, const Tolerance& tol) {
  ASSERT_EQ(got.size(), p.input_ids.size() * vocab);
  ASSERT_EQ(p.sample_logits.size(), p.input_ids.size());
  for (size_t pos = 0; pos < p.input_ids.size(); ++pos) {
    const float* row = &got[pos * vocab];
    std::vector<float> at_sample, at_top5;
    for (int32_t id : golden.sample_ids) at_sample.push_back(row[id]);
    for (int32_t id : p.top5_ids[pos]) at_top5.push_back(row[id]);
    EXPECT_ALL_CLOSE(at_sample, p.sample_logits[pos], tol) << "position " << pos;
    EXPECT_ALL_CLOSE(at_top5, p.top5_logits[pos], tol) << "position " << pos;
    EXPECT_EQ(ArgMax(row, vocab), p.top5_ids[pos][0])
        << "position " << pos << ": HF top-2 gap " << p.top5_logits[pos][0] - p.top5_logits[pos][1];
  }
  ASSERT_EQ(p.last_logits.size(), static_cast<size_t>(vocab)) << "the .last.f32 file";
  const std::vector<float> last(got.end() - vocab, got.end());
  const auto report = onecard::testing::CompareAll(last, p.last_logits, tol);
  std::printf("[%s] last row against HF: max abs err %.2e, NMSE %.2e\n", p.name.c_str(),
              report.max_abs_err, report.nmse);
  EXPECT_ALL_CLOSE(last, p.last_logits, tol);
}

void ExpectGreedyMatches(ModelRunner& runner, int64_t seq_id, const GoldenPrompt& p,
                         const std::vector<float>& prefill, const std::vector<int32_t>& table,
                         const Tolerance& tol, int steps, bool allow_near_tie) {
  const int64_t vocab = runner.config().vocab_size;
  // The golden's own consistency: HF's first generate step must be HF's
  // forward pass on the prompt (it is not when generate masks prompt tokens,
  // e.g. with an attention mask inferred from pad_token_id == eos).
  ASSERT_FALSE(p.greedy_top2_ids.empty() || p.last_logits.size() != static_cast<size_t>(vocab));
  const std::vector<float> forward_top2 = {p.last_logits[p.greedy_top2_ids[0][0]],
                                           p.last_logits[p.greedy_top2_ids[0][1]]};
  EXPECT_ALL_CLOSE(forward_top2, p.greedy_top2_logits[0], tol)
      << "the golden is inconsistent: HF generate's first step differs from HF's forward "
         "pass on the same prompt; regenerate it";
  std::vector<float> row(prefill.end() - vocab, prefill.end());
  std::vector<int32_t> tokens = p.input_ids, greedy;
  const size_t num_steps =
      steps < 0 ? p.greedy_ids.size() : std::min<size_t>(steps, p.greedy_ids.size());
  for (size_t step = 0; step < num_steps; ++step) {
    const std::vector<float> hf_top2 = p.greedy_top2_logits[step];
    const std::vector<float> got_top2 = {row[p.greedy_top2_ids[step][0]],
                                         row[p.greedy_top2_ids[step][1]]};
    EXPECT_ALL_CLOSE(got_top2, hf_top2, tol) << "greedy step " << step;
    greedy.push_back(ArgMax(row.data(), vocab));
    const double hf_gap = static_cast<double>(hf_top2[0]) - hf_top2[1];
    const double tie = 2 * (tol.atol + tol.rtol * std::fabs(hf_top2[0]));
    if (greedy.back() != p.greedy_ids[step] && allow_near_tie && hf_gap <= tie) {
      std::printf(
          "[%s] greedy step %zu: got %d, HF %d, a near tie (HF top-2 gap %.2e <= %.2e); "
          "compared up to here\n",
          p.name.c_str(), step, greedy.back(), p.greedy_ids[step], hf_gap, tie);
      return;
    }
    if (greedy.back() != p.greedy_ids[step]) {
      ADD_FAILURE() << "greedy step " << step << ": got " << greedy.back() << " (logit "
                    << row[greedy.back()] << "), HF " << p.greedy_ids[step] << " (HF top-2 "
                    << hf_top2[0] << ", " << hf_top2[1] << "; ours at HF's top-2 " << got_top2[0]
                    << ", " << got_top2[1] << ")";
      return;
    }
    tokens.push_back(greedy.back());
    BatchInput batch;
    batch.chunks.push_back(
        {seq_id, std::span(tokens).last(1), static_cast<int32_t>(tokens.size()) - 1, table});
    const absl::Status status = runner.Forward(batch, &row);
    ASSERT_TRUE(status.ok()) << status;
  }
  EXPECT_EQ(greedy, std::vector<int32_t>(p.greedy_ids.begin(), p.greedy_ids.begin() + num_steps));
}

}  // namespace onecard::engine
