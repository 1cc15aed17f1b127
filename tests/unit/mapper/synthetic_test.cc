// Synthetic allocations: whole-host fragments (fragmented_hosts) take exactly the busy share,
// leave leaves with odd free counts, hand out the lowest-named free hosts whole, and are
// deterministic for a seed.
#include "topoaware/mapper/synthetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "topoaware/mapper/layout.h"
#include "topoaware/topology/paths.h"

namespace topoaware::mapper {
namespace {

topology::Fabric cluster(bool scramble) {
  FatTreeSpec s;
  s.hosts = 128;
  s.hosts_per_leaf = 16;
  s.scramble_names = scramble;
  return make_fat_tree(s);
}

TEST(SyntheticFragmentedHosts, WholeHostsInNameOrderFromTheFreeOnes) {
  topology::Fabric f = cluster(false);
  Allocation a = fragmented_hosts(f, 8, 0.7, 20, 5);
  ASSERT_EQ(a.hosts.size(), 20u);
  EXPECT_TRUE(std::is_sorted(a.hosts.begin(), a.hosts.end()));
  EXPECT_EQ(std::set<std::string>(a.hosts.begin(), a.hosts.end()).size(), 20u);
  for (int t : a.tasks_per_host) EXPECT_EQ(t, 8);
  // 70% of 128 hosts busy leaves 38 free: all of them is the whole free set, and the first 20
  // of it is the allocation (Slurm's lowest-named free hosts).
  Allocation all = fragmented_hosts(f, 8, 0.7, 38, 5);
  EXPECT_TRUE(std::equal(a.hosts.begin(), a.hosts.end(), all.hosts.begin()));
  EXPECT_THROW(fragmented_hosts(f, 8, 0.7, 39, 5), Error);
}

TEST(SyntheticFragmentedHosts, LeavesKeepRandomOftenOddFreeCounts) {
  topology::Fabric f = cluster(false);
  int odd = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    Allocation all = fragmented_hosts(f, 8, 0.5, 64, seed);
    std::map<std::uint32_t, int> free_per_leaf;
    for (const auto& h : all.hosts) ++free_per_leaf[f.host_index.at(h) / 16];
    for (const auto& [leaf, n] : free_per_leaf) odd += n % 2;
    EXPECT_GT(free_per_leaf.size(), 4u);  // 64 free hosts are not the first 4 leaves
  }
  EXPECT_GT(odd, 0);
}

TEST(SyntheticFragmentedHosts, DeterministicPerSeedAndScatteredByNames) {
  topology::Fabric f = cluster(true);
  Allocation a = fragmented_hosts(f, 8, 0.5, 16, 9);
  Allocation b = fragmented_hosts(f, 8, 0.5, 16, 9);
  Allocation c = fragmented_hosts(f, 8, 0.5, 16, 10);
  EXPECT_EQ(a.hosts, b.hosts);
  EXPECT_NE(a.hosts, c.hosts);
  // Names shuffled against the wiring: Slurm's name order spreads the job over several leaves.
  std::set<std::uint32_t> leaves;
  for (const auto& h : a.hosts) leaves.insert(f.host_index.at(h) / 16);
  EXPECT_GT(leaves.size(), 2u);
  EXPECT_THROW(fragmented_hosts(f, 8, 1.5, 1, 1), Error);
}

}  // namespace
}  // namespace topoaware::mapper

TEST(SyntheticNode, EachGpuHasOneNearestNicAndNicsAreSharedEvenly) {
  for (auto [gpus, nics] : {std::pair{8, 8}, {8, 4}, {8, 2}, {4, 1}, {8, 3}}) {
    topoaware::topology::NodeTopology node = topoaware::mapper::make_node(gpus, nics, 450, 50);
    std::map<std::size_t, int> users;  // NIC vertex -> GPUs it is nearest to
    for (const auto& l : topoaware::topology::gpu_locality(node)) {
      ASSERT_EQ(l.nearest_nics.size(), 1u) << gpus << " GPUs, " << nics << " NICs";
      ++users[l.nearest_nics[0].value];
    }
    ASSERT_EQ(users.size(), static_cast<std::size_t>(nics)) << gpus << " GPUs, " << nics;
    for (auto [nic, n] : users) {
      EXPECT_GE(n, gpus / nics) << gpus << " GPUs, " << nics << " NICs";
      EXPECT_LE(n, (gpus + nics - 1) / nics) << gpus << " GPUs, " << nics << " NICs";
    }
  }
}
