// Tests services/metrics/aggregate.h on hand-built snapshots; every expected
// number is worked out by hand in the comments beside it.
#include "services/metrics/aggregate.h"

#include <string>

#include "gtest/gtest.h"

namespace onecard::services::metrics {
namespace {

WorkerView Worker(const std::string &id, bool live, int32_t max_num_seqs) {
  WorkerView view;
  view.entry.set_worker_id(id);
  view.entry.mutable_info()->set_max_num_seqs(max_num_seqs);
  view.live = live;
  return view;
}

void SetLoad(WorkerView &view, int64_t waiting, int64_t running, int64_t kv_used, int64_t kv_total,
             double tokens_per_second, bool draining = false) {
  v1::WorkerLoadReport *load = view.entry.mutable_load();
  load->set_waiting(waiting);
  load->set_running(running);
  load->set_kv_blocks_used(kv_used);
  load->set_kv_blocks_total(kv_total);
  load->set_tokens_per_second(tokens_per_second);
  load->set_draining(draining);
}

void AddDepth(google::protobuf::RepeatedPtrField<v1::PriorityQueueDepth> *parts,
              v1::Priority priority, int64_t depth) {
  v1::PriorityQueueDepth *part = parts->Add();
  part->set_priority(priority);
  part->set_depth(depth);
}

RouterView Router(const std::string &id, bool live) {
  RouterView view;
  view.router_id = id;
  view.live = live;
  return view;
}

TEST(AggregateTest, EmptyClusterIsAllZero) {
  const ClusterLoad load = Aggregate(RegistrySnapshot{});
  EXPECT_EQ(load.queue_depth, 0);
  EXPECT_EQ(load.running, 0);
  EXPECT_EQ(load.saturation, 0.0);
  EXPECT_EQ(load.kv_cache_usage_mean, 0.0);
  EXPECT_EQ(load.workers_healthy, 0);
}

TEST(AggregateTest, MixedClusterByHand) {
  RegistrySnapshot snapshot;
  WorkerView w1 = Worker("w1", true, 8);
  SetLoad(w1, /*waiting=*/3, /*running=*/4, 30, 100, 10.0);
  AddDepth(w1.entry.mutable_load()->mutable_waiting_by_priority(), v1::PRIORITY_INTERACTIVE, 1);
  WorkerView w2 = Worker("w2", true, 8);
  SetLoad(w2, 0, 2, 50, 100, 5.0, /*draining=*/true);
  WorkerView w3 = Worker("w3", /*live=*/false, 8);  // silent: left out
  SetLoad(w3, 9, 9, 90, 100, 100.0);
  WorkerView w4 = Worker("w4", true, 4);  // registered, no report yet
  snapshot.workers = {w1, w2, w3, w4};

  RouterView r1 = Router("r1", true);
  r1.load.emplace();
  AddDepth(r1.load->mutable_queue_depth(), v1::PRIORITY_INTERACTIVE, 2);
  AddDepth(r1.load->mutable_queue_depth(), v1::PRIORITY_BATCH, 5);
  r1.load->set_in_flight(6);
  RouterView r2 = Router("r2", /*live=*/false);
  r2.load.emplace();
  AddDepth(r2.load->mutable_queue_depth(), v1::PRIORITY_STANDARD, 100);
  snapshot.routers = {r1, r2, Router("r3", true)};

  const ClusterLoad load = Aggregate(snapshot);
  EXPECT_EQ(load.queue_depth_by_priority[0], 3);  // r1 2 + w1 1
  EXPECT_EQ(load.queue_depth_by_priority[1], 2);  // w1's unattributed 3 - 1
  EXPECT_EQ(load.queue_depth_by_priority[2], 5);  // r1
  EXPECT_EQ(load.queue_depth, 10);
  EXPECT_EQ(load.router_queue_depth, 7);
  EXPECT_EQ(load.worker_waiting, 3);
  EXPECT_EQ(load.running, 6);                       // w1 4 + w2 2
  EXPECT_EQ(load.router_in_flight, 6);              // r1
  EXPECT_DOUBLE_EQ(load.kv_cache_usage_mean, 0.4);  // (0.3 + 0.5) / 2
  EXPECT_DOUBLE_EQ(load.kv_cache_usage_max, 0.5);
  EXPECT_EQ(load.sequence_slots, 12);  // w1 8 + w4 4 (w2 drains)
  EXPECT_DOUBLE_EQ(load.saturation,
                   16.0 / 12.0);  // (6 running + 10 queued) / 12
  EXPECT_DOUBLE_EQ(load.tokens_per_second, 15.0);
  EXPECT_EQ(load.workers_healthy, 2);
  EXPECT_EQ(load.workers_draining, 1);
  EXPECT_EQ(load.workers_unhealthy, 1);
  EXPECT_EQ(load.routers_live, 2);
}

TEST(AggregateTest, KvUsageDominatesWhenSlotsAreFree) {
  RegistrySnapshot snapshot;
  WorkerView w = Worker("w", true, 64);
  SetLoad(w, 0, 2, 90, 100, 0.0);
  snapshot.workers = {w};
  const ClusterLoad load = Aggregate(snapshot);
  EXPECT_DOUBLE_EQ(load.saturation, 0.9);  // max(0.9, 2 / 64)
}

TEST(AggregateTest, QueueWithoutWorkersReadsAsSaturatedNotInfinite) {
  RegistrySnapshot snapshot;
  RouterView r = Router("r", true);
  r.load.emplace();
  AddDepth(r.load->mutable_queue_depth(), v1::PRIORITY_UNSPECIFIED, 3);
  snapshot.routers = {r};
  const ClusterLoad load = Aggregate(snapshot);
  EXPECT_EQ(load.queue_depth_by_priority[1],
            3);                            // unspecified counts as standard
  EXPECT_DOUBLE_EQ(load.saturation, 3.0);  // 3 queued / max(0 slots, 1)
}

TEST(AggregateTest, OverAttributedWaitingIsNotNegative) {
  RegistrySnapshot snapshot;
  WorkerView w = Worker("w", true, 4);
  SetLoad(w, /*waiting=*/1, 0, 0, 0, 0.0);  // kv total 0: not in the KV mean
  AddDepth(w.entry.mutable_load()->mutable_waiting_by_priority(), v1::PRIORITY_BATCH, 2);
  snapshot.workers = {w};
  const ClusterLoad load = Aggregate(snapshot);
  EXPECT_EQ(load.queue_depth_by_priority[1], 0);
  EXPECT_EQ(load.queue_depth_by_priority[2], 2);
  EXPECT_EQ(load.queue_depth, 2);
  EXPECT_EQ(load.worker_waiting, 2);
  EXPECT_EQ(load.kv_cache_usage_mean, 0.0);
}

TEST(AggregateTest, PriorityLabels) {
  EXPECT_STREQ(PriorityLabel(v1::PRIORITY_INTERACTIVE), "interactive");
  EXPECT_STREQ(PriorityLabel(v1::PRIORITY_STANDARD), "standard");
  EXPECT_STREQ(PriorityLabel(v1::PRIORITY_UNSPECIFIED), "standard");
  EXPECT_STREQ(PriorityLabel(v1::PRIORITY_BATCH), "batch");
}

}  // namespace
}  // namespace onecard::services::metrics
