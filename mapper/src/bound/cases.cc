// Cases that split the placements (docs/mapper.md, "Lower bound"): where a bound holds only for
// some placements, split all of them into cases that each have one and take the least. Tree chains
// (which of two all-reduce dims takes its ring floor), trees in the crossing term (which all-reduce
// dims run a two-host tree) and hashed hops on ECMP tiers (how many members of a ring group share a
// host), each with a host's members of one group charging their peers.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "bound/bound.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::internal {

namespace {

// A host's members of one group and their peers (docs/mapper.md, "Lower bound", of the same
// name). Where some host holds k members of one d-group (k in [lo, hi]: a two-node
// tree's larger side, or the most of a group on a host in an ECMP case), those members differ in
// d alone: the ranks sharing one member's d coordinate lie apart from those sharing another's, so
// some member p has at most kmax / k of them on the host. p's peers of each other dim lie among
// those and meet only in p, so sum_e (m_e(p) - 1) <= kmax / k - 1, and the dims' times together
// are at least f_d(k) + sum_e f_e(m_e(p)) (f: the case's host floors, raised or not). Returns the
// least of that over k and the peer counts. `radix`: radix_dims(), every dim of more than one
// member.
double member_peers_floor(const Floors& host, const std::vector<long long>& sizes,
                          const std::vector<std::size_t>& radix, std::size_t d, long long kmax,
                          long long lo, long long hi) {
  // A host holds at most kmax of the group, so the budget below is never negative.
  const long long top = std::min<long long>({hi, std::ssize(host[d]), kmax});
  double least = std::numeric_limits<double>::infinity();
  for (long long k = std::max(1LL, lo); k <= top; ++k) {
    const long long budget = kmax / k - 1;  // sum over the other dims of (m_e - 1)
    // cost[b]: the least sum of the other dims' floors spending b of the budget.
    std::vector<double> cost(static_cast<std::size_t>(budget + 1), 0.0);
    for (std::size_t e : radix) {
      if (e == d) continue;
      const auto& fe = host[e];
      const long long most = std::min<long long>(sizes[e], std::ssize(fe));
      std::vector<double> next(cost.size(), std::numeric_limits<double>::infinity());
      for (long long b = 0; b <= budget; ++b) {
        for (long long j = 1; j <= b + 1 && j <= most; ++j) {
          next[static_cast<std::size_t>(b)] = std::min(
              next[static_cast<std::size_t>(b)],
              cost[static_cast<std::size_t>(b - (j - 1))] + fe[static_cast<std::size_t>(j - 1)]);
        }
      }
      cost = std::move(next);
    }
    least = std::min(least, host[d][static_cast<std::size_t>(k - 1)] +
                                *std::min_element(cost.begin(), cost.end()));
  }
  return least;
}

}  // namespace

// Two all-reduce dims d and e whose two-host trees cannot chain (docs/mapper.md, "Lower bound",
// "Tree chains"). Without NVLink domains, a rank alone in its d-group on its host is either on a
// ring, and then time_d >= fr_d(1) (the ring floor of one member on a host), or in a two-host
// tree whose other host, its partner, holds the group's other n_d - 1 members. Those lie in
// n_d - 1 distinct e-groups, and each of the partner's other slots is an e-peer of at most one
// of them, so at least 2 (n_d - 1) - c of them are alone in their e-group there; and so on with
// d and e swapped. A host is partner to one group at most: it cannot hold n_d - 1 of two d-groups
// (2 (n_d - 1) > kmax) nor n_d - 1 of a d-group and n_e - 1 of an e-group, which share at most
// one rank (n_d + n_e - 3 > kmax). So were both dims faster than their one-member ring floors, a
// lone rank on a host too small to be a partner (fewer than n - 1 slots for both dims) would
// start a chain of trees whose partners never repeat (the first repeat would need an earlier
// one, or the start host as a partner), which no finite step holds: one of the two dims takes at
// least its floor. A host of 1, 2, 3 or 5 slots holds a rank alone in d or in e (every rank with
// a d-peer and an e-peer needs, in each plane of d x e, lines of two or more both ways: 4, 6 or
// more ranks). The bound is the least of the walk with either floor imposed.
double tree_chain_bound(const Traffic& traffic, const BoundMachine& summary, const Floors& by_host,
                        const Floors& by_host_ring, const Floors& by_island, bool full,
                        const Walk& walk) {
  if (!full || summary.has_domains) return 0;
  const std::vector<std::size_t> radix = radix_dims(traffic);
  if (radix.empty()) return 0;
  std::vector<std::size_t> trees;  // all-reduce dims whose partners hold no two groups
  for (std::size_t d : radix) {
    const DimTraffic& dt = traffic.dims[d];
    if (dt.all_reduce && dt.pattern == Pattern::kRing && dt.bytes > 0 &&
        2 * (dt.size - 1LL) > summary.kmax) {
      trees.push_back(d);
    }
  }
  double best = 0;
  for (std::size_t i = 0; i < trees.size(); ++i) {
    for (std::size_t j = i + 1; j < trees.size(); ++j) {
      const std::size_t d = trees[i], e = trees[j];
      const long long n = std::min(traffic.dims[d].size, traffic.dims[e].size);
      const bool start =
          std::any_of(summary.host_slots.begin(), summary.host_slots.end(), [&](long long c) {
            return (c == 1 || c == 2 || c == 3 || c == 5) && c < n - 1;  // a lone rank, no partner
          });
      if (!start || traffic.dims[d].size + traffic.dims[e].size - 3LL <= summary.kmax) continue;
      double least = std::numeric_limits<double>::infinity();
      for (std::size_t x : {d, e}) {  // x takes at least its one-member ring floor
        auto host = by_host, ring = by_host_ring, island = by_island;
        const double floor = by_host_ring[x][0];
        for (auto* v : {&host[x], &ring[x], &island[x]}) {
          for (double& y : *v) y = std::max(y, floor);
        }
        least = std::min(least, walk(host, ring, island));
      }
      best = std::max(best, least);
    }
  }
  return best;
}

// Trees in the crossing term. joint_crossing_bound() credits every cut all-reduce group with the
// hop of a two-node tree (S, not V) wherever the group's size allows one, while its walk may keep
// the other dims whole on their hosts: it never sees that a tree costs the other dims. Split the
// placements by which tree dims T (all-reduce rings of 3 to 2 kmax members) run some group as a
// two-node tree, without NVLink domains (nodes are hosts) and with every slot holding a rank:
// - d not in T: every d-group off one host spans three hosts or more and is a ring, so its floors
//   are the ring's (fr) and each group a place cuts sends V out of it;
// - d in T: one d-group lies on two hosts. The one holding at least ceil(n_d / 2) of it holds
//   that many distinct e-groups of every other dim e (the members differ in d alone) on at most
//   kmax slots, so some rank there has at most kmax / ceil(n_d / 2) e-peers on its host: time_e
//   >= the least floor of e up to that count. The other host holds at most n_d / 2 of the
//   group: time_d >= the least floor of d up to that count.
// Every placement falls in one case, so the least over cases of (walk, joint crossing term under
// the case's floors) is a bound.
double tree_case_bound(const Machine& machine, const Traffic& traffic, const BoundMachine& summary,
                       const Floors& by_host, const Floors& by_host_ring, const Floors& by_island,
                       const std::vector<long long>& sizes, bool full,
                       const std::vector<CutSets>& cuts, const Walk& walk) {
  if (!full || summary.has_domains) return 0;
  const std::vector<std::size_t> radix = radix_dims(traffic);
  std::vector<std::size_t> trees;
  for (std::size_t d : radix) {
    const DimTraffic& dt = traffic.dims[d];
    if (dt.all_reduce && dt.pattern == Pattern::kRing && dt.bytes > 0 && dt.size >= 3 &&
        dt.size <= 2 * summary.kmax) {
      trees.push_back(d);
    }
  }
  constexpr std::size_t kMostTreeDims = 4;  // 2^4 cases
  if (trees.empty() || trees.size() > kMostTreeDims) return 0;
  // The least of `v` over counts 1..j.
  auto least_up_to = [](const std::vector<double>& v, long long j) {
    return prefix_min(v)[static_cast<std::size_t>(std::clamp<long long>(j, 1, std::ssize(v)) - 1)];
  };
  double least = std::numeric_limits<double>::infinity();
  for (unsigned mask = 0; mask < (1u << trees.size()); ++mask) {
    Floors host = by_host, ring = by_host_ring, island = by_island;
    std::vector<bool> rings(traffic.dims.size(), false);
    for (std::size_t i = 0; i < trees.size(); ++i) {
      if (mask & (1u << i)) continue;
      const std::size_t d = trees[i];
      rings[d] = true;
      host[d] = by_host_ring[d];
      for (std::size_t k = 0; k < island[d].size() && k < by_host_ring[d].size(); ++k) {
        island[d][k] = std::max(island[d][k], by_host_ring[d][k]);  // islands are hosts here
      }
    }
    std::vector<double> at_least(traffic.dims.size(), 0.0);
    for (std::size_t i = 0; i < trees.size(); ++i) {
      if (!(mask & (1u << i))) continue;
      const std::size_t d = trees[i];
      const long long n = traffic.dims[d].size;
      at_least[d] = std::max(at_least[d], least_up_to(host[d], n / 2));
      const long long peers = summary.kmax / ((n + 1) / 2);
      for (std::size_t e : radix) {
        if (e != d) at_least[e] = std::max(at_least[e], least_up_to(host[e], peers));
      }
    }
    for (std::size_t d = 0; d < traffic.dims.size(); ++d) {
      for (auto* v : {&host[d], &ring[d], &island[d]}) {
        for (double& y : *v) y = std::max(y, at_least[d]);
      }
    }
    // The walk, and from a member of each tree dim's two-node tree its peers' floors.
    auto walk_case = [&](const Floors& h, const Floors& r, const Floors& i) {
      double v = walk(h, r, i);
      for (std::size_t j = 0; j < trees.size(); ++j) {
        if (!(mask & (1u << j))) continue;
        const long long n = sizes[trees[j]];
        v = std::max(
            v, member_peers_floor(h, sizes, radix, trees[j], summary.kmax, (n + 1) / 2, n - 1));
      }
      return v;
    };
    double v =
        std::max(walk_case(host, ring, island),
                 joint_crossing_bound(machine, traffic, host, island, sizes, summary.host_slots,
                                      summary.island_slots, summary.island_kmax, rings));
    if (v < least) {  // the whole cuts can only raise it
      v = std::max(v, cut_case_bound(machine, traffic, summary, host, ring, island, rings, cuts, v,
                                     walk_case));
    }
    least = std::min(least, v);
  }
  return least;
}

// Hashed hops (ECMP). The crossing term prices an ECMP uplink at the most flows its place could
// send, but a ring's hop leaves a node as one flow per member of its group there: cutting hops
// finely takes many members of one group on a host, and their ranks then have few peers of the
// other dims there. Split the placements, without NVLink domains (nodes are hosts), by kappa_d,
// the most members of one d-group on any host, for each ring dim, in ranges [lo, hi]:
// - no rank has more than hi, so the floors above hi never apply, and a flow of d carries at
//   least its hop / (hi x pieces) (cross_setup()'s `members`); where 2 hi < n no two
//   hosts hold a group, so d runs no group as a two-node tree: its floors are the ring's and
//   each group a place cuts sends V out (`rings`);
// - some rank has m_d in [lo, hi]: time_d >= the least floor of d there, and the rank has at
//   most kmax / lo peers of each other dim e on its host (prod m <= c), so time_e >= the least
//   floor of e up to that count.
// Every placement falls in one case, so the least over cases of (walk, joint crossing term, whole
// cuts, under the case's floors) is a bound.
double ecmp_case_bound(const Machine& machine, const Traffic& traffic, const BoundMachine& summary,
                       const Floors& by_host, const Floors& by_host_ring, const Floors& by_island,
                       const std::vector<long long>& sizes, const std::vector<CutSets>& cuts,
                       const Walk& walk) {
  if (summary.has_domains || std::none_of(machine.levels.begin(), machine.levels.end(),
                                          [](const NetLevel& l) { return l.ecmp; })) {
    return 0;
  }
  CrossSetup setup;
  if (!cross_setup(machine, traffic, summary.host_slots, summary.island_kmax, {}, &setup)) return 0;
  const bool hashed = std::any_of(setup.tiers.begin(), setup.tiers.end(), [](const CrossTier& x) {
    return std::any_of(x.links.begin(), x.links.end(), [](std::uint32_t l) { return l > 1; });
  });
  if (!hashed) return 0;
  struct Range {
    long long lo, hi;
  };
  std::vector<std::size_t> split;          // ring dims
  std::vector<std::vector<Range>> ranges;  // theirs: 1, 2, 3-4, 5-8, ... up to min(n, kmax)
  std::size_t cases = 1;
  for (std::size_t i : setup.live) {
    const std::size_t d = setup.radix[i];
    const long long top = std::min<long long>(traffic.dims[d].size, summary.kmax);
    if (traffic.dims[d].pattern != Pattern::kRing || top < 2) continue;
    std::vector<Range> r{{1, 1}};
    for (long long hi = 2; r.back().hi < top; hi *= 2) r.push_back({hi / 2 + 1, std::min(hi, top)});
    cases *= r.size();
    split.push_back(d);
    ranges.push_back(std::move(r));
  }
  constexpr std::size_t kMostCases = 64;
  if (split.empty() || cases > kMostCases) return 0;
  constexpr double kNever = 1e9;  // seconds: a floor for counts no rank has
  std::vector<long long> members(traffic.dims.size());
  for (std::size_t d = 0; d < traffic.dims.size(); ++d) {
    members[d] = std::min<long long>(traffic.dims[d].size, summary.kmax);
  }
  const std::vector<std::size_t>& radix = setup.radix;
  // Each case's search for theta starts where the search over every placement ended.
  std::vector<double> start;
  joint_crossing_bound(machine, traffic, by_host, by_island, sizes, summary.host_slots,
                       summary.island_slots, summary.island_kmax, {}, {}, &start);
  double least = std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c < cases; ++c) {
    Floors host = by_host, ring = by_host_ring, island = by_island;
    std::vector<double> at_least(traffic.dims.size(), 0.0);
    std::vector<bool> rings(traffic.dims.size(), false);
    std::vector<Range> in(split.size());
    for (std::size_t j = 0, rest = c; j < split.size(); ++j) {
      in[j] = ranges[j][rest % ranges[j].size()];
      rest /= ranges[j].size();
      const std::size_t d = split[j];
      members[d] = in[j].hi;
      if (2 * in[j].hi < traffic.dims[d].size) {  // no two hosts hold a group: rings, never trees
        rings[d] = true;
        host[d] = by_host_ring[d];
        for (std::size_t k = 0; k < island[d].size() && k < by_host_ring[d].size(); ++k) {
          island[d][k] = std::max(island[d][k], by_host_ring[d][k]);  // islands are hosts here
        }
      }
      for (auto* v : {&host[d], &ring[d], &island[d]}) {
        for (std::size_t k = static_cast<std::size_t>(in[j].hi); k < v->size(); ++k) {
          (*v)[k] = kNever;
        }
      }
    }
    for (std::size_t j = 0; j < split.size(); ++j) {
      const std::size_t d = split[j];
      double here = std::numeric_limits<double>::infinity();
      for (long long k = in[j].lo; k <= in[j].hi; ++k) here = std::min(here, host[d][k - 1]);
      at_least[d] = std::max(at_least[d], here);
      const long long peers = summary.kmax / in[j].lo;
      for (std::size_t e : radix) {
        if (e == d) continue;
        const auto top = static_cast<std::size_t>(std::min<long long>(peers, std::ssize(host[e])));
        at_least[e] = std::max(at_least[e], prefix_min(host[e])[top - 1]);
      }
    }
    for (std::size_t d = 0; d < traffic.dims.size(); ++d) {
      for (auto* v : {&host[d], &ring[d], &island[d]}) {
        for (double& y : *v) y = std::max(y, at_least[d]);
      }
    }
    // The walk, and from the most members of a group on one host their peers' floors.
    auto walk_case = [&](const Floors& h, const Floors& r, const Floors& i) {
      double v = walk(h, r, i);
      for (std::size_t j = 0; j < split.size(); ++j) {
        v = std::max(
            v, member_peers_floor(h, sizes, radix, split[j], summary.kmax, in[j].lo, in[j].hi));
      }
      return v;
    };
    std::vector<double> seed = start;
    double v = std::max(
        walk_case(host, ring, island),
        joint_crossing_bound(machine, traffic, host, island, sizes, summary.host_slots,
                             summary.island_slots, summary.island_kmax, rings, members, &seed));
    if (v < least) {  // the whole cuts can only raise it
      v = std::max(v, cut_case_bound(machine, traffic, summary, host, ring, island, rings, cuts, v,
                                     walk_case, members));
    }
    least = std::min(least, v);
  }
  return least;
}

}  // namespace topoaware::mapper::internal
