// The cost model: how long one training step waits for communication when logical ranks sit on
// given slots (host, GPU) of a fabric. The same model scores every algorithm, the baselines and
// the lower bound, so their figures compare like for like.
//
// Three layers (docs/mapper.md, "Cost model", with the source of each fact):
// - what the framework issues per dim (layout.h: Megatron-core's reduce-scatter + all-gather under
//   sequence parallelism and the distributed optimizer, ring attention's send/recv, all-to-all,
//   pipeline send/recv);
// - what NCCL runs for each group (nccl_model.h: its own algorithm choice for the group's nodes,
//   GPUs and NICs), routed as that algorithm sends: a ring over nodes numbered by first rank with
//   a chain through each node's GPUs and each channel on one rail, a double binary tree, NVLS
//   through the NVSwitch; send/recv through PXN relays of the same communicator. A flow between
//   hosts climbs Fabric::levels to the lowest group holding both (ECMP tiers charged their
//   expected busiest link); a dim takes the longer of NCCL's own time for its slowest group and
//   its most loaded resource's load / bandwidth, plus NCCL's latency;
// - what the step waits for: every dim in full but the data-parallel reduction, which overlaps
//   the compute it is issued behind (DimTraffic's hidden windows).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "topoaware/mapper/calibration.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/nccl_model.h"
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
  // What NCCL's tuning reads off each host: the GPUs' compute capability (x10), whether an
  // NVSwitch joins them (NVLS), whether its CPUs are AMD's (network overhead).
  std::vector<int> host_sm;
  std::vector<char> host_nvswitch;
  std::vector<char> host_amd_cpu;
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
  nccl::Version nccl;    // the release whose rules pick each group's algorithm
  bool collnet = false;  // NCCL's CollNet (in-network reduction) is enabled
  // The fast-domain rule (Layout::split): where it keeps every group of a dim whole, the lower
  // bound is over the placements that do.
  SplitPolicy split = SplitPolicy::kDomains;
  // NCCL_ALGO as a job may set it: the algorithm every collective runs where the group's shape
  // has it (else NCCL's own choice). Empty: NCCL chooses.
  std::optional<nccl::Algo> nccl_algo;
  // A site's correction from its own measurements (calibration.h); unmeasured: the model as is.
  Calibration calibration;
};
Traffic job_traffic(const Layout& layout);

// What evaluate() reports: the step's modeled time, per dim and per tier, and its bottleneck.
struct TierCost {
  std::string tier;                 // "nvlink", "host", "leaf", "spine", ...
  double bytes = 0;                 // bytes per step crossing this tier
};

struct DimCost {
  std::string dim;
  double seconds = 0;               // the dim's communication time per step, all of it
  double exposed = 0;               // what of it the step waits for (dp: beyond its overlap)
  std::string collective;           // what the framework issues ("reduce-scatter+all-gather")
  std::string nccl;                 // what NCCL runs for its groups ("Ring", "NVLS 8, Ring 4")
  int groups_in_host = 0, groups_in_leaf = 0, groups_across = 0;
};

struct CostReport {
  double seconds = 0;               // communication the step waits for (the dims' exposed time)
  double raw_seconds = 0;           // all of the dims' communication, overlapped or not
  std::vector<DimCost> dims;
  std::vector<TierCost> tiers;
  std::string bottleneck;           // the most loaded link, in words
};

// A fast dim (tp, cp, ep) of a plan and the fast-domain rule (docs/mapper.md, "Fast domains stay
// whole"): its groups, those spanning NVLink domains (hosts, or NVL72-style domains), and why.
struct SplitReport {
  std::string dim;
  long long groups = 0;
  long long split = 0;
  long long forced = 0;  // groups no plan can keep whole: the step's domains lack the room
  std::string place;  // "host", or "NVLink domain" on steps with multi-host domains
  std::string why;    // empty where none is split
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

// Cost of ranks on slots: slot_of_rank[r] indexes Machine::slots. CostReport::seconds is the
// exposed time (what the mapper minimizes). `loads` (optional) receives
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

// A lower bound on evaluate_seconds() over every assignment of ranks to the machine's slots that
// keeps the fast-domain rule (Traffic::split; every assignment under split=allow): never above
// that optimum, which is what plan() searches (checked against brute force in tests).
// docs/mapper.md derives it. Under a calibration (Traffic::calibration) it is the uncalibrated
// bound where every factor slows groups down, else the raw time's bound times the least factor
// less what the hidden windows can take (docs/calibration.md, "What a calibration does").
// `whole_cuts`: also price each crossing place's cut as one set of ranks (docs/mapper.md, "Whole
// cuts"), tighter where oversubscribed or ECMP tiers split a job (three of its dims counted), at
// up to about 0.9 s on one core; plan() leaves it out (its bound only stops refinement early),
// the benchmark and `inspect` take it.
double lower_bound(const Machine& machine, const Traffic& traffic, bool whole_cuts = true);

// How many blocks short of the fast-domain rule (docs/mapper.md, "Fast domains stay whole") an
// assignment is under Traffic::split: 0 where it keeps the rule (always under split=allow).
long long rule_shortfall(const Machine& machine, const Traffic& traffic,
                         const std::vector<std::uint32_t>& slot_of_rank);

// The bound on the routed part alone (mapper/src/bound/): every resource's load over its
// bandwidth plus the latency walk, for traffic taken as rings (all-reduces possibly two-node
// trees), all-to-alls and pipelines by DimTraffic::pattern and all_reduce, with no NCCL floors
// and no view. What lower_bound() builds on; for tests of its parts by brute force against a
// model of those flows alone (tests/unit/mapper/routed_reference.h).
double routed_lower_bound(const Machine& machine, const Traffic& traffic, bool whole_cuts = true,
                          std::size_t counted = 3);

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
