// Placement: which hosts a job should get, chosen by what the job's communication would cost
// there, with Slurm's own choice (slurm_select.h) on the same free hosts beside it.
//
// place() builds a few host sets that a person would consider (docs/placement.md, "How place
// chooses"): the best-fitting group of the lowest locality level that holds the job, and, where
// the job must be split, splits that fall on the layout's cheapest cut (pipeline stage
// boundaries, then data-parallel ones, then counts alone), plus Slurm's tree choice itself.
// Each is scored by the mapper's own model on the plan the mapper would make there (plan.h), so
// a placement and a launch agree on what a host set costs. The lowest modeled exposed time wins;
// ties go to the set that leaves the free hosts least fragmented (fragmentation() below), then to
// the one spanning fewer groups (pods, then leaves), then to the one with fewer degraded hosts.
// Pure: no I/O, no clock; sizes are checked and bad input throws Error (layout.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "topoaware/mapper/request.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {

struct PlaceInput {
  // Per fabric host (Fabric::hosts order): GPUs free now. A host the fabric marks excluded
  // (down, drained, a health report) is never used, whatever it says here.
  std::vector<int> free_gpus;
  // Per fabric host: its node model (the same pointer for hosts of one type). Only hosts with a
  // model and free GPUs are usable.
  std::vector<const topology::NodeTopology*> nodes;
  int gpus_per_host = 0;     // GPUs of a whole host (what a multi-host job takes on each)
  std::uint32_t hosts = 0;   // whole hosts wanted (-N); or
  int gpus = 0;              // GPUs wanted on one host, fewer than a host's (--gpus G < G/host)
  // The step's request without hosts: layout (resolved for hosts * gpus_per_host ranks),
  // algorithm, calibration, refinement budget. place() fills hosts and tasks_per_host.
  Request request;
  // > hosts: also return this many hosts around the choice (same leaf, then pod, ...), for
  // Slurm to choose within; 0: none.
  std::uint32_t candidates = 0;
};

// One host set and what the model says of it.
struct HostSet {
  std::string label;                  // how it was built: "best-fit", "pp-cut", "dp-cut",
                                      // "counts", "slurm-tree"
  std::vector<std::uint32_t> hosts;   // fabric host indexes, ascending (Slurm's node order)
  double seconds = 0;                 // modeled exposed communication per step (plan.h)
  double raw_seconds = 0;             // all communication per step
  std::vector<std::size_t> spread;    // groups touched per grouping level (group_levels())
  double fragmentation = 0;           // of the free hosts left after taking these
  std::size_t degraded = 0;           // hosts whose fabric bandwidth is degraded
  std::vector<std::string> assumptions;  // the plan's (RankPlan::assumptions)
};

struct Placement {
  bool placed = false;
  std::string reason;                 // when not placed: why (too few free hosts, ...)
  HostSet chosen;
  std::vector<std::uint32_t> candidates;  // the choice and hosts around it (PlaceInput::candidates)
  std::vector<HostSet> considered;     // every distinct set scored, cheapest first
  // Slurm's topology/tree on the same free hosts (select_tree), scored alike; hosts empty when
  // Slurm would not start the job there (reason in tree_reason).
  HostSet tree;
  std::string tree_reason;
  double fragmentation_before = 0;
  // Where the job is split over several groups: how the split was made, for people ("no one
  // leaf holds 12 hosts; split at pipeline stage boundaries, 4 hosts a stage: ...").
  std::string why;
  std::vector<std::string> level_names;   // names of group_levels(), for spread
};

// The fabric's grouping levels: indexes into Fabric::levels of the levels whose groups hold more
// than one host, innermost first, and not the outermost level when it is one group (the whole
// fabric). What spread and fragmentation count.
std::vector<std::size_t> group_levels(const topology::Fabric& fabric);

// Fragmentation of a free set (per fabric host, free or not), in [0, 1]: over the grouping
// levels, the share of the free hosts that sit in a group some of whose hosts are not free --
// free capacity that a job wanting a whole group cannot use -- averaged over the levels. 0: every
// free host is in a wholly free group at every level (or none is free). docs/placement.md,
// "Fragmentation".
double fragmentation(const topology::Fabric& fabric, const std::vector<char>& free);

// The hosts for the job, or placed = false with the reason. Throws Error for inputs of the wrong
// size or a job of no hosts.
Placement place(const topology::Fabric& fabric, const PlaceInput& input);

// A level's name in the plural, for people: "leaves", "spines", "pods".
std::string level_plural(const std::string& name);

// Index into group_levels() of the first level joined by switches (the leaves), 0 when none is.
std::size_t leaf_level(const topology::Fabric& fabric);

// A host set's spread for people: "2 leaves, 1 pod" ("-" when the fabric has no grouping level).
std::string spread_text(const topology::Fabric& fabric, const HostSet& set);

// One host set scored as place() scores its candidates (label, fragmentation left empty).
HostSet score_allocation(const topology::Fabric& fabric, const PlaceInput& input,
                            std::vector<std::uint32_t> hosts);

// How good an allocation is: its spread and modeled time against the best allocation place()
// finds where the job could have gone (`input.free_gpus`: the free hosts at that moment with
// the allocation's own hosts among them, or every host for an empty cluster).
struct Quality {
  HostSet allocation;
  HostSet best;
  double slowdown = 1;   // allocation.seconds / best.seconds (1 when both are 0)
  bool best_found = false;
};
Quality assess(const topology::Fabric& fabric, const PlaceInput& input,
               const std::vector<std::uint32_t>& allocation);

// assess() for a step as map, inspect and srun hold it: its request's hosts are the allocation,
// every fabric host is modeled as `node` with the step's tasks per host, and the hosts free
// besides the allocation are `free` (per fabric host; empty: an empty cluster). Not judged
// (best_found false) when the step's hosts run different numbers of tasks.
Quality assess_step(const topology::Fabric& fabric, const topology::NodeTopology* node,
                    const Request& request, const std::vector<char>& free = {});

}  // namespace topoaware::mapper
