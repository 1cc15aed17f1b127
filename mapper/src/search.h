// The topo algorithm's search for an assignment of ranks to slots (plan()'s kTopo) and the
// baselines it is measured against (block, cyclic, random): candidate orders of the dims and the
// slot sequences they are laid over (starts, scored by the cost model), then refinement of the
// best by exchanges of hosts and ranks (docs/mapper.md, "Algorithms"). Private to the mapper; the
// class is cut over files by concern: search.cc (baselines, orders and starts), slot_sequence.cc
// (slots in locality order, hosts cut into pieces), nvlink_domains.cc (starts for NVLink
// domains), refine.cc (refinement).
//
// Everything inside works on the canonical machine (hosts sorted by name, slots by GPU), so the
// plan does not depend on the order the hosts came in; only the block baseline reads Slurm's order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "domains.h"
#include "host_cuts.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/request.h"

namespace topoaware::mapper::internal {

using Assignment = std::vector<std::uint32_t>;  // slot of each rank

// A score: how many blocks short of the fast-domain rule (domains.h) a plan is, then modeled
// seconds, then bytes crossing levels. The rule first: the model chooses among plans that keep it.
struct Score {
  double seconds = 0;
  double crossing = 0;
  long long split = 0;
};

// The order scores are compared in: seconds in steps of 1e-5 of a reference time (latency terms
// differ by microseconds between otherwise equal plans), then crossing bytes in steps of 1e-9 of
// a reference (the plan that keeps traffic lower in the tree leaves the spine to other jobs).
// Comparing quantized keys is a strict weak ordering, so it may sort; a tolerance compare ("within
// 1e-5 of each other") is not transitive and may not. References: the instance's first score.
class ScoreOrder {
 public:
  explicit ScoreOrder(const Score& reference)
      : second_step_(1e-5 * std::max(reference.seconds, 1e-12)),
        crossing_step_(1e-9 * std::max(reference.crossing, 1.0)) {}
  // Whether `a` is strictly better than `b`.
  bool operator()(const Score& a, const Score& b) const { return key(a) < key(b); }

 private:
  std::tuple<long long, double, double> key(const Score& s) const {
    return {s.split, std::floor(s.seconds / second_step_), std::floor(s.crossing / crossing_step_)};
  }
  double second_step_, crossing_step_;
};

// The model's score of one assignment under the fast-domain rule.
Score score(const Machine& m, const Traffic& t, const DomainRule& rule,
            const std::vector<std::uint32_t>& a);

// A rank digit: ranks are enumerated with digits varying fastest first; a digit is a dim, or
// part of one (a dim of size n split into a low digit of size a and a high one of size n / a).
struct Digit {
  long long stride;  // rank distance between neighbours in this digit
  long long size;
};
using Digits = std::vector<Digit>;

class Mapper {
 public:
  Mapper(const Instance& inst, const Request& req)
      : in_(inst), req_(req), rule_(inst.machine, inst.traffic, inst.layout.split) {
    const Machine& m = inst.machine;
    slots_of_host_.assign(m.hosts.size(), {});
    for (std::uint32_t s = 0; s < m.slots.size(); ++s) slots_of_host_[m.slots[s].host].push_back(s);
  }

  // The baselines (search.cc): Slurm's block order as the request gives it, cyclic, random.
  Assignment block() const;
  Assignment cyclic() const;
  Assignment random(std::uint64_t seed) const;
  // The same hosts and GPU order made into one contiguous block of ranks per host.
  Assignment host_blocks(const Assignment& a) const;
  // The topo algorithm; `bound`: lower_bound() of the instance.
  Assignment topo(double bound, long long* moves_done);
  // The fast-domain rule the search keeps, and a plan's score under it.
  const DomainRule& rule() const { return rule_; }
  Score score_of(const Assignment& a) const { return score(in_.machine, in_.traffic, rule_, a); }

 private:
  using Starts = std::vector<std::pair<Score, Assignment>>;

  // How slots are laid in locality order (slot_sequence).
  enum class Packing {
    kNone,     // hosts by name inside each group, groups by name
    kRuns,     // children reordered so partial ones complete each other (5 + 3 = 8)
    kAligned,  // every child's whole units first, then the children's leftovers packed
    kPieces,   // as kAligned, and hosts split into pieces so no unit has a tiny piece
    kTrees,    // as kPieces for an all-reduce: units of two pieces (two-host trees) first
  };

  // How one slot sequence is cut: the packing, the unit sizes of the candidate order (products
  // of its innermost digits), and for kPieces the unit a host may be split for and the
  // smallest piece a cut may leave.
  struct Cutting {
    Packing packing = Packing::kNone;
    std::vector<long long> prefix;
    long long piece_unit = 1;
    long long piece_floor = 1;
    long long tree_floor = 1, ring_floor = 1;  // kTrees: least piece of a tree / of a ring
    bool flat = false;                         // the step's hosts cut as one group
    // The largest unit that fits `capacity` slots.
    long long unit_for(long long capacity) const {
      long long u = 1;
      for (long long x : prefix) {
        if (x <= capacity) u = x;
      }
      return u;
    }
  };

  // One refinement run (refine()): its incremental cost, the order moves are judged by, the
  // assignment's score so far and what the budget allows; host and rank exchanges share it.
  struct Refiner {
    IncrementalCost& inc;
    DomainTracker* domains;  // the fast-domain rule's shortfall; null where the rule is empty
    const ScoreOrder& better;
    Score cost;
    long long budget, work_cap, used;
    double good_enough;  // seconds: no move can gain enough below this to be worth a search
    bool spent() const {
      return used >= budget || inc.work() >= work_cap ||
             (cost.split == 0 && cost.seconds <= good_enough);
    }
    using Pairs = std::vector<std::pair<std::uint32_t, std::uint32_t>>;
    void exchange(const Pairs& pairs) {
      inc.exchange(pairs);
      if (domains) domains->exchanged(pairs, inc.slot_of_rank());
    }
    void undo() {
      inc.undo();
      if (domains) domains->undo();
    }
    Score now() const {
      return Score{inc.seconds(), inc.crossing(), domains ? domains->shortfall() : 0};
    }
    // Tries a move; keeps it when better. Returns whether it was kept.
    bool attempt(const Pairs& pairs) {
      exchange(pairs);
      ++used;
      const Score c = now();
      if (better(c, cost)) {
        cost = c;
        return true;
      }
      undo();
      return false;
    }
  };

  // Orders and starts (search.cc).
  std::vector<long long> orientation(const Assignment& a) const;
  bool partial_hosts(const std::vector<std::size_t>& heavy) const;
  std::vector<std::size_t> heavy_dims() const;
  std::vector<std::vector<std::size_t>> candidate_orders(
      const std::vector<std::size_t>& heavy) const;
  Starts candidate_starts(const std::vector<std::size_t>& heavy);
  Starts cut_around(const std::vector<std::size_t>& heavy);
  std::pair<Score, Assignment> digit_orders(const std::vector<std::size_t>& heavy);
  std::map<std::uint32_t, std::vector<std::uint32_t>> hosts_by_node() const;
  long long slots_per_host() const;
  Assignment block_by_name() const;
  Digits digits_of(const std::vector<std::size_t>& order) const;

  // Starts for steps with NVLink domains (nvlink_domains.cc).
  std::vector<std::uint32_t> domain_blocks(long long R) const;
  Assignment column_blocks() const;
  Assignment split_stages(Assignment a) const;
  Assignment domains_in_turn() const;
  bool stage_grid(long long* C, long long* R, long long* U) const;
  static std::vector<bool> even_halves(long long R, long long C, long long x);

  // Slots in locality order (slot_sequence.cc).
  std::vector<std::uint32_t> slot_sequence(const Digits& order, Packing packing, bool flat = false);
  static PieceCut cut_tree_units(const std::vector<long long>& n, long long unit,
                                 const Cutting& cut, bool top);
  std::vector<std::uint32_t> order_group(const std::vector<std::uint32_t>& hosts, int level,
                                         const Cutting& cut, std::size_t* tail);
  std::vector<std::uint32_t> island_sequence(long long unit) const;
  std::vector<std::uint32_t> units_by_place(const std::vector<std::uint32_t>& seq,
                                            long long unit) const;
  Assignment fill(const std::vector<std::uint32_t>& seq, const Digits& order);
  // A start that keeps the fast-domain rule: each island's slots hold the rule's blocks whole,
  // largest level first (domains.h); empty where the rule is.
  Assignment domain_aligned();

  // Refinement (refine.cc).
  long long refine(Assignment& a, Score& cost, const ScoreOrder& better, long long budget,
                   long long work_cap, double good_enough);
  void refine_hosts(Refiner& r);
  void refine_ranks(Refiner& r);

  const Instance& in_;
  const Request& req_;
  DomainRule rule_;
  std::vector<std::vector<std::uint32_t>> slots_of_host_;
};

}  // namespace topoaware::mapper::internal
