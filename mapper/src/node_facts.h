// What the mapper needs from a node model, per GPU: NVML index, bus id, its NVLink bandwidth,
// its nearest NICs, socket interface and NUMA-local CPUs. Taken from topology::gpu_locality()
// when the node library provides it, else from the node graph's PCIe tree directly (nearest
// NIC = the one sharing the deepest PCIe ancestor), so the mapper works on any node model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topoaware/topology/node.h"

namespace topoaware::mapper::internal {

struct GpuFacts {
  int dev = -1;  // NVML index
  std::string busid;
  double nvlink_gbps = 0;           // egress to other GPUs of the node (NVLink, else PCIe)
  std::vector<std::string> nics;    // HCA names, nearest first
  std::string netdev;               // of the nearest NIC, when known
  std::vector<std::uint32_t> cpus;  // NUMA-local PUs
  int nic_ordinal = -1;             // position of the nearest NIC among the node's NICs
  std::vector<int> nic_ordinals;    // positions of all its nearest NICs (NCCL spreads over them)
  bool nvlink = false;              // NVLink/C2C to other GPUs (directly or by NVSwitch)
};

struct NodeFacts {
  std::vector<GpuFacts> gpus;          // sorted by dev
  std::vector<std::string> nic_names;  // node NICs in graph order
  std::vector<double> nic_gbps;  // per NIC: its usable ports' speed together (GB/s), 0 unknown
  std::vector<char> nic_usable;  // per NIC: a net device NCCL would use (net_candidates)
  bool capture = true;           // false for a synthetic node (make_node): speeds invented
  // What NCCL's tuning reads: the GPUs' compute capability x10 (the lowest; from the capture,
  // else the GPU model's name; -1 unknown), an NVSwitch joining them, AMD CPUs.
  int sm = -1;
  bool nvswitch = false;
  bool amd_cpu = false;
  const GpuFacts* find(int dev) const {
    for (const auto& g : gpus) {
      if (g.dev == dev) return &g;
    }
    return nullptr;
  }
};

NodeFacts node_facts(const topology::NodeTopology& node);

}  // namespace topoaware::mapper::internal
