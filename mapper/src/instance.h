// The instance plan() works on (cost.h's Instance): the step's machine, traffic and Slurm's block
// order for a request, with the GPUs of each host chosen. Private to the mapper: make_instance()
// is the public face, and plan() also needs Slurm's own choice of GPUs to score its order.
#pragma once

#include <vector>

#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/request.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper::internal {

// make_instance(), with the GPUs of a host chosen by health (the plan's) or the first k by index
// (Slurm's: local task j on GPU j).
Instance instance_of(const topology::Fabric& fabric,
                     const std::vector<const topology::NodeTopology*>& nodes_in,
                     const Request& request, bool choose_gpus);

}  // namespace topoaware::mapper::internal
