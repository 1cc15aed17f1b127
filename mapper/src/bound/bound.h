// The lower bound's parts (cost.h's lower_bound(); the argument is docs/mapper.md's "Lower bound",
// whose headings the comments here cite), shared by the files of mapper/src/bound/: what the bound
// reads off the machine once and each dim's floors (floors.cc), the walk over one place's ranks
// (walk.cc), the crossing terms (crossing.cc), the whole cuts (whole_cuts.cc), the cases that split
// the placements (cases.cc), the latency above a switch (latency.cc), and the entry point that
// takes the largest of them (lower_bound.cc). Every part gives a true bound on its own, so each
// can be read, tested and changed apart.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::internal {

// A family of floors, per dim and per count k = 1.. of members of the rank's group on its place:
// [d][k - 1] the least time of dim d given that count.
using Floors = std::vector<std::vector<double>>;

// The walk under given host floors, host floors of all-reduces as rings, and island floors: what
// the cases re-run under their raised floors.
using Walk = std::function<double(const Floors&, const Floors&, const Floors&)>;

constexpr std::size_t kNoDim = static_cast<std::size_t>(-1);

// ---- lower_bound.cc: the bound on the routed part ----

// A bound on the routed part of the cost model (docs/mapper.md, "Lower bound"): every resource's
// load over its bandwidth plus latency, for traffic of rings (all-reduces possibly two-node trees),
// all-to-alls and pipelines on `machine`, whole cuts counting at most `counted` dims. The public
// lower_bound() (exposed.cc) runs it on a view of the traffic the model's own time never
// undercuts.
// `whole` (optional, per dim): dims whose every group lies inside one island in the placements
// bounded (the fast-domain rule where it keeps every group whole): a bound over those only.
double routed_bound(const Machine& machine, const Traffic& traffic, bool whole_cuts,
                    std::size_t counted, const std::vector<char>* whole = nullptr);

// ---- floors.cc: what the bound reads off the machine, and each dim's floors ----

// What the lower bound reads off the machine once: the fastest NVLink and per-GPU NIC capacity,
// slots per host and per island, and the capacities the crossing floors divide by.
struct BoundMachine {
  double nv = 0;    // fastest GPU NVLink egress, bytes/s
  double port = 0;  // most NIC capacity one GPU's ports have together, bytes/s
  bool has_domains = false;
  std::vector<long long> host_slots;
  long long kmax = 0;  // most slots of a host
  std::vector<long long> island_slots;
  long long island_kmax = 0;  // most slots of an island: an NCCL node
  double total_egress = 0;    // every NVLink and NIC egress together, bytes/s
  double lat_min = 0;         // the least latency of a step
  double lat_network = 0;     // the least latency of a step whose flows leave an island
  // Crossing bins: islands (capacity: their hosts' NIC ports), then each network level's groups
  // (capacity: their uplinks).
  struct Bins {
    std::vector<long long> slots;
    double cap = 0;
  };
  std::vector<Bins> bins;
};

BoundMachine bound_machine(const Machine& machine);
// Every host's NIC ports together, bytes/s.
std::vector<double> host_port_capacity(const Machine& machine);
// The least hop of a ring group split over NCCL nodes in any way (a two-node tree's bytes where
// the group may fit two nodes of kmax slots).
double any_split_hop(const DimTraffic& dt, long long kmax);
// p[k-1] = the least of v[0..k-1]: a floor for "at most k members".
std::vector<double> prefix_min(const std::vector<double>& v);
// The least time of a pipeline stage with `neighbours` neighbour stages, k of its group on its
// host.
double pipe_stage(int neighbours, long long k, bool domains, double bytes, double nv, double port);
// What a dim's steps wait beyond the least latency once some group of it leaves an island.
double network_latency(const DimTraffic& dt, const BoundMachine& summary);
// A dim's crossing floor, which holds wherever its ranks sit.
double crossing_floor(const DimTraffic& dt, long long world, const BoundMachine& summary);
// The dim's floors given k members of the rank's group on its host; `pipe_floor` receives a
// pipeline's middle-stage floor. `ring_only`: an all-reduce as a ring, never a two-node tree.
std::vector<double> host_floors(const DimTraffic& dt, const BoundMachine& summary, double cross,
                                double* pipe_floor, bool ring_only = false);
// The dim's floors given k members of the rank's group on its island (`by_host`: its host floors).
std::vector<double> island_floors(const DimTraffic& dt, const BoundMachine& summary, double cross,
                                  double pipe_floor, const std::vector<double>& by_host,
                                  bool ring_only = false);

// ---- walk.cc: the walk over one place's ranks (docs/mapper.md, "Lower bound", Walk) ----

// The largest v such that the places of value below v hold fewer slots than there are
// middle-stage ranks (`middle`), `value(c)` the bound on a place of c slots.
double middle_stage_bound(const std::vector<long long>& slots, long long middle,
                          const std::function<double(long long)>& value);
// The walk on a place of c slots, an all-reduce's floor at k members being its ring's (`ring`) or
// a two-node tree's (`any`) with the tree's partner floors on the other dims.
double least_sum_trees(const Floors& ring, const Floors& any, const std::vector<long long>& n,
                       long long c, long long kmax, bool partners, bool full,
                       const Floors* host_any = nullptr, std::size_t loose = kNoDim);
// The distinct non-zero place sizes among `slots`, the smallest `max_sizes` of them.
std::vector<long long> place_sizes(std::vector<long long> slots, std::size_t max_sizes);
// The largest walk over places of the given slot counts (at most `max_sizes` sizes).
double least_sum_over(const Floors& floors, const std::vector<long long>& n,
                      const std::vector<long long>& slots, std::size_t max_sizes, bool full);

// ---- crossing.cc: the crossing terms (docs/mapper.md, "Lower bound", "Joint crossing") ----

// Largest place the crossing bound takes (least_cut costs about cmax^3 / n per dim; at 256 the
// bound took a third of all mapping time in the benchmark to tighten one row, 1.16 s to 1.30 s).
constexpr long long kCutSlots = 128;

// Places of one tier whose exits the crossing bound counts: their slot counts and the capacity
// every flow leaving them loads (the NIC ports of an island, a level group's uplink).
struct CrossTier {
  std::vector<long long> slots;
  std::vector<double> cap;
  std::vector<std::uint32_t> links;  // ECMP links of the place's uplink; 0: flows spread evenly
  double total_cap = 0;
};

// What the crossing bounds read off the machine and the traffic: the tiers whose exits count, the
// bytes a cut group of each radix dim sends out of a place and the least bytes of one of its
// flows, and the most flows each place can send up (ECMP). False where no tier or no dim counts
// (or not every slot holds a rank).
struct CrossSetup {
  std::vector<std::size_t> radix;  // radix_dims(), innermost first
  std::vector<long long> n;        // their sizes
  std::vector<double> out;         // per radix index: bytes a cut group sends out of a place
  std::vector<double> flow;        // per radix index: least bytes of one flow (least_flow_bytes)
  std::vector<std::size_t> live;   // radix indexes with bytes
  std::vector<CrossTier> tiers;
  std::vector<std::vector<double>> flows;  // per tier and place: the most flows it can send up
  long long cmax = 0;                      // most slots of a counted place
};

// The dims with more than one member, innermost first, when they tile the ranks as a mixed radix;
// empty otherwise.
std::vector<std::size_t> radix_dims(const Traffic& traffic);
// How many levels, from the lowest, nest.
std::size_t nested_levels(const Machine& machine);
// Fills `setup` from the machine and the traffic; false where no tier or no dim counts.
bool cross_setup(const Machine& machine, const Traffic& traffic,
                 const std::vector<long long>& host_slots, long long kmax,
                 const std::vector<bool>& rings, CrossSetup* setup,
                 const std::vector<long long>& members = {});
// A place's exit `load` on an ECMP tier times its expected worst link, at least.
double ecmp_exit(double load, double least, double most, std::uint32_t links);
// The joint crossing bound: the walk under floors scaled by theta plus the crossing term of the
// bytes scaled by 1 - theta, for a theta searched per dim.
double joint_crossing_bound(const Machine& machine, const Traffic& traffic, const Floors& by_host,
                            const Floors& by_island, const std::vector<long long>& sizes,
                            const std::vector<long long>& host_slots,
                            const std::vector<long long>& island_slots, long long kmax,
                            const std::vector<bool>& rings = {},
                            const std::vector<long long>& members = {},
                            std::vector<double>* seed = nullptr);

// ---- whole_cuts.cc: whole cuts (docs/mapper.md, "Lower bound", "Whole cuts") ----

// Dims the whole cuts (cut_vectors(), cut_case_bound()) take at most.
constexpr std::size_t kCutDims = 3;
using CutVector = std::array<std::int32_t, kCutDims>;

// P[c] of cut_vectors(), per place size c, and per radix dim its coordinate in them (-1: not
// counted) and what it counts: cut groups, or for all-to-alls of three or more the pairs term.
struct CutSets {
  std::vector<std::vector<CutVector>> sets;
  std::vector<int> coord;
  std::vector<bool> pairs;
  // The bytes vector p makes radix dim i send out of the place, at least, a cut group sending
  // `out` (CrossSetup::out); an all-to-all's pairs term times S / n.
  double bytes_out(const CutVector& p, std::size_t i, const DimTraffic& dt, double out) const {
    if (coord[i] < 0) return 0;
    const double v = p[static_cast<std::size_t>(coord[i])];
    return pairs[i] ? v * dt.bytes / static_cast<double>(dt.size) : v * out;
  }
};

// The cut vectors of every place the crossing bounds count, once per counted dim peeled last;
// none where the whole cuts do not apply.
std::vector<CutSets> place_cut_vectors(const Machine& machine, const Traffic& traffic,
                                       const BoundMachine& summary, bool full,
                                       std::size_t most_counted = kCutDims);
// The least walk over each place's cut vectors, each dim's floors raised to what the cut sends out.
double cut_case_bound(const Machine& machine, const Traffic& traffic, const BoundMachine& summary,
                      const Floors& by_host, const Floors& by_host_ring, const Floors& by_island,
                      const std::vector<bool>& rings, const std::vector<CutSets>& cuts,
                      double known, const Walk& walk, const std::vector<long long>& members = {});

// ---- cases.cc: cases that split the placements (docs/mapper.md, "Lower bound") ----

// Tree chains: two all-reduce dims whose two-host trees cannot chain; one takes its ring floor.
double tree_chain_bound(const Traffic& traffic, const BoundMachine& summary, const Floors& by_host,
                        const Floors& by_host_ring, const Floors& by_island, bool full,
                        const Walk& walk);
// Trees in the crossing term: the placements split by which all-reduce dims run a two-host tree.
double tree_case_bound(const Machine& machine, const Traffic& traffic, const BoundMachine& summary,
                       const Floors& by_host, const Floors& by_host_ring, const Floors& by_island,
                       const std::vector<long long>& sizes, bool full,
                       const std::vector<CutSets>& cuts, const Walk& walk);
// Hashed hops (ECMP): the placements split by the most members of a ring group on one host.
double ecmp_case_bound(const Machine& machine, const Traffic& traffic, const BoundMachine& summary,
                       const Floors& by_host, const Floors& by_host_ring, const Floors& by_island,
                       const std::vector<long long>& sizes, const std::vector<CutSets>& cuts,
                       const Walk& walk);

// ---- latency.cc: latency beyond a leaf ----

// The walk on each nesting level's switch groups, a group that leaves one charged the latency
// above it.
double level_latency_bound(const Machine& machine, const Traffic& traffic,
                           const BoundMachine& summary, const Floors& by_host,
                           const Floors& by_host_ring, const std::vector<long long>& sizes,
                           bool full, const Floors* partner_by_host = nullptr,
                           std::size_t loose = kNoDim, long long middle = 0);

}  // namespace topoaware::mapper::internal
