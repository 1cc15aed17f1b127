// Slurm topology.conf importer and exporters (tree and block) against real files.
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "fabric_test_support.h"
#include "test_support.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::topology {
namespace {

using test::leaf_membership;
using test::level;
using test::load_error;
using test::switch_count;
using test::tier_of;
using test::write_temp;

TEST(FabricSlurm, NstdaTaraTwoLevels) {
  TOPOAWARE_SHARED_OR_SKIP(path, "slurm-topology/nstda-tara-2level-dgx1.topology.conf");
  Fabric f = load_fabric(path);  // no trailing newline in this file
  EXPECT_EQ(switch_count(f), 5u);
  EXPECT_EQ(f.hosts.size(), 10u);
  EXPECT_EQ(tier_of(f, "s4"), 2);
  EXPECT_EQ(tier_of(f, "s3"), 1);
  EXPECT_EQ(leaf_membership(f).at("s3"), (std::set<std::string>{"tara-dgx1-001", "tara-dgx1-002"}));
  // No LinkSpeed: the assumed default is said, and used.
  ASSERT_FALSE(f.notes.empty());
  EXPECT_NE(f.notes[0].find("placeholder of 100 Gb/s"), std::string::npos);
  EXPECT_DOUBLE_EQ(f.hosts[0].port_gbps[0], 12.5);
  // 4 leaves with 10 hosts down, 4 cables up to s4.
  EXPECT_DOUBLE_EQ(f.tiers[0].oversubscription, 2.5);
}

TEST(FabricSlurm, PsmnGeneratedTreeWithSwitchCycle) {
  Fabric f =
      load_fabric(test::fixture("slurm-topology/psmn-x5-tree-from-ibnetdiscover.topology.conf"));
  EXPECT_EQ(switch_count(f), 11u);
  EXPECT_EQ(f.hosts.size(), 89u);
  EXPECT_EQ(leaf_membership(f).at("S-0008f105002036b4").size(), 24u);
  // S-...851e and S-...86a2 list each other in Switches=; the file still loads, and every leaf
  // stays below both.
  EXPECT_GT(tier_of(f, "S-0008f1050010851e"), 1);
  EXPECT_GT(tier_of(f, "S-0008f105001086a2"), 1);
  EXPECT_EQ(f.levels.back().group_uplink_gbps.size(), 1u);  // one connected fabric
}

TEST(FabricSlurm, UnbalancedFourLevelTree) {
  Fabric f = load_fabric(
      test::fixture("slurm-topology/slurm-testsuite-4level-tree-unbalanced.topology.conf"));
  EXPECT_EQ(switch_count(f), 528u);
  EXPECT_EQ(f.hosts.size(), 10000u);
  EXPECT_EQ(tier_of(f, "leaf100"), 1);
  EXPECT_EQ(tier_of(f, "grp10"), 2);
  EXPECT_EQ(tier_of(f, "im0"), 3);
  EXPECT_EQ(tier_of(f, "root"), 4);  // root is above im0 although it also holds grp23 directly
  EXPECT_EQ(leaf_membership(f).at("leaf599").size(), 20u);
  EXPECT_EQ(f.find_host("peta19999"), 9999);
}

TEST(FabricSlurm, DisconnectedTrunksStaySeparate) {
  Fabric f = load_fabric(
      test::fixture("slurm-topology/slurm-testsuite-disconnected-trunks.topology.conf"));
  EXPECT_EQ(switch_count(f), 7u);
  EXPECT_EQ(f.hosts.size(), 40u);
  // The outermost level: trunk A, trunk B and the standalone leafC.
  EXPECT_EQ(f.levels.back().group_uplink_gbps.size(), 3u);
  auto key1 = f.locality_key(static_cast<std::uint32_t>(f.find_host("node1")));
  auto key9 = f.locality_key(static_cast<std::uint32_t>(f.find_host("node9")));
  auto key17 = f.locality_key(static_cast<std::uint32_t>(f.find_host("node17")));
  EXPECT_NE(key1[1], key9[1]);           // different leaves
  EXPECT_EQ(key1.back(), key9.back());   // same trunk
  EXPECT_NE(key1.back(), key17.back());  // other trunk
}

TEST(FabricSlurm, BlockWithBlockSizes) {
  Fabric f = load_fabric(
      test::fixture("slurm-topology/slurm-testsuite-block-8x4-blocksizes.topology.conf"));
  EXPECT_EQ(f.hosts.size(), 32u);
  ASSERT_EQ(f.blocks.size(), 8u);
  EXPECT_EQ(f.blocks[1].first, "b2");
  EXPECT_EQ(f.block_sizes, (std::vector<int>{4, 8, 16, 32, 64}));
  const LocalityLevel* b = level(f, "block");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->group_uplink_gbps.size(), 8u);
  const LocalityLevel* b16 = level(f, "block16");
  ASSERT_NE(b16, nullptr);
  EXPECT_EQ(b16->group_uplink_gbps.size(), 2u);  // node[01-16], node[17-32]
  // Exported back, the same blocks and sizes (capped where slurmctld stops: 8 blocks).
  std::string out = to_slurm_block(f);
  EXPECT_NE(out.find("BlockName=b1 Nodes=node[01-04]\n"), std::string::npos) << out;
  EXPECT_NE(out.find("BlockSizes=4,8,16,32\n"), std::string::npos) << out;
  Fabric again = load_fabric(write_temp("block-again.conf", out));
  EXPECT_EQ(leaf_membership(again), leaf_membership(f));
}

// BlockSizes arrived in 24.05 and a 23.11 slurmctld refuses a file with it; there is no
// topology/block before 23.11 (topology.conf(5) of each release).
TEST(FabricSlurm, BlockFollowsTheSlurmReleaseItIsFor) {
  Fabric f = load_fabric(
      test::fixture("slurm-topology/slurm-testsuite-block-8x4-blocksizes.topology.conf"));
  const std::string r2405 = to_slurm_block(f, {24, 5}, "--slurm-version");
  EXPECT_NE(r2405.find("for Slurm 24.05 (--slurm-version)"), std::string::npos) << r2405;
  EXPECT_NE(r2405.find("\nBlockSizes=4,8,16,32\n"), std::string::npos) << r2405;
  const std::string r2311 = to_slurm_block(f, {23, 11}, "scontrol --version");
  EXPECT_EQ(r2311.find("\nBlockSizes="), std::string::npos) << r2311;
  EXPECT_NE(r2311.find("# BlockSizes left out: Slurm 23.11 reads none"), std::string::npos)
      << r2311;
  EXPECT_NE(r2311.find("BlockSizes=4,8,16,32\n"), std::string::npos) << r2311;  // in the note
  // What 23.11 gets loads back as the same blocks, with Slurm's own default sizes.
  Fabric again = load_fabric(write_temp("block-2311.conf", r2311));
  EXPECT_EQ(leaf_membership(again), leaf_membership(f));
  EXPECT_TRUE(again.block_sizes.empty() || again.block_sizes.front() == 4);
  try {
    (void)to_slurm_block(f, {23, 2}, "scontrol --version");
    ADD_FAILURE() << "23.02 has no topology/block";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Slurm 23.02 (scontrol --version)"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--of slurm-tree"), std::string::npos) << e.what();
  }
}

TEST(FabricSlurm, SlurmReleasesParseAsScontrolPrintsThem) {
  EXPECT_EQ(parse_slurm_release("24.05"), (SlurmRelease{24, 5}));
  EXPECT_EQ(parse_slurm_release("slurm 22.05.8\n"), (SlurmRelease{22, 5}));
  EXPECT_EQ(parse_slurm_release("slurm-wlm 22.05.8\n"), (SlurmRelease{22, 5}));
  EXPECT_EQ(parse_slurm_release("23.11.4-1ubuntu1"), (SlurmRelease{23, 11}));
  EXPECT_LT(*parse_slurm_release("23.11"), (SlurmRelease{24, 5}));
  EXPECT_EQ(slurm_release_name({23, 2}), "23.02");
  for (const char* bad : {"", "24", "24.", ".05", "x24.05", "24.05x", "24.13", "slurm", "0.1",
                          "1234.05", "24.05 extra"}) {
    EXPECT_FALSE(parse_slurm_release(bad).has_value()) << bad;
  }
}

TEST(FabricSlurm, YamlAndGresConfAreRefusedForWhatTheyAre) {
  TOPOAWARE_SHARED_OR_SKIP(yaml,
                           "slurm-topology/slurm-manpage-example-multi-topology.topology.yaml");
  Error y = load_error(yaml);
  EXPECT_EQ(y.code(), ErrorCode::kUnsupported);
  EXPECT_NE(std::string(y.what()).find("topology.yaml"), std::string::npos);
  for (const char* g : {"slurm-topology/slurm-test39.18-8xA100-links.gres.conf",
                        "slurm-topology/slurm-test39.18-8xtesla-nvlink-counts.gres.conf"}) {
    TOPOAWARE_SHARED_OR_SKIP(gres, g);
    Error e = load_error(gres);
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("gres.conf"), std::string::npos) << e.what();
    EXPECT_NE(e.context().find(":2"), std::string::npos) << e.context();
  }
}

TEST(FabricSlurm, NodeUnderTwoSwitchesNamesBothLines) {
  Error e = load_error(write_temp("two.conf",
                                  "SwitchName=l1 Nodes=n[1-4]\n"
                                  "# comment\n"
                                  "SwitchName=l2 Nodes=n[4-8]\n"
                                  "SwitchName=top Switches=l[1-2]\n"));
  EXPECT_NE(e.context().find("two.conf:3"), std::string::npos) << e.context();
  std::string msg = e.what();
  EXPECT_NE(msg.find("n4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("l1 (line 1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("switch l2"), std::string::npos) << msg;
}

TEST(FabricSlurm, BadFilesAreRefusedAtTheirLine) {
  struct Case {
    const char* text;
    const char* where;
    const char* says;
  } cases[] = {
      {"SwitchName=a Nodes=n1\nSwitchName=b Switches=a,c\n", ":2", "no SwitchName= line defines"},
      {"SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n", ":2", "defined twice"},
      {"SwitchName=a Nodes=n1 Speed=3\n", ":1", "unknown parameter"},
      {"SwitchName=a Nodes=n1 LinkSpeed=fast\n", ":1", "LinkSpeed"},
      {"SwitchName=a Nodes=n[1-3\n", ":1", "bad hostlist"},
      {"SwitchName=a Nodes=n1\nBlockName=b Nodes=n2\n", ":2", "mixes"},
      {"BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,12\n", ":2", "power of two"},
      {"BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-6]\nBlockSizes=4,8\n", ":2",
       "fewer than"},
      {"SwitchName=a \\\n  Nodes=n1 \\\n  Bogus=1\n", ":1", "unknown parameter"},
  };
  for (const Case& c : cases) {
    Error e = load_error(write_temp("bad.conf", c.text));
    EXPECT_NE(e.context().find(c.where), std::string::npos) << c.text << " -> " << e.context();
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos)
        << c.text << " -> " << e.what();
  }
}

TEST(FabricSlurm, HugeHostlistIsRefusedAtOnce) {
  auto t0 = std::chrono::steady_clock::now();
  Error e = load_error(write_temp("huge.conf", "SwitchName=s Nodes=n[1-999999999]\n"));
  EXPECT_EQ(e.code(), ErrorCode::kLimit);
  EXPECT_NE(e.context().find("huge.conf:1"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

// A fuzz finding (tests/fuzz/regressions/slurm_topology): 916,293 hosts from one short range took
// 13 s and 1.5 GiB to build under the old limit of 2^20. A fabric now names at most 131,072 hosts,
// counted over every line before any is made.
TEST(FabricSlurm, AFabricNamesAtMostTheHostLimit) {
  auto t0 = std::chrono::steady_clock::now();
  Error one = load_error(write_temp("range.conf", "SwitchName=leaf Nodes=peta[1807-918099]\n"));
  EXPECT_EQ(one.code(), ErrorCode::kLimit);
  EXPECT_NE(std::string(one.what()).find("names 916293 hosts, more than the limit of 131072"),
            std::string::npos)
      << one.what();
  Error sum = load_error(write_temp("sum.conf",
                                    "SwitchName=l1 Nodes=a[1-70000]\n"
                                    "SwitchName=l2 Nodes=b[1-70000]\n"
                                    "SwitchName=top Switches=l[1-2]\n"));
  EXPECT_EQ(sum.code(), ErrorCode::kLimit);
  EXPECT_NE(sum.context().find("sum.conf:2"), std::string::npos) << sum.context();
  EXPECT_NE(std::string(sum.what()).find("more than 131072 node entries"), std::string::npos)
      << sum.what();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(FabricSlurm, LinkSpeedAndContinuationLines) {
  Fabric f = load_fabric(write_temp("speed.conf",
                                    "SwitchName=l1 Nodes=n[1-2] LinkSpeed=400 # NDR\n"
                                    "SwitchName=l2 \\\n   Nodes=n[3-4] LinkSpeed=200\n"
                                    "SwitchName=top Switches=l[1-2] LinkSpeed=400\n"));
  EXPECT_TRUE(f.notes.empty());
  EXPECT_DOUBLE_EQ(test::host(f, "n1").port_gbps[0], 50.0);
  EXPECT_DOUBLE_EQ(test::host(f, "n3").port_gbps[0], 25.0);
  // n3/n4 run slower than n1/n2: not siblings (different leaves), so no slow-link anomaly, but
  // tier 1's uplinks are even (400 Gb/s each).
  for (const Anomaly& a : f.anomalies) EXPECT_NE(a.kind, "asymmetric-uplinks") << a.message;
}

TEST(FabricSlurm, TreeExportRoundTripsRealFiles) {
  for (const char* rel : {"slurm-topology/psmn-x5-tree-from-ibnetdiscover.topology.conf",
                          "slurm-topology/slurm-testsuite-4level-tree-unbalanced.topology.conf",
                          "slurm-topology/slurm-testsuite-disconnected-trunks.topology.conf"}) {
    Fabric f = load_fabric(test::fixture(rel));
    std::string out = to_slurm_tree(f);
    Fabric again = load_fabric(write_temp("again.conf", out));
    EXPECT_EQ(leaf_membership(again), leaf_membership(f)) << rel;
    EXPECT_EQ(switch_count(again), switch_count(f)) << rel;
    for (const Vertex& v : f.graph.vertices()) {
      if (v.kind == VertexKind::kSwitch) {
        EXPECT_EQ(tier_of(again, v.name), v.sw.tier) << rel << " " << v.name;
      }
    }
  }
}

TEST(FabricSlurm, IbnetdiscoverToTreeMatchesTheRealPsmnFile) {
  Fabric ib = load_fabric(
      test::fixture("ibnetdiscover/psmn-x5-qdr-voltaire-mellanox-100nodes.ibnetdiscover.txt"),
      test::fixture("ibnetdiscover/psmn-x5-guid-to-hostname.map"));
  std::string out = to_slurm_tree(ib);
  EXPECT_NE(
      out.find(
          "SwitchName=S-0008f10500108bba Nodes=r510gluster[1-4],x5570comp[1-2] LinkSpeed=32\n"),
      std::string::npos)
      << out;
  Fabric conf = load_fabric(write_temp("from-ib.conf", out));
  Fabric real =
      load_fabric(test::fixture("slurm-topology/psmn-x5-tree-from-ibnetdiscover.topology.conf"));
  EXPECT_EQ(leaf_membership(conf), leaf_membership(real));
}

}  // namespace
}  // namespace topoaware::topology
