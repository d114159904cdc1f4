// Tests router/table_keeper.h: tables taken as they are while the watch
// stays connected; after a reconnect, workers the new tables lack are kept
// for the grace, fresh again when listed, dropped when it passes.
#include "router/table_keeper.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace onecard::router {
namespace {

std::vector<WorkerDesc> Table(const std::vector<std::string>& ids) {
  std::vector<WorkerDesc> table;
  for (const std::string& id : ids) table.push_back(WorkerDesc{.id = id, .address = id + ":1"});
  return table;
}

std::vector<std::string> Ids(const std::vector<WorkerDesc>& workers) {
  std::vector<std::string> ids;
  for (const WorkerDesc& w : workers) ids.push_back(w.id);
  return ids;
}

using IdList = std::vector<std::string>;

TEST(WorkerTableKeeperTest, ConnectedTablesAreTakenAsTheyAre) {
  WorkerTableKeeper keeper(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(Ids(keeper.Apply(Table({"a", "b"}), true, t0)), (IdList{"a", "b"}));
  EXPECT_EQ(Ids(keeper.Apply(Table({"a"}), false, t0)), (IdList{"a"}));  // b left
  EXPECT_EQ(keeper.stale(), 0);
}

// Issue 22: a restart of the control plane emptied the router's table until
// the worker registered again; every request meanwhile failed.
TEST(WorkerTableKeeperTest, AfterAReconnectMissingWorkersStayForTheGrace) {
  WorkerTableKeeper keeper(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  keeper.Apply(Table({"a", "b"}), true, t0);
  // The restarted control plane knows no worker yet, then only b.
  EXPECT_EQ(Ids(keeper.Apply(Table({}), true, t0 + absl::Seconds(1))), (IdList{"a", "b"}));
  EXPECT_EQ(keeper.stale(), 2);
  EXPECT_EQ(Ids(keeper.Apply(Table({"b"}), false, t0 + absl::Seconds(2))), (IdList{"b", "a"}));
  EXPECT_EQ(keeper.stale(), 1);
  EXPECT_FALSE(keeper.Expire(t0 + absl::Seconds(10)));
  EXPECT_TRUE(keeper.Expire(t0 + absl::Seconds(11)));  // a never came back
  EXPECT_EQ(Ids(keeper.workers()), (IdList{"b"}));
  // Once fresh, b leaving is a real leave.
  EXPECT_EQ(Ids(keeper.Apply(Table({}), false, t0 + absl::Seconds(12))), (IdList{}));
}

TEST(WorkerTableKeeperTest, AStaleWorkerListedAgainIsFresh) {
  WorkerTableKeeper keeper(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  keeper.Apply(Table({"a"}), true, t0);
  keeper.Apply(Table({}), true, t0 + absl::Seconds(1));
  EXPECT_EQ(Ids(keeper.Apply(Table({"a"}), false, t0 + absl::Seconds(3))), (IdList{"a"}));
  EXPECT_EQ(keeper.stale(), 0);
  EXPECT_FALSE(keeper.Expire(t0 + absl::Seconds(30)));
  EXPECT_EQ(Ids(keeper.workers()), (IdList{"a"}));
}

}  // namespace
}  // namespace onecard::router
