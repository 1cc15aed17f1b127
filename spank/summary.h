// What srun tells the user about a step before it launches: how spread the allocation is against
// the fabric, and (srun -v) the plan's modeled cost against Slurm's order, per dim.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "topoaware/launch/shadow.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/mapper/request.h"
#include "topoaware/topology/node.h"
#include "topoaware/topology/fabric.h"

namespace topoaware::spank {

// Per locality level above the host (leaf, spine, ...): the groups the allocation spans, and the
// fewest groups that could hold as many usable hosts (the shadow line's spread=,
// launch::format_spread).
std::vector<launch::SpreadLevel> allocation_spread(const topology::Fabric& fabric,
                                                   const std::vector<std::string>& hosts);

// One line on how spread the allocation is: per locality level above the host, the groups it spans
// against the fewest groups that could hold the same number of usable hosts. *spread is set when it
// spans more than needed.
std::string judge_line(const topology::Fabric& fabric, const std::vector<std::string>& hosts,
                       bool* spread);

// The plan summary lines (srun -v): the plan against Slurm's order, then each dim that
// communicates.
std::vector<std::string> plan_summary(const mapper::RankPlan& plan);

// One line (srun -v) on the allocation's quality (mapper::assess): the mapper's plan on it
// against its plan on the best allocation `place` finds on an empty cluster (srun does not know
// which hosts were free when slurmctld chose), every host modeled as the step's first host.
// Empty when the step's hosts run different numbers of tasks. Throws mapper::Error.
std::string quality_line(const topology::Fabric& fabric,
                         const std::vector<const topology::NodeTopology*>& nodes,
                         const mapper::Request& request);

}  // namespace topoaware::spank
