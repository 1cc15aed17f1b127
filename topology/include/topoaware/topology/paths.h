// Paths inside a node, computed with NCCL's own rules so our numbers match NCCL's view.
//
// Path types are ordered like NCCL's (LOC < NVL < NVB < C2C < PIX < PXB < P2C < PXN < PHB < SYS
// < NET < DIS): a path's type is the worst of its hops, its bandwidth the narrowest link, and a
// candidate replaces a stored path on a better type, then higher bandwidth, then fewer hops.
// Link bandwidths follow NCCL (reference nccl-topology.md section 4): PCIe width x lane rate /
// 80, NVLink per-lane by SM, SYS by CPU vendor/model, NET speed/8000.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "topoaware/topology/node.h"

namespace topoaware::topology {

enum class PathType : std::uint8_t { LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET, DIS };
std::string_view to_string(PathType t);
std::optional<PathType> path_type_from_string(std::string_view s);

struct Path {
  PathType type = PathType::DIS;
  double bandwidth = 0;  // GB/s, bottleneck
  int hops = 0;
};

// NCCL's bandwidth rules, exposed so importers fill links consistently.
double pcie_bandwidth(std::string_view link_speed, int width);  // GB/s; Gen3 x16 when unknown
double nvlink_lane_bandwidth(int sm);                            // GB/s per NVLink lane
double smp_bandwidth(const CpuInfo& cpu);                        // CPU<->CPU GB/s
double net_bandwidth(double speed_mbps);                         // GB/s; <=0 -> 10000 Mb/s

// All-pairs paths between the interesting vertices of a node (GPUs, NICs, CPUs).
class NodePaths {
 public:
  explicit NodePaths(const NodeTopology& node);
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
  double bandwidth_to_nic = 0;
  int numa = -1;
  std::vector<std::uint32_t> local_pus;  // NUMA-local CPU set (OS indexes)
};
std::vector<GpuLocality> gpu_locality(const NodeTopology& node);

}  // namespace topoaware::topology
