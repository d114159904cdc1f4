// ShutdownSignals: SIGTERM sent to the process reaches Wait(), and Trigger()
// does too. A binary of its own: Install() must run before any other thread
// exists (threads inherit the blocked mask; a thread started earlier, such as
// gRPC's in the other server_main tests, may take a process-directed SIGTERM
// with the default action and end the process), as in the services' main().
#include <signal.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "services/common/server_main.h"

namespace onecard::services {
namespace {

TEST(ShutdownSignalsTest, SigtermReachesWait) {
  absl::StatusOr<std::unique_ptr<ShutdownSignals>> signals = ShutdownSignals::Install();
  ASSERT_TRUE(signals.ok());
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  EXPECT_EQ((*signals)->Wait(), SIGTERM);
}

TEST(ShutdownSignalsTest, TriggerReachesWait) {
  absl::StatusOr<std::unique_ptr<ShutdownSignals>> signals = ShutdownSignals::Install();
  ASSERT_TRUE(signals.ok());
  (*signals)->Trigger();
  EXPECT_EQ((*signals)->Wait(), 0);
}

}  // namespace
}  // namespace onecard::services
