// What Slurm says of its nodes right now, for placing a job on them (`topo-aware place
// --from-slurm`, docs/placement.md): per node its name, state, partitions, configured GPUs and
// GPUs in use, read from the text of `scontrol show nodes --details --oneliner`, and whether a new
// job could start there. The parser is pure (text in, records out); running scontrol is the
// command line's job (tools/topo-aware/slurm_state.h), so tests read real captures.
//
// Format, read from Slurm's source rather than remembered, and the same in 22.05 and 24.11
// (src/api/node_info.c, slurm_sprint_node_table): one record per node, `Key=value` fields, a
// record on one line with --oneliner, else a first line `NodeName=...` and continuation lines
// indented by three spaces. Values may hold spaces (OS=, Reason=, Comment=, Extra=): a word that
// is not `Key=...` belongs to the value before it. Every field read here (NodeName, Gres,
// GresUsed, State, Partitions, CfgTRES, AllocTRES) is printed before Reason, Comment and Extra,
// the free-text fields, so reading stops at the first of those: a reason that happens to say
// `State=IDLE` or `GresUsed=gpu:0` cannot change what the node is.
// - State: the base state (src/common/slurm_protocol_defs.c node_states: DOWN IDLE ALLOCATED
//   ERROR MIXED FUTURE UNKNOWN) and each flag after a '+' (node_state_flags: DRAIN, RESERVED,
//   MAINTENANCE, NOT_RESPONDING, POWERED_DOWN, COMPLETING, PLANNED, ...). scontrol prints
//   NOT_RESPONDING as a flag; sinfo's '*' suffix is accepted too.
// - Gres and GresUsed (GresUsed only with --details): comma-separated `name[:type]:count`, each
//   with an optional "(S:...)" or "(IDX:...)" whose commas do not separate entries; the GPUs are
//   the entries named gpu, summed over types.
// - CfgTRES/AllocTRES hold gres/gpu only where the site accounts for it
//   (AccountingStorageTRES=gres/gpu); they are read when GresUsed is absent.
// Errors are thrown as topology::Error naming the source and line, like the rest of this library.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace topoaware::launch {

struct SlurmNode {
  std::string name;
  std::string state;                    // the base state: IDLE, MIXED, ALLOCATED, DOWN, ...
  std::vector<std::string> flags;       // after '+', as printed: DRAIN, RESERVED, ...
  std::vector<std::string> partitions;  // empty when the node is in none
  int gpus = 0;                         // configured (Gres=)
  int gpus_used = 0;                    // allocated to jobs (GresUsed=, else AllocTRES gres/gpu)
  bool gpus_used_known = false;         // false: neither field said (no --details, no TRES)

  // GPUs a new job could get: configured minus allocated. With the allocation unknown, all of
  // an IDLE node's and none of any other's, so a guess never offers a busy GPU.
  int free_gpus() const;
  // Why a new job cannot start here now ("state DOWN", "flag DRAIN", "no free GPU"); empty when
  // it can: the base state IDLE or MIXED, every flag one that does not keep jobs off (COMPLETING,
  // PLANNED, CLOUD, DYNAMIC_NORM, PERFCTRS), and a free GPU. An unknown flag keeps the node out:
  // a later release's new reason to skip a node must not send a job to wait on it.
  std::string unusable() const;
  bool usable() const { return unusable().empty(); }
  bool in_partition(const std::string& partition) const;
};

// The nodes scontrol listed, in its order (slurm.conf's). `source` names the text in errors
// ("scontrol show nodes", a fixture's path). Throws topology::Error on a line that is not part
// of a node record, a record without NodeName or State, or a GPU count that is not a number.
std::vector<SlurmNode> parse_scontrol_nodes(std::string_view text, const std::string& source);

// The partition marked Default=YES in `scontrol show partitions --oneliner` text; empty when
// none is.
std::string default_partition(std::string_view text);

}  // namespace topoaware::launch
