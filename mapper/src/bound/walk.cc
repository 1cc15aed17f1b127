// The walk (docs/mapper.md, "Lower bound", Walk): on a place of c slots, the fewest members of
// each dim's group that a rank there finds multiply to at most c, so the dims' floors at those
// counts add up to a bound; least_sum_trees() lets an all-reduce's floor be a two-node tree's.
#include <algorithm>
#include <bitset>
#include <cstddef>
#include <functional>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "bound/bound.h"

namespace topoaware::mapper::internal {

namespace {

// Whether a place can have m as the fewest members of a dim's group (of n) that a rank on it
// finds there, and what its lines cost: the dim's groups cut the place's ranks into lines, one of
// m and the others of m to n each, so the rest, `ranks` - m, is a sum of such counts. The ranks
// counted are those of the place's quotient by the dims it holds whole (c over their sizes'
// product): the lines there have the same counts. A line of j members holds ranks with j members
// of their group on the place, so the dim takes at least floors[j-1] (the dim's floors for the
// place's kind). Returns the least, over the ways to cut the rest into lines, of the largest
// floor among all lines, floors[m-1] included, or -1 where no way exists: a place of 9 ranks in the
// quotient cuts tp=4 into lines of 2 and more only with one of 3.
double place_lines_floor(const std::vector<double>& floors, long long ranks, long long m,
                         long long n) {
  const double own = floors[static_cast<std::size_t>(m - 1)];
  if (m >= n) return own;
  const long long rest = ranks - m;
  if (rest < 0) return -1;
  if (rest % m == 0) return own;  // lines of m alone (or none)
  const long long top = std::min({n, static_cast<long long>(floors.size()), rest});
  bool dearer = false;  // some count's floor above the fewest's
  for (long long j = m + 1; j <= top && !dearer; ++j) {
    dearer = floors[static_cast<std::size_t>(j - 1)] > own;
  }
  const bool fit = (rest + top - 1) / top <= rest / m;  // t lines of m..top: t m <= rest <= t top
  if (!fit) return -1;
  // Past a set of 256 sums the count alone decides: a weaker floor, never a wrong one (the walks'
  // places hold at most 128 slots, islands aside).
  if (!dearer || rest >= 256) return own;
  // Whether lines of the counts whose floor is at most v make up the rest: every multiple of
  // each count, by doubling shifts of the set of sums.
  auto make_up = [&](double v) {
    std::bitset<256> reach;
    reach[0] = true;
    for (long long j = m; j <= top; ++j) {
      if (floors[static_cast<std::size_t>(j - 1)] > v) continue;
      for (long long step = j; step <= rest; step *= 2) {
        reach |= reach << static_cast<std::size_t>(step);
      }
    }
    return static_cast<bool>(reach[static_cast<std::size_t>(rest)]);
  };
  if (make_up(own)) return own;  // no line need cost more than the fewest's
  // The least v that makes it up is one of the counts' floors above `own`.
  double best = std::numeric_limits<double>::infinity();
  for (long long j = m; j <= top; ++j) {
    const double v = floors[static_cast<std::size_t>(j - 1)];
    if (v > own && v < best && make_up(v)) best = v;
  }
  return best;
}

// The least sum_d f_d(m_d) over vectors with 1 <= m_d <= |f_d| and prod_d m_d <= c, where, when
// the place's c slots all hold ranks (`full`), the dims with m_d = n_d (the whole group on the
// place) have a product of sizes dividing c and each m_d fits the place's lines, each dim then
// taking the larger of f_d(m_d) and its other lines' floor (place_lines_floor; the walk
// argument in docs/mapper.md). Dims whose f is a single zero constrain nothing.
double least_sum(const Floors& floors, const std::vector<long long>& n, long long c, bool full) {
  std::vector<std::size_t> live;
  for (std::size_t d = 0; d < floors.size(); ++d) {
    if (floors[d].size() > 1 || (floors[d].size() == 1 && floors[d][0] > 0)) live.push_back(d);
  }
  if (live.empty()) return 0;
  c = std::max(1LL, c);
  double best = std::numeric_limits<double>::infinity();
  std::vector<long long> pick(live.size(), 1);
  auto search = [&](auto&& self, std::size_t i, long long room, long long whole,
                    double sum) -> void {
    if (sum >= best) return;
    if (i == live.size()) {
      double total = sum;
      for (std::size_t j = 0; full && j < live.size(); ++j) {
        const auto& fj = floors[live[j]];
        const double lines = place_lines_floor(fj, c / whole, pick[j], n[live[j]]);
        if (lines < 0) return;
        total += lines - fj[static_cast<std::size_t>(pick[j] - 1)];
      }
      best = std::min(best, total);
      return;
    }
    const auto& fd = floors[live[i]];
    const long long nd = n[live[i]];
    for (long long k = 1; k <= room && k <= static_cast<long long>(fd.size()); ++k) {
      long long w = whole;
      if (k == nd) {
        w *= nd;
        if (full && c % w != 0) continue;  // a place closed under these holds a multiple of w
      }
      pick[i] = k;
      self(self, i + 1, room / k, w, sum + fd[static_cast<std::size_t>(k - 1)]);
    }
  };
  search(search, 0, c, 1, 0.0);
  return best;
}

}  // namespace

// Middle stages (docs/mapper.md, "Lower bound", middle stages). The walk speaks for a rank of
// each dim that it cannot choose, so a pipeline's floor is an end stage's (one neighbour). A
// pipeline of n >= 3 stages has W (n - 2) / n ranks in middle stages, each receiving from two
// neighbours. Walked pipeline first from a middle-stage rank of the place, the product argument
// holds with the pipeline's m the fewest over the place's middle-stage ranks alone: the bound
// then takes the middle stage's floors, on any place that holds a middle stage. With `value(c)`
// that bound on places of c slots (`slots`: every place's count), the largest value v such that
// the places whose value is below v hold fewer slots than there are middle-stage ranks: some
// middle stage sits on a place of value >= v.
double middle_stage_bound(const std::vector<long long>& slots, long long middle,
                          const std::function<double(long long)>& value) {
  std::map<long long, long long> held;  // slots in the places of each size
  for (long long c : slots) {
    if (c > 0) held[c] += c;
  }
  std::vector<std::pair<double, long long>> by_size;
  for (const auto& [c, n] : held) by_size.emplace_back(value(c), n);
  std::sort(by_size.begin(), by_size.end());
  double best = 0;
  long long below = 0;  // slots of the places of smaller value (or equal: the same v then)
  for (const auto& [v, n] : by_size) {
    if (below >= middle) break;
    best = v;
    below += n;
  }
  return best;
}

// least_sum where an all-reduce's floor at k members may be a two-node tree's (any[d], below
// ring[d]): then the group's other host P holds its other n - k members, which lie in n - k
// distinct groups of every other dim e (they differ in d's coordinate), so some rank of P has at
// most kmax / (n - k) e-peers on P and time_e >= g_e(n - k) = the least f_e up to there. The
// search takes, per all-reduce dim, the ring's floor or the tree's with those floors on the
// others (docs/mapper.md, "Lower bound", two-node trees). `partners`: whether a tree's other
// node is one place of the walk's kind (a host; or an island, with island floors and kmax).
// Walking hosts with NVLink domains, it may be a clique of several hosts, whose members of the
// group need not be crowded on one host, and the partner floors are left out there.
//
// `loose`: a dim whose m is not the fewest over the place's ranks but over some of them (a
// pipeline's middle stages, middle_stage_bound()): it counts in the product, but its lines need
// not fit and it never closes the place.
double least_sum_trees(const Floors& ring, const Floors& any, const std::vector<long long>& n,
                       long long c, long long kmax, bool partners, bool full,
                       const Floors* host_any, std::size_t loose) {
  std::vector<std::size_t> live;
  for (std::size_t d = 0; d < any.size(); ++d) {
    if (any[d].size() > 1 || (any[d].size() == 1 && any[d][0] > 0)) live.push_back(d);
  }
  if (live.empty()) return 0;
  c = std::max(1LL, c);
  // g[e][q]: the least floor of dim e with at most kmax / q members on a host (`host_any`: the
  // host floors, where the place is larger than a host).
  const auto& partner_floors = host_any ? *host_any : any;
  auto partner_floor = [&](std::size_t e, long long q) {
    const long long most =
        std::min<long long>(static_cast<long long>(partner_floors[e].size()), kmax / q);
    double v = std::numeric_limits<double>::infinity();
    for (long long j = 1; j <= most; ++j)
      v = std::min(v, partner_floors[e][static_cast<std::size_t>(j - 1)]);
    return most >= 1 ? v : 0.0;
  };
  double best = std::numeric_limits<double>::infinity();
  std::vector<double> val(any.size(), 0.0), clamp(any.size(), 0.0);
  std::vector<std::pair<std::size_t, long long>> trees;  // (dim, n - k) of tree choices
  std::vector<long long> pick(any.size(), 1);
  auto finish = [&](long long whole) {
    std::fill(clamp.begin(), clamp.end(), 0.0);
    for (std::size_t e : live) {  // the place's other lines, at their least floors (any)
      if (!full || e == loose) continue;
      const double lines = place_lines_floor(any[e], c / whole, pick[e], n[e]);
      if (lines < 0) return;
      clamp[e] = lines;
    }
    for (const auto& [d, q] : trees) {
      for (std::size_t e : live) {
        if (partners && e != d) clamp[e] = std::max(clamp[e], partner_floor(e, q));
      }
    }
    double sum = 0;
    for (std::size_t e : live) sum += std::max(val[e], clamp[e]);
    best = std::min(best, sum);
  };
  auto search = [&](auto&& self, std::size_t i, long long room, long long whole,
                    double partial) -> void {
    if (partial >= best) return;
    if (i == live.size()) {
      finish(whole);
      return;
    }
    const std::size_t d = live[i];
    const auto& any_floors = any[d];
    const auto& ring_floors = ring[d];
    const long long nd = n[d];
    for (long long k = 1; k <= room && k <= static_cast<long long>(any_floors.size()); ++k) {
      long long w = whole;
      if (k == nd && d != loose) {
        w *= nd;
        if (full && c % w != 0) continue;  // a place closed under these holds a multiple of w
      }
      const auto at = static_cast<std::size_t>(k - 1);
      const double ring_value = at < ring_floors.size() ? ring_floors[at] : any_floors[at];
      pick[d] = k;
      val[d] = ring_value;
      self(self, i + 1, room / k, w, partial + ring_value);
      // A two-node tree is cheaper, with its partner's floors.
      if (any_floors[at] < ring_value && k < nd) {
        val[d] = any_floors[at];
        trees.emplace_back(d, nd - k);
        self(self, i + 1, room / k, w, partial + any_floors[at]);
        trees.pop_back();
      }
    }
  };
  search(search, 0, c, 1, 0.0);
  return best;
}

// The distinct non-zero place sizes among `slots`, the smallest `max_sizes` of them.
std::vector<long long> place_sizes(std::vector<long long> slots, std::size_t max_sizes) {
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  slots.erase(std::remove(slots.begin(), slots.end(), 0LL), slots.end());
  if (slots.size() > max_sizes) slots.resize(max_sizes);
  return slots;
}

// The largest least_sum over places of the given slot counts (each place gives a true bound;
// the divisibility condition makes the smallest place not always the best). At most
// `max_sizes` distinct sizes, the smallest, keep it cheap.
double least_sum_over(const Floors& floors, const std::vector<long long>& n,
                      const std::vector<long long>& slots, std::size_t max_sizes, bool full) {
  double best = 0;
  for (long long c : place_sizes(slots, max_sizes))
    best = std::max(best, least_sum(floors, n, c, full));
  return best;
}

}  // namespace topoaware::mapper::internal
