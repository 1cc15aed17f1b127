// Paths inside a node, computed with NCCL's own rules so our numbers match NCCL's view.
//
// Path types are ordered like NCCL's (LOC < NVL < NVB < C2C < PIX < PXB < P2C < PXN < PHB < SYS
// < NET < DIS): a path's type is the worst of its hops, its bandwidth the narrowest link, and a
// candidate replaces a stored path on a better type, then higher bandwidth, then fewer hops.
// Link bandwidths follow NCCL (reference nccl-topology.md section 4): PCIe width x lane rate /
// 80, NVLink per-lane by SM, SYS by CPU vendor/model, NET speed/8000.
//
// Contract for importers (every node source fills links the same way, so paths agree whatever
// the source):
//   - one kPcie link per PCI vertex (switch, device, GPU, NIC) to its tree parent, with
//     bandwidth = pcie_bandwidth(child.pci.link_speed, child.pci.link_width);
//   - one kNvLink link per GPU pair / GPU-NVSwitch / GPU-CPU connection, count = lanes and
//     bandwidth = count x nvlink_lane_bandwidth(gpu.sm) (all NVSwitches merged into one
//     kNvSwitch vertex, lanes summed per GPU, as NCCL does);
//   - one kSmp link between every pair of kCpu vertices with bandwidth = smp_bandwidth(cpu);
//   - a virtual NIC directly under a kCpu: a kPcie link of kLocBandwidth.
//
// Hop types: NVLink = NVL, C2C = C2C, SMP = SYS, network = LOC, PCIe = PIX except PCI<->PCI
// (switch or plain device on both ends) = PXB and any PCIe hop touching a kCpu = PHB. Paths only
// pass through CPUs, PCI switches and the NVSwitch; through another GPU only as NVB (GPU -NVLink->
// GPU -NVLink-> GPU). NCCL's post-processing (P2P-level and GDR reroutes, PXN, P2C) is not applied:
// these are the raw topology paths.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topoaware/topology/node.h"

namespace topoaware::topology {

enum class PathType : std::uint8_t { LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET, DIS };
std::string_view to_string(PathType t);
// Exact, uppercase names as NCCL writes them ("PIX"); nullopt for anything else.
std::optional<PathType> path_type_from_string(std::string_view s);

struct Path {
  PathType type = PathType::DIS;
  double bandwidth = 0;  // GB/s, bottleneck
  int hops = 0;
};

// NCCL's LOC bandwidth (GB/s): a path to itself, a virtual NIC under its CPU.
inline constexpr double kLocBandwidth = 5000.0;

// NCCL's bandwidth rules, exposed so importers fill links consistently.
// link_speed takes NCCL's prefix forms ("16 GT/s", "16.0 GT/s PCIe"); anything else (including
// empty and "64 GT/s") is Gen3. width <= 0 means x16.
double pcie_bandwidth(std::string_view link_speed, int width);  // GB/s; Gen3 x16 when unknown
double nvlink_lane_bandwidth(int sm);                           // GB/s per NVLink lane
double smp_bandwidth(const CpuInfo& cpu);                       // CPU<->CPU GB/s
double net_bandwidth(double speed_mbps);                        // GB/s; <=0 -> 10000 Mb/s

// NCCL's cpumap strings ("ffffffff,00000000": 32-bit hex words, most significant first, the last
// word is CPUs 0-31). parse returns the set bits ascending, nullopt when malformed; format writes
// no leading zero words ("00000000" for an empty set).
std::optional<std::vector<std::uint32_t>> parse_cpumap(std::string_view cpumap);
std::string format_cpumap(const std::vector<std::uint32_t>& pus);

// All-pairs paths between the interesting vertices of a node (GPUs, NICs, CPUs, the NVSwitch).
class NodePaths {
 public:
  explicit NodePaths(const NodeTopology& node);
  // LOC for from == to; DIS (bandwidth 0) when unreachable or either end is not an endpoint.
  Path path(VertexId from, VertexId to) const;

 private:
  struct Impl;
  std::vector<std::vector<Path>> table_;  // indexed by compact ids of endpoints
  std::vector<std::int32_t> compact_;     // vertex id -> compact index or -1
};

// What the mapper and the launch plan need to know per GPU.
struct GpuLocality {
  VertexId gpu;
  std::vector<VertexId> nearest_nics;  // NCCL's candidates: highest bandwidth, then lowest type
  PathType path_to_nic = PathType::DIS;
  double bandwidth_to_nic = 0;  // NCCL's GPU->NET bandwidth: the PCIe path, capped by port speed
  int numa = -1;
  std::vector<std::uint32_t> local_pus;  // NUMA-local CPU set (OS indexes)
};
// One entry per GPU, in vertex order. A GPU-to-NIC PIX means one PCIe switch between them, PXB
// several switches, PHB through the CPU's root complex, SYS across CPUs.
// The NICs NCCL would use as net devices, in graph order: those with an RDMA port that is up (or
// of unknown state) where the node has any, its socket interfaces otherwise, and among those the
// PCI ones where there are any (docker bridges and tunnels never reach other hosts). The
// candidates gpu_locality() chooses from.
std::vector<VertexId> net_candidates(const NodeTopology& node);
// An RDMA port NCCL's IB plugin lists: is_rdma() and not known to be down.
bool rdma_port_up(const NetPort& p);
std::vector<GpuLocality> gpu_locality(const NodeTopology& node);
// The same, reusing paths already computed for this node.
std::vector<GpuLocality> gpu_locality(const NodeTopology& node, const NodePaths& paths);

}  // namespace topoaware::topology
