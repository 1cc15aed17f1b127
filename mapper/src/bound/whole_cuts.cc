// Whole cuts (docs/mapper.md, "Lower bound", "Whole cuts"): the counts of groups a set of ranks
// cuts, as vectors no placement can go below, and the bound that prices each place's cut as one
// set of ranks under the walk.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "bound/bound.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::internal {

namespace {

// Whether some vector of `set` is at or below `v` in every one of the first `dims` dims; `work`
// counts the comparisons.
bool covered(const std::vector<CutVector>& set, const CutVector& v, std::size_t dims,
             long long& work) {
  work += static_cast<long long>(set.size()) + 1;
  return std::any_of(set.begin(), set.end(), [&](const CutVector& u) {
    for (std::size_t i = 0; i < dims; ++i) {
      if (u[i] > v[i]) return false;
    }
    return true;
  });
}

// Keeps the vectors of `v` no other one is below in every dim (one of equal ones).
void pareto(std::vector<CutVector>& v, std::size_t dims, long long& work) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::vector<CutVector> kept;
  for (const CutVector& x : v) {  // a vector below x sorts before it
    if (!covered(kept, x, dims, work)) kept.push_back(x);
  }
  v = std::move(kept);
}

// Work one cut_vectors() may do (vectors made and compared): about 0.3 s on one core. Past it the
// whole cuts are not counted (the bound stays true, only less tight). Three dims over a place of
// 128 ranks take up to some 160M; four or more have too many cuts that no other is below, so only
// kCutDims of them are counted (place_cut_vectors).
constexpr long long kCutWork = 250'000'000;

// P[c] for the c of `targets` (sorted, at most kCutSlots; empty past kCutWork): cut vectors,
// counts p_d(A) of the d-groups (lines) a set A of c ranks meets but does not hold whole, such
// that every A of c ranks has p(A) >= some vector of P[c] in every dim: least_cut's counts without
// its convex hull, each vector one whole cut, never a mixture of two. Pushing every d-line's
// members to its low end keeps p_d and raises no other count: in a plane of d and e (other
// coordinates fixed) whose d-lines hold a_j members, the e-lines cut afterwards are exactly
// max a - min a, and before, at least that many e-lines meet the fullest d-line but not the
// emptiest. So it is enough to count down-sets, whose slices along the outermost dim D nest,
// A_1 >= ... >= A_nD: p_D = |A_1| - |A_nD|, and the inner dims' counts add up over the slices.
// Slices are walked in non-increasing size (their nesting not required), the outer count held
// as w_D = x_1 so that a set ends with p_D = w_D - x_n; then (s, x, w) is worth no less than
// (s, x', w') when x >= x' and w <= w' (it may take every later slice the other may, to the same
// end), and only vectors no other one covers are kept. `n` innermost first; `coord`: each dim's
// coordinate in the vectors, -1 for a dim whose cuts are not counted (a coordinate dropped from
// every vector leaves a lower cover of the others).
//
// `pairs`: count an all-to-all's pairs split by A, sum over its lines of j (n - j) for j members
// in A, instead of its cut lines (each pair sends S/n across; a cut line has j (n - j) >= n - 1).
// Pushing members to the low end keeps the d-lines' counts and, in a plane of d and e, turns the
// e-lines' counts into the conjugate of the d-lines', which majorizes any other arrangement's,
// so the concave sum of j (n_e - j) does not grow: down-sets are still enough. In a down-set the
// D-lines holding at least i members are |A_i|, so the sum is sum_i x_i (n - 2i + 1), added
// slice by slice.
std::vector<std::vector<CutVector>> cut_vectors(const std::vector<long long>& n,
                                                const std::vector<int>& coord,
                                                const std::vector<bool>& pairs,
                                                const std::vector<long long>& targets) {
  std::size_t dims = 0;  // coordinates the vectors use
  for (int c : coord) dims = std::max(dims, static_cast<std::size_t>(c + 1));
  const long long cmax = targets.back();
  long long work = 0;
  std::vector<std::vector<CutVector>> h(2, std::vector<CutVector>{CutVector{}});  // 0 or 1 rank
  long long space = 1;
  for (std::size_t k = 0; k < n.size(); ++k) {
    const bool last = k + 1 == n.size();
    const int at = coord[k];                                       // this dim's coordinate, or -1
    const long long inner = static_cast<long long>(h.size()) - 1;  // largest slice
    space = std::min(cmax, space * n[k]);
    // Whether a sum s, with `rest` slices of at most x still to come, can end on a size wanted.
    auto wanted = [&](long long s, long long x, long long rest) {
      if (!last) return s <= space;
      auto it = std::lower_bound(targets.begin(), targets.end(), s);
      return it != targets.end() && *it <= s + x * rest;
    };
    // g[s][x]: vectors w over the slices so far, their sizes summing to s, the last of size x.
    using Table = std::vector<std::vector<std::vector<CutVector>>>;
    const auto rows = static_cast<std::size_t>(space + 1);
    const auto cols = static_cast<std::size_t>(inner + 1);
    // Drops from each g[s][x] the vectors that some g[s][x''], x'' >= x, holds one below.
    auto prune = [&](Table& t) {
      std::vector<CutVector> seen;
      for (auto& row : t) {
        seen.clear();
        for (std::size_t x = cols; x-- > 0;) {
          auto& cell = row[x];
          if (cell.empty()) continue;
          pareto(cell, dims, work);
          std::erase_if(cell, [&](const CutVector& v) { return covered(seen, v, dims, work); });
          seen.insert(seen.end(), cell.begin(), cell.end());
        }
      }
    };
    Table g(rows, std::vector<std::vector<CutVector>>(cols));
    for (long long x = 0; x <= std::min(inner, space); ++x) {
      if (!wanted(x, x, n[k] - 1)) continue;
      auto& cell = g[static_cast<std::size_t>(x)][static_cast<std::size_t>(x)];
      cell = h[static_cast<std::size_t>(x)];
      if (at < 0) continue;
      // The first slice: w_D = x_1, or its pairs term x_1 (n - 1).
      const long long first = pairs[k] ? x * (n[k] - 1) : x;
      for (CutVector& v : cell) v[static_cast<std::size_t>(at)] = static_cast<std::int32_t>(first);
    }
    for (long long j = 1; j < n[k]; ++j) {
      Table next(rows, std::vector<std::vector<CutVector>>(cols));
      for (long long s = 0; s <= space; ++s) {
        for (long long x = 0; x <= inner; ++x) {
          const auto& from = g[static_cast<std::size_t>(s)][static_cast<std::size_t>(x)];
          if (from.empty()) continue;
          for (long long y = 0; y <= x && s + y <= space; ++y) {
            if (!wanted(s + y, y, n[k] - 1 - j)) continue;
            const auto& add = h[static_cast<std::size_t>(y)];
            auto& to = next[static_cast<std::size_t>(s + y)][static_cast<std::size_t>(y)];
            // Slice j + 1 of size y: its pairs term y (n - 2j - 1).
            const auto term =
                static_cast<std::int32_t>(at >= 0 && pairs[k] ? y * (n[k] - 2 * j - 1) : 0);
            for (const CutVector& a : from) {
              for (const CutVector& b : add) {
                CutVector v{};
                for (std::size_t i = 0; i < dims; ++i) v[i] = a[i] + b[i];
                if (at >= 0) v[static_cast<std::size_t>(at)] += term;
                to.push_back(v);
              }
            }
            work += static_cast<long long>(from.size() * add.size());
          }
          if (work > kCutWork) return {};
        }
      }
      prune(next);
      if (work > kCutWork) return {};
      g = std::move(next);
    }
    std::vector<std::vector<CutVector>> next_h(rows);
    for (std::size_t s = 0; s < rows; ++s) {
      auto& out = next_h[s];
      for (std::size_t x = 0; x < cols; ++x) {
        for (CutVector v : g[s][x]) {
          if (at >= 0 && !pairs[k]) v[static_cast<std::size_t>(at)] -= static_cast<std::int32_t>(x);
          out.push_back(v);
        }
      }
      pareto(out, dims, work);
    }
    if (work > kCutWork) return {};
    h = std::move(next_h);
  }
  return h;
}

}  // namespace

// The cut vectors of every place the crossing bounds count (cut_case_bound), once for each dim
// peeled last (each is a lower cover of its own, and they differ: on `3tier-4:1/whole tp=8,cp=4`
// the bound is 1.1238 s with DP outermost, 1.2043 s with CP or TP), or none where that bound
// does not apply (not every slot holds a rank, no radix dims, no tier to cross).
std::vector<CutSets> place_cut_vectors(const Machine& machine, const Traffic& traffic,
                                       const BoundMachine& summary, bool full,
                                       std::size_t most_counted) {
  CrossSetup setup;
  if (!full || !cross_setup(machine, traffic, summary.host_slots, summary.island_kmax, {}, &setup))
    return {};
  // Past kCutDims radix dims the cuts no other is below are too many (too slow): the heaviest
  // (bytes a cut group sends out) are counted, the others peeled first and left uncounted, which
  // drops a coordinate of every vector (still a lower cover of the counted ones).
  const std::size_t dims = setup.n.size();
  std::vector<std::size_t> by_weight(dims);
  std::iota(by_weight.begin(), by_weight.end(), 0);
  std::stable_sort(by_weight.begin(), by_weight.end(),
                   [&](std::size_t x, std::size_t y) { return setup.out[x] > setup.out[y]; });
  std::vector<bool> counted(dims, false);
  for (std::size_t j = 0; j < std::min({dims, kCutDims, most_counted}); ++j) {
    counted[by_weight[j]] = true;
  }
  std::vector<long long> targets;
  for (const CrossTier& tier : setup.tiers) {
    targets.insert(targets.end(), tier.slots.begin(), tier.slots.end());
  }
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  std::vector<CutSets> all;
  for (std::size_t last = 0; last < dims; ++last) {
    if (!counted[last]) continue;
    // Uncounted dims innermost, then the counted others, then `last`.
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < dims; ++i) {
      if (!counted[i]) order.push_back(i);
    }
    for (std::size_t i = 0; i < dims; ++i) {
      if (counted[i] && i != last) order.push_back(i);
    }
    order.push_back(last);
    CutSets sets;
    sets.coord.assign(dims, -1);
    sets.pairs.assign(dims, false);
    for (std::size_t i = 0, next = 0; i < dims; ++i) {
      if (counted[i]) sets.coord[i] = static_cast<int>(next++);
      const DimTraffic& dt = traffic.dims[setup.radix[i]];
      sets.pairs[i] = dt.pattern == Pattern::kAllToAll && dt.size >= 3;
    }
    std::vector<long long> n(dims);
    std::vector<int> coord(dims);
    std::vector<bool> pairs(dims);
    for (std::size_t i = 0; i < dims; ++i) {
      n[i] = setup.n[order[i]];
      coord[i] = sets.coord[order[i]];
      pairs[i] = sets.pairs[order[i]];
    }
    sets.sets = cut_vectors(n, coord, pairs, targets);
    if (sets.sets.empty()) continue;  // past the work cap
    all.push_back(std::move(sets));
  }
  return all;
}

// Whole cuts under the walk (docs/mapper.md, "Lower bound", "Whole cuts"). A place of a crossing
// tier (an island, a level's switch group) with c slots holds c ranks A, and each d-group A cuts
// sends at least out_d through the place's exits, so time_d >= p_d(A) out_d E / cap (E: the
// place's least ECMP factor). Every placement has p(A) >= some p of cut_vectors()[c] (`cuts`), so
// the least over those p of the walk, each dim's floors raised to p_d out_d E / cap, is a bound,
// and every place gives one. Unlike the joint crossing bound, which splits each dim's time between
// the walk and a cut minimized apart, a dim here pays the larger of the two, and the cut is one
// set of ranks, not a mixture of cuts. `known`: a bound already proved (a place whose least
// cannot beat it is left early).
double cut_case_bound(const Machine& machine, const Traffic& traffic, const BoundMachine& summary,
                      const Floors& by_host, const Floors& by_host_ring, const Floors& by_island,
                      const std::vector<bool>& rings, const std::vector<CutSets>& cuts,
                      double known, const Walk& walk, const std::vector<long long>& members) {
  CrossSetup setup;
  if (cuts.empty() || !cross_setup(machine, traffic, summary.host_slots, summary.island_kmax, rings,
                                   &setup, members)) {
    return 0;
  }
  double best = 0;
  // (slots, cap, ECMP links, most flows) of the places walked
  std::set<std::tuple<long long, double, std::uint32_t, double>> seen;
  for (std::size_t ti = 0; ti < setup.tiers.size(); ++ti) {
    const CrossTier& tier = setup.tiers[ti];
    for (std::size_t pl = 0; pl < tier.slots.size(); ++pl) {
      const long long c = tier.slots[pl];
      if (tier.cap[pl] <= 0 ||
          !seen.emplace(c, tier.cap[pl], tier.links[pl], setup.flows[ti][pl]).second) {
        continue;
      }
      double place = 0;  // the largest over the cut sets of their least walk
      for (const CutSets& sets : cuts) {
        if (c >= std::ssize(sets.sets)) continue;
        // What dim i's exit load takes at least: each dim's flows apart (ecmp_exit()).
        auto raise = [&](const CutVector& p, std::size_t i) {
          const double out = sets.bytes_out(p, i, traffic.dims[setup.radix[i]], setup.out[i]);
          return ecmp_exit(out, setup.flow[i], setup.flows[ti][pl], tier.links[pl]) / tier.cap[pl];
        };
        std::vector<std::pair<double, const CutVector*>> order;  // cheapest raises first
        for (const CutVector& p : sets.sets[static_cast<std::size_t>(c)]) {
          double sum = 0;
          for (std::size_t i : setup.live) sum += raise(p, i);
          order.emplace_back(sum, &p);
        }
        if (order.empty()) continue;
        std::sort(order.begin(), order.end(),
                  [](const auto& x, const auto& y) { return x.first < y.first; });
        double least = std::numeric_limits<double>::infinity();
        for (const auto& [sum, p] : order) {
          Floors host = by_host, ring = by_host_ring, island = by_island;
          for (std::size_t i : setup.live) {
            const std::size_t d = setup.radix[i];
            // A group the place cuts leaves its island: the dim waits for the network too.
            double cut_floor = raise(*p, i);
            if (cut_floor > 0) cut_floor += network_latency(traffic.dims[d], summary);
            for (auto* v : {&host[d], &ring[d], &island[d]}) {
              for (double& y : *v) y = std::max(y, cut_floor);
            }
          }
          least = std::min(least, walk(host, ring, island));
          if (least <= std::max({best, known, place})) break;
        }
        place = std::max(place, least);
      }
      best = std::max(best, place);
    }
  }
  return best;
}

}  // namespace topoaware::mapper::internal
