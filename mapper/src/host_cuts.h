// Cutting hosts' slot counts into units of `unit` slots (the groups of the innermost dims) where
// no host holds a unit whole: which host lends how many slots to which unit. A unit cut into two
// pieces is a two-host NCCL tree, into more a ring, and the smallest piece bounds the dim, so the
// cuts keep pieces large (docs/mapper.md, "Algorithms"). Private to the mapper's search
// (slot_sequence.cc); pure functions of the counts, tested through plan().
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace topoaware::mapper::internal {

// The exact tree cut (cut_trees_exact): on steps of at most this many hosts, and units tried.
constexpr std::size_t kExactCutHosts = 256;
constexpr long long kExactCutUnit = 16;  // a tree's two pieces each fit a host
constexpr long long kExactCutBudget = 2'000;

// Cutting slot counts into units of `unit` slots where no host holds a unit whole (tensor
// parallelism over hosts lending 3, 5, 7 GPUs). A one-GPU piece of a ring sends its whole hop
// through one NIC and bounds the dim, so what matters is the smallest piece of any unit.
struct PieceCut {
  std::vector<std::pair<std::size_t, long long>> pieces;  // (item, slots), units in order
  long long smallest = 0;                                 // smallest piece of a split unit
  long long left = 0;                                     // slots left over at the end
};

// Children ordered (by slot count) so that those holding whole units come first, then partial
// ones in runs whose counts add up to a unit.
std::vector<std::size_t> pack(const std::vector<long long>& count, long long unit);
// Every item's whole units, then units of the leftovers with the largest smallest piece the
// greedy finds (`complete`), or as many as can be cut with no piece under `floor`.
PieceCut cut_pieces(const std::vector<long long>& count, long long unit, long long floor,
                    bool complete);
// `bins` units of the leftovers as two-host trees (pieces >= k2) or rings (pieces >= kr), the
// greedy; empty when it cannot.
std::optional<PieceCut> cut_trees(const std::vector<long long>& count, long long unit, long long k2,
                                  long long kr, long long bins);
// Every unit the counts hold cut at floors (k2, kr): the greedy, else the exact search.
std::optional<PieceCut> complete_tree_cut(const std::vector<long long>& count, long long unit,
                                          long long k2, long long kr);
// The best tree/ring floors (k2, kr) a cut reaches on these counts.
std::pair<long long, long long> tree_floors(const std::vector<long long>& count, long long unit,
                                            double ring);

}  // namespace topoaware::mapper::internal
