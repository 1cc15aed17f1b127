// calibration_bench: the cost model against published nccl-tests bus bandwidths.
//
//   build/release/tools/bench/calibration_bench            the table of docs/calibration.md
//   build/release/tools/bench/calibration_bench --markdown the same as a Markdown table
//   build/release/tools/bench/calibration_bench --only h100-4n-allreduce-default
//
// Each case builds the published run's hardware with the project's own builders (a real NCCL
// topology capture where one exists, else mapper::make_node), places ranks the way nccl-tests
// does (Slurm's block order: ranks 0..7 on the first node, ...), runs the current cost model
// (mapper::evaluate, through topoaware/mapper/busbw_model.h, which nccl-check shares) for one
// collective over those ranks, and converts the modeled time to bus bandwidth as nccl-tests does
// (doc/PERFORMANCE.md there): busbw = algbw x 2(n-1)/n for all_reduce, x (n-1)/n for all_gather
// and alltoall, x 1 for sendrecv, algbw = size / time.
//
// The model is used only through its public API (make_instance, evaluate, the synthetic fabric
// and node builders), so the "model" column follows whatever the cost model is when this runs.
// The published column, its source and the algorithm NCCL ran are data below; docs/calibration.md
// cites each. Every case is compared (PASS within +-25%, else OUTSIDE, with the gap the doc names),
// and the model's own algorithm choice is printed beside what NCCL ran. `--choices` prints the
// model's choice for NCCL's collectives over node counts and sizes (docs/calibration.md, "Which
// algorithm").
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "topoaware/mapper/busbw_model.h"
#include "topoaware/mapper/nccl_model.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/paths.h"
#include "topoaware/topology/sources.h"

using namespace topoaware;
using namespace topoaware::mapper;
namespace fs = std::filesystem;

namespace {

// nccl-tests' collectives, not the layout's (mapper::Collective).
using busbw::Collective;
using busbw::collective_name;
using busbw::model_busbw;
using busbw::ModeledBusbw;
using busbw::NcclSetup;

// The hardware of one case: a fabric and the node model of its hosts (all hosts alike).
struct Hardware {
  topology::Fabric fabric;
  topology::NodeTopology node;
  std::string described;  // how it was built, for the table's notes
};

struct Case {
  std::string id;
  std::string system;  // the published machine, in words
  Collective collective;
  int nodes = 1;
  int gpus_per_node = 8;  // ranks per node
  double bytes = 0;       // nccl-tests "size" of the published row
  double published = 0;   // published busbw, GB/s
  std::string algorithm;  // what NCCL ran (as published or as its version does by default)
  std::string source;     // where the published figure is (docs/calibration.md cites it)
  std::function<Hardware()> hardware;
  NcclSetup nccl;         // NCCL_ALGO where the run forced it, CollNet, the release
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// NCCL's per-lane NVLink figures (paths.h): what a node model built from a capture carries.
const double kH100NvlinkGbps = 18 * topology::nvlink_lane_bandwidth(90);
const double kA100NvlinkGbps = 12 * topology::nvlink_lane_bandwidth(80);
const double kGb200NvlinkGbps = 18 * topology::nvlink_lane_bandwidth(100);

fs::path fixture(const std::string& name) {
  for (fs::path dir : {fs::path("tests/fixtures/nccl-topo"),
                       fs::path(__FILE__).parent_path().parent_path().parent_path() / "tests" /
                           "fixtures" / "nccl-topo"}) {
    if (fs::exists(dir / name)) return dir / name;
  }
  throw topology::Error(topology::ErrorCode::kNotFound, name,
                        "fixture not found (run from the repository root)");
}

// A rail-optimized two-tier fabric of `hosts` hosts (one scalable unit: every host under the
// same rail switches), `ports` NIC ports per host at `port_gbps` GB/s each.
FatTreeSpec rail_fabric(int hosts, int gpus, int ports, double port_gbps) {
  FatTreeSpec s;
  s.hosts = hosts;
  s.hosts_per_leaf = 32;
  s.gpus_per_host = gpus;
  s.ports_per_host = ports;
  s.port_gbps = port_gbps;
  s.rail_optimized = ports > 1;
  return s;
}

// DGX/HGX H100 from the project's capture (tests/fixtures/nccl-topo/dgx-h100-topo.xml: 8 H100
// SXM, 18 NVLinks each, 8 ConnectX-7 at 400 Gb/s, one per GPU's PCIe switch).
Hardware h100(int hosts) {
  Hardware hw;
  hw.fabric = make_fat_tree(rail_fabric(hosts, 8, 8, 50));
  hw.node = topology::load_nccl_xml(fixture("dgx-h100-topo.xml").string());
  hw.described = "dgx-h100-topo.xml, rail-optimized 8 x 400G";
  return hw;
}

// An 8-GPU NVSwitch node built by make_node (captures of A100 clouds list no NVLink: NCCL reads
// it from NVML at run time).
Hardware a100(int hosts, int nics, double nic_gbps, const std::string& what) {
  Hardware hw;
  hw.fabric = make_fat_tree(rail_fabric(hosts, 8, nics, nic_gbps));
  hw.node = make_node(8, nics, kA100NvlinkGbps, nic_gbps, 80);
  hw.described = what;
  return hw;
}

// The same DGX A100-class machine from Azure NDv4's own NCCL topology file, as a user would
// give it: the file lists no NVLink, so the node model has none.
Hardware ndv4_capture(int hosts) {
  Hardware hw;
  hw.fabric = make_fat_tree(rail_fabric(hosts, 8, 8, 25));
  hw.node = topology::load_nccl_xml(fixture("azure-ndv4-a100-8gpu-8ib-topo.xml").string());
  hw.described = "azure-ndv4-a100-8gpu-8ib-topo.xml (no NVLink in the file), 8 x 200G";
  return hw;
}

// GB200 trays (4 GPUs, 4 NICs at `nic_gbps`) in NVLink domains of `domain_hosts` trays.
Hardware gb200(int hosts, int domain_hosts, double nic_gbps) {
  Hardware hw;
  FatTreeSpec s = rail_fabric(hosts, 4, 4, nic_gbps);
  s.nvlink_domain_hosts = domain_hosts;
  s.nvlink_gbps = kGb200NvlinkGbps;
  hw.fabric = make_fat_tree(s);
  hw.node = make_node(4, 4, kGb200NvlinkGbps, nic_gbps, 100);
  hw.described =
      "make_node(4 GPUs, 4 NICs), NVLink domains of " + std::to_string(domain_hosts) + " trays";
  return hw;
}

// An 8-GPU H100 node with `nics` NICs at `nic_gbps` (make_node), for clouds whose capture is
// not in the fixtures.
Hardware h100_plain(int hosts, int nics, double nic_gbps, const std::string& what) {
  Hardware hw;
  hw.fabric = make_fat_tree(rail_fabric(hosts, 8, nics, nic_gbps));
  hw.node = make_node(8, nics, kH100NvlinkGbps, nic_gbps);
  hw.described = what;
  return hw;
}

using nccl::Algo;

// NCCL_ALGO forced (and the release the run used, where it matters).
NcclSetup forced(Algo a, nccl::Version v = nccl::kNewest) {
  NcclSetup s;
  s.algo = a;
  s.version = v;
  return s;
}
// CollNet (SHARP) enabled, and forced.
NcclSetup collnet(Algo a, nccl::Version v) {
  NcclSetup s = forced(a, v);
  s.collnet = true;
  return s;
}

std::vector<Case> cases() {
  using C = Collective;
  const char* k1455 = "github.com/NVIDIA/nccl/issues/1455";
  const char* k212 = "github.com/NVIDIA/nccl-tests/issues/212";
  const char* k309 = "github.com/NVIDIA/nccl-tests/issues/309";
  const char* kCw = "coreweave/nccl-tests README.md @0120901";
  const char* k290 = "github.com/NVIDIA/nccl-tests/issues/290, /267";
  const char* k130 = "github.com/NVIDIA/nccl-tests/issues/130";
  const char* k1218 = "github.com/NVIDIA/nccl/issues/1218";
  const char* kA3 = "lessizzmore/create-a3mega-ztan-fork ztan-NCCL-test-result @02dd8f4";
  const char* k812 = "github.com/NVIDIA/nccl/issues/812";
  const char* k1801 = "github.com/NVIDIA/nccl/issues/1801";
  std::vector<Case> v;
  // Single DGX/HGX H100.
  v.push_back({"h100-1n-allreduce-ring", "8x H100 SXM, one node", C::kAllReduce, 1, 8, 4 * kGiB,
               367, "Ring (NCCL_ALGO=Ring)", k1455, [] { return h100(1); }, forced(Algo::kRing)});
  v.push_back({"h100-1n-allreduce-nvls", "8x H100 SXM, one node", C::kAllReduce, 1, 8, 4 * kGiB,
               480, "NVLS (default)", k1455, [] { return h100(1); }, {}});
  v.push_back({"h100-1n-allgather", "8x H100 SXM, one node", C::kAllGather, 1, 8, 4 * kGiB, 370,
               "Ring (NVIDIA's figure for non-allreduce)", k212, [] { return h100(1); }, {}});
  // Multi-node H100, 8 x 400G InfiniBand.
  v.push_back({"h100-2n-allreduce-default", "2x HGX H100 (Dell XE9680), 8x CX-7 400G IB",
               C::kAllReduce, 2, 8, 8 * kGiB, 470, "default: Tree/NVLS-Tree at 2 nodes",
               k309, [] { return h100(2); }, {}});
  v.push_back({"h100-4n-allreduce-default", "4x HGX H100 (Dell XE9680), 8x CX-7 400G IB",
               C::kAllReduce, 4, 8, 8 * kGiB, 365.84, "default (NIC-bound at 4 nodes)", k309,
               [] { return h100(4); }, {}});
  v.push_back({"h100-8n-allreduce-collnet", "8x H100 (CoreWeave), 8x 400G IB", C::kAllReduce, 8, 8,
               8 * kGiB, 386.56, "CollNet chain (IB SHARP, forced)", kCw,
               [] { return h100(8); }, collnet(Algo::kCollNetChain, {2, 18})});
  v.push_back({"h100-2n-sendrecv", "2x H100, one GPU each, 400G NDR", C::kSendRecv, 2, 1, 8 * kGiB,
               47, "p2p (NVIDIA's expected 46-48 per NIC)", k290, [] { return h100(2); }, {}});
  v.push_back({"h100-2n-alltoall", "2x H100, 8x 400G", C::kAllToAll, 2, 8, 8 * kGiB, 96,
               "p2p (NVIDIA's N/(N-1) x 48 per GPU)", k130, [] { return h100(2); }, {}});
  v.push_back({"h100-6n-alltoall", "6x H100, 8x 400G", C::kAllToAll, 6, 8, 8 * kGiB, 57.6,
               "p2p (NVIDIA's N/(N-1) x 48 per GPU)", k130, [] { return h100(6); }, {}});
  // Ethernet (RoCE / TCPXO) clouds.
  v.push_back({"h100-32n-allgather-roce", "32x H100, 8 HCAs RoCE (speed not stated: 400G modeled)",
               C::kAllGather, 32, 8, 2 * kGiB, 200, "Ring, 16 channels forced", k1218,
               [] { return h100(32); }, {}});
  v.push_back({"a3mega-2n-allreduce", "2x GCP a3-megagpu-8g, 8 NICs GPUDirect-TCPXO (200G each)",
               C::kAllReduce, 2, 8, 8 * kGiB, 338.82, "default at 2 nodes (not stated)", kA3,
               [] { return h100_plain(2, 8, 25, "make_node(8 H100, 8 NICs at 200G)"); }, {}});
  // DGX A100, 8 x 200G HDR.
  v.push_back({"dgx-a100-allreduce", "DGX A100, 8x 200G HDR IB (nodes not stated: 4 modeled)",
               C::kAllReduce, 4, 8, 8 * kGiB, 192, "default multi-node", k812,
               [] { return a100(4, 8, 25, "make_node(8 A100, 12 NVLinks, 8 NICs at 200G)"); }, {}});
  v.push_back({"dgx-a100-allreduce-ndv4file", "same, modeled from Azure NDv4's NCCL XML file",
               C::kAllReduce, 4, 8, 8 * kGiB, 192, "default multi-node", k812,
               [] { return ndv4_capture(4); }, {}});
  // GB200 NVL72.
  v.push_back({"gb200-nvl72-allreduce", "GB200 NVL72, one rack (18 trays x 4)", C::kAllReduce, 18,
               4, 8 * kGiB, 834.57, "default in one NVLink domain (not stated)", kCw,
               [] { return gb200(18, 18, 50); }, {}});
  v.push_back({"gb200-3xnvl4-ring", "GB200, 3 NVL4 partitions over IB (400G modeled)",
               C::kAllReduce, 3, 4, 16 * kGiB, 196.72, "Ring (default with NVLS disabled)", k1801,
               [] { return gb200(3, 1, 50); }, forced(Algo::kRing, {2, 27})});
  v.push_back({"gb200-3xnvl4-tree", "same", C::kAllReduce, 3, 4, 16 * kGiB, 234.43,
               "Tree (NCCL_ALGO=Tree)", k1801, [] { return gb200(3, 1, 50); },
               forced(Algo::kTree, {2, 27})});
  v.push_back({"gb200-3xnvl8-ring", "GB200, 3 NVL8 partitions over IB (400G modeled)",
               C::kAllReduce, 6, 4, 16 * kGiB, 393.66, "Ring (default with NVLS disabled)", k1801,
               [] { return gb200(6, 2, 50); }, forced(Algo::kRing, {2, 27})});
  v.push_back({"gb200-3xnvl8-tree", "same", C::kAllReduce, 6, 4, 16 * kGiB, 485.68,
               "Tree (NCCL_ALGO=Tree)", k1801, [] { return gb200(6, 2, 50); },
               forced(Algo::kTree, {2, 27})});
  return v;
}

// The current cost model's busbw for the case's collective on its hardware.
ModeledBusbw run(const Case& c, std::string* built) {
  Hardware hw = c.hardware();
  *built = hw.described;
  return model_busbw(hw.fabric, hw.node, c.nodes, c.gpus_per_node, c.collective, c.bytes,
                     c.nccl);
}

// Cases outside +-25% for a reason docs/calibration.md names ("Gaps that matter to mapping").
// --check fails on any other case outside, and says when one of these comes within.
std::string known_gap(const std::string& id) {
  if (id == "dgx-a100-allreduce-ndv4file") return "gap 1";
  if (id == "h100-32n-allgather-roce") return "gap 4";
  if (id == "gb200-3xnvl4-tree" || id == "gb200-3xnvl8-tree") return "gap 7";
  return "";
}

bool within(double ratio) { return std::fabs(ratio - 1.0) <= 0.25; }

// What the model runs for a case: NCCL's algorithm, or point-to-point.
std::string runs(const ModeledBusbw& r) { return r.nccl.empty() ? "p2p" : r.nccl; }

// --choices: the model's choice (algorithm/protocol, channels) for NCCL's collectives on DGX
// H100 nodes (8 GPUs on NVSwitch, 8 x 400 Gb/s), over node counts and sizes: the rows of
// docs/calibration.md's "Which algorithm" table.
void print_choices(bool markdown) {
  const std::vector<int> node_counts = {1, 2, 3, 4, 8, 16};
  std::vector<double> sizes;
  for (double b = 1 << 20; b <= 4 * kGiB; b *= 4) sizes.push_back(b);
  auto size_text = [](double b) {
    char buf[16];
    if (b >= kGiB) {
      std::snprintf(buf, sizeof buf, "%.0f GiB", b / kGiB);
    } else {
      std::snprintf(buf, sizeof buf, "%.0f MiB", b / (1 << 20));
    }
    return std::string(buf);
  };
  for (nccl::Func f : {nccl::Func::kAllReduce, nccl::Func::kReduceScatter}) {
    if (markdown) {
      std::printf("\n%s%s, DGX H100 nodes (NCCL %s rules):\n\n| nodes |",
                  std::string(nccl::to_string(f)).c_str(),
                  f == nccl::Func::kReduceScatter ? " (and AllGather)" : "",
                  nccl::to_string(nccl::kNewest).c_str());
      for (double b : sizes) std::printf(" %s |", size_text(b).c_str());
      std::printf("\n|---|");
      for (std::size_t i = 0; i < sizes.size(); ++i) std::printf("---|");
      std::printf("\n");
    } else {
      std::printf("\n%s, DGX H100 nodes:\n%6s", std::string(nccl::to_string(f)).c_str(), "nodes");
      for (double b : sizes) std::printf(" %16s", size_text(b).c_str());
      std::printf("\n");
    }
    for (int n : node_counts) {
      nccl::Comm c;
      c.ranks = 8 * n;
      c.nodes = n;
      c.max_local_ranks = 8;
      c.sm = 90;
      c.gpu_GBps = kH100NvlinkGbps;
      c.nics = 8;
      c.nic_GBps = 50;
      const nccl::Tuning t = nccl::tune(c);
      std::printf(markdown ? "| %d |" : "%6d", n);
      for (double b : sizes) {
        const nccl::Choice ch = nccl::choose(t, f, b);
        const std::string cell = std::string(nccl::to_string(ch.algo)) + "/" +
                                 std::string(nccl::to_string(ch.proto)) + " " +
                                 std::to_string(ch.channels);
        std::printf(markdown ? " %s |" : " %16s", cell.c_str());
      }
      std::printf("\n");
    }
  }
}

std::string verdict(const Case& c, double ratio) {
  if (within(ratio)) return "PASS";
  const std::string gap = known_gap(c.id);
  return gap.empty() ? "OUTSIDE" : "OUTSIDE (" + gap + ")";
}

}  // namespace

int main(int argc, char** argv) {
  bool markdown = false, check = false, choices = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--markdown") {
      markdown = true;
    } else if (a == "--check") {
      check = true;
    } else if (a == "--choices") {
      choices = true;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::printf("usage: %s [--markdown] [--check] [--only CASE] [--choices]\n", argv[0]);
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  if (choices) {
    print_choices(markdown);
    return 0;
  }
  int compared = 0, pass = 0;
  std::vector<std::string> regressions, closed;  // for --check
  std::vector<std::string> hardware_lines;
  if (markdown) {
    std::printf(
        "| case | system | collective | nodes x GPUs | size | NCCL ran | model runs | published "
        "GB/s | model GB/s | model/published | verdict | source |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  } else {
    std::printf("%-28s %-10s %6s %6s %-14s %10s %10s %7s %-16s %s\n", "case", "collective",
                "ranks", "GiB", "model runs", "published", "model", "ratio", "verdict",
                "model bottleneck");
  }
  try {
    for (const Case& c : cases()) {
      if (!only.empty() && c.id != only) continue;
      std::string built;
      ModeledBusbw r = run(c, &built);
      hardware_lines.push_back("| `" + c.id + "` | " + built + " | " + r.bottleneck + " |");
      const double ratio = c.published > 0 ? r.gbps / c.published : 0;
      const std::string v = verdict(c, ratio);
      ++compared;
      if (v == "PASS") ++pass;
      if (!within(ratio) && known_gap(c.id).empty()) regressions.push_back(c.id);
      if (within(ratio) && !known_gap(c.id).empty()) closed.push_back(c.id);
      if (markdown) {
        std::printf(
            "| `%s` | %s | %s | %d x %d | %.0f GiB | %s | %s | %.1f | %.1f | %.2f | %s | %s |\n",
            c.id.c_str(), c.system.c_str(), collective_name(c.collective), c.nodes,
            c.gpus_per_node, c.bytes / kGiB, c.algorithm.c_str(), runs(r).c_str(), c.published,
            r.gbps, ratio, v.c_str(), c.source.c_str());
      } else {
        std::printf("%-28s %-10s %6d %6.0f %-14s %10.1f %10.1f %7.2f %-16s %s\n", c.id.c_str(),
                    collective_name(c.collective), c.nodes * c.gpus_per_node, c.bytes / kGiB,
                    runs(r).c_str(), c.published, r.gbps, ratio, v.c_str(),
                    r.bottleneck.c_str());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "topo-aware: calibration_bench: %s\n", e.what());
    return 1;
  }
  std::printf("\n%d of %d compared cases within +-25%% of the published bus bandwidth\n", pass,
              compared);
  if (markdown) {
    std::printf("\n| case | hardware as built | the model's bottleneck |\n|---|---|---|\n");
    for (const auto& line : hardware_lines) std::printf("%s\n", line.c_str());
  }
  for (const auto& id : closed) {
    std::printf("%s is now within +-25%%: its gap is closed, update docs/calibration.md\n",
                id.c_str());
  }
  if (check && !regressions.empty()) {
    for (const auto& id : regressions) {
      std::fprintf(stderr,
                   "topo-aware: calibration_bench: %s is outside +-25%% of its published figure "
                   "and no known gap explains it\n",
                   id.c_str());
    }
    return 1;
  }
  return 0;
}
