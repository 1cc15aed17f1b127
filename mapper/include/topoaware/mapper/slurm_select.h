// Slurm's own choice of nodes for a job, reimplemented: which whole nodes slurmctld would give a
// job on a cluster with no topology plugin (flat), with topology/tree, or with topology/block.
//
// It is here so that a placement of ours can be compared with what Slurm would have done on the
// same free nodes, and so that `explain` output can say why Slurm chose what it chose. It is a
// reimplementation of Slurm 24.11's code (src/plugins/topology/{common,tree,block}), rule for
// rule, including its quirks; every rule cites its file and function in slurm_select.cc, and
// where 22.05 to 23.11 differ it says so there (Settings::release follows their tree rules).
// docs/placement.md, "Slurm's own choice", describes each algorithm and what is not modeled;
// "Checked against slurmctld" how it agrees with the real one.
//
// Slurm's choice is count-based: it never looks at the job's layout. The model is whole nodes
// only: a node is free or busy (no partially used CPUs or GPUs, no GRES), every free node gives
// the job the same CPUs, and the job asks for exactly `nodes` nodes (min = max). Pure: no I/O,
// no clock (whether a --switches wait has run out is an input). Malformed inputs (a node index
// out of range, bad BlockSizes, a job of 0 nodes) throw topoaware::mapper::Error (layout.h); a job
// Slurm would not start now is a Selection with outcome kWait, not an exception.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace topoaware::topology {
struct Fabric;
}

namespace topoaware::mapper::slurm {

// One node as slurmctld holds it, in Slurm's node index order (slurm.conf order).
struct Node {
  std::string name;
  // slurm.conf Weight (sched_weight): Slurm fills the lowest weight first. How each algorithm
  // applies it is stated at select_flat, select_tree and select_block.
  std::uint64_t weight = 1;
  bool free = true;  // idle and usable by this job (a busy, down or drained node is not)
};

// One SwitchName line of topology.conf (topology/tree), in the file's order, which is Slurm's
// switch index order. A leaf switch names nodes, an upper switch names child switches.
struct Switch {
  std::string name;
  std::vector<std::uint32_t> nodes;     // node indexes (leaf switch)
  std::vector<std::uint32_t> switches;  // child switch indexes (upper switch)
};

// topology/block's topology.conf: BlockName lines in order (Slurm's base-block index order)
// and BlockSizes.
struct Block {
  std::string name;
  std::vector<std::uint32_t> nodes;  // node indexes
};
struct BlockTopology {
  std::vector<Block> blocks;
  // BlockSizes in nodes, e.g. {4, 8, 16}; the first is the base-block size, each a power-of-two
  // multiple of it. Empty: Slurm's default, base blocks of the first block's node count, and
  // aggregates of 1, 2, 4, 8 and 16 base blocks.
  std::vector<std::uint32_t> block_sizes;
};

// What the job asks for, and the settings that change which algorithm Slurm runs.
struct Job {
  std::uint32_t nodes = 1;           // -N (min = max)
  std::uint32_t max_switches = 0;    // --switches=N (leaf switches); 0: not given
  bool switch_wait_expired = false;  // --switches=N@T: the job has waited T (or max_switch_wait)
  bool contiguous = false;           // --contiguous
  bool spread_job = false;           // --spread-job
};
struct Settings {
  bool topo_optional = false;  // TopologyParam=TopoOptional
  bool lln = false;            // SelectTypeParameters=CR_LLN, or the partition's LLN=YES
  // The Slurm release whose tree rules to follow, major * 100 + minor (2205 for 22.05). Below
  // 2405 (22.05 to 23.11, select/cons_tres/job_test.c): a closer leaf replaces the best when it
  // compares no worse, not only when it holds the rest; taking a leaf's nodes does not lower
  // the counts of the switches above it; and the top switch's parent is switch 0, not none.
  // docs/placement.md, "Slurm's own choice", step 3. The flat best fit is the same in all.
  std::uint32_t release = 2411;
};

enum class Outcome {
  kSelected,    // Slurm would start the job on `nodes` now
  kWait,        // Slurm would leave the job pending (reason says why)
  kNotModeled,  // Slurm would use an algorithm this unit does not reimplement (reason names it)
};
std::string_view to_string(Outcome o);  // "selected", "wait", "not-modeled"

struct Selection {
  Outcome outcome = Outcome::kWait;
  std::vector<std::uint32_t> nodes;  // chosen node indexes, ascending (Slurm's bitmap order)
  std::string reason;                // for kWait / kNotModeled; empty when selected
  std::vector<std::string> trace;    // the decisions in order ("leaf s2 (2 free): smallest ...")
};

// No topology plugin: select/cons_tres's best fit over runs of consecutive free node indexes
// (_eval_nodes_consec). Weights: a run never spans two weights, and a lower-weight run is taken
// before any higher-weight one, whatever its size.
Selection select_flat(const std::vector<Node>& nodes, const Job& job);

// topology/tree (_eval_nodes_topo): the smallest leaf that holds the job, else leaves chosen by
// their spine's fit, hop distance and their own counts; spreads rather than waits unless
// --switches is given. Weights: the job takes every free node of the lowest weights first and
// only the nodes of the next weight that it needs, leaf by leaf. Contiguous and TopoOptional
// without --switches fall back to select_flat as Slurm does; --spread-job and LLN run
// algorithms not modeled here (kNotModeled).
Selection select_tree(const std::vector<Node>& nodes, const std::vector<Switch>& switches,
                      const Job& job, const Settings& settings = {});

// topology/block (eval_nodes_block): one aligned block of a BlockSizes size that holds the job,
// or wait; inside it, base blocks chosen to keep within as few lower-level blocks as the size
// allows. Weights: the block whose free nodes include the lowest weight wins; inside it, as for
// the tree. Block overrides --spread-job, LLN and --contiguous (trump_others).
Selection select_block(const std::vector<Node>& nodes, const BlockTopology& topology,
                       const Job& job);

// The inputs from a fabric model: nodes in the fabric's host order (excluded hosts busy, weight
// 1; the caller marks busy ones), its switch tree, and its blocks. The tree: when every host
// hangs from one leaf, the fabric's own switches in vertex order, which for an imported
// topology.conf is its line order, Slurm's switch index order; otherwise (rail-optimized hosts)
// the locality levels from "leaf" up, each group a switch, as `fabric --of slurm-tree` writes
// them. Blocks: Fabric::blocks and block_sizes, else one block per leaf group with Slurm's
// default sizes. Hosts are Slurm's node order only when the fabric lists them in slurm.conf
// order (a topology.conf import lists them as the file first names them).
std::vector<Node> nodes_of(const topology::Fabric& fabric);
std::vector<Switch> switches_of(const topology::Fabric& fabric);
BlockTopology blocks_of(const topology::Fabric& fabric);

}  // namespace topoaware::mapper::slurm
