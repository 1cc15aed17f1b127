// The fast-domain rule (docs/mapper.md, "Fast domains stay whole"): a group of tp, then of cp,
// then of ep that fits an NVLink domain of the step (a host, or an NVL72-style domain) stays
// inside one, as Megatron's layout assumes, unless the job allows a split (split=allow). The
// search scores plans by how far they fall short of the rule before anything else, so the cost
// model chooses among plans that keep the rule wherever one exists.
//
// A level of the rule is a prefix of the fast dims (tp; tp and cp; tp, cp and ep): a block is
// the ranks that share every other coordinate, and keeping each of the prefix's groups inside one
// island (NCCL node) is keeping its blocks whole. A level requires as many whole blocks as the
// islands' slot counts allow, min(blocks, sum over islands of floor(slots / block size)); the
// levels nest, so all of them can be met at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "topoaware/mapper/cost.h"

namespace topoaware::mapper::internal {

struct DomainLevel {
  std::vector<std::size_t> dims;  // indexes into Traffic::dims: the prefix of the fast dims
  long long unit = 1;             // ranks in a block: the product of their sizes
  long long blocks = 0;           // blocks in the step
  long long required = 0;         // whole blocks the rule asks for
};

class DomainRule {
 public:
  DomainRule() = default;
  // The rule for a step: empty under split=allow, and for levels no island can hold a block of.
  DomainRule(const Machine& m, const Traffic& t, SplitPolicy policy);

  bool empty() const { return levels_.empty(); }
  const std::vector<DomainLevel>& levels() const { return levels_; }
  // How many blocks short of the rule an assignment is, summed over levels: 0 keeps it.
  long long shortfall(const std::vector<std::uint32_t>& slot_of_rank) const;
  // Whether the block of `level` holding `rank` lies inside one island.
  bool whole(std::size_t level, long long rank, const std::vector<std::uint32_t>& a) const;
  std::uint32_t island_of_slot(std::uint32_t slot) const { return island_[slot]; }
  // The first rank of the block of `level` holding `rank`.
  long long base(std::size_t level, long long rank) const;

 private:
  const Traffic* t_ = nullptr;
  std::vector<DomainLevel> levels_;
  std::vector<std::uint32_t> island_;  // per slot
};

// The rule's shortfall kept up to date across exchanges of ranks' slots, for refinement.
class DomainTracker {
 public:
  DomainTracker(const DomainRule& rule, const std::vector<std::uint32_t>& slot_of_rank);
  long long shortfall() const;
  // After `a` had the slots of each pair of ranks exchanged.
  void exchanged(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs,
                 const std::vector<std::uint32_t>& a);
  void undo();  // the last exchanged()

 private:
  const DomainRule& rule_;
  std::vector<long long> whole_;             // per level: whole blocks
  std::vector<std::vector<char>> is_whole_;  // per level, by block base rank
  struct Saved {
    std::size_t level;
    long long base;
    char was;
  };
  std::vector<Saved> journal_;
  std::vector<long long> saved_whole_;
};

// Per fast dim of a plan: its groups, how many span islands, and why (empty: none do).
std::vector<SplitReport> domain_splits(const Machine& m, const Traffic& t, SplitPolicy policy,
                                       const std::vector<std::uint32_t>& slot_of_rank);

}  // namespace topoaware::mapper::internal
