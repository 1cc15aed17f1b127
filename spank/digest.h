// Nodes that must agree. Every node plans the step on its own, from files each node reads for
// itself (configuration, fabric, captures, the job description, a hostfile), from its own live
// discovery where a host has no capture, and from what Slurm tells all nodes alike (the step's
// hosts and tasks). An input that differs on one node -- an update pushed to half the cluster, a
// capture missing on one node, a node of another hardware generation modeled live, another build
// of the plugin -- would make that node compute another plan and launch tasks with duplicate or
// missing ranks, which hang a training job instead of failing it.
//
// So srun, which reads the same inputs before launch, hands every node a digest of them
// (SLURM_TOPO_AWARE_DIGEST: Slurm passes SLURM_* variables also under --export=NONE), and each
// node compares its own before touching a task. The plan is a pure function of these inputs and
// of the step's shape (which Slurm gives every node alike), so equal digests mean equal plans.
// Each part is hashed on its own, so a node that differs can say what. Two parts are values srun
// decides for every node rather than hashes: the GPUs the job holds on each host (from slurmctld;
// a node sees only its own) and MASTER_PORT (port.h).
//
// When srun cannot plan (fail-open), it hands the nodes the verdict instead ("v2 unmodified"):
// every node then runs the step as Slurm launched it, none plans alone.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "topoaware/launch/config.h"
#include "topoaware/launch/inputs.h"
#include "topoaware/topology/fabric.h"

namespace topoaware::spank {

using launch::Config;

struct Digest {
  bool unmodified = false;  // srun's verdict: the step runs unmodified on every node
  std::string build;        // the plugin's build id (launch/build.h)
  std::string config;       // plugstack arguments and the configuration file
  std::string fabric;       // the fabric file (and GUID map)
  std::string captures;     // every capture the configuration and the fabric's node types name
  std::string live;         // the model of a host without a capture, as discovered; "-": none
  std::string health;       // the degraded NICs srun planned with (SLURM_TOPO_AWARE_HEALTH)
  std::string hostfile;     // SLURM_HOSTFILE's text (-m arbitrary); "-": unset
  std::string spec;         // the SPEC, and the job description a file: SPEC names
  std::string gpus;         // value: GPUs per host as "8:node[1-4];2:node5", "-": none
  std::string port;         // value: MASTER_PORT
};

// What the digest is computed from besides the configuration, the fabric and the SPEC.
struct DigestInputs {
  bool with_live = false;          // hash this machine's live model (a host without a capture)
  std::string health;              // health_text srun planned with / the node received
  const char* hostfile = nullptr;  // SLURM_HOSTFILE's path, or nullptr when unset
};

// The hashed parts as this process reads them (gpus and port are left to the caller). Throws
// what reading them throws.
Digest digest_of(const Config& config, const std::vector<std::string>& plugstack_args,
                 const topology::Fabric& fabric, const std::string& spec,
                 const DigestInputs& inputs);

// Whether `hosts` need a live model under `config` (a host without a capture).
bool uses_live(const Config& config, const topology::Fabric& fabric,
               const std::vector<std::string>& hosts);

// GPUs per host, as the value `gpus` carries them (compressed host lists); and back.
std::string encode_gpus(const std::vector<std::string>& hosts, const std::vector<int>& gpus);
std::map<std::string, int> decode_gpus(const std::string& text);

// One hash of the hashed parts (build to spec, not the per-step gpus and port): steps planned from
// the same inputs share it. The shadow line's digest= (16 hex digits).
std::string inputs_hash(const Digest& digest);

// "v2 build=0123abcd... config=... ... gpus=8:node[1-4] port=20123", or "v2 unmodified".
std::string encode(const Digest& digest);
// Throws topology::Error naming SLURM_TOPO_AWARE_DIGEST when `text` is not encode()'s (another
// build's, or no digest at all).
Digest decode(const std::string& text);

// What differs between srun's digest and this node's, in words ("the fabric
// (/etc/slurm/fabric.toml), the node captures"), or empty when they agree. The live model is
// compared only where this node uses one (`here.live` not "-").
std::string differences(const Digest& srun, const Digest& here, const Config& config);

}  // namespace topoaware::spank
