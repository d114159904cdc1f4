// Tests of the main() helpers: address parsing, a gRPC server on port 0
// reporting its bound port, a bind failure as UNAVAILABLE. ShutdownSignals
// has its own binary (shutdown_signals_test.cc).
#include "services/common/server_main.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onecard/v1/generation.grpc.pb.h"

namespace onecard::services {
namespace {

TEST(ServerMainTest, ParsesAndJoinsHostPort) {
  absl::StatusOr<HostPort> v4 = ParseHostPort("127.0.0.1:8080");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 8080);
  absl::StatusOr<HostPort> v6 = ParseHostPort("[::1]:0");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(JoinHostPort("::1", 5), "[::1]:5");
  EXPECT_EQ(JoinHostPort("localhost", 5), "localhost:5");
  for (const char* bad : {"localhost", "host:", "host:http", "host:70000", "host:-1"}) {
    const absl::Status s = ParseHostPort(bad).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), ::testing::HasSubstr(bad));
  }
}

TEST(ServerMainTest, AdvertisedAddress) {
  EXPECT_EQ(AdvertisedAddress("worker-0.svc:50051", "0.0.0.0:1234"), "worker-0.svc:50051");
  EXPECT_EQ(AdvertisedAddress("", "127.0.0.1:1234"), "127.0.0.1:1234");
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_EQ(AdvertisedAddress("", "0.0.0.0:1234"), std::string(host) + ":1234");
}

TEST(ServerMainTest, StartsOnPortZero) {
  v1::Generation::CallbackService service;  // a server needs one service
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  absl::StatusOr<StartedServer> started = StartGrpcServer(&builder, "127.0.0.1:0");
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_GT(started->port, 0);
  EXPECT_EQ(started->address, "127.0.0.1:" + std::to_string(started->port));
  started->server->Shutdown();
}

TEST(ServerMainTest, BindFailureIsUnavailable) {
  grpc::ServerBuilder builder;
  // 192.0.2.0/24 (TEST-NET-1) is never a local address, so bind fails.
  const absl::Status s = StartGrpcServer(&builder, "192.0.2.1:0").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("192.0.2.1:0"));
}

}  // namespace
}  // namespace onecard::services
