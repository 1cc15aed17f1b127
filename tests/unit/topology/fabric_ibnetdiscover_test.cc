// ibnetdiscover importer against real dumps (../shared/fixtures/ibnetdiscover, PSMN copies in
// tests/fixtures) and against hostile input.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fabric_test_support.h"
#include "test_support.h"

namespace topoaware::topology {
namespace {

using test::host;
using test::leaf_membership;
using test::load_error;
using test::switch_count;
using test::tier_of;
using test::write_temp;

const char* kPsmn = "ibnetdiscover/psmn-x5-qdr-voltaire-mellanox-100nodes.ibnetdiscover.txt";
const char* kPsmnMap = "ibnetdiscover/psmn-x5-guid-to-hostname.map";

TEST(FabricIbnetdiscover, PsmnX5CountsAndTiers) {
  Fabric f = load_fabric(test::fixture(kPsmn));
  EXPECT_EQ(switch_count(f), 11u);
  EXPECT_EQ(f.channel_adapters, 89u);
  EXPECT_EQ(f.hosts.size(), 89u);  // every CA its own host, named H-<guid> without a map
  EXPECT_EQ(tier_of(f, "S-0008f10500200b50"), 1);  // Voltaire 4036 with hosts on ports 4-15
  EXPECT_EQ(tier_of(f, "S-0008f10500108c5c"), 2);
  EXPECT_EQ(tier_of(f, "S-0008f105001086a2"), 3);  // reaches hosts only through 8530/851e
  ASSERT_EQ(f.tiers.size(), 3u);
  EXPECT_EQ(f.tiers[0].switches.size(), 6u);
  // The Infiniscale-IV leaf: 24 QDR hosts (4 GB/s) down, 12 QDR cables up.
  const HostInfo& h = host(f, "H-78e7d10300229794");
  ASSERT_EQ(h.port_gbps.size(), 1u);
  EXPECT_DOUBLE_EQ(h.port_gbps[0], 4.0);
  EXPECT_EQ(f.graph.vertex(h.leaves.at(0)).name, "S-0002c90200417670");
  EXPECT_EQ(f.graph.vertex(h.leaves.at(0)).sw.model, "Infiniscale-IV Mellanox Technologies");
  // Parallel cables between two switches stay one Link each: each has its own port numbers, which
  // anomalies name. The dump has such pairs (the leaf's 12 cables go to fewer switches).
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> cables;
  for (const Link& l : f.graph.links()) {
    EXPECT_EQ(l.count, 1);
    if (f.graph.vertex(l.a).kind == VertexKind::kSwitch &&
        f.graph.vertex(l.b).kind == VertexKind::kSwitch) {
      EXPECT_GE(l.port_a, 1);
      ++cables[std::minmax(l.a.value, l.b.value)];
    }
  }
  int most = 0;
  for (const auto& [pair, n] : cables) most = std::max(most, n);
  EXPECT_GT(most, 1);
}

TEST(FabricIbnetdiscover, PsmnX5WithGuidMapMatchesTheRealTopologyConf) {
  Fabric ib = load_fabric(test::fixture(kPsmn), test::fixture(kPsmnMap));
  Fabric conf =
      load_fabric(test::fixture("slurm-topology/psmn-x5-tree-from-ibnetdiscover.topology.conf"));
  EXPECT_EQ(ib.hosts.size(), conf.hosts.size());
  EXPECT_EQ(leaf_membership(ib), leaf_membership(conf));
  EXPECT_EQ(leaf_membership(ib).at("S-0008f10500108bba"),
            (std::set<std::string>{"r510gluster1", "r510gluster2", "r510gluster3", "r510gluster4",
                                   "x5570comp1", "x5570comp2"}));
  // Two CAs are not in the map and keep their ibnetdiscover names, as in the real file.
  EXPECT_GE(ib.find_host("H-003048c749450000"), 0);
  // The dump's CA descriptions name no device ("MT25408 ConnectX Mellanox Technologies"): the
  // NIC's name is unknown, not the CA's GUID name (which NCCL_IB_HCA could never match).
  const HostInfo& sl = host(ib, "sl390lin1");
  ASSERT_EQ(sl.port_nic.size(), 1u);
  EXPECT_EQ(sl.port_nic[0], "");
  // The x5570 hosts are DDR on a QDR leaf: reported, with the ports named.
  bool slow = false;
  for (const Anomaly& a : ib.anomalies) {
    if (a.kind == "slow-link" && a.message.find("x5570comp1") != std::string::npos &&
        a.message.find("4xDDR") != std::string::npos) {
      slow = true;
    }
  }
  EXPECT_TRUE(slow);
}

TEST(FabricIbnetdiscover, HdrCs8500IbdiagnetVariant) {
  TOPOAWARE_SHARED_OR_SKIP(
      path, "ibnetdiscover/hk-hdr-cs8500-192sw-1182ca-ibdiagnet-generated.ibnetdiscover.txt");
  Fabric f = load_fabric(path);
  EXPECT_EQ(switch_count(f), 192u);
  EXPECT_EQ(f.channel_adapters, 1182u);
  // 1182 CAs: 192 SHARP aggregation nodes (not hosts), 4 unnamed ConnectX-6 (own hosts),
  // the rest grouped by the host their description names.
  EXPECT_EQ(f.hosts.size(), 268u);
  EXPECT_LT(f.find_host("H-043f720300feee20"), 0);  // an aggregation node
  const HostInfo& a = host(f, "agpu1337");
  ASSERT_EQ(a.port_nic.size(), 4u);
  EXPECT_EQ(a.port_nic, (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_5"}));
  EXPECT_EQ(f.graph.vertex(a.port_switch[0]).name, "S-b8cef60300617fda");
  EXPECT_EQ(a.leaves.size(), 4u);
  EXPECT_DOUBLE_EQ(a.port_gbps[0], 25.0);          // 4xHDR
  EXPECT_EQ(tier_of(f, "S-b8cef60300617c9a"), 1);  // external Quantum leaf with agpu hosts
  EXPECT_EQ(tier_of(f, "S-b8cef6030019c882"), 2);  // MCS8500/L01/U1 line ASIC
  ASSERT_EQ(f.tiers.size(), 3u);
  EXPECT_EQ(f.tiers[0].switches.size(), 57u);
  EXPECT_EQ(f.tiers[1].switches.size(), 80u);
}

TEST(FabricIbnetdiscover, QuantumDirectorCrlf) {
  TOPOAWARE_SHARED_OR_SKIP(path,
                           "ibnetdiscover/hk-hdr-quantum-60sw-director-2ca-crlf.ibnetdiscover.txt");
  Fabric f = load_fabric(path);
  EXPECT_EQ(switch_count(f), 60u);
  EXPECT_EQ(f.channel_adapters, 2u);
  ASSERT_EQ(f.hosts.size(), 2u);
  EXPECT_DOUBLE_EQ(host(f, "fit101").port_gbps.at(0), 1.0);  // the CA runs 4xSDR
  EXPECT_EQ(host(f, "fit26").port_nic.at(0), "HCA-3");
  bool loop_note = false;
  for (const std::string& n : f.notes)
    loop_note |= n.find("loop from a switch back to itself") != std::string::npos;
  EXPECT_TRUE(loop_note);  // [19] <-> [20] of S-98039b030096aa24
}

TEST(FabricIbnetdiscover, LabFakeGuidsCrlf) {
  TOPOAWARE_SHARED_OR_SKIP(
      path, "ibnetdiscover/hk-lab-4sw-msb7800-12ca-fakeguids-crlf.ibnetdiscover.txt");
  Fabric f = load_fabric(path);
  EXPECT_EQ(switch_count(f), 4u);
  EXPECT_EQ(f.channel_adapters, 12u);
  EXPECT_EQ(f.hosts.size(), 8u);  // 4 of the 12 CAs are aggregation nodes
  EXPECT_EQ(test::leaf_membership(f).at("S-2222222222222222"),
            (std::set<std::string>{"Host2_1", "Host2_2", "Host2_3"}));
  EXPECT_DOUBLE_EQ(host(f, "Host2_1").port_gbps.at(0), 12.5);  // 4xEDR
}

TEST(FabricIbnetdiscover, InvalidLidDumpIsRefusedAtTheLine) {
  TOPOAWARE_SHARED_OR_SKIP(path, "ibnetdiscover/hk-lab-4sw-invalid-lid-edgecase.ibnetdiscover.txt");
  Error e = load_error(path);
  EXPECT_EQ(e.code(), ErrorCode::kBadInput);
  EXPECT_EQ(e.context(), path + ":10");  // "... port 0 lid  lmc 0": the LID is missing
  EXPECT_NE(std::string(e.what()).find("LID"), std::string::npos) << e.what();
  // The same dump with only the out-of-range LID left.
  std::string text = test::read_file(path);
  std::size_t at = text.find("lid  lmc");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 8, "lid 2 lmc");
  Error e2 = load_error(write_temp("lid65335.txt", text));
  EXPECT_NE(std::string(e2.what()).find("65335"), std::string::npos) << e2.what();
  EXPECT_NE(e2.context().find(":32"), std::string::npos) << e2.context();
}

const char* kSmall =
    "\xEF\xBB\xBF# Topology file: generated by hand\r\n"
    "\r\n"
    "vendid=0x2c9\r\n"
    "switchguid=0x0000000000000a01(a01)\r\n"
    "Switch  8 \"S-0000000000000a01\"  # \"leafA\" enhanced port 0 lid 1 lmc 0\r\n"
    "[1](1) \"H-0000000000000b01\"[1](b01)  # \"node012 HCA-1\" lid 3 4xNDR\r\n"
    "[2](2) \"H-0000000000000b02\"[1](b02)  # \"node012 HCA-2\" lid 4 4xNDR\r\n"
    "[3](3) \"H-0000000000000b03\"[1](b03)  # \"MT4129 ConnectX7   Mellanox Technologies\" lid 5 "
    "4xHDR\r\n"
    "\r\n"
    "caguid=0x0000000000000b01\r\n"
    "Ca  1 \"H-0000000000000b01\"  # \"node012 HCA-1\"\r\n"
    "[1](b01) \"S-0000000000000a01\"[1] # lid 3 lmc 0 \"leafA\" lid 1 4xNDR\r\n"
    "\r\n"
    "caguid=0x0000000000000b02\r\n"
    "Ca  1 \"H-0000000000000b02\"  # \"node012 HCA-2\"\r\n"
    "[1](b02) \"S-0000000000000a01\"[2] # lid 4 lmc 0 \"leafA\" lid 1 4xNDR\r\n"
    "caguid=0x0000000000000b03\r\n"
    "Ca  1 \"H-0000000000000b03\"  # \"MT4129 ConnectX7   Mellanox Technologies\"\r\n"
    "[1](b03) \"S-0000000000000a01\"[3] # lid 5 lmc 0 \"leafA\" lid 1 4xHDR\r\n";

TEST(FabricIbnetdiscover, BomCrlfCommentsSeveralHcasOfOneHost) {
  Fabric f = load_fabric(write_temp("small.txt", kSmall));
  ASSERT_EQ(f.hosts.size(), 2u);
  const HostInfo& n = host(f, "node012");
  EXPECT_EQ(n.port_nic, (std::vector<std::string>{"HCA-1", "HCA-2"}));
  EXPECT_DOUBLE_EQ(n.port_gbps[0], 50.0);  // 4xNDR
  EXPECT_EQ(n.leaves.size(), 1u);
  EXPECT_DOUBLE_EQ(host(f, "H-0000000000000b03").port_gbps[0], 25.0);  // 4xHDR, unnamed CA
  // The slower HDR port is flagged against its NDR siblings.
  ASSERT_FALSE(f.anomalies.empty());
  EXPECT_EQ(f.anomalies[0].kind, "slow-link");
  // A map naming the unnamed CA by GUID (ibnetdiscover's node-name-map form) or H-name.
  Fabric m = load_fabric(write_temp("small2.txt", kSmall),
                         write_temp("small.map", "# map\n0x0000000000000b03 \"gpu7\"\n"));
  EXPECT_GE(m.find_host("gpu7"), 0);
  EXPECT_GE(m.find_host("node012"), 0);
}

TEST(FabricIbnetdiscover, InconsistentAndTruncatedDumpsAreRefused) {
  std::string text = kSmall;
  // The CA's half of a cable names a different switch port than the switch's half.
  std::string bad = text;
  bad.replace(bad.find("\"S-0000000000000a01\"[2]"), 23, "\"S-0000000000000a01\"[7]");
  Error e = load_error(write_temp("inconsistent.txt", bad));
  EXPECT_NE(std::string(e.what()).find("inconsistent dump"), std::string::npos) << e.what();
  // Cut before the last CA block: the switch links to a node the dump never describes.
  std::string cut = text.substr(0, text.find("caguid=0x0000000000000b03"));
  Error t = load_error(write_temp("truncated.txt", cut));
  EXPECT_NE(std::string(t.what()).find("truncated"), std::string::npos) << t.what();
  EXPECT_NE(t.context().find(":8"), std::string::npos) << t.context();
  // A port listed twice in one block.
  std::string twice = text;
  std::string dup = "[2](2) \"H-0000000000000b02\"[1](b02)  # \"node012 HCA-2\" lid 4 4xNDR\r\n";
  twice.insert(twice.find(dup) + dup.size(), dup);
  Error d = load_error(write_temp("twice.txt", twice));
  EXPECT_NE(std::string(d.what()).find("listed twice (also line 7)"), std::string::npos)
      << d.what();
  // Cut inside a line.
  std::string mid = text.substr(0, text.find("4xNDR") - 12);
  Error m = load_error(write_temp("midline.txt", mid));
  EXPECT_EQ(m.code(), ErrorCode::kBadInput);
}

TEST(FabricIbnetdiscover, EveryPrefixOfARealDumpParsesOrFailsCleanly) {
  std::string text = test::read_file(test::fixture(kPsmn));
  std::size_t ok = 0, refused = 0;
  for (std::size_t n = 0; n < text.size(); n += 997) {
    std::string p = write_temp("prefix.txt", text.substr(0, n));
    try {
      load_fabric(p);
      ++ok;
    } catch (const Error& e) {
      ++refused;
      EXPECT_FALSE(std::string(e.what()).empty());
    }
  }
  EXPECT_GT(refused, 40u);  // nearly every cut leaves a dangling cable
  (void)ok;
}

TEST(FabricIbnetdiscover, BinaryGarbageAndBadMapsAreRefused) {
  std::mt19937 rng(42);
  std::string junk(64 << 10, '\0');
  for (char& c : junk) c = static_cast<char>(rng());
  Error e = load_error(write_temp("junk.bin", junk));
  EXPECT_NE(std::string(e.what()).find("binary"), std::string::npos) << e.what();
  // Printable garbage after a valid header.
  std::string text = std::string(kSmall) + "Switch 99999 \"x\"\n";
  Error p = load_error(write_temp("bigport.txt", text));
  EXPECT_NE(std::string(p.what()).find("out of range"), std::string::npos) << p.what();
  Error m = load_error(write_temp("small3.txt", kSmall), write_temp("bad.map", "0xb03\n"));
  EXPECT_NE(m.context().find("bad.map:1"), std::string::npos) << m.context();
  Error missing = load_error(write_temp("small4.txt", kSmall), "/nonexistent/map");
  EXPECT_EQ(missing.code(), ErrorCode::kNotFound);
}

// Seeded byte mutations of real files of every format: each loads or throws topology::Error,
// never crashes (this is what the ASan/UBSan build exercises).
TEST(FabricIbnetdiscover, MutatedInputsOfEveryFormatFailCleanly) {
  std::vector<std::string> sources = {
      test::read_file(test::fixture(kPsmn)),
      kSmall,
      test::read_file(
          test::fixture("slurm-topology/psmn-x5-tree-from-ibnetdiscover.topology.conf")),
      test::read_file(
          test::fixture("slurm-topology/slurm-testsuite-block-8x4-blocksizes.topology.conf")),
      test::read_file(std::string(TOPOAWARE_TEST_FIXTURES) + "/../../etc/lab-cluster.toml"),
  };
  std::mt19937 rng(7);
  const char alphabet[] = "[]()\"#=,-0123456789x \t\r\nSCa";
  std::size_t loaded = 0, refused = 0;
  for (std::size_t k = 0; k < sources.size(); ++k) {
    for (int round = 0; round < 120; ++round) {
      std::string text = sources[k];
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        std::size_t at = rng() % text.size();
        switch (rng() % 3) {
          case 0:
            text[at] = alphabet[rng() % (sizeof alphabet - 1)];
            break;
          case 1:
            text.erase(at, 1 + rng() % 16);
            break;
          default:
            text.insert(at, 1, alphabet[rng() % (sizeof alphabet - 1)]);
            break;
        }
      }
      std::string path =
          write_temp("mutant" + std::to_string(k) + (k == 4 ? ".toml" : ".txt"), text);
      try {
        Fabric f = load_fabric(path);
        to_slurm_tree(f);
        fabric_to_json(f);
        ++loaded;
      } catch (const Error& e) {
        ++refused;
        EXPECT_FALSE(std::string(e.what()).empty());
      }
    }
  }
  EXPECT_GT(refused, 100u);
  EXPECT_GT(loaded, 10u);
}

}  // namespace
}  // namespace topoaware::topology
