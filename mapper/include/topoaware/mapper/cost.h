// The cost model: how long one training step spends communicating when logical ranks sit on
// given slots (host, GPU) of a fabric. The same model scores every algorithm, the baselines and
// the lower bound, so their figures compare like for like.
//
// Model (docs/mapper.md, "Cost model", with the NCCL source of each fact): dims communicate one
// after another; within a dim all groups communicate at once. A ring collective is NCCL's ring:
// nodes numbered by first rank, a chain through each node's GPUs over NVLink, then one hop to
// the next node spread over the node's GPUs' NICs, each leaving by its own NICs; an all-reduce
// whose group spans exactly two hosts is NCCL's tree (each host sends its bytes once).
// All-to-all is every pair and pipeline stage to stage, both directions, as send/recv: NCCL's PXN
// sends them through the NICs of the sender host's GPU with the peer's NVML index (an NVLink hop
// first). A GPU spreads its traffic over all its nearest NICs. A flow between hosts climbs
// Fabric::levels to the lowest group holding both (loading that group's uplink and the peer
// group's downlink; on ECMP tiers charged the expected busiest of the group's links), and a flow
// between two rails of a rail-optimized fabric climbs above the rail switches. Inside a node and
// an NVLink domain flows use the GPU's NVLink bandwidth. A dim's time is the most loaded
// resource's load / bandwidth plus a latency term (calls x steps x path latency).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/request.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {

// A run of host-local port indexes in Machine::port_list.
struct PortRange {
  std::uint32_t begin = 0;
  std::uint32_t count = 0;
};

// One place a rank can run: a GPU of a host of the step.
struct Slot {
  std::uint32_t host = 0;  // index into Machine::hosts (the step's hosts, sorted by name)
  int gpu = -1;            // NVML index
  int port = 0;            // its first (nearest) fabric port: its rail
  PortRange ports;         // every port NCCL spreads this GPU's channels over (port first)
};

// One locality level the network routes through (Fabric::levels without host/nvlink levels),
// restricted to the step's hosts with group ids made dense.
struct NetLevel {
  std::string name;
  std::vector<std::uint32_t> group_of_host;  // per Machine host
  std::vector<double> uplink_gbps;           // per dense group
  std::vector<std::string> group_label;      // "leaf of node017" (its first host by name)
  double latency_us = 0;
  // ECMP (Fabric routing of this level's tier): each flow hashes onto one of a group's
  // uplink_links parallel links, and a group's uplink is charged its expected worst link.
  bool ecmp = false;
  std::vector<std::uint32_t> uplink_links;  // per dense group
};

// What the cost model routes over, gathered once per plan from the fabric and node models.
struct Machine {
  std::vector<std::string> hosts;          // the step's hosts, sorted by name
  std::vector<std::uint32_t> fabric_host;  // per host: index into Fabric::hosts
  std::vector<Slot> slots;                 // sorted by (host, gpu)
  std::vector<double> slot_nvlink_gbps;    // per slot: GPU egress inside host / NVLink domain
  std::vector<std::uint32_t> port_base;    // per host: first index into port_gbps
  std::vector<std::uint32_t> port_count;   // per host
  std::vector<double> port_gbps;           // every host port, host after host
  std::vector<std::uint32_t> port_list;    // what PortRanges index: host-local port indexes
  // NCCL's PXN (send/recv and all-to-all, not rings): a GPU sends to a peer through the NICs of
  // its host's GPU with the peer's NVML index, after an NVLink hop to it. Per host: whether its
  // GPUs reach each other over NVLink (else no PXN), and the ports of each NVML index's GPU
  // (relay_ports(), empty where unknown).
  std::vector<char> pxn;
  std::vector<std::uint32_t> relay_base;   // per host: index into relay_ranges of NVML index 0
  std::vector<std::uint32_t> relay_count;  // per host: NVML indexes described
  std::vector<PortRange> relay_ranges;
  std::vector<int> domain_of_host;         // NVLink domain (dense) or -1
  std::vector<NetLevel> levels;            // innermost first
  bool rail_optimized = false;
  double nvlink_latency_us = 0.5;  // a hop inside a host or NVLink domain
  // Latency of a flow by how far it reached: [0] inside a host/NVLink domain, [1] inside one
  // group of levels[0], [2 + l] across level l (Fabric::levels latency_us of the common level).
  std::vector<double> reach_latency_us;
  // What the capacities above rest on where the inputs did not give them, one sentence each
  // ("switch uplinks non-blocking: ..."); empty when every capacity came from the inputs.
  std::vector<std::string> assumptions;

  PortRange relay_ports(std::uint32_t host, int gpu) const {
    if (gpu < 0 || static_cast<std::uint32_t>(gpu) >= relay_count[host]) return {};
    return relay_ranges[relay_base[host] + static_cast<std::uint32_t>(gpu)];
  }
  // Sum of the capacity of a slot's ports (GB/s): what it can send into the network.
  double slot_port_gbps(std::size_t slot) const;
};

// Builds the machine for a set of hosts (names) and the GPUs used on each (`gpus[i]` for
// hosts[i], NVML indexes). nodes[i] describes hosts[i] (nullptr: a plain node with that many
// GPUs, one NIC per fabric port). Hosts are re-sorted by name. Where the fabric gives no port
// speeds the hosts' NICs come from their node models, and where it gives no uplink speeds each
// tier's uplinks are sized from what they carry over the declared oversubscription
// (Fabric::declared_oversubscription; non-blocking where none): Machine::assumptions says so.
// Throws Error.
Machine build_machine(const topology::Fabric& fabric, const std::vector<std::string>& hosts,
                      const std::vector<const topology::NodeTopology*>& nodes,
                      const std::vector<std::vector<int>>& gpus);

// Resolved traffic of a layout (dims + explicit matrix).
struct Traffic {
  long long world = 0;
  std::vector<DimTraffic> dims;
  std::vector<Flow> matrix;
  // Dims overlap (Request::overlap_dims): the step's bandwidth time is the most loaded resource
  // under all dims' loads together, not the sum of each dim's own; latency terms still add up.
  // Off by default: frameworks overlap some communication with compute, rarely dims with each
  // other, and the sum is the upper estimate.
  bool overlap = false;
};
Traffic job_traffic(const Layout& layout);

// What evaluate() reports: the step's modeled time, per dim and per tier, and its bottleneck.
struct TierCost {
  std::string tier;                 // "nvlink", "host", "leaf", "spine", ...
  double bytes = 0;                 // bytes per step crossing this tier
};

struct DimCost {
  std::string dim;
  double seconds = 0;
  int groups_in_host = 0, groups_in_leaf = 0, groups_across = 0;
};

struct CostReport {
  double seconds = 0;               // modeled communication time per step
  std::vector<DimCost> dims;
  std::vector<TierCost> tiers;
  std::string bottleneck;           // the most loaded link, in words
};

// Per-resource loads of one evaluation (bytes per step summed over dims), for pictures.
struct LinkLoad {
  std::string name;   // "uplink leaf of node017", "NIC node017:mlx5_3 out", "NVLink node017 GPU2"
  std::string level;  // "nvlink", "nic", or a level name
  double bytes = 0;
  double gbps = 0;
  double peak_seconds = 0;  // worst dim's load / bandwidth on it
  // Where it is, for pictures: the Machine host of an NVLink/NIC resource, or the NetLevel
  // index and dense group of an uplink/downlink (-1 where not applicable).
  std::int64_t host = -1;
  int net_level = -1;
  std::int64_t group = -1;
};

// Cost of ranks on slots: slot_of_rank[r] indexes Machine::slots. `loads` (optional) receives
// every loaded resource. Throws Error when the sizes disagree.
CostReport evaluate(const Machine& machine, const Traffic& traffic,
                    const std::vector<std::uint32_t>& slot_of_rank,
                    std::vector<LinkLoad>* loads = nullptr);
// Just the seconds (no report strings): what refinement calls in its loop. `crossing`
// (optional) receives the bytes that left a level group, weighted by the level's height: the
// tie-break between assignments the model times alike (keep traffic low in the tree).
double evaluate_seconds(const Machine& machine, const Traffic& traffic,
                        const std::vector<std::uint32_t>& slot_of_rank, double* crossing = nullptr);

// The cost of one assignment kept per dim and resource, so that exchanging a few ranks' slots
// re-routes only the groups those ranks belong to: what refinement uses to try many moves
// cheaply. seconds() and crossing() agree with evaluate_seconds() up to rounding (tested).
class IncrementalCost {
 public:
  IncrementalCost(const Machine& machine, const Traffic& traffic,
                  std::vector<std::uint32_t> slot_of_rank);
  ~IncrementalCost();
  IncrementalCost(const IncrementalCost&) = delete;
  IncrementalCost& operator=(const IncrementalCost&) = delete;

  double seconds() const;
  double crossing() const;
  const std::vector<std::uint32_t>& slot_of_rank() const;
  // Exchanges the slots of each pair of ranks (pairs disjoint). Throws Error on a rank out of
  // range or a rank named twice.
  void exchange(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& rank_pairs);
  // Takes the last exchange back (cheaper than exchanging again). Throws Error when there is
  // none.
  void undo();
  // Work done so far, in group members re-routed and resources rescanned: what a refinement
  // budget counts, so budgets are deterministic (never wall time).
  long long work() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// A lower bound on evaluate_seconds() over every assignment of ranks to the machine's slots:
// never above the optimum (checked against brute force in tests). docs/mapper.md derives it.
// `whole_cuts`: also price each crossing place's cut as one set of ranks (docs/mapper.md, "Whole
// cuts"), tighter where oversubscribed or ECMP tiers split a job (three of its dims counted), at
// up to about 0.9 s on one core; plan() leaves it out (its bound only stops refinement early),
// the benchmark and `inspect` take it.
double lower_bound(const Machine& machine, const Traffic& traffic, bool whole_cuts = true);

// lower_bound() whose whole cuts count at most `counted` dims (the heaviest; 1 to 3), leaving the
// others' cuts uncounted as they are on jobs of more than three: looser, still a bound. For tests
// of that path on jobs small enough to check by brute force.
double lower_bound_counting(const Machine& machine, const Traffic& traffic, std::size_t counted);

// The machine and traffic plan() works on for a request (hosts sorted by name; the GPUs of each
// host: bound_gpu when given, else its first tasks_per_host GPUs by NVML index), and each
// task's slot in Slurm's block order. What the benchmark and `inspect` score assignments with.
struct Instance {
  Machine machine;
  Traffic traffic;
  Layout layout;                            // resolved
  std::vector<std::uint32_t> block_slot;    // per task: its slot under Slurm's block order
  std::vector<std::uint32_t> host_of_task;  // per task: Machine host index
};
Instance make_instance(const topology::Fabric& fabric,
                       const std::vector<const topology::NodeTopology*>& nodes,
                       const Request& request);

}  // namespace topoaware::mapper
