// Starts for steps with NVLink domains (search.h): blocks of hosts over at most two domains,
// and pipeline stages split over two domains by rows and columns (docs/mapper.md, "Algorithms").
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "routing.h"
#include "search.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::internal {

// The step's slots, host by host, with the hosts cut into blocks of R that each lie in at
// most two NCCL nodes (NVLink domains), the smallest part of any block as large as can be: a
// group with one member on each of a block's hosts, on a part of q of them, has R - q of its R
// members off its node, and an all-to-all's time follows the largest such count. Steps with
// NVLink domains and whole hosts of one slot count only; else empty. Worked by hand in
// docs/results/2026-12-06-mapper-bench.md (nvl72).
std::vector<std::uint32_t> Mapper::domain_blocks(long long R) const {
  const Machine& m = in_.machine;
  if (R < 2 || std::none_of(m.domain_of_host.begin(), m.domain_of_host.end(),
                            [](int d) { return d >= 0; })) {
    return {};
  }
  if (slots_per_host() == 0) return {};
  std::vector<std::vector<std::uint32_t>> nodes;
  long long hosts = 0;
  for (auto& [node, hs] : hosts_by_node()) {
    hosts += static_cast<long long>(hs.size());
    nodes.push_back(std::move(hs));
  }
  if (hosts % R != 0 || nodes.size() > 64) return {};
  // Parts per node: (node, size). A search per least part t, from R/2 down: each node's
  // hosts are whole blocks and parts of t..R-t, each part completed by one other node's.
  std::vector<long long> left(nodes.size());
  for (std::size_t n = 0; n < nodes.size(); ++n) left[n] = static_cast<long long>(nodes[n].size());
  std::vector<std::array<std::pair<std::size_t, long long>, 2>> blocks;
  long long steps = 0;
  auto solve = [&](auto&& self, long long t) -> bool {
    if (++steps > 20000) return false;
    std::size_t n = 0;
    while (n < left.size() && left[n] == 0) ++n;
    if (n == left.size()) return true;
    if (left[n] >= R) {  // a whole block first
      left[n] -= R;
      blocks.push_back({std::pair{n, R}, std::pair{n, 0LL}});
      if (self(self, t)) return true;
      blocks.pop_back();
      left[n] += R;
    }
    // Node n's first part p, completed by R - p of a later node with that many left.
    for (long long p = std::min(left[n], R - t); p >= t; --p) {
      for (std::size_t o = n + 1; o < left.size(); ++o) {
        if (left[o] < R - p) continue;
        left[n] -= p;
        left[o] -= R - p;
        blocks.push_back({std::pair{n, p}, std::pair{o, R - p}});
        if (self(self, t)) return true;
        blocks.pop_back();
        left[n] += p;
        left[o] += R - p;
      }
    }
    return false;
  };
  bool found = false;
  for (long long t = R / 2; t >= 1 && !found; --t) {
    blocks.clear();
    steps = 0;
    found = solve(solve, t);
  }
  if (!found) return {};
  std::vector<std::size_t> next(nodes.size(), 0);
  std::vector<std::uint32_t> seq;
  for (const auto& b : blocks) {
    for (const auto& [n, k] : b) {
      for (long long j = 0; j < k; ++j) {
        const auto& sl = slots_of_host_[nodes[n][next[n]++]];
        seq.insert(seq.end(), sl.begin(), sl.end());
      }
    }
  }
  return seq;
}

// Columns kept in two NVLink domains where rows must cross them. In a stage grid (stage_grid)
// whose hosts each hold k slots, k dividing C, a row spans C/k hosts and a column lies in the
// R hosts holding its share of every row: a block. Each column's group is then a tree or
// ring over the NCCL nodes of its block. Where domains leave lone hosts, some rows cross
// domains anyway (the dim's time is its slowest group's), and filling domains in turn leaves
// blocks over three or more domains: rings whose lone members send V. Instead cut the hosts
// into blocks of R over at most two domains each: whole blocks inside a domain first, then
// each remainder (largest first) completed from one other domain (an exact fit first, else
// the smallest that can). A stage takes C/k consecutive blocks (a domain's whole blocks come
// in turn, so a stage of them keeps its rows inside it). Empty where it does not apply. Worked by
// hand in docs/results/2026-12-06-mapper-bench.md (nvl72).
Assignment Mapper::column_blocks() const {
  const Traffic& t = in_.traffic;
  long long C = 0, R = 0, U = 0;
  if (!stage_grid(&C, &R, &U) || slots_of_host_.empty()) return {};
  const long long k = slots_per_host();
  if (k == 0 || C % k != 0) return {};
  const long long per_stage = C / k;  // blocks a stage takes
  const auto hosts = static_cast<long long>(slots_of_host_.size());
  if (hosts != (t.world / U) * per_stage * R) return {};
  std::map<std::uint32_t, std::vector<std::uint32_t>> free = hosts_by_node();
  std::vector<std::vector<std::uint32_t>> blocks;
  auto take = [&](std::vector<std::uint32_t>& from, long long n, std::vector<std::uint32_t>& to) {
    to.insert(to.end(), from.end() - n, from.end());
    from.resize(from.size() - static_cast<std::size_t>(n));
  };
  for (auto& [node, hs] : free) {
    while (static_cast<long long>(hs.size()) >= R) take(hs, R, blocks.emplace_back());
  }
  bool mixed = false;
  for (;;) {
    // The largest remainder, completed from one other node.
    std::vector<std::uint32_t>* big = nullptr;
    for (auto& [node, hs] : free) {
      if (!hs.empty() && (!big || hs.size() > big->size())) big = &hs;
    }
    if (!big) break;
    const auto need = R - static_cast<long long>(big->size());
    std::vector<std::uint32_t>* fit = nullptr;
    auto rank = [&](const std::vector<std::uint32_t>& hs) {  // exact fits first, then smallest
      const auto have = static_cast<long long>(hs.size());
      return std::pair<bool, long long>(have != need, have);
    };
    for (auto& [node, hs] : free) {
      if (&hs == big || static_cast<long long>(hs.size()) < need) continue;
      if (!fit || rank(hs) < rank(*fit)) fit = &hs;
    }
    if (!fit) return {};  // no two domains complete it: blocks over three or more
    std::vector<std::uint32_t>& b = blocks.emplace_back();
    take(*big, static_cast<long long>(big->size()), b);
    take(*fit, need, b);
    mixed = true;
  }
  if (!mixed) return {};  // every block inside one domain: block order does as well
  Assignment a(static_cast<std::size_t>(t.world));
  for (long long r = 0; r < t.world; ++r) {
    const long long stage = r / U, row = (r % U) / C, col = r % C;
    const auto& block = blocks[static_cast<std::size_t>(stage * per_stage + col / k)];
    a[static_cast<std::size_t>(r)] =
        slots_of_host_[block[static_cast<std::size_t>(row)]][static_cast<std::size_t>(col % k)];
  }
  return a;
}

// Stages split over two NVLink domains, by rows and columns. Where the outermost dim's groups
// (pipeline stages) are an R x C grid of two dims (rows: groups of the innermost, of C; columns:
// the groups of the other, of R) and a stage's slots lie in two NCCL nodes, x in one, an order
// that fills the nodes in turn splits the stage by whole rows, so every column crosses with a
// lone member or a few. Instead pick the x cells so that every row is whole or C/2 + C/2 and
// every column whole or R/2 + R/2: both dims' crossing groups are two-node trees of even halves
// (docs/results/2026-12-06-mapper-bench.md, nvl72). Returns `a` with such stages rearranged, or
// nothing. Called only where the step has NVLink domains (else every node is a host).
Assignment Mapper::split_stages(Assignment a) const {
  const Machine& m = in_.machine;
  const Traffic& t = in_.traffic;
  long long C = 0, R = 0, U = 0;
  if (a.empty() || !stage_grid(&C, &R, &U)) return {};
  bool changed = false;
  for (long long s = 0; s * U < t.world; ++s) {
    const long long base = s * U;
    std::map<std::uint32_t, std::vector<std::uint32_t>> slots_in;  // node -> the stage's slots
    for (long long r = base; r < base + U; ++r) {
      const std::uint32_t slot = a[static_cast<std::size_t>(r)];
      slots_in[internal::nccl_node(m, m.slots[slot].host)].push_back(slot);
    }
    if (slots_in.size() != 2) continue;
    const auto x = static_cast<long long>(slots_in.begin()->second.size());
    const std::vector<bool> cells = even_halves(R, C, x);
    if (cells.empty()) continue;
    std::vector<std::uint32_t>& in_x = slots_in.begin()->second;
    std::vector<std::uint32_t>& in_y = std::next(slots_in.begin())->second;
    std::size_t ix = 0, iy = 0;
    for (long long cell = 0; cell < U; ++cell) {
      a[static_cast<std::size_t>(base + cell)] =
          cells[static_cast<std::size_t>(cell)] ? in_x[ix++] : in_y[iy++];
    }
    changed = true;
  }
  return changed ? a : Assignment{};
}

// Ranks in order over the NCCL nodes taken in the order (of at most 8 nodes) that leaves the
// fewest pipeline stages unable to split by even halves (split_stages): on two nodes, with a
// count even_halves() can take, or whole. Empty where split_stages() does not apply.
Assignment Mapper::domains_in_turn() const {
  const Machine& m = in_.machine;
  const Traffic& t = in_.traffic;
  std::map<std::uint32_t, std::size_t> index;
  std::vector<std::vector<std::uint32_t>> node_slots;
  for (const auto& slots : slots_of_host_) {
    for (std::uint32_t slot : slots) {
      const std::uint32_t node = internal::nccl_node(m, m.slots[slot].host);
      auto [it, fresh] = index.emplace(node, node_slots.size());
      if (fresh) node_slots.emplace_back();
      node_slots[it->second].push_back(slot);
    }
  }
  constexpr std::size_t kMostNodes = 8;
  long long C = 0, R = 0, U = 0;
  if (!stage_grid(&C, &R, &U) || node_slots.size() < 2 || node_slots.size() > kMostNodes) {
    return {};
  }
  std::vector<int> can(static_cast<std::size_t>(U + 1), -1);  // even_halves(x) exists, by x
  auto splits = [&](long long x) {
    int& c = can[static_cast<std::size_t>(x)];
    if (c < 0) c = x == 0 || x == U || !even_halves(R, C, x).empty() ? 1 : 0;
    return c == 1;
  };
  std::vector<std::size_t> order(node_slots.size()), best;
  std::iota(order.begin(), order.end(), 0);
  long long best_bad = std::numeric_limits<long long>::max();
  do {
    long long bad = 0, at = 0;  // slots before the current node
    std::size_t k = 0;
    for (long long stage = 0; stage * U < t.world && bad < best_bad; ++stage) {
      // The nodes this stage's ranks [stage U, stage U + U) fall in.
      while (at + static_cast<long long>(node_slots[order[k]].size()) <= stage * U) {
        at += static_cast<long long>(node_slots[order[k++]].size());
      }
      const long long in_first =
          std::min(U, at + static_cast<long long>(node_slots[order[k]].size()) - stage * U);
      const bool two = in_first == U ||
                       (k + 1 < order.size() &&
                        U - in_first <= static_cast<long long>(node_slots[order[k + 1]].size()));
      bad += two && splits(in_first) ? 0 : 1;
    }
    if (bad < best_bad) {
      best_bad = bad;
      best = order;
    }
  } while (best_bad > 0 && std::next_permutation(order.begin(), order.end()));
  Assignment a;
  for (std::size_t n : best) a.insert(a.end(), node_slots[n].begin(), node_slots[n].end());
  return a;
}

// The step as pipeline stages of an R x C grid: exactly three dims of more than one member,
// the innermost (C, stride 1: rows), the next (R, stride C: columns), the outermost (stride
// U = R C), with C and R even.
bool Mapper::stage_grid(long long* C, long long* R, long long* U) const {
  const Traffic& t = in_.traffic;
  std::vector<const DimTraffic*> live;
  for (const DimTraffic& d : t.dims) {
    if (d.size > 1) live.push_back(&d);
  }
  if (live.size() != 3) return false;
  std::sort(live.begin(), live.end(),
            [](const DimTraffic* x, const DimTraffic* y) { return x->stride < y->stride; });
  *C = live[0]->size;
  *R = live[1]->size;
  *U = *C * *R;
  return live[0]->stride == 1 && live[1]->stride == *C && live[2]->stride == *U &&
         *U * live[2]->size == t.world && *C % 2 == 0 && *R % 2 == 0;
}

// x cells of an R x C grid (row-major: cell = row * C + column) with every row holding 0, C/2
// or C of them and every column 0, R/2 or R; empty when no such set exists. Rows with the
// larger demand take the columns with the most room left (Gale-Ryser's greedy order).
std::vector<bool> Mapper::even_halves(long long R, long long C, long long x) {
  for (long long full_rows = x / C; full_rows >= 0; --full_rows) {
    const long long rest = x - full_rows * C;
    if (rest % (C / 2) || full_rows + rest / (C / 2) > R) continue;
    const long long half_rows = rest / (C / 2);
    for (long long full_cols = x / R; full_cols >= 0; --full_cols) {
      const long long crest = x - full_cols * R;
      if (crest % (R / 2) || full_cols + crest / (R / 2) > C) continue;
      std::vector<long long> room(static_cast<std::size_t>(C), 0);
      for (long long c = 0; c < C; ++c) {
        room[static_cast<std::size_t>(c)] =
            c < full_cols ? R : (c < full_cols + crest / (R / 2) ? R / 2 : 0);
      }
      std::vector<bool> cells(static_cast<std::size_t>(R * C), false);
      bool ok = true;
      for (long long r = 0; r < full_rows + half_rows && ok; ++r) {
        const long long want = r < full_rows ? C : C / 2;
        std::vector<long long> order(static_cast<std::size_t>(C));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](long long p, long long q) {
          return room[static_cast<std::size_t>(p)] > room[static_cast<std::size_t>(q)];
        });
        for (long long k = 0; k < want; ++k) {
          const auto c = static_cast<std::size_t>(order[static_cast<std::size_t>(k)]);
          if (room[c] == 0) {
            ok = false;
            break;
          }
          --room[c];
          cells[static_cast<std::size_t>(r * C) + c] = true;
        }
      }
      if (ok && std::all_of(room.begin(), room.end(), [](long long v) { return v == 0; })) {
        return cells;
      }
    }
  }
  return {};
}

}  // namespace topoaware::mapper::internal
