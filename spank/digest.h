// Nodes that must agree. Every node plans the step on its own, from files each node reads for
// itself (configuration, fabric, captures, the job description) and from what Slurm tells all
// nodes alike (the step's hosts and tasks). A file that differs on one node -- an update pushed
// to half the cluster, a capture missing on one node -- would make that node compute another
// plan and launch tasks with duplicate or missing ranks, which hang a training job instead of
// failing it.
//
// So srun, which read the same inputs before launch, hands every node a digest of them
// (SLURM_TOPO_AWARE_DIGEST: Slurm passes SLURM_* variables also under --export=NONE), and each
// node compares its own before touching a task. The plan is a pure function of these inputs, of
// the step's shape (which Slurm gives every node alike) and of the plugin's build, so equal
// digests mean equal plans. Each part is hashed on its own, so a node that differs can say what.
#pragma once

#include <string>
#include <vector>

#include "config.h"
#include "topoaware/topology/fabric.h"

namespace topoaware::spank {

struct Digest {
  std::string build;     // the plugin's version
  std::string config;    // plugstack arguments and the configuration file
  std::string fabric;    // the fabric file (and GUID map)
  std::string captures;  // every capture the configuration and the fabric's node types name
  std::string spec;      // the SPEC, and the job description a file: SPEC names
};

// The digest of the inputs as this process reads them. Throws what reading them throws.
Digest digest_of(const Config& config, const std::vector<std::string>& plugstack_args,
                 const topology::Fabric& fabric, const std::string& spec);

// "v1 build=0123abcd... config=... fabric=... captures=... spec=..."
std::string encode(const Digest& digest);
// Throws topology::Error naming SLURM_TOPO_AWARE_DIGEST when `text` is not encode()'s.
Digest decode(const std::string& text);

// What differs between srun's digest and this node's, in words ("the fabric
// (/etc/slurm/fabric.toml), the captures"), or empty when they agree.
std::string differences(const Digest& srun, const Digest& here, const Config& config);

}  // namespace topoaware::spank
