// Tests of FlattenBatch (engine/runtime/cpu/cpu_batch.cc): the flat layout of
// a three-chunk batch worked out by hand, the logits rows with and without
// all_logits, and each InvalidArgument naming the chunk and sequence.
#include "engine/runtime/cpu/cpu_batch.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::ElementsAre;

BatchLimits Limits() {
  BatchLimits limits;
  limits.vocab_size = 50;
  limits.max_context = 64;
  limits.layout = KvLayout{20, 4, 2, 8};  // 20 blocks of 4 tokens
  return limits;
}

TEST(FlattenBatchTest, LaysOutChunksSideBySide) {
  const std::vector<int32_t> a = {5, 6, 7}, b = {9}, c = {1, 2, 3, 4, 5, 6};
  const std::vector<int32_t> ta = {7, 2}, tb = {3, 11, 0, 9}, tc = {19, 4};
  BatchInput batch;
  batch.chunks = {{10, a, 2, ta, false},  // positions 2..4: blocks 7, 2
                  {11, b, 13, tb},        // a decode token at 13: block 9, slot 1
                  {12, c, 0, tc}};        // a prompt: positions 0..5
  auto flat = FlattenBatch(batch, Limits());
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->num_tokens, 10);
  EXPECT_EQ(flat->num_seqs, 3);
  EXPECT_THAT(flat->token_ids, ElementsAre(5, 6, 7, 9, 1, 2, 3, 4, 5, 6));
  EXPECT_THAT(flat->positions, ElementsAre(2, 3, 4, 13, 0, 1, 2, 3, 4, 5));
  EXPECT_THAT(flat->slot_mapping, ElementsAre(7 * 4 + 2, 7 * 4 + 3, 2 * 4 + 0, 9 * 4 + 1, 76, 77,
                                              78, 79, 4 * 4 + 0, 4 * 4 + 1));
  EXPECT_THAT(flat->cu_query_lens, ElementsAre(0, 3, 4, 10));
  EXPECT_THAT(flat->start_pos, ElementsAre(2, 13, 0));
  EXPECT_EQ(flat->max_blocks_per_seq, 4);
  EXPECT_THAT(flat->block_tables, ElementsAre(7, 2, -1, -1, 3, 11, 0, 9, 19, 4, -1, -1));
  EXPECT_THAT(flat->logit_rows, ElementsAre(3, 9));  // chunk a wants none
  batch.all_logits = true;
  flat = FlattenBatch(batch, Limits());
  ASSERT_TRUE(flat.ok());
  EXPECT_THAT(flat->logit_rows, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
}

TEST(FlattenBatchTest, EmptyBatchIsEmpty) {
  auto flat = FlattenBatch(BatchInput{}, Limits());
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->num_tokens, 0);
  EXPECT_THAT(flat->cu_query_lens, ElementsAre(0));
}

void ExpectError(const std::vector<SequenceChunk>& chunks, const std::string& needle) {
  BatchInput batch;
  batch.chunks = chunks;
  const absl::Status status = FlattenBatch(batch, Limits()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << needle;
  EXPECT_NE(status.message().find(needle), std::string::npos) << status;
}

TEST(FlattenBatchTest, Errors) {
  const std::vector<int32_t> ok = {1, 2}, big = {1, 50}, table = {0, 1};
  const std::vector<int32_t> far = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  ExpectError({{1, ok, 0, table}, {4, big, 0, table}}, "batch chunk 1 (seq 4): token_ids[1] = 50");
  ExpectError({{1, {}, 0, table}}, "batch chunk 0 (seq 1): no tokens");
  ExpectError({{1, ok, -1, table}}, "start_pos -1");
  ExpectError({{1, ok, 63, far}}, "positions up to 64 reach past the context length 64");
  ExpectError({{1, ok, 7, table}}, "block_table has 2 blocks; positions up to 8 need 3");
  const std::vector<int32_t> outside = {0, 20};
  ExpectError({{1, ok, 4, outside}}, "block_table[1] = 20 is outside the pool [0, 20)");
  ExpectError({{1, ok, 0, table}, {1, ok, 2, table}}, "batch chunk 1 (seq 1): the sequence");
}

}  // namespace
}  // namespace onecard::engine
