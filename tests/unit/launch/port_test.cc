// MASTER_PORT per step (port.h): inside 20000-65535, outside the kernel's ephemeral range, distinct
// for the steps of one job, and the ephemeral range read from the file Linux keeps it in.
#include "topoaware/launch/port.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace topoaware::launch {
namespace {

TEST(MasterPort, OutsideTheEphemeralRangeAndDistinctPerStep) {
  const PortRange linux_default;  // 32768-60999
  std::set<int> ports, first;
  for (std::uint32_t step = 0; step < 2000; ++step) {
    const int port = master_port(123456, step, linux_default);
    EXPECT_GE(port, 20000);
    EXPECT_LE(port, 65535);
    EXPECT_TRUE(port < 32768 || port > 60999) << port;
    EXPECT_TRUE(ports.insert(port).second) << "step " << step << " reuses " << port;
    if (step < 64) first.insert(port);
  }
  // The next job's first 64 steps are not this job's first 64.
  for (std::uint32_t step = 0; step < 64; ++step) {
    EXPECT_EQ(first.count(master_port(123457, step, linux_default)), 0u) << step;
  }
  // The same job and step give the same port: srun derives it once, `map` again offline.
  EXPECT_EQ(master_port(77, 3, linux_default), master_port(77, 3, linux_default));
}

TEST(MasterPort, FollowsTheRangeItIsGiven) {
  // Ephemeral ports from 20000 up to 50000: what is left above it.
  for (std::uint32_t job = 0; job < 500; ++job) {
    const int port = master_port(job, 1, PortRange{20000, 50000});
    EXPECT_GT(port, 50000) << job;
  }
  // Everything from 1024 up ephemeral except a few ports: below 20000 is all there is.
  for (std::uint32_t job = 0; job < 500; ++job) {
    const int port = master_port(job, 0, PortRange{15000, 65535});
    EXPECT_GE(port, 1024);
    EXPECT_LT(port, 15000) << job;
  }
}

TEST(EphemeralPorts, ReadFromTheFileElseLinuxDefault) {
  const auto dir = std::filesystem::temp_directory_path() / "topo-aware-port-test";
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "ip_local_port_range").string();
  std::ofstream(file) << "40000\t50000\n";
  const PortRange r = ephemeral_ports(file);
  EXPECT_EQ(r.first, 40000);
  EXPECT_EQ(r.last, 50000);
  const PortRange missing = ephemeral_ports((dir / "none").string());
  EXPECT_EQ(missing.first, 32768);
  EXPECT_EQ(missing.last, 60999);
  std::ofstream(file) << "50000 40000\n";  // not a range
  EXPECT_EQ(ephemeral_ports(file).first, 32768);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace topoaware::launch
