// Synthetic clusters for tests and the benchmark: fat trees (2 or 3 tiers, any
// oversubscription), rail-optimized scalable units, NVL72-style NVLink domains, host names that
// do not follow the wiring, and fragmented allocations drawn from a busy cluster. Built in memory
// as a real topology::Fabric (graph + hosts) and derived by topology::analyze(), so the mapper
// sees exactly what it sees from an imported fabric. Deterministic for a seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {

struct FatTreeSpec {
  int hosts = 64;
  int hosts_per_leaf = 16;  // hosts per leaf switch (per scalable unit when rail-optimized)
  int leaves_per_pod = 0;   // 0: two tiers; > 0: three tiers, this many leaves per pod
  double leaf_oversub = 1;  // leaf down:up bandwidth
  double pod_oversub = 1;   // pod down:up bandwidth (three tiers)
  int gpus_per_host = 8;
  int ports_per_host = 8;       // NIC ports to the fabric
  double port_gbps = 50;        // GB/s per port (400 Gb/s)
  bool rail_optimized = false;  // port k of every host of a unit goes to rail switch k
  int nvlink_domain_hosts = 0;  // > 0: consecutive hosts form NVLink domains of this size
  double nvlink_gbps = 450;     // per GPU, inside a host and a domain
  bool scramble_names = false;  // host names shuffled against the wiring
  // How every tier spreads flows over a group's uplinks, and how many cables each switch-to-
  // switch connection has (what ECMP hashes onto; the capacity is the same either way).
  topology::Routing routing = topology::Routing::kAdaptive;
  int uplink_cables = 1;
  std::uint64_t seed = 1;
  std::string prefix = "node";
};

// The fabric, analyzed. Host i (wiring order) is named prefix + 5 digits, shuffled when asked.
topology::Fabric make_fat_tree(const FatTreeSpec& spec);

// A node: one CPU per half of the GPUs (linked), one PCIe switch per GPU with its NIC (nics ==
// gpus; more NICs spread over the switches), or with fewer NICs one switch per NIC shared by
// its GPUs; all GPUs on one NVSwitch of `nvlink_gbps` per GPU, of compute capability `sm` (x10:
// 80 A100, 90 H100, 100 B200/GB200), which picks NCCL's tables.
topology::NodeTopology make_node(int gpus, int nics, double nvlink_gbps, double nic_gbps,
                                 int sm = 90);

// A step's allocation on a cluster `busy` (0..1) full: per host, how many GPUs other jobs use
// (whole hosts and partial ones), then Slurm's pick of the lowest-named hosts with free GPUs
// until `gpus` are found. Returns hosts (Slurm's order: by name) and tasks per host.
struct Allocation {
  std::vector<std::string> hosts;
  std::vector<int> tasks_per_host;
};
Allocation fragmented_allocation(const topology::Fabric& fabric, int gpus_per_host, double busy,
                                 int gpus, std::uint64_t seed);
// A multi-node job's allocation on a cluster `busy` (0..1) full of whole-host jobs, as
// `--exclusive` jobs see it: round(busy x hosts) hosts, chosen at random for the seed, are taken,
// so each leaf keeps a random (often odd) number of free hosts; Slurm then picks the first
// `hosts` free hosts by name, all GPUs of each. With names that do not follow the wiring (see
// FatTreeSpec::scramble_names) the pick is scattered over leaves as well. Throws when fewer than
// `hosts` hosts are free.
Allocation fragmented_hosts(const topology::Fabric& fabric, int gpus_per_host, double busy,
                            int hosts, std::uint64_t seed);
// The first `hosts` hosts by name, all GPUs.
Allocation whole_hosts(const topology::Fabric& fabric, int gpus_per_host, int hosts);

}  // namespace topoaware::mapper
