// Alibaba Lingjun topology CSV importer (lingjun_csv.cc) against the real file
// (tests/fixtures/lingjun/topo.csv: 847 hosts under 119 ToRs, 3 PSWs, 1 DSW), malformed rows,
// and what the exporters make of it.
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fabric_test_support.h"
#include "test_support.h"
#include "topoaware/topology/input_format.h"

namespace topoaware::topology {
namespace {

using test::leaf_membership;
using test::level;
using test::load_error;
using test::switch_count;
using test::tier_of;
using test::write_temp;

const char* kLingjun = "lingjun/topo.csv";
// The first row of the real file, which becomes host lj001.
const char* kFirstId = "0c9d9de1b19e7f39b08f49ddfa26744ae26d3adf8bd59af1b16e203b6fa5fe4b";

TEST(FabricLingjun, RealFileHostsToRsAndPods) {
  Fabric f = load_fabric(test::fixture(kLingjun));
  EXPECT_EQ(f.source.rfind("lingjun-csv:", 0), 0u) << f.source;
  ASSERT_EQ(f.hosts.size(), 847u);
  EXPECT_EQ(f.hosts.front().name, "lj001");
  EXPECT_EQ(f.hosts.back().name, "lj847");
  EXPECT_EQ(f.hosts.front().source_id, kFirstId);
  // 119 ToRs + 3 PSWs + 1 DSW, in three tiers.
  EXPECT_EQ(switch_count(f), 123u);
  ASSERT_EQ(f.tiers.size(), 3u);
  EXPECT_EQ(f.tiers[0].switches.size(), 119u);
  EXPECT_EQ(tier_of(f, "P10-S14"), 1);  // lj001's ToR
  EXPECT_EQ(tier_of(f, "P10"), 2);
  EXPECT_EQ(tier_of(f, "G6"), 3);
  EXPECT_EQ(f.graph.vertex(f.hosts.front().leaves.at(0)).name, "P10-S14");

  // Hosts per ToR as the shared PROVENANCE counts them: 3 ToRs of 2 hosts ... 68 of 8.
  auto leaves = leaf_membership(f);
  ASSERT_EQ(leaves.size(), 119u);
  std::map<std::size_t, int> by_size;
  for (const auto& [name, hosts] : leaves) ++by_size[hosts.size()];
  EXPECT_EQ(by_size, (std::map<std::size_t, int>{
                         {2, 3}, {3, 1}, {4, 2}, {5, 7}, {6, 15}, {7, 23}, {8, 68}}));
  // S1 exists under more than one PSW, and those are different ToRs.
  EXPECT_EQ(tier_of(f, "P8-S1"), 1);
  EXPECT_EQ(tier_of(f, "P10-S1"), 1);

  // Pods: P8 179 hosts, P10 362, P12 306; one spine group above them.
  const LocalityLevel* pod = level(f, "pod");
  ASSERT_NE(pod, nullptr);
  std::map<std::string, int> pod_hosts;
  for (std::size_t h = 0; h < f.hosts.size(); ++h) {
    ++pod_hosts[pod->group_name.at(pod->group_of_host[h])];
  }
  EXPECT_EQ(pod_hosts, (std::map<std::string, int>{{"P8", 179}, {"P10", 362}, {"P12", 306}}));
  const LocalityLevel* spine = level(f, "spine");
  ASSERT_NE(spine, nullptr);
  EXPECT_EQ(spine->group_uplink_gbps.size(), 1u);

  // No speeds in the file: the placeholder is marked and said.
  EXPECT_TRUE(f.hosts.front().port_speed_assumed);
  EXPECT_DOUBLE_EQ(f.hosts.front().port_gbps.at(0), 12.5);
  bool said = false;
  for (const std::string& n : f.notes) said = said || n.find("placeholder of 100 Gb/s") != n.npos;
  EXPECT_TRUE(said);
}

TEST(FabricLingjun, RecognizedByItsHeaderInAnyColumnOrder) {
  std::string text = test::read_file(test::fixture(kLingjun));
  EXPECT_EQ(detect_format(text, InputKind::kFabric, "topo.csv"), InputFormat::kLingjunCsv);
  EXPECT_EQ(parse_input_format("lingjun-csv", InputKind::kFabric, "--format"),
            InputFormat::kLingjunCsv);
  std::string p =
      write_temp("reordered.csv", "ASW, psw ,DSW,IP\nS1,P1,G1,aa\nS2,P1,G1,bb\nS1,P2,G1,cc\n");
  Fabric f = load_fabric(p);
  ASSERT_EQ(f.hosts.size(), 3u);
  EXPECT_EQ(f.graph.vertex(f.hosts[2].leaves.at(0)).name, "P2-S1");
  EXPECT_EQ(f.hosts[2].source_id, "cc");
  // A node loader refuses it as a fabric description.
  EXPECT_THROW(detect_format(text, InputKind::kNode, "topo.csv"), Error);
}

TEST(FabricLingjun, NamesWidenPastNineHundredNinetyNineHosts) {
  std::string text = "ip,DSW,PSW,ASW\n";
  for (int i = 0; i < 1000; ++i) {
    text += "h" + std::to_string(i) + ",G1,P1,S" + std::to_string(i / 8) + "\n";
  }
  Fabric f = load_fabric(write_temp("thousand.csv", text));
  ASSERT_EQ(f.hosts.size(), 1000u);
  EXPECT_EQ(f.hosts.front().name, "lj0001");
  EXPECT_EQ(f.hosts.back().name, "lj1000");
}

TEST(FabricLingjun, MalformedRowsNameFileAndLine) {
  struct Case {
    const char* text;
    const char* where;  // ":<line>"
    const char* says;
  };
  const Case cases[] = {
      {"ip,DSW,PSW,ASW\naa,G1,P1,S1\nbb,G1,P1\n", ":3", "expected 4 comma-separated fields"},
      {"ip,DSW,PSW,ASW\naa,G1,P1,S1,x\n", ":2", "got 5"},
      {"ip,DSW,PSW,ASW\naa,G1,,S1\n", ":2", "empty PSW"},
      {"ip,DSW,PSW,ASW\naa,G1,P1,S1\n\naa,G1,P1,S2\n", ":4", "listed twice (also line 2)"},
      {"ip,DSW,PSW,ASW\naa,G1,P[1],S1\n", ":2", "is not one name"},
      {"ip,DSW,PSW,ASW\naa,G 1,P1,S1\n", ":2", "is not one name"},
      {"ip,DSW,PSW,Rack\naa,G1,P1,S1\n", ":1", "unknown column \"Rack\""},
      {"ip,DSW,PSW,PSW\n", ":1", "given twice"},
      {"ip,DSW,PSW,ASW\naa,G1,P1-S1,S2\nbb,G1,P1,S1\n", ":3", "names a ToR here"},
      {"ip,DSW,PSW,ASW\naa,P1,P1,S1\n", ":2", "names a PSW"},
  };
  // Given as lingjun-csv (a header that is not the format's is not recognized as it: below).
  auto error_of = [](const std::string& path) {
    try {
      load_fabric(path, {}, InputFormat::kLingjunCsv);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << path << " loaded without error";
    return Error(ErrorCode::kBadInput, {}, "none");
  };
  int k = 0;
  for (const Case& c : cases) {
    std::string p = write_temp("bad" + std::to_string(k++) + ".csv", c.text);
    Error e = error_of(p);
    EXPECT_EQ(e.context(), p + c.where) << c.text << "\n" << e.what();
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << c.text << "\n" << e.what();
  }
  Error empty = load_error(write_temp("header-only.csv", "ip,DSW,PSW,ASW\n"));
  EXPECT_NE(std::string(empty.what()).find("no host rows"), std::string::npos) << empty.what();
  Error other = load_error(write_temp("other.csv", "ip,DSW,PSW,Rack\naa,G1,P1,S1\n"));
  EXPECT_NE(std::string(other.what()).find("unrecognized format"), std::string::npos)
      << other.what();
}

TEST(FabricLingjun, SlurmTreeAndJsonReloadTheSameLeaves) {
  Fabric f = load_fabric(test::fixture(kLingjun));
  std::string tree = to_slurm_tree(f);
  EXPECT_NE(tree.find("SwitchName=P10-S14 Nodes="), std::string::npos) << tree.substr(0, 2000);
  EXPECT_EQ(tree.find("LinkSpeed"), std::string::npos);  // no placeholder written back
  Fabric back = load_fabric(write_temp("lingjun-tree.conf", tree));
  EXPECT_EQ(leaf_membership(back), leaf_membership(f));
  EXPECT_EQ(tier_of(back, "G6"), 3);

  Fabric json = load_fabric_text(fabric_to_json(f), "lingjun.json");
  EXPECT_EQ(leaf_membership(json), leaf_membership(f));
  ASSERT_EQ(json.hosts.size(), f.hosts.size());
  EXPECT_EQ(json.hosts.front().source_id, kFirstId);
}

}  // namespace
}  // namespace topoaware::topology
