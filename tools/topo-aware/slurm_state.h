// `topo-aware place --from-slurm`: what the running Slurm says of a partition's nodes now, asked
// through scontrol (launch/slurm_nodes.h reads its answer). scontrol finds the cluster the way
// every Slurm client does (SLURM_CONF, else the configless lookup or the default path), so run
// from a cli_filter inside sbatch it asks the cluster sbatch submits to. Every call has a time
// limit: a controller that does not answer must not hold up a submission.
#pragma once

#include <string>
#include <vector>

#include "topoaware/launch/slurm_nodes.h"

namespace topoaware::cli {

struct SlurmState {
  std::string partition;                 // the one asked for, else Slurm's default partition
  std::vector<launch::SlurmNode> nodes;  // that partition's nodes, in Slurm's order
};

// Runs `scontrol show nodes --details --oneliner` (and `show partitions` when no partition is
// given) with `scontrol` a path or a name looked up in PATH, each call killed after
// `timeout_s`. Throws topology::Error naming what failed: scontrol missing or silent, its own
// complaint when it fails, an answer that does not read, a partition without nodes.
SlurmState slurm_state(const std::string& scontrol, const std::string& partition, int timeout_s);

}  // namespace topoaware::cli
