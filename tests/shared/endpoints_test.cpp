// command_endpoint_for: the command socket sits on the port after the PUB socket.
#include <gtest/gtest.h>

#include "keel/wire/codec.hpp"

namespace keel::wire {
namespace {

TEST(CommandEndpoint, NextPort) {
  EXPECT_EQ(command_endpoint_for(kDefaultPubEndpoint), "tcp://127.0.0.1:5558");
  EXPECT_EQ(command_endpoint_for("tcp://*:6000"), "tcp://*:6001");
  EXPECT_EQ(command_endpoint_for("tcp://[::1]:5557"), "tcp://[::1]:5558");
  EXPECT_EQ(command_endpoint_for("tcp://gpu-node-3:9"), "tcp://gpu-node-3:10");
  EXPECT_EQ(command_endpoint_for("tcp://eth0:65534"), "tcp://eth0:65535");
}

TEST(CommandEndpoint, EmptyWhenThereIsNoNextPort) {
  EXPECT_EQ(command_endpoint_for("tcp://127.0.0.1:65535"), "");
  EXPECT_EQ(command_endpoint_for("tcp://127.0.0.1:0"), "");
  EXPECT_EQ(command_endpoint_for("tcp://127.0.0.1:*"), "");
  EXPECT_EQ(command_endpoint_for("tcp://127.0.0.1:"), "");
  EXPECT_EQ(command_endpoint_for("tcp://127.0.0.1:55x7"), "");
  EXPECT_EQ(command_endpoint_for("tcp://127.0.0.1:123456"), "");
  EXPECT_EQ(command_endpoint_for("tcp://127.0.0.1"), "");
  EXPECT_EQ(command_endpoint_for("ipc:///tmp/keel.sock"), "");
  EXPECT_EQ(command_endpoint_for(""), "");
}

}  // namespace
}  // namespace keel::wire
