// The native TOML description (etc/ examples), analyze() on it, and the JSON/DOT exporters.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "fabric_test_support.h"
#include "test_support.h"

namespace topoaware::topology {
namespace {

using test::host;
using test::level;
using test::load_error;
using test::write_temp;

std::string etc(const std::string& name) {
  return std::string(TOPOAWARE_TEST_FIXTURES) + "/../../etc/" + name;
}

TEST(FabricToml, DgxH100TwoScalableUnits) {
  Fabric f = load_fabric(etc("cluster-dgx-h100.toml"));
  EXPECT_EQ(f.hosts.size(), 64u);
  EXPECT_EQ(test::switch_count(f), 20u);
  EXPECT_TRUE(f.rail_optimized);
  EXPECT_EQ(f.rails, 8);
  ASSERT_EQ(f.tiers.size(), 2u);
  EXPECT_EQ(f.tiers[0].switches.size(), 16u);
  EXPECT_DOUBLE_EQ(f.tiers[0].oversubscription, 2.0);  // 32 x 50 down, 16 x 50 up per leaf
  for (const Anomaly& a : f.anomalies) ADD_FAILURE() << a.kind << ": " << a.message;
  // Rail k of dgx001 and dgx032 is the same switch; of dgx033 it is the other SU's.
  const HostInfo& a = host(f, "dgx001");
  ASSERT_EQ(a.port_switch.size(), 8u);
  EXPECT_EQ(f.graph.vertex(a.port_switch[3]).name, "su1-leaf4");
  EXPECT_EQ(host(f, "dgx032").port_switch, a.port_switch);
  EXPECT_EQ(f.graph.vertex(host(f, "dgx033").port_switch[3]).name, "su2-leaf4");
  // Levels: host -> SU -> spine, with the SU's uplink 8 leaves x 16 cables x 50 GB/s.
  ASSERT_EQ(f.levels.size(), 3u);
  EXPECT_EQ(f.levels[1].name, "leaf");
  EXPECT_EQ(f.levels[1].group_uplink_gbps.size(), 2u);
  EXPECT_DOUBLE_EQ(f.levels[1].group_uplink_gbps[0], 6400.0);
  EXPECT_EQ(f.levels[2].name, "spine");
  auto k1 = f.locality_key(0), k33 = f.locality_key(32);
  EXPECT_NE(k1[1], k33[1]);
  EXPECT_EQ(k1[2], k33[2]);
  // Down and degraded hosts; node type and its capture path, resolved against etc/.
  EXPECT_TRUE(host(f, "dgx017").excluded);
  EXPECT_TRUE(host(f, "dgx045").excluded);
  EXPECT_FALSE(host(f, "dgx018").excluded);
  EXPECT_DOUBLE_EQ(host(f, "dgx003").degraded, 0.875);
  EXPECT_EQ(host(f, "dgx064").node_type, "dgx-h100");
  ASSERT_EQ(f.node_types.size(), 1u);
  EXPECT_EQ(f.node_types[0].gpus, 8);
  EXPECT_EQ(f.node_types[0].capture, "../tests/fixtures/nccl-topo/dgx-h100-topo.xml");
  EXPECT_TRUE(f.node_types[0].capture_path.ends_with("tests/fixtures/nccl-topo/dgx-h100-topo.xml"));
  EXPECT_EQ(f.node_types[0].capture_path.find(".."), std::string::npos);
}

TEST(FabricToml, DgxH100SlurmExports) {
  Fabric f = load_fabric(etc("cluster-dgx-h100.toml"));
  // Hosts sit on 8 leaves each: Slurm's tree gets one switch per scalable unit.
  std::string tree = to_slurm_tree(f);
  // The leaf groups are named after their [[unit]], the top after the level.
  EXPECT_NE(tree.find("SwitchName=su1 Nodes=dgx[001-032]\n"), std::string::npos) << tree;
  EXPECT_NE(tree.find("SwitchName=su2 Nodes=dgx[033-064]\n"), std::string::npos) << tree;
  EXPECT_NE(tree.find("SwitchName=spine-group0 Switches=su[1-2]\n"), std::string::npos) << tree;
  Fabric t = load_fabric(write_temp("dgx-tree.conf", tree));
  EXPECT_EQ(t.levels.back().group_uplink_gbps.size(), 1u);
  EXPECT_EQ(t.tiers.size(), 2u);
  std::string block = to_slurm_block(f);
  EXPECT_NE(block.find("BlockSizes=32,64\n"), std::string::npos) << block;
  Fabric b = load_fabric(write_temp("dgx-block.conf", block));
  EXPECT_EQ(b.blocks.size(), 2u);
}

TEST(FabricToml, LabCluster) {
  Fabric f = load_fabric(etc("lab-cluster.toml"));
  EXPECT_EQ(f.hosts.size(), 4u);
  EXPECT_EQ(host(f, "node2").port_switch.size(), 8u);
  EXPECT_EQ(host(f, "node2").leaves.size(), 1u);
  EXPECT_EQ(to_slurm_tree(f).substr(to_slurm_tree(f).find('\n') + 1),
            "SwitchName=leaf1 Nodes=node[1-2] LinkSpeed=400\n"
            "SwitchName=leaf2 Nodes=node[3-4] LinkSpeed=400\n"
            "SwitchName=spine Switches=leaf[1-2] LinkSpeed=400\n");
  EXPECT_DOUBLE_EQ(f.tiers[0].oversubscription, 1.0);
}

TEST(FabricToml, Gb200Nvl72Example) {
  Fabric f = load_fabric(etc("cluster-gb200-nvl72.toml"));
  EXPECT_EQ(f.hosts.size(), 72u);
  EXPECT_EQ(f.nvlink_domains.size(), 4u);
  std::vector<std::string> names;
  for (const LocalityLevel& l : f.levels) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"host", "nvlink", "leaf", "spine"}));
  EXPECT_EQ(f.rails, 4);
  EXPECT_TRUE(host(f, "r3n07").excluded);
  EXPECT_DOUBLE_EQ(f.tiers[0].oversubscription, 1.0);
  EXPECT_TRUE(f.anomalies.empty());
  EXPECT_TRUE(f.node_types[0].capture_path.ends_with("etc/captures/gb200-tray-topo.xml"));
  EXPECT_DOUBLE_EQ(f.nvlink_domains[2].gpu_bandwidth, 900.0);
}

const char* kNvl72 = R"(
name = "gb200"
[defaults]
link = "400G"
[node_types.gb200-tray]
capture = "/captures/gb200.xml"
gpus = 4
[[unit]]
hosts = "r1n[01-18]"
node_type = "gb200-tray"
leaves = "r1-leaf[1-4]"
wiring = "rail"
nics = 4
[[unit]]
hosts = "r2n[01-18]"
node_type = "gb200-tray"
leaves = "r2-leaf[1-4]"
wiring = "rail"
nics = 4
[[unit]]
hosts = "login1"         # not wired: an orphan
[[uplinks]]
from = "r1-leaf[1-4],r2-leaf[1-4]"
to = "spine[1-2]"
cables = 9
[[uplinks]]
from = "spine[1-2]"
to = "core1"
cables = 36
[[tier]]
tier = 1
oversubscription = 1.0
[[tier]]
tier = 2
oversubscription = 1.0
[[nvlink_domain]]
name = "rack1"
hosts = "r1n[01-18]"
gpu_bandwidth = 900
[[nvlink_domain]]
name = "rack2"
hosts = "r2n[01-18]"
gpu_bandwidth = 900
)";

TEST(FabricToml, Nvl72RacksAreNvlinkDomains) {
  Fabric f = load_fabric(write_temp("nvl72.toml", kNvl72));
  EXPECT_EQ(f.hosts.size(), 37u);
  ASSERT_EQ(f.nvlink_domains.size(), 2u);
  EXPECT_EQ(host(f, "r2n07").nvlink_domain, 1);
  EXPECT_EQ(host(f, "login1").nvlink_domain, -1);
  const LocalityLevel* nv = level(f, "nvlink");
  ASSERT_NE(nv, nullptr);
  EXPECT_EQ(f.levels[1].name, "nvlink");
  EXPECT_EQ(nv->group_uplink_gbps.size(), 3u);  // rack1, rack2, login1 alone
  EXPECT_EQ(nv->group_name[nv->group_of_host[0]], "rack1");
  EXPECT_TRUE(f.rail_optimized);
  EXPECT_EQ(f.rails, 4);
  EXPECT_EQ(f.tiers.size(), 3u);
  // 400G = 50 GB/s. Leaf: 18 x 50 down, 2 x 9 x 50 up: 1:1. Spine: 8 x 9 x 50 down, 36 x 50 up.
  EXPECT_DOUBLE_EQ(f.tiers[0].oversubscription, 1.0);
  EXPECT_DOUBLE_EQ(f.tiers[1].oversubscription, 2.0);
  std::vector<std::string> kinds;
  for (const Anomaly& a : f.anomalies) kinds.push_back(a.kind + ": " + a.message);
  auto has = [&](const std::string& s) {
    for (const auto& k : kinds) {
      if (k.find(s) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("orphan-host: host login1")) << ::testing::PrintToString(kinds);
  EXPECT_TRUE(has("tier 2: declared oversubscription 1:1 but the wiring gives 2:1"))
      << ::testing::PrintToString(kinds);
  EXPECT_FALSE(has("tier 1: declared"));
}

TEST(FabricToml, MistakesAreRefusedAtTheirLine) {
  struct Case {
    std::string text;
    const char* where;
    const char* says;
  } cases[] = {
      {"[[unit]]\nhosts = \"n[1-2]\"\nleafs = \"l1\"\n", ":3", "unknown key \"leafs\""},
      {"[[unit]]\nhosts = \"n[1-2]\"\nleaves = \"l1\"\nlink = \"4xQQR\"\n", ":4",
       "unknown link rate"},
      {"[[unit]]\nhosts = \"n[1-2]\"\nleaves = \"l[1-2]\"\nwiring = \"rail\"\nnics = 4\nlink = "
       "\"4xHDR\"\n",
       ":1", "one leaf per NIC"},
      {"[defaults]\nlink=\"4xHDR\"\n[[unit]]\nhosts = \"n[1-2]\"\nleaves=\"a\"\n[[unit]]\nhosts = "
       "\"n2\"\nleaves=\"b\"\n",
       ":6", "two [[unit]]"},
      {"[[unit]]\nhosts = \"n[1-2]\"\n[hosts]\nexcluded = \"n3\"\n", ":4", "in no [[unit]]"},
      {"[[unit]]\nhosts = \"n[1-999999999]\"\n", ":2", "more than the limit"},
      // Two units, each under the limit, together over it: the fabric is refused as a whole.
      {"[defaults]\nlink=\"4xHDR\"\n[[unit]]\nhosts=\"a[1-70000]\"\nleaves=\"l1\"\n[[unit]]\n"
       "hosts=\"b[1-70000]\"\nleaves=\"l2\"\n",
       "bad.toml", "names more than 131072 hosts"},
      {"[[unit]]\nhosts = \"n1\"\nnode_type = \"dgx\"\n", ":3", "not defined"},
      {"name = \"x\"\n[[unit]\n", ":2", "TOML"},
      {"[defaults]\nlink=\"4xHDR\"\n[[unit]]\nhosts=\"n[1-1000]\"\nleaves=\"a[1-1000]\"\n"
       "[[uplinks]]\nfrom=\"a[1-1000]\"\nto=\"s[1-1000]\"\ncables=1000\n",
       ":6", "more than 4194304 cables"},
      {"[defaults]\nlink=\"4xHDR\"\n[[unit]]\nhosts=\"n1\"\nleaves=\"a\"\n[[uplinks]]\nfrom="
       "\"b\"\nto=\"c\"\n",
       ":7", "not a leaf"},
  };
  for (const Case& c : cases) {
    Error e = load_error(write_temp("bad.toml", c.text));
    EXPECT_NE(e.context().find(c.where), std::string::npos)
        << c.text << " -> " << e.context() << " " << e.what();
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos)
        << c.text << " -> " << e.what();
  }
}

TEST(FabricJson, ScriptContractAndReload) {
  Fabric f = load_fabric(etc("cluster-dgx-h100.toml"));
  nlohmann::json j = nlohmann::json::parse(fabric_to_json(f));
  ASSERT_TRUE(j["switches"].is_array());
  EXPECT_EQ(j["switches"].size(), 20u);
  EXPECT_EQ(j["switches"][0]["name"], "su1-leaf1");
  EXPECT_EQ(j["switches"][0]["tier"], 1);
  EXPECT_EQ(j["hosts"][0]["name"], "dgx001");
  EXPECT_EQ(j["hosts"][0]["leaves"].size(), 8u);
  EXPECT_EQ(j["tiers"].size(), 2u);
  EXPECT_EQ(j["rails"], 8);
  EXPECT_EQ(j["levels"][1]["name"], "leaf");
  // Reloaded, the model is the same.
  std::string path = write_temp("dgx.json", j.dump());
  Fabric g = load_fabric(path);
  EXPECT_EQ(g.hosts.size(), f.hosts.size());
  EXPECT_EQ(test::leaf_membership(g), test::leaf_membership(f));
  EXPECT_EQ(g.rails, 8);
  EXPECT_TRUE(host(g, "dgx017").excluded);
  EXPECT_DOUBLE_EQ(g.tiers[0].oversubscription, 2.0);
  for (std::uint32_t h = 0; h < f.hosts.size(); ++h)
    EXPECT_EQ(g.locality_key(h), f.locality_key(h));
  // Broken JSON names its line.
  Error e = load_error(
      write_temp("broken.json", "{\n \"format\": \"topo-aware-fabric\",\n \"switches\": [\n"));
  EXPECT_NE(e.context().find("broken.json:4"), std::string::npos) << e.context();
}

// Parallel cables of one kind are one Link with a count: the graph a node builds in every step
// grows with switch pairs, not cables. Every figure read from the fabric stays per cable or in
// total as before: tiers, group uplinks, Slurm's LinkSpeed, JSON (which merges them again).
TEST(FabricToml, ParallelCablesAreOneLinkWithACount) {
  const char* text = R"(
[defaults]
link = "4xNDR"
[[unit]]
hosts = "n[1-8]"
leaves = "leaf[1-2]"
[[uplinks]]
from = "leaf[1-2]"
to = "spine1"
cables = 4
[[uplinks]]
from = "leaf[1-2]"
to = "spine2"
cables = 2
link = "4xHDR"
)";
  Fabric f = load_fabric(write_temp("cables.toml", text));
  std::size_t switch_links = 0;
  for (const Link& l : f.graph.links()) {
    if (f.graph.vertex(l.a).kind != VertexKind::kSwitch) continue;
    ++switch_links;
    const bool ndr = f.graph.vertex(l.a).name == "spine1";
    EXPECT_EQ(l.count, ndr ? 4 : 2);
    EXPECT_DOUBLE_EQ(l.bandwidth, ndr ? 4 * 50.0 : 2 * 25.0);
  }
  EXPECT_EQ(switch_links, 4u);  // 2 leaves x 2 spines, not 12 cables
  // Tier 1 up: 2 leaves x (4 x 50 + 2 x 25); each leaf group's uplink counts its 6 cables.
  EXPECT_DOUBLE_EQ(f.tiers[0].up_gbps, 500.0);
  const LocalityLevel* leaf = level(f, "leaf");
  ASSERT_NE(leaf, nullptr);
  EXPECT_DOUBLE_EQ(leaf->group_uplink_gbps[0], 250.0);
  EXPECT_EQ(leaf->group_uplink_links[0], 6u);
  // Each leaf has 2 of 6 uplink ports slower than the rest, counted per cable.
  bool slow = false;
  for (const Anomaly& a : f.anomalies) {
    if (a.kind != "slow-link" || a.message.rfind("leaf1:", 0) != 0) continue;
    slow = true;
    EXPECT_NE(a.message.find("2 of 6 uplink ports run slower than 50 GB/s (4xNDR)"),
              std::string::npos) << a.message;
    EXPECT_NE(a.message.find("2x->spine2 25 GB/s (4xHDR)"), std::string::npos) << a.message;
  }
  EXPECT_TRUE(slow);
  // Slurm's LinkSpeed is one cable's (400 Gb/s), not the merged pair's.
  EXPECT_NE(to_slurm_tree(f).find("SwitchName=leaf1 Nodes=n[1-4] LinkSpeed=400\n"),
            std::string::npos) << to_slurm_tree(f);
  // JSON writes one cable's speed and the count; reloaded, the same links.
  nlohmann::json j = nlohmann::json::parse(fabric_to_json(f));
  ASSERT_EQ(j["switch_links"].size(), 4u);
  EXPECT_EQ(j["switch_links"][0]["cables"], 4);
  EXPECT_DOUBLE_EQ(j["switch_links"][0]["gbps"].get<double>(), 50.0);
  Fabric g = load_fabric(write_temp("cables.json", j.dump()));
  EXPECT_EQ(g.graph.link_count(), f.graph.link_count());
  EXPECT_DOUBLE_EQ(g.tiers[0].up_gbps, 500.0);
  // A count out of bounds is refused where it is written.
  j["switch_links"][1]["cables"] = 0;
  Error e = load_error(write_temp("cables0.json", j.dump()));
  EXPECT_NE(e.context().find("switch_links[1]"), std::string::npos) << e.context();
  EXPECT_NE(std::string(e.what()).find("\"cables\" must be 1 to 1024"), std::string::npos)
      << e.what();
}

TEST(FabricDot, SmallFabricPicture) {
  Fabric f = load_fabric(etc("lab-cluster.toml"));
  std::string dot = fabric_to_dot(f);
  EXPECT_EQ(dot.find("graph fabric {"), dot.find("graph"));
  EXPECT_NE(dot.find("\"leaf1\" -- \"spine\" [label=\"16x 50 GB/s\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"node1\" -- \"leaf1\" [label=\"8x 50 GB/s\"]"), std::string::npos) << dot;
  EXPECT_EQ(dot.back(), '\n');
}

}  // namespace
}  // namespace topoaware::topology
