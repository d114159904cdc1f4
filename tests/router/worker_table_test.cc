// Tests router/worker_table.h: the control plane's table and the static
// endpoints become WorkerDescs with the right capacity, health and load;
// DNS names resolve to every address.
#include "router/worker_table.h"

#include "gtest/gtest.h"

namespace onecard::router {
namespace {

onecard::v1::WorkerTable Table() {
  onecard::v1::WorkerTable t;
  onecard::v1::WorkerEntry* e = t.add_workers();
  e->set_worker_id("w1");
  e->set_address("10.0.0.1:50051");
  e->set_healthy(true);
  e->mutable_info()->set_max_num_seqs(32);
  e->mutable_info()->mutable_model()->set_id("smol");
  onecard::v1::WorkerLoadReport* r = e->mutable_load();
  r->set_waiting(2);
  r->set_running(5);
  r->set_kv_blocks_used(10);
  r->set_kv_blocks_total(100);
  r->set_sequence(17);
  e = t.add_workers();
  e->set_worker_id("w2");
  e->set_address("10.0.0.2:50051");
  e->set_healthy(false);
  return t;
}

TEST(WorkerTableTest, FromControlPlane) {
  std::vector<WorkerDesc> d = FromWorkerTable(Table(), "", 0);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, "w1");
  EXPECT_EQ(d[0].address, "10.0.0.1:50051");
  EXPECT_TRUE(d[0].healthy);
  EXPECT_EQ(d[0].capacity, 32);  // the worker's max_num_seqs
  ASSERT_TRUE(d[0].load.has_value());
  EXPECT_EQ(d[0].load->waiting, 2);
  EXPECT_EQ(d[0].load->running, 5);
  EXPECT_EQ(d[0].load->kv_blocks_total, 100);
  EXPECT_EQ(d[0].load->sequence, 17);
  EXPECT_FALSE(d[1].healthy);
  EXPECT_FALSE(d[1].load.has_value());
  EXPECT_EQ(d[1].capacity, 0);  // the pool's default
  // The configured bound wins; a model filter drops other models.
  EXPECT_EQ(FromWorkerTable(Table(), "", 4)[0].capacity, 4);
  std::vector<WorkerDesc> other = FromWorkerTable(Table(), "llama", 0);
  ASSERT_EQ(other.size(), 1u);  // w2 says nothing about its model: kept
  EXPECT_EQ(other[0].id, "w2");
}

TEST(WorkerTableTest, FromStaticEndpoints) {
  absl::flat_hash_map<std::string, onecard::v1::WorkerInfo> infos;
  infos["b:2"].set_max_num_seqs(16);
  std::vector<WorkerDesc> d = FromStaticEndpoints({"a:1", "b:2", "a:1"}, infos, 0);
  ASSERT_EQ(d.size(), 2u);  // duplicates once
  EXPECT_EQ(d[0].id, "a:1");
  EXPECT_EQ(d[0].capacity, 0);
  EXPECT_EQ(d[1].capacity, 16);
  EXPECT_TRUE(d[1].healthy);
  EXPECT_EQ(FromStaticEndpoints({"b:2"}, infos, 3)[0].capacity, 3);
}

TEST(WorkerTableTest, ResolvesNames) {
  absl::StatusOr<std::vector<std::string>> r = ResolveAll("localhost:7000");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->empty());
  bool loopback = false;
  for (const std::string& a : *r) loopback |= a == "127.0.0.1:7000" || a == "[::1]:7000";
  EXPECT_TRUE(loopback);
  EXPECT_EQ(*ResolveAll("127.0.0.1:9"), std::vector<std::string>{"127.0.0.1:9"});
  absl::Status bad = ResolveAll("no-such-host.invalid:1").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(bad.message().find("no-such-host.invalid"), std::string::npos);
  EXPECT_FALSE(ResolveAll("no-port").ok());
}

}  // namespace
}  // namespace onecard::router
