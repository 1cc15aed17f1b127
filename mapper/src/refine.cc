// Refinement (search.h): exchanges of hosts, kicks out of host-order plateaus, then exchanges of
// ranks, each kept when the model says the step gets faster; counted in moves, never timed.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "search.h"
#include "splitmix.h"
#include "topoaware/mapper/cost.h"

namespace topoaware::mapper::internal {

namespace {

// Kicks out of host-order plateaus (refine_hosts) on jobs of at most this many hosts: how many,
// and the moves they may spend together.
constexpr std::size_t kKickHosts = 32;
constexpr int kKicks = 48;
constexpr int kKickPatience = 12;  // kicks in a row that gain nothing end them
constexpr long long kKickMoves = 2'000;
constexpr long long kKickWork = 500'000;  // a few ms: kicks must not slow a launch much

}  // namespace

// One refinement run: host exchanges, then rank exchanges, each accepted when the model says
// the step gets faster (ties: less traffic up the tree). Moves are scored incrementally
// (IncrementalCost: only the moved ranks' groups are re-routed). Every move counts against
// `budget`, and the work of all moves against `work_cap`: deterministic, never wall time.
long long Mapper::refine(Assignment& a, Score& cost, const ScoreOrder& better, long long budget,
                         long long work_cap, double good_enough) {
  if (a.size() < 2 || budget <= 0) return 0;
  IncrementalCost inc(in_.machine, in_.traffic, a);
  std::optional<DomainTracker> domains;
  if (!rule_.empty()) domains.emplace(rule_, a);
  Refiner r{inc, domains ? &*domains : nullptr, better, cost, budget, work_cap, 0, good_enough};
  refine_hosts(r);
  refine_ranks(r);
  a = inc.slot_of_rank();
  cost = r.cost;
  return r.used;
}

// Host exchanges: everything two hosts with as many slots hold, GPU k for GPU k (rails stay
// aligned). The move whole-host allocations need: a rank exchange splits the groups a host
// holds, a host exchange moves them together. Up to 64 hosts every pair in sweeps until one
// gains nothing; more, pairs from a fixed-seed generator until a run of fruitless moves.
void Mapper::refine_hosts(Refiner& r) {
  const std::size_t nh = slots_of_host_.size();
  if (nh < 3) return;
  const auto& a = r.inc.slot_of_rank();
  std::vector<std::uint32_t> rank_on(in_.machine.slots.size(), 0);
  for (std::uint32_t k = 0; k < a.size(); ++k) rank_on[a[k]] = k;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
  // The rank pairs that exchange everything hosts x and y hold, GPU k for GPU k.
  auto host_pairs = [&](std::size_t x, std::size_t y) {
    const auto& sx = slots_of_host_[x];
    const auto& sy = slots_of_host_[y];
    pairs.clear();
    for (std::size_t i = 0; i < sx.size(); ++i) pairs.emplace_back(rank_on[sx[i]], rank_on[sy[i]]);
  };
  auto moved = [&]() {
    for (const auto& [p, q] : pairs) {
      rank_on[a[p]] = p;
      rank_on[a[q]] = q;
    }
  };
  // Exchanges made (kept or forced) since the log was cleared, so that a kick can be taken back.
  std::vector<std::pair<std::size_t, std::size_t>> log;
  auto try_hosts = [&](std::size_t x, std::size_t y) {
    if (slots_of_host_[x].size() != slots_of_host_[y].size()) return false;
    host_pairs(x, y);
    if (!r.attempt(pairs)) return false;
    moved();
    log.emplace_back(x, y);
    return true;
  };
  auto force = [&](std::size_t x, std::size_t y) {
    host_pairs(x, y);
    r.exchange(pairs);
    moved();
    log.emplace_back(x, y);
  };
  // Sweeps over every pair until one gains nothing.
  auto descend = [&]() {
    bool improved = true;
    while (improved && !r.spent()) {
      improved = false;
      for (std::size_t x = 0; x < nh && !r.spent(); ++x) {
        for (std::size_t y = x + 1; y < nh && !r.spent(); ++y) improved |= try_hosts(x, y);
      }
    }
  };
  if (nh <= 64) {
    descend();
    if (nh > kKickHosts) return;
    // Kicks (iterated local search), small jobs only. The model's time is a maximum over
    // resources, so a host order can sit on a plateau that no exchange of two hosts leaves:
    // scoring every order of 8-host jobs (mapper_bench --exact) found plans 14-17% above the
    // best order of their own host sets, the way out a cycle of six hosts. A kick moves a few
    // hosts around a random cycle, descends again, and is taken back unless the end is better.
    // Counted in moves like the rest, with a budget of its own (a move on a job this small
    // costs microseconds) unless the request set one (Request::refine_moves).
    SplitMix kick_rng{0x6b69636b2d686f73ULL};
    const long long saved_budget = r.budget, used_before = r.used, saved_cap = r.work_cap;
    if (req_.refine_moves < 0) r.budget = r.used + kKickMoves;
    r.work_cap = std::min(r.work_cap, r.inc.work() + kKickWork);
    std::vector<std::size_t> cycle;
    for (int k = 0, fruitless = 0; k < kKicks && fruitless < kKickPatience && !r.spent(); ++k) {
      const Score before = r.cost;
      ++fruitless;
      log.clear();
      cycle.clear();
      const std::size_t len = 3 + kick_rng.below(std::min<std::size_t>(nh, 6) - 2);
      for (std::size_t draw = 0; draw < 4 * nh && cycle.size() < len; ++draw) {
        const std::size_t h = kick_rng.below(nh);
        if (std::find(cycle.begin(), cycle.end(), h) == cycle.end() &&
            slots_of_host_[h].size() == slots_of_host_[cycle.empty() ? h : cycle[0]].size()) {
          cycle.push_back(h);
        }
      }
      if (cycle.size() < 2) continue;
      for (std::size_t i = 0; i + 1 < cycle.size(); ++i) force(cycle[i], cycle[i + 1]);
      ++r.used;
      r.cost = r.now();
      descend();
      if (r.better(r.cost, before)) {  // a better plateau: keep it
        fruitless = 0;
        continue;
      }
      // Take it all back, newest first (an exchange is its own inverse).
      std::vector<std::pair<std::size_t, std::size_t>> back(log.rbegin(), log.rend());
      for (const auto& [x, y] : back) force(x, y);
      r.cost = before;
    }
    // Rank exchanges keep their share of the request's budget and of the work cap.
    if (req_.refine_moves < 0) r.budget = saved_budget + (r.used - used_before);
    r.work_cap = saved_cap;
    return;
  }
  SplitMix rng{0x686f7374732d7377ULL};
  long long since_gain = 0;
  const long long patience = std::max<long long>(64, static_cast<long long>(nh));
  while (!r.spent() && since_gain < patience) {
    ++since_gain;
    std::size_t x = rng.below(nh), y = rng.below(nh);
    if (x != y && try_hosts(x, y)) since_gain = 0;
  }
}

// Rank exchanges. Up to 24 ranks steepest descent over every pair; more, pairs from a fixed-seed
// generator until a run of fruitless moves. With host blocks (a per-node launcher) only ranks of
// one host trade places: the blocks stay whole.
void Mapper::refine_ranks(Refiner& r) {
  const std::size_t n = r.inc.slot_of_rank().size();
  // The block of ranks each rank's host holds: [first, first + size). Host exchanges move blocks
  // between hosts, never reshape them, so these stay true during refinement.
  std::vector<std::uint32_t> block_first(n, 0), block_size(n, static_cast<std::uint32_t>(n));
  if (req_.host_blocks) {
    const auto& a = r.inc.slot_of_rank();
    for (std::uint32_t i = 0; i < n;) {
      std::uint32_t j = i;
      while (j < n && in_.machine.slots[a[j]].host == in_.machine.slots[a[i]].host) ++j;
      for (std::uint32_t k = i; k < j; ++k) {
        block_first[k] = i;
        block_size[k] = j - i;
      }
      i = j;
    }
  }
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pair(1);
  if (n <= 24) {
    bool improved = true;
    while (improved && !r.spent()) {
      improved = false;
      Score best = r.cost;
      std::uint32_t bi = 0, bj = 0;
      for (std::uint32_t i = 0; i < n && !r.spent(); ++i) {
        for (std::uint32_t j = i + 1; j < block_first[i] + block_size[i] && !r.spent(); ++j) {
          pair[0] = {i, j};
          r.exchange(pair);
          ++r.used;
          const Score c = r.now();
          r.undo();
          if (r.better(c, best)) {
            best = c;
            bi = i;
            bj = j;
          }
        }
      }
      if (r.better(best, r.cost)) {
        pair[0] = {bi, bj};
        r.exchange(pair);
        r.cost = best;
        improved = true;
      }
    }
    return;
  }
  SplitMix rng{0x746f706f2d617761ULL};
  long long since_gain = 0;
  // Stop after a run of fruitless moves: random exchanges rarely help once the block
  // structure is right, and the budget is better left unspent than burnt.
  const long long patience = std::max<long long>(64, static_cast<long long>(n / 4));
  while (!r.spent() && since_gain < patience) {
    ++since_gain;
    auto i = static_cast<std::uint32_t>(rng.below(n));
    auto j = block_first[i] + static_cast<std::uint32_t>(rng.below(block_size[i]));
    if (i == j) continue;
    pair[0] = {i, j};
    if (r.attempt(pair)) since_gain = 0;
  }
}

}  // namespace topoaware::mapper::internal
