// `topo-aware fabric` as an admin runs it: the built binary, exit codes (0 ok, 1 bad input with
// file:line, 2 usage), --help, the JSON fields scripts rely on, and golden outputs for real
// fabrics (tests/golden/fabric-*; regenerate with UPDATE_GOLDEN=1 after a deliberate change).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_support.h"
#include "test_support.h"

namespace topoaware {
namespace {

namespace fs = std::filesystem;
using test::cli;
using test::CliRun;
using test::expect_golden;
using test::joined_option_names;
using test::scratch;
using test::slurp;

const char* kPsmn = "ibnetdiscover/psmn-x5-qdr-voltaire-mellanox-100nodes.ibnetdiscover.txt";
const char* kPsmnMap = "ibnetdiscover/psmn-x5-guid-to-hostname.map";

TEST(FabricCli, HelpNamesEveryOption) {
  CliRun r = cli("fabric --help");
  EXPECT_EQ(r.rc, 0);
  for (const char* s : {"-i,--input", "--format", "slurm-topology", "--map", "--of", "slurm-tree",
                        "slurm-block", "dot", "json", "-o,--output"}) {
    EXPECT_NE(joined_option_names(r.out).find(s), std::string::npos) << s << "\n" << r.out;
  }
}

TEST(FabricCli, UsageErrorsExitTwo) {
  EXPECT_EQ(cli("fabric").rc, 2);  // -i is required
  EXPECT_EQ(cli(std::string("fabric -i ") + kPsmn + " --of yaml").rc, 2);
  CliRun f = cli(std::string("fabric -i ") + kPsmn + " --format yaml");
  EXPECT_EQ(f.rc, 2);
  EXPECT_NE(f.err.find("--format"), std::string::npos) << f.err;
  EXPECT_EQ(cli(std::string("fabric -i ") + kPsmn + " --format nccl-xml").rc, 2);  // a node's
}

// The capture: the dump saved from a terminal session, with a byte-order mark, the
// prompt and command in front, CRLF line ends and the next prompt after it. `fabric` reports the
// same switches and hosts as for the clean file, and a note per skipped line.
TEST(FabricCli, TerminalCaptureReportsWhatTheCleanFileDoes) {
  std::string dump = slurp(std::string(TOPOAWARE_TEST_FIXTURES) + "/" + kPsmn);
  std::string crlf;
  for (char c : dump) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  std::string term = scratch("term.txt");
  std::ofstream(term, std::ios::binary) << "\xEF\xBB\xBF[root@ufm01 dir]# ibnetdiscover\r\n"
                                        << crlf << "[root@ufm01 dir]# \r\n";
  CliRun clean = cli(std::string("fabric -i ") + kPsmn + " --map " + kPsmnMap + " --of json");
  CliRun dirty = cli("fabric -i " + term + " --map " + kPsmnMap + " --of json");
  ASSERT_EQ(dirty.rc, 0) << dirty.err;
  auto a = nlohmann::json::parse(clean.out), b = nlohmann::json::parse(dirty.out);
  for (const char* key : {"switches", "hosts", "switch_links", "tiers", "levels", "anomalies"}) {
    EXPECT_EQ(a[key], b[key]) << key;
  }
  ASSERT_EQ(b["notes"].size(), a["notes"].size() + 2);
  EXPECT_NE(b["notes"][0].get<std::string>().find(
                term + ":1: skipped a shell prompt or command line before the data: "
                       "`[root@ufm01 dir]# ibnetdiscover`"),
            std::string::npos)
      << b["notes"][0];
  // The text output says it too, under notes.
  CliRun text = cli("fabric -i " + term);
  EXPECT_NE(text.out.find("11 switches, 89 hosts"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("after the data: `[root@ufm01 dir]#`"), std::string::npos) << text.out;
  // --format says what detection would, or overrides it.
  EXPECT_EQ(
      cli("fabric -i " + term + " --map " + kPsmnMap + " --format ibnetdiscover --of json").out,
      dirty.out);
  CliRun toml = cli("fabric -i " + term + " --format toml");
  EXPECT_EQ(toml.rc, 1);
  EXPECT_NE(toml.err.find("TOML"), std::string::npos) << toml.err;
  fs::remove(term);
}

TEST(FabricCli, TextShowsTiersHostsRailsAnomalies) {
  CliRun r = cli(std::string("fabric -i ") + kPsmn + " --map " + kPsmnMap);
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_golden("fabric-psmn-x5.txt", r.out);
  for (const char* s :
       {"11 switches, 89 hosts, 89 channel adapters, 3 tiers", "tiers:", "OVERSUB",
        "hosts per leaf group:", "rails:", "anomalies: 3", "slow-link", "r510gluster[1-4]"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  // The map option as `topo-aware map` spells it gives the same fabric.
  CliRun g = cli(std::string("fabric -i ") + kPsmn + " --guid-map " + kPsmnMap);
  ASSERT_EQ(g.rc, 0) << g.err;
  EXPECT_EQ(g.out, r.out);
}

TEST(FabricCli, SlurmTreeFromIbnetdiscoverIsGolden) {
  CliRun r = cli(std::string("fabric -i ") + kPsmn + " --map " + kPsmnMap + " --of slurm-tree");
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_golden("fabric-psmn-x5-tree.conf", r.out);
}

TEST(FabricCli, JsonForScriptsAndOutputFile) {
  std::string out = scratch("fabric.json");
  CliRun r =
      cli(std::string("fabric -i ") + kPsmn + " --map " + kPsmnMap + " --of json -o '" + out + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  nlohmann::json j = nlohmann::json::parse(slurp(out));
  fs::remove(out);
  ASSERT_EQ(j["switches"].size(), 11u);
  int tier1 = 0;
  for (const auto& s : j["switches"]) tier1 += s["tier"] == 1 ? 1 : 0;
  EXPECT_EQ(tier1, 6);
  ASSERT_EQ(j["hosts"].size(), 89u);
  bool found = false;
  for (const auto& h : j["hosts"]) {
    if (h["name"] == "r815lin104") {
      found = true;
      EXPECT_EQ(h["leaves"], nlohmann::json::array({"S-0002c902004827b0"}));
    }
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(j["tiers"].is_array());
  EXPECT_TRUE(j["levels"].is_array());
  EXPECT_TRUE(j["anomalies"].is_array());
}

// The real Alibaba Lingjun fabric (tests/fixtures/lingjun/topo.csv), recognized from its
// header: a table, JSON with each host's blinded id, and a topology.conf Slurm can load.
TEST(FabricCli, LingjunCsvAsTableJsonAndSlurmTree) {
  CliRun t = cli("fabric -i lingjun/topo.csv");
  ASSERT_EQ(t.rc, 0) << t.err;
  for (const char* s : {"123 switches, 847 hosts", "lj", "placeholder of 100 Gb/s"}) {
    EXPECT_NE(t.out.find(s), std::string::npos) << s << "\n" << t.out;
  }
  CliRun j = cli("fabric -i lingjun/topo.csv --format lingjun-csv --of json");
  ASSERT_EQ(j.rc, 0) << j.err;
  nlohmann::json doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["hosts"].size(), 847u);
  EXPECT_EQ(doc["hosts"][0]["name"], "lj001");
  EXPECT_EQ(doc["hosts"][0]["source_id"],
            "0c9d9de1b19e7f39b08f49ddfa26744ae26d3adf8bd59af1b16e203b6fa5fe4b");
  EXPECT_EQ(doc["hosts"][0]["leaves"], nlohmann::json::array({"P10-S14"}));
  CliRun s = cli("fabric -i lingjun/topo.csv --of slurm-tree");
  ASSERT_EQ(s.rc, 0) << s.err;
  EXPECT_NE(s.out.find("SwitchName=G6 Switches="), std::string::npos) << s.out.substr(0, 2000);
  EXPECT_NE(s.out.find("SwitchName=P10-S14 Nodes="), std::string::npos);
  // A bad row exits 1 naming the file and line.
  std::string bad = scratch("lingjun-bad.csv");
  std::ofstream(bad) << "ip,DSW,PSW,ASW\naa,G1,P1,S1\nbb,G1\n";
  CliRun b = cli("fabric -i '" + bad + "'");
  EXPECT_EQ(b.rc, 1);
  EXPECT_NE(b.err.find(bad + ":3:"), std::string::npos) << b.err;
}

TEST(FabricCli, DotAndBlock) {
  CliRun d = cli("fabric -i ../../etc/lab-cluster.toml --of dot");
  ASSERT_EQ(d.rc, 0) << d.err;
  EXPECT_NE(d.out.find("graph fabric {"), std::string::npos);
  CliRun b = cli("fabric -i ../../etc/lab-cluster.toml --of slurm-block --slurm-version 24.05");
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_NE(b.out.find("BlockName=block1 Nodes=node[1-2]\nBlockName=block2 Nodes=node[3-4]\n"
                       "BlockSizes=2,4\n"),
            std::string::npos)
      << b.out;
}

// The release a topology/block file is for: named, or the installed Slurm's (a stand-in
// scontrol on PATH here, as sites run it), never a file that release refuses.
TEST(FabricCli, BlockIsWrittenForTheSlurmReleaseItIsFor) {
  CliRun old = cli("fabric -i ../../etc/lab-cluster.toml --of slurm-block --slurm-version 23.11");
  ASSERT_EQ(old.rc, 0) << old.err;
  EXPECT_EQ(old.out.find("\nBlockSizes="), std::string::npos) << old.out;
  EXPECT_NE(old.out.find("BlockSizes left out: Slurm 23.11"), std::string::npos) << old.out;

  CliRun none = cli("fabric -i ../../etc/lab-cluster.toml --of slurm-block --slurm-version 23.02");
  EXPECT_EQ(none.rc, 1) << none.out;
  EXPECT_NE(none.err.find("Slurm 23.02 (--slurm-version)"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("no topology/block"), std::string::npos) << none.err;

  CliRun bad = cli("fabric -i ../../etc/lab-cluster.toml --of slurm-block --slurm-version 24");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.err.find("--slurm-version"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("not a Slurm release"), std::string::npos) << bad.err;

  const std::string bin = scratch("bin");
  fs::create_directories(bin);
  {
    std::ofstream s(bin + "/scontrol");
    s << "#!/bin/sh\n[ \"$1\" = -V ] && echo 'slurm 23.11.4'\n";
  }
  fs::permissions(bin + "/scontrol", fs::perms::owner_all);
  CliRun found = cli("fabric -i ../../etc/lab-cluster.toml --of slurm-block",
                     "PATH='" + bin + "':\"$PATH\";");
  fs::remove_all(bin);
  ASSERT_EQ(found.rc, 0) << found.err;
  EXPECT_NE(found.out.find("for Slurm 23.11 (scontrol -V)"), std::string::npos) << found.out;
  EXPECT_EQ(found.out.find("\nBlockSizes="), std::string::npos) << found.out;
}

// Bad input: exit 1, a message naming the file (and line), in bounded time and memory: the
// command runs under a 1 GiB address-space and 10 s CPU limit (a sanitizer build reserves more
// virtual memory than that, so there only the time bound applies).
TEST(FabricCli, HostileInputExitsOneWithAClearMessage) {
#if defined(__SANITIZE_ADDRESS__)
  const std::string limits = "ulimit -t 10;";
#else
  const std::string limits = "ulimit -v 1048576; ulimit -t 10;";
#endif
  std::string dir = scratch("hostile");
  fs::create_directories(dir);
  {
    std::ofstream(dir + "/huge.conf") << "SwitchName=s1 Nodes=n[1-999999999]\n";
    std::ofstream junk(dir + "/junk.bin", std::ios::binary);
    std::uint32_t x = 2463534242u;
    for (int i = 0; i < (1 << 20); ++i) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      junk.put(static_cast<char>(x));
    }
    std::string psmn = slurp(std::string(TOPOAWARE_TEST_FIXTURES) + "/" + kPsmn);
    std::ofstream(dir + "/truncated.txt") << psmn.substr(0, psmn.size() / 2);
    std::ofstream(dir + "/empty.txt") << "";
  }
  struct Case {
    std::string file;
    std::string says;
  } cases[] = {
      {dir + "/huge.conf", "huge.conf:1: hostlist \"n[1-999999999]\" names 999999999 hosts"},
      {dir + "/junk.bin", "junk.bin: binary data"},
      {dir + "/truncated.txt", "truncated dump"},
      {dir + "/empty.txt", "empty file"},
      {dir + "/missing.txt", "no such file"},
  };
  TOPOAWARE_SHARED_OR_SKIP(lid, "ibnetdiscover/hk-lab-4sw-invalid-lid-edgecase.ibnetdiscover.txt");
  std::vector<Case> all(std::begin(cases), std::end(cases));
  all.push_back({lid, "hk-lab-4sw-invalid-lid-edgecase.ibnetdiscover.txt:10: invalid LID"});
  for (const Case& c : all) {
    auto t0 = std::chrono::steady_clock::now();
    CliRun r = cli("fabric -i '" + c.file + "'", limits);
    EXPECT_EQ(r.rc, 1) << c.file << "\n" << r.err;
    EXPECT_NE(r.err.find("topo-aware: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.says << "\n" << r.err;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << c.file;
  }
  CliRun m = cli(
      std::string("fabric -i slurm-topology/psmn-x5-tree-from-ibnetdiscover.topology.conf --map ") +
      kPsmnMap);
  EXPECT_EQ(m.rc, 1);
  // The error names the map file and says why it does not apply.
  EXPECT_NE(m.err.find(kPsmnMap), std::string::npos) << m.err;
  EXPECT_NE(m.err.find("applies to ibnetdiscover dumps only"), std::string::npos) << m.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace topoaware
