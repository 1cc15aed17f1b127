// `topo-aware map` and `inspect` as users run them: the lab cluster description (etc/) with the
// DGX H100 capture, exit codes, the env line format the end-to-end test relies on, JSON keys,
// hostfile, and inspect recomputing a plan from its JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_support.h"
#include "doctor_fixtures.h"
#include "test_support.h"
#include "topoaware/launch/port.h"

namespace {

using topoaware::test::cli;
using topoaware::test::CliRun;

using topoaware::test::lab_args;
using topoaware::test::source_dir;

TEST(MapCliTest, EnvLinesPerTaskSortedByName) {
  CliRun r =
      cli("map " + lab_args() + " --nodes 'node[1-4]' --layout tp=8,pp=2 --job-id 77 --of env");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  std::map<int, std::vector<std::string>> names;
  std::map<int, std::map<std::string, std::string>> env;
  while (std::getline(in, line)) {
    auto sp = line.find(' ');
    auto eq = line.find('=');
    ASSERT_NE(sp, std::string::npos) << line;
    ASSERT_NE(eq, std::string::npos) << line;
    int task = std::stoi(line.substr(0, sp));
    std::string name = line.substr(sp + 1, eq - sp - 1);
    names[task].push_back(name);
    env[task][name] = line.substr(eq + 1);
  }
  ASSERT_EQ(env.size(), 32u);
  for (const auto& [task, n] : names) EXPECT_TRUE(std::is_sorted(n.begin(), n.end())) << task;
  EXPECT_EQ(env[0]["WORLD_SIZE"], "32");
  // MASTER_PORT as srun derives it for step 0 of job 77 on this machine (launch/port.h).
  const std::string port =
      std::to_string(topoaware::launch::master_port(77, 0, topoaware::launch::ephemeral_ports()));
  EXPECT_EQ(env[0]["MASTER_PORT"], port);
  // Another step of the same job listens elsewhere: two steps may run at once.
  CliRun step1 = cli("map " + lab_args() +
                     " --nodes 'node[1-4]' --layout tp=8,pp=2 --job-id 77 --step-id 1 --of env");
  ASSERT_EQ(step1.rc, 0) << step1.err;
  EXPECT_EQ(step1.out.find("0 MASTER_PORT=" + port + "\n"), std::string::npos) << step1.out;
  EXPECT_NE(step1.out.find("0 MASTER_PORT="), std::string::npos) << step1.out;
  EXPECT_EQ(env[5]["LOCAL_WORLD_SIZE"], "8");
  // The DGX H100 capture pairs GPU k with mlx5_k.
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(env[t]["NCCL_IB_HCA"].substr(0, 6), "=mlx5_") << t;
  }
  std::map<std::string, int> ranks;
  for (auto& [t, e] : env) ++ranks[e["RANK"]];
  EXPECT_EQ(ranks.size(), 32u);
}

TEST(MapCliTest, JsonHasRanksCostAndInputs) {
  CliRun r = cli("map " + lab_args() + " --nodes 'node[1-4]' --layout tp=8,pp=2 --of json");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["ranks"].size(), 32u);
  for (const auto& t : j["ranks"]) {
    for (const char* key : {"task", "rank", "host", "gpu", "nic"}) EXPECT_TRUE(t.contains(key));
  }
  EXPECT_GT(j["cost"]["block"].get<double>(), 0);
  EXPECT_LE(j["cost"]["topo"].get<double>(), j["cost"]["block"].get<double>());
  EXPECT_LE(j["cost"]["lower_bound"].get<double>(), j["cost"]["topo"].get<double>());
  EXPECT_EQ(j["inputs"]["nodes"], "node[1-4]");
  // The ranks are written directly, not through nlohmann: the text must be what its dump(2)
  // gives for the same document, key order and indentation included.
  EXPECT_EQ(r.out, j.dump(2) + "\n");
}

TEST(MapCliTest, InspectRecomputesThePlan) {
  auto dir = std::filesystem::path(TOPOAWARE_BINARY_DIR) / "map_cli_test";
  std::filesystem::create_directories(dir);
  std::string plan = (dir / "plan.json").string(), svg = (dir / "plan.svg").string();
  CliRun m = cli("map " + lab_args() + " --nodes 'node[1,3]' --layout tp=4 --of json -o " + plan);
  ASSERT_EQ(m.rc, 0) << m.err;
  CliRun r = cli("inspect " + plan + " --svg " + svg + " --of json");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::ifstream f(plan);
  auto p = nlohmann::json::parse(f);
  EXPECT_DOUBLE_EQ(j["plan"]["seconds"].get<double>(), p["cost"]["plan"].get<double>());
  EXPECT_EQ(j["compare"]["algorithm"], "block");
  std::ifstream s(svg);
  std::string text((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("node3"), std::string::npos);
  // Hosts are labelled with their ranks in the picture itself, not only in tooltips.
  std::string label = ">node1 ";
  for (const auto& t : p["ranks"]) {
    if (t["host"] == "node1" && t["rank"] == 0) label += "0-";
  }
  EXPECT_NE(text.find(label), std::string::npos) << label;
  CliRun t = cli("inspect " + plan);
  EXPECT_EQ(t.rc, 0);
  EXPECT_NE(t.out.find("per dim"), std::string::npos);
}

// inspect judges the allocation: a plan on node1 and node3 spans both leaves of the lab; the best
// allocation of an empty cluster, and of node1, node3 plus a free node2, is one leaf.
TEST(MapCliTest, InspectJudgesTheAllocationAgainstTheBestOne) {
  auto dir = std::filesystem::path(TOPOAWARE_BINARY_DIR) / "map_cli_test";
  std::filesystem::create_directories(dir);
  std::string plan = (dir / "plan-quality.json").string();
  CliRun m = cli("map " + lab_args() + " --nodes 'node[1,3]' --layout tp=8 --of json -o " + plan);
  ASSERT_EQ(m.rc, 0) << m.err;
  CliRun r = cli("inspect " + plan + " --of json");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto a = nlohmann::json::parse(r.out)["allocation"];
  EXPECT_EQ(a["spread"]["leaf"], 2);
  EXPECT_EQ(a["against"], "empty-cluster");
  EXPECT_EQ(a["best_found"], true);
  EXPECT_EQ(a["best"]["spread"]["leaf"], 1);
  EXPECT_GE(a["slowdown"].get<double>(), 1.0);
  EXPECT_LE(a["best"]["seconds"].get<double>(), a["seconds"].get<double>());
  r = cli("inspect " + plan + " --free node2 --of json");
  ASSERT_EQ(r.rc, 0) << r.err;
  a = nlohmann::json::parse(r.out)["allocation"];
  EXPECT_EQ(a["against"], "free-hosts");
  EXPECT_EQ(a["best"]["hosts"], "node[1-2]");
  CliRun t = cli("inspect " + plan);
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("allocation: 2 leaves; the mapper's plan there"), std::string::npos)
      << t.out;
  CliRun bad = cli("inspect " + plan + " --free node9");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("--free"), std::string::npos) << bad.err;
}

// --format names the fabric file's format; the plan records it, so inspect reads the file the
// same way, and inspect --format overrides what the plan says.
TEST(MapCliTest, FabricFormatIsGivenRecordedAndOverridable) {
  auto dir = std::filesystem::path(TOPOAWARE_BINARY_DIR) / "map_cli_test";
  std::filesystem::create_directories(dir);
  std::string plan = (dir / "plan-format.json").string();
  CliRun m = cli("map " + lab_args() +
                 " --format toml --nodes 'node[1-2]' --layout tp=8 --of json -o " + plan);
  ASSERT_EQ(m.rc, 0) << m.err;
  std::ifstream f(plan);
  auto p = nlohmann::json::parse(f);
  EXPECT_EQ(p["inputs"]["fabric_format"], "toml");
  EXPECT_EQ(cli("inspect " + plan).rc, 0);
  CliRun wrong = cli("inspect " + plan + " --format ibnetdiscover");
  EXPECT_EQ(wrong.rc, 1);
  EXPECT_NE(wrong.err.find("lab-cluster.toml"), std::string::npos) << wrong.err;
  CliRun bad = cli("map " + lab_args() + " --format ibnetdiscover --nodes 'node[1-2]'");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("lab-cluster.toml:"), std::string::npos) << bad.err;
  EXPECT_EQ(cli("map " + lab_args() + " --format hwloc-xml --nodes 'node[1-2]'").rc, 2);
  // Without --format the plan records nothing, as before.
  CliRun d = cli("map " + lab_args() + " --nodes 'node[1-2]' --layout tp=8 --of json");
  ASSERT_EQ(d.rc, 0) << d.err;
  EXPECT_FALSE(nlohmann::json::parse(d.out)["inputs"].contains("fabric_format"));
}

// Slurm's topology.conf gives no link speeds: the figures come from the node capture's NICs and
// uplinks sized from what they carry, and every output says so.
TEST(MapCliTest, TopologyConfWithoutSpeedsStatesItsAssumptions) {
  const std::string conf = ::testing::TempDir() + "/map_cli_test_topology.conf";
  {
    std::ofstream f(conf);
    f << "SwitchName=s0 Switches=l[0-1]\nSwitchName=l0 Nodes=node[1-2]\n"
         "SwitchName=l1 Nodes=node[3-4]\n";
  }
  const std::string args = "map --fabric " + conf + " --node-type " +
                           topoaware::test::fixture("nccl-topo/dgx-h100-topo.xml") +
                           " --nodes 'node[1-4]' --layout tp=8,dp=4";
  CliRun table = cli(args);
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_NE(table.out.find("figures assume: host NICs from the node capture (8 x 50 GB/s per "
                           "host)"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("non-blocking"), std::string::npos) << table.out;
  CliRun json = cli(args + " --oversubscription 2 --of json");
  ASSERT_EQ(json.rc, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_TRUE(j.contains("assumptions"));
  ASSERT_EQ(j["assumptions"].size(), 2u);
  EXPECT_NE(j["assumptions"][1].get<std::string>().find("tier 1 2:1"), std::string::npos);
  EXPECT_EQ(j["inputs"]["oversubscription"], "2");
  const std::string plan = ::testing::TempDir() + "/map_cli_test_conf_plan.json";
  ASSERT_EQ(cli(args + " --of json -o " + plan).rc, 0);
  CliRun inspect = cli("inspect " + plan + " --oversubscription 4");
  ASSERT_EQ(inspect.rc, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("figures assume:"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("tier 1 4:1"), std::string::npos) << inspect.out;
  EXPECT_EQ(cli(args + " --oversubscription 0.5").rc, 1);
  EXPECT_EQ(cli(args + " --routing hashed").rc, 1);
  // A fabric with every speed (the lab's TOML) assumes nothing.
  CliRun lab = cli("map " + lab_args() + " --nodes 'node[1-2]' --layout tp=8 --of json");
  ASSERT_EQ(lab.rc, 0) << lab.err;
  EXPECT_TRUE(nlohmann::json::parse(lab.out)["assumptions"].empty());
}

TEST(MapCliTest, HostfileListsRankHosts) {
  CliRun r = cli("map " + lab_args() + " --nodes 'node[1-2]' --layout tp=8 --of hostfile");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    EXPECT_TRUE(line == "node1" || line == "node2") << line;
    ++n;
  }
  EXPECT_EQ(n, 16);
}

// --of host-order (scripts/calibrate.sh runs nccl-tests in each): on the lab's fabric (node1-2 on
// leaf1, node3-4 on leaf2) and on the crossed one (node1,3 on leaf1, node2,4 on leaf2), where
// Slurm's order crosses the spine at every step and the plan does not.
TEST(MapCliTest, HostOrderBlockPlanInterleaved) {
  const std::string crossed = "--fabric " + source_dir() + "/tests/e2e/lab-crossed.toml";
  auto order = [](const std::string& fabric, const std::string& nodes, const std::string& o) {
    CliRun r = cli("map " + fabric + " --nodes '" + nodes + "' --of host-order --order " + o);
    EXPECT_EQ(r.rc, 0) << r.err;
    std::string joined = r.out;
    std::replace(joined.begin(), joined.end(), '\n', ' ');
    return joined;
  };
  EXPECT_EQ(order(lab_args(), "node[1-4]", "block"), "node1 node2 node3 node4 ");
  EXPECT_EQ(order(lab_args(), "node[1-4]", "interleaved"), "node1 node3 node2 node4 ");
  EXPECT_EQ(order(lab_args(), "node[1-3]", "interleaved"), "node1 node3 node2 ");
  EXPECT_EQ(order(lab_args(), "node[1-4]", "plan"), "node1 node2 node3 node4 ");
  // One leaf: nothing to interleave.
  EXPECT_EQ(order(lab_args(), "node[1-2]", "interleaved"), "node1 node2 ");
  // The crossed fabric: the plan keeps each leaf's hosts together, interleaving is Slurm's order.
  const std::string plan = order(crossed, "node[1-4]", "plan");
  EXPECT_TRUE(plan == "node1 node3 node2 node4 " || plan == "node3 node1 node4 node2 " ||
              plan == "node2 node4 node1 node3 " || plan == "node4 node2 node3 node1 ")
      << plan;
  EXPECT_EQ(order(crossed, "node[1-4]", "interleaved"), "node1 node2 node3 node4 ");
  // The plan's order is what --of hostfile gives, hosts taken at their first rank.
  CliRun hf = cli("map " + crossed + " --nodes 'node[1-4]' --of hostfile");
  ASSERT_EQ(hf.rc, 0) << hf.err;
  std::istringstream in(hf.out);
  std::string line, first;
  while (std::getline(in, line)) {
    if (first.find(line + " ") == std::string::npos) first += line + " ";
  }
  EXPECT_EQ(first, plan);
  // The default order is the plan's; an unknown one is a usage error.
  EXPECT_EQ(cli("map " + crossed + " --nodes 'node[1-4]' --of host-order").out,
            cli("map " + crossed + " --nodes 'node[1-4]' --of host-order --order plan").out);
  CliRun bad = cli("map " + crossed + " --nodes 'node[1-4]' --of host-order --order random");
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("--order"), std::string::npos) << bad.err;
}

TEST(MapCliTest, PlainNodeExportsNoInventedNicNames) {
  // PSMN's real dump: its CA descriptions name no device, so a plain node's NIC is the host's
  // fabric port ("port-0"), shown in the plan and never exported to NCCL.
  std::string fabric = "--fabric " + topoaware::test::fixture("ibnetdiscover/psmn-x5-qdr-voltaire-"
                                                              "mellanox-100nodes.ibnetdiscover.txt") +
                       " --guid-map " +
                       topoaware::test::fixture("ibnetdiscover/psmn-x5-guid-to-hostname.map");
  CliRun j = cli("map " + fabric + " --nodes 'sl390lin[1-2]' --gpus-per-node 4 --layout tp=4 "
                 "--of json");
  ASSERT_EQ(j.rc, 0) << j.err;
  auto plan = nlohmann::json::parse(j.out);
  ASSERT_EQ(plan["ranks"].size(), 8u);
  for (const auto& t : plan["ranks"]) EXPECT_EQ(t["nic"], "port-0") << t.dump();
  CliRun env = cli("map " + fabric + " --nodes 'sl390lin[1-2]' --gpus-per-node 4 --layout tp=4 "
                   "--of env");
  ASSERT_EQ(env.rc, 0) << env.err;
  EXPECT_NE(env.out.find("0 RANK=0"), std::string::npos) << env.out;
  EXPECT_EQ(env.out.find("NCCL_IB_HCA"), std::string::npos) << env.out;
  EXPECT_EQ(env.out.find("NCCL_SOCKET_IFNAME"), std::string::npos) << env.out;
}

// `map --of env` for the lab's two nodes with CAPTURE as node type: task -> name -> value.
std::map<int, std::map<std::string, std::string>> lab_env(const std::string& capture) {
  CliRun r = cli("map --fabric " + source_dir() + "/etc/lab-cluster.toml --node-type " +
                 topoaware::test::fixture(capture) + " --nodes 'node[1-2]' --of env");
  EXPECT_EQ(r.rc, 0) << r.err;
  std::map<int, std::map<std::string, std::string>> env;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    auto sp = line.find(' '), eq = line.find('=');
    if (sp == std::string::npos || eq == std::string::npos) continue;
    env[std::stoi(line.substr(0, sp))][line.substr(sp + 1, eq - sp - 1)] = line.substr(eq + 1);
  }
  return env;
}

TEST(MapCliTest, SocketOnlyNodesGetAnInterfaceAndNoHca) {
  // Azure NCv4: NCCL's own dump with only its socket transport's eth0.
  auto env = lab_env("nccl-topo/azure-ncv4-a100-4gpu-topo.xml");
  ASSERT_EQ(env.size(), 8u);
  for (auto& [task, e] : env) {
    EXPECT_EQ(e.count("NCCL_IB_HCA"), 0u) << task;
    EXPECT_EQ(e["NCCL_SOCKET_IFNAME"], "=eth0") << task;
  }
  CliRun table = cli("map --fabric " + source_dir() + "/etc/lab-cluster.toml --node-type " +
                     topoaware::test::fixture("nccl-topo/azure-ncv4-a100-4gpu-topo.xml") +
                     " --nodes 'node[1-2]'");
  EXPECT_NE(table.out.find(" eth0 (socket) "), std::string::npos) << table.out;
  // A Supermicro with an I350 (eth0, eth1) beside a ConnectX-4: the HCA, never the I350, and
  // four GPUs with four distinct indices though hwloc named only one of them (cuda0).
  env = lab_env("hwloc/hwloc-v2fmt-2s-xeon-e5-2650-cuda-mlx5-ib-wholeio.xml");
  ASSERT_EQ(env.size(), 8u);
  for (auto& [task, e] : env) {
    EXPECT_EQ(e["NCCL_IB_HCA"], "=mlx5_0") << task;
    EXPECT_EQ(e["NCCL_SOCKET_IFNAME"], "=ib0") << task;
  }
  std::vector<std::string> devs;
  std::istringstream list(env[0]["CUDA_VISIBLE_DEVICES"]);
  for (std::string d; std::getline(list, d, ',');) devs.push_back(d);
  std::sort(devs.begin(), devs.end());
  EXPECT_EQ(devs, (std::vector<std::string>{"0", "1", "2", "3"}));
  // A node with no NIC at all (the DGX-2H capture lists none): nothing is invented.
  env = lab_env("hwloc/hwloc-v2fmt-nvidia-dgx2h-16xV100-nvml-nvlinkbw.xml");
  ASSERT_EQ(env.size(), 32u);
  for (auto& [task, e] : env) EXPECT_EQ(e.count("NCCL_IB_HCA"), 0u) << task;
}

TEST(MapCliTest, GpuIndicesFollowBusOrderAndEveryPortOfTheNicIsExported) {
  // The ProLiant SL390s capture gives its three Teslas no NVML index: they are numbered in PCI
  // bus order, as NVML does (06, 11, 14), not in the capture's order.
  CliRun j = cli("map --fabric " + source_dir() + "/etc/lab-cluster.toml --node-type " +
                 topoaware::test::fixture("hwloc/hwloc-v2fmt-2s-proliant-sl390s-mlx4-ib.xml") +
                 " --nodes node1 --of json");
  ASSERT_EQ(j.rc, 0) << j.err;
  std::map<int, std::string> bus;
  const auto plan = nlohmann::json::parse(j.out);
  for (const auto& t : plan["ranks"]) bus[t["gpu"].get<int>()] = t["busid"].get<std::string>();
  EXPECT_EQ(bus, (std::map<int, std::string>{
                     {0, "0000:06:00.0"}, {1, "0000:11:00.0"}, {2, "0000:14:00.0"}}));
  // Modal's B200 VM: GPU 0's nearest card carries four 400G ports, mlx5_5..mlx5_8; NCCL uses
  // them all, so all are exported.
  auto env = lab_env("nccl-topo/modal-hgx-b200-vm-8gpu-handedited-p2p-nvlink-topo.xml");
  EXPECT_EQ(env[0]["NCCL_IB_HCA"], "=mlx5_5,mlx5_6,mlx5_7,mlx5_8");
}

TEST(MapCliTest, BadInputAndUsageExitCodes) {
  CliRun bad = cli("map " + lab_args() + " --nodes 'node[1-4]' --layout tp=8,pp=3");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("tp*cp*ep*pp = 24 does not divide 32 slots"), std::string::npos)
      << bad.err;
  CliRun unknown = cli("map " + lab_args() + " --nodes 'node[1-2],nosuch' --layout tp=8");
  EXPECT_EQ(unknown.rc, 1);
  EXPECT_NE(unknown.err.find("nosuch"), std::string::npos) << unknown.err;
  CliRun usage = cli("map " + lab_args() + " --nodes node1 --of yaml");
  EXPECT_EQ(usage.rc, 2) << usage.err;
  CliRun missing = cli("map --nodes node1");
  EXPECT_EQ(missing.rc, 2) << missing.err;
  CliRun algo = cli("map " + lab_args() + " --nodes node1 --algo best");
  EXPECT_EQ(algo.rc, 2) << algo.err;
  CliRun noplan = cli("inspect /nonexistent/plan.json");
  EXPECT_EQ(noplan.rc, 1) << noplan.err;
}

TEST(MapCliTest, JobFileLayout) {
  auto dir = std::filesystem::path(TOPOAWARE_BINARY_DIR) / "map_cli_test";
  std::filesystem::create_directories(dir);
  std::string job = (dir / "job.toml").string();
  std::ofstream(job) << "layout = \"tp=8,dp=auto\"\n[model]\nhidden = 4096\nlayers = 32\n";
  CliRun r = cli("map " + lab_args() + " --nodes 'node[1-2]' --layout file:" + job + " --of json");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ofstream(job) << "layout = \"tp=8\"\n[model]\nhiden = 1\n";
  CliRun bad = cli("map " + lab_args() + " --nodes 'node[1-2]' --layout file:" + job);
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("job.toml:3: unknown key model.hiden"), std::string::npos) << bad.err;
}

// Env lines as a map: task -> name -> value.
std::map<int, std::map<std::string, std::string>> env_of(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> env;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    auto sp = line.find(' ');
    auto eq = line.find('=');
    if (sp == std::string::npos || eq == std::string::npos) continue;
    env[std::stoi(line.substr(0, sp))][line.substr(sp + 1, eq - sp - 1)] = line.substr(eq + 1);
  }
  return env;
}

// The lab described with its hosts cabled across their names (tests/e2e/lab-crossed.toml):
// a per-node launcher's plan must renumber the hosts, and `map` shows what srun would do.
TEST(MapCliTest, PerNodeLauncherOrdersHostsAndGpus) {
  const std::string crossed = "--fabric " + source_dir() + "/tests/e2e/lab-crossed.toml";
  CliRun r = cli("map " + crossed +
                 " --nodes 'node[1-4]' --tasks-per-node 1 --layout nproc=2,tp=2,pp=2 --job-id 9 "
                 "--of env");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto env = env_of(r.out);
  ASSERT_EQ(env.size(), 4u);  // one launcher task a host
  std::map<std::string, std::string> node_rank;
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(env[t]["WORLD_SIZE"], "8");
    EXPECT_EQ(env[t]["NNODES"], "4");
    EXPECT_EQ(env[t]["PET_NPROC_PER_NODE"], "2");
    EXPECT_EQ(env[t]["PET_NODE_RANK"], env[t]["NODE_RANK"]);
    EXPECT_EQ(env[t]["CUDA_VISIBLE_DEVICES"].size(), 3u);  // two GPUs, "a,b"
    EXPECT_EQ(env[t].count("RANK"), 0u);
    node_rank["node" + std::to_string(t + 1)] = env[t]["NODE_RANK"];
  }
  // node1 and node3 share a leaf: they hold neighbouring node ranks, unlike Slurm's order.
  EXPECT_EQ(std::abs(std::stoi(node_rank["node1"]) - std::stoi(node_rank["node3"])), 1) << r.out;
  // The same through --launcher, and the table says what it shows.
  CliRun t = cli("map " + crossed + " --nodes 'node[1-4]' --launcher per-node --nproc 2 " +
                 "--layout tp=2,pp=2");
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("8 workers of a per-node launcher on 4 hosts"), std::string::npos) << t.out;
  // A hostfile is for one task per GPU.
  CliRun h = cli("map " + crossed + " --nodes 'node[1-4]' --launcher per-node --of hostfile");
  EXPECT_EQ(h.rc, 2) << h.err;
}

TEST(MapCliTest, PerNodeLauncherThatWouldStraddleHostsIsRefusedNamingTheFix) {
  CliRun r = cli("map " + lab_args() + " --nodes 'node[1-3]' --launcher per-node --layout tp=3");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.err.find("would straddle hosts; run nproc=6"), std::string::npos) << r.err;
  CliRun ok = cli("map " + lab_args() + " --nodes 'node[1-3]' --layout tp=3,nproc=6");
  EXPECT_EQ(ok.rc, 0) << ok.err;
  CliRun fit = cli("map " + lab_args() +
                   " --nodes 'node[1-4]' --launcher per-node --layout "
                   "tp=16,pp=3");
  EXPECT_EQ(fit.rc, 1) << fit.out;
  EXPECT_NE(fit.err.find("4 hosts x 8 workers (per-node launcher)"), std::string::npos) << fit.err;
}

TEST(MapCliTest, IdsSlurmAndThePluginsConfiguration) {
  auto dir = std::filesystem::path(TOPOAWARE_BINARY_DIR) / "map_cli_test";
  std::filesystem::create_directories(dir);
  const std::string config = (dir / "topo-aware.toml").string();
  std::ofstream(config) << "fabric = \"" << source_dir() << "/etc/lab-cluster.toml\"\n"
                        << "[[node]]\nhosts = \"node*\"\ncapture = \""
                        << topoaware::test::fixture("nccl-topo/dgx-h100-topo.xml") << "\"\n";
  CliRun r = cli("map --config " + config +
                 " --nodes 'node[1-2]' --layout tp=4 --ids slurm --master-addr 10.0.0.1 "
                 "--job-id 5 --of env");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto env = env_of(r.out);
  ASSERT_EQ(env.size(), 16u);
  for (auto& [task, e] : env) {
    EXPECT_EQ(e["SLURM_PROCID"], e["RANK"]);
    EXPECT_EQ(e["TOPO_AWARE_SLURM_PROCID"], std::to_string(task));
    EXPECT_EQ(e["MASTER_ADDR"], "10.0.0.1");
    EXPECT_EQ(e["JAX_COORDINATOR_ADDRESS"],
              "10.0.0.1:" + std::to_string(topoaware::launch::master_port(
                                5, 0, topoaware::launch::ephemeral_ports())));
  }
  // The same plan as from the fabric and capture given directly.
  CliRun direct = cli("map " + lab_args() +
                      " --nodes 'node[1-2]' --layout tp=4,ids=slurm "
                      "--master-addr 10.0.0.1 --job-id 5 --of env");
  ASSERT_EQ(direct.rc, 0) << direct.err;
  EXPECT_EQ(direct.out, r.out);
  std::ofstream(config) << "fabirc = \"x\"\n";
  CliRun bad = cli("map --config " + config + " --nodes node1");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("topo-aware.toml:1"), std::string::npos) << bad.err;
}

// The node doctor's reports: map and inspect model a degraded NIC at what it measured.
TEST(MapCliTest, HealthReportsAreModelledAndSaid) {
  auto dir = std::filesystem::path(TOPOAWARE_BINARY_DIR) / "map_cli_test" / "health";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string faults = topoaware::test::doctor_faults().string();
  CliRun d = cli("doctor --fsroot " + faults + "/rdma-rate-hdr --node node3 --health-dir " +
                 dir.string() + " -q -o /dev/null");
  ASSERT_EQ(d.rc, 3) << d.err;  // degraded
  const std::string args = "map " + lab_args() + " --nodes 'node[1-4]' --tasks-per-node 4 " +
                           "--layout tp=4 --health-dir " + dir.string();
  CliRun r = cli(args);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("degraded (health report): node3: mlx5_2 at 200 of 400 Gb/s"),
            std::string::npos)
      << r.out;
  CliRun j = cli(args + " --of json -o " + (dir / "plan.json").string());
  ASSERT_EQ(j.rc, 0) << j.err;
  auto plan = nlohmann::json::parse(topoaware::test::slurp((dir / "plan.json").string()));
  EXPECT_LT(plan["cost"]["plan"].get<double>(), 0.75 * plan["cost"]["block"].get<double>());
  ASSERT_EQ(plan["degraded"].size(), 1u);
  for (const auto& t : plan["ranks"]) {
    if (t["host"] == "node3") {
      EXPECT_NE(t["gpu"].get<int>(), 2) << t.dump();
    }
  }
  CliRun i = cli("inspect " + (dir / "plan.json").string());
  ASSERT_EQ(i.rc, 0) << i.err;
  EXPECT_NE(i.out.find("degraded (health report): node3"), std::string::npos) << i.out;
}

}  // namespace
