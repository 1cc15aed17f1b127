// Host cuts (host_cuts.h): greedy cuts first, an exact search where they give up.
#include "host_cuts.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace topoaware::mapper::internal {

namespace {

// Every item's whole units first, then `bins` units of the leftovers with no piece under `p`
// (greedy: the largest leftover opens a unit, split if it leaves no room for a piece >= p; then
// an exact fit, else a split leaving both parts >= p, else the largest whole piece leaving room
// for another), then what is left.
// Empty when the greedy cannot.
std::optional<PieceCut> cut_units(const std::vector<long long>& count, long long unit, long long p,
                                  long long bins) {
  struct Left {
    std::size_t idx;
    long long n;
  };
  PieceCut cut;
  cut.smallest = unit;
  std::vector<Left> r;
  for (std::size_t i = 0; i < count.size(); ++i) {
    for (long long k = 0; k < count[i] / unit; ++k) cut.pieces.emplace_back(i, unit);
    if (count[i] % unit) r.push_back({i, count[i] % unit});
  }
  auto by_size = [](const Left& x, const Left& y) { return x.n > y.n; };
  std::stable_sort(r.begin(), r.end(), by_size);
  for (long long b = 0; b < bins; ++b) {
    auto first = std::find_if(r.begin(), r.end(), [](const Left& x) { return x.n > 0; });
    if (first == r.end() || first->n < p) return std::nullopt;
    // A leftover too large to leave room for a piece >= p gives up a piece >= p itself.
    const long long open = first->n <= unit - p ? first->n : std::min(first->n - p, unit - p);
    if (open < p) return std::nullopt;
    cut.pieces.emplace_back(first->idx, open);
    cut.smallest = std::min(cut.smallest, open);
    long long need = unit - open;
    first->n -= open;
    while (need > 0) {
      Left* pick = nullptr;
      long long take = 0;
      for (auto& x : r) {
        if (x.n == need) {
          pick = &x;
          take = need;
          break;
        }
      }
      if (!pick && need >= p) {
        for (auto& x : r) {
          if (x.n >= need + p && (!pick || x.n < pick->n)) pick = &x;
        }
        if (pick) take = need;
      }
      if (!pick) {
        for (auto& x : r) {
          if (x.n >= p && x.n <= need - p) {
            pick = &x;
            take = x.n;
            break;  // sorted by size: the largest
          }
        }
      }
      if (!pick) return std::nullopt;
      cut.pieces.emplace_back(pick->idx, take);
      cut.smallest = std::min(cut.smallest, take);
      pick->n -= take;
      need -= take;
    }
    std::stable_sort(r.begin(), r.end(), by_size);
  }
  for (const auto& x : r) {
    if (x.n > 0) cut.pieces.emplace_back(x.idx, x.n);
    cut.left += x.n;
  }
  return cut;
}

// cut_trees' search, complete and exact where the greedy gives up: every leftover cut into
// units of two pieces >= k2 (trees) or of more pieces >= kr (rings). A host's leftover may be
// split over several units, so a cut can chain through hosts (5 + 3 and 3 + 5 over a 6 cut
// 3 + 3) where the greedy runs out of partners. Depth first, the smallest leftover opening each
// unit (it has the fewest ways to complete one); leftovers of equal size are interchangeable, so
// a failed state is remembered by its counts per size. Gives up (empty) after `budget` units.
//
// `open`: a host holding whole units besides its leftover may give one of them up, so its
// leftover is one unit larger (a host lending 5 GPUs to TP4 cut 3 + 2 rather than 4 + 1).
std::optional<PieceCut> cut_trees_exact(const std::vector<long long>& count, long long unit,
                                        long long k2, long long kr, long long budget, bool open) {
  if (unit > kExactCutUnit || count.size() > 65535) return std::nullopt;
  PieceCut cut;
  cut.smallest = unit;
  std::vector<long long> left(count.size());
  const long long top = open ? 2 * unit : unit;                        // leftovers are below this
  std::vector<std::uint16_t> sizes(static_cast<std::size_t>(top), 0);  // leftovers per size
  long long total = 0;
  for (std::size_t i = 0; i < count.size(); ++i) {
    left[i] = count[i] % unit;
    if (open && left[i] > 0 && count[i] > unit) left[i] += unit;
    for (long long k = 0; k < (count[i] - left[i]) / unit; ++k) cut.pieces.emplace_back(i, unit);
    ++sizes[static_cast<std::size_t>(left[i])];
    total += left[i];
  }
  if (total % unit != 0) return std::nullopt;
  const long long least = std::min(k2, kr);  // no piece may be left smaller
  for (long long v = 1; v < least; ++v) {
    if (sizes[static_cast<std::size_t>(v)] > 0) return std::nullopt;
  }
  // A leftover of one under rings of two or more is a tree's piece, and its partner's unit - 1
  // can only be a leftover of unit - 1 taken whole.
  if (!open && k2 == 1 && kr > 1 && sizes[1] > sizes[static_cast<std::size_t>(unit - 1)]) {
    return std::nullopt;
  }
  std::set<std::vector<std::uint16_t>> failed;
  std::vector<std::pair<std::size_t, long long>> unit_pieces;  // the cut so far, in order
  auto fits = [&](long long rest) { return rest == 0 || rest >= least; };
  // An item with `size` left, not `not_a` nor already in the unit opened at `mark`.
  auto item_of = [&](long long size, std::size_t not_a, std::size_t mark) {
    for (std::size_t j = 0; j < left.size(); ++j) {
      if (left[j] != size || j == not_a) continue;
      bool used = false;
      for (std::size_t q = mark; q < unit_pieces.size(); ++q) used |= unit_pieces[q].first == j;
      if (!used) return j;
    }
    return left.size();
  };
  auto take = [&](std::size_t i, long long k) {
    unit_pieces.emplace_back(i, k);
    --sizes[static_cast<std::size_t>(left[i])];
    left[i] -= k;
    ++sizes[static_cast<std::size_t>(left[i])];
  };
  auto undo = [&](std::size_t n) {
    while (unit_pieces.size() > n) {
      const auto [i, k] = unit_pieces.back();
      --sizes[static_cast<std::size_t>(left[i])];
      left[i] += k;
      ++sizes[static_cast<std::size_t>(left[i])];
      unit_pieces.pop_back();
    }
  };
  auto search = [&](auto&& self) -> bool {
    // The smallest leftover first: it has the fewest ways to complete a unit.
    long long a = 1;
    while (a < top && sizes[static_cast<std::size_t>(a)] == 0) ++a;
    if (a == top) return true;
    if (--budget < 0) return false;
    std::vector<std::uint16_t> key(sizes.begin() + 1, sizes.end());
    if (failed.count(key)) return false;
    const std::size_t first = item_of(a, left.size(), unit_pieces.size());
    const std::size_t mark = unit_pieces.size();
    // A whole unit of an opened host.
    if (a >= unit && fits(a - unit)) {
      take(first, unit);
      if (self(self)) return true;
      undo(mark);
      if (budget < 0) return false;
    }
    // Trees: a piece f of the first leftover, its partner's unit - f from another.
    for (long long f = std::min(a, unit - k2); f >= k2; --f) {
      if (!fits(a - f)) continue;
      for (long long w = top - 1; w >= unit - f; --w) {
        if (!fits(w - (unit - f))) continue;
        const std::size_t j = item_of(w, first, mark);
        if (j == left.size()) continue;
        take(first, f);
        take(j, unit - f);
        if (self(self)) return true;
        undo(mark);
        if (budget < 0) return false;
      }
    }
    // Rings: a piece of the first leftover, then pieces >= kr of others until the unit is full
    // (each the whole of a leftover, or just what the unit still needs).
    auto fill = [&](auto&& again, long long need, int pieces) -> bool {
      if (need == 0) return pieces >= 3 && self(self);
      const std::size_t at = unit_pieces.size();
      for (long long w = top - 1; w >= kr; --w) {
        const std::size_t j = item_of(w, left.size(), mark);
        if (j == left.size()) continue;
        for (long long k : {std::min(w, need), need}) {
          if (k < kr || k > w || !fits(w - k) || (k < need && need - k < kr)) continue;
          take(j, k);
          if (again(again, need - k, pieces + 1)) return true;
          undo(at);
          if (budget < 0) return false;
          if (k == need) break;
        }
      }
      return false;
    };
    for (long long f = std::min(a, unit - 2 * kr); f >= kr; --f) {
      if (!fits(a - f)) continue;
      take(first, f);
      if (fill(fill, unit - f, 1)) return true;
      undo(mark);
      if (budget < 0) return false;
    }
    failed.insert(std::move(key));
    return false;
  };
  if (!search(search)) return std::nullopt;
  for (const auto& [i, k] : unit_pieces) {
    cut.pieces.emplace_back(i, k);
    cut.smallest = std::min(cut.smallest, k);
  }
  return cut;
}

}  // namespace

// Orders children (by slot count) so that those holding whole units come first, then partial
// ones in runs whose counts add up to a unit: fragmented hosts pair up (5 + 3 = 8).
std::vector<std::size_t> pack(const std::vector<long long>& count, long long unit) {
  std::vector<std::size_t> out, rest;
  for (std::size_t i = 0; i < count.size(); ++i) {
    (unit <= 1 || count[i] % unit == 0 ? out : rest).push_back(i);
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [&](auto a, auto b) { return count[a] % unit > count[b] % unit; });
  std::vector<bool> used(rest.size(), false);
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (used[i]) continue;
    used[i] = true;
    out.push_back(rest[i]);
    long long need = unit - count[rest[i]] % unit;
    while (need > 0) {
      std::size_t pick = rest.size();
      for (std::size_t j = i + 1; j < rest.size(); ++j) {
        if (!used[j] && count[rest[j]] % unit <= need) {
          pick = j;  // residues are sorted: the first that fits is the largest
          break;
        }
      }
      if (pick == rest.size()) break;
      used[pick] = true;
      out.push_back(rest[pick]);
      need -= count[rest[pick]] % unit;
    }
  }
  return out;
}

// `complete` (the top of the tree): every unit the counts hold, with the largest smallest piece
// the greedy finds. Else (inside a switch group): as many units as can be cut with no piece
// under `floor`, leaving the rest to combine one level up.
PieceCut cut_pieces(const std::vector<long long>& count, long long unit, long long floor,
                    bool complete) {
  long long total = 0;
  for (long long c : count) total += c % unit;
  const long long bins = total / unit;
  if (!complete) {
    for (long long b = bins; b > 0; --b) {
      if (auto c = cut_units(count, unit, floor, b)) return *c;
    }
    return *cut_units(count, unit, 1, 0);
  }
  for (long long p = unit / 2; p > 1; --p) {
    if (auto c = cut_units(count, unit, p, bins)) return *c;
  }
  return *cut_units(count, unit, 1, bins);  // p = 1 always fits
}

// Cutting for an all-reduce of `unit` ranks on hosts lending fewer: a unit of two pieces is a
// two-host NCCL tree, whose piece of k GPUs sends S/k through their NICs; a unit of more pieces
// is a ring, whose piece of k sends V/k = `ring` x S/k. `bins` units are cut (after every item's
// whole units), largest leftover first: two pieces of at least k2 where it can, else a ring of
// pieces of at least kr. Empty when the greedy cannot.
std::optional<PieceCut> cut_trees(const std::vector<long long>& count, long long unit, long long k2,
                                  long long kr, long long bins) {
  struct Left {
    std::size_t idx;
    long long n;
  };
  PieceCut cut;
  cut.smallest = unit;
  std::vector<Left> r;
  for (std::size_t i = 0; i < count.size(); ++i) {
    for (long long k = 0; k < count[i] / unit; ++k) cut.pieces.emplace_back(i, unit);
    if (count[i] % unit) r.push_back({i, count[i] % unit});
  }
  auto by_size = [](const Left& x, const Left& y) { return x.n > y.n; };
  auto take = [&](Left& x, long long k) {
    cut.pieces.emplace_back(x.idx, k);
    cut.smallest = std::min(cut.smallest, k);
    x.n -= k;
  };
  for (long long b = 0; b < bins; ++b) {
    std::stable_sort(r.begin(), r.end(), by_size);
    if (r.empty() || r.front().n <= 0) return std::nullopt;
    Left& first = r.front();
    const long long a = first.n;
    // First pieces to try, largest first: all of it when the rest fits one piece >= k2, else
    // parts that leave >= k2 behind. One with an exact partner wins (nothing split), else the
    // largest with a partner that can give the rest and keep k2.
    std::vector<long long> firsts;
    if (a <= unit - k2) firsts.push_back(a);
    for (long long f = std::min(unit - k2, a - k2); f >= k2; --f) firsts.push_back(f);
    Left* partner = nullptr;
    long long f_used = 0;
    for (long long f : firsts) {
      for (auto& x : r) {
        if (&x != &first && x.n == unit - f) {
          partner = &x;
          f_used = f;
          break;
        }
      }
      if (partner) break;
    }
    for (long long f : firsts) {
      if (partner) break;
      for (auto& x : r) {
        if (&x != &first && x.n >= unit - f + k2 && (!partner || x.n < partner->n)) partner = &x;
      }
      if (partner) f_used = f;
    }
    if (partner) {
      take(first, f_used);
      take(*partner, unit - f_used);
      continue;
    }
    // A ring: pieces of at least kr.
    if (a < kr || unit - a < kr) return std::nullopt;
    take(first, a);
    long long need = unit - a;
    while (need > 0) {
      Left* pick = nullptr;
      long long k = 0;
      for (auto& x : r) {
        if (x.n == need) {
          pick = &x;
          k = need;
          break;
        }
      }
      if (!pick) {
        for (auto& x : r) {
          if (x.n >= need + kr && (!pick || x.n < pick->n)) pick = &x;
        }
        if (pick) k = need;
      }
      if (!pick) {
        for (auto& x : r) {
          if (x.n >= kr && x.n <= need - kr && (!pick || x.n > pick->n)) pick = &x;
        }
        if (pick) k = pick->n;
      }
      if (!pick) return std::nullopt;
      take(*pick, k);
      need -= k;
    }
  }
  for (const auto& x : r) {
    if (x.n > 0) cut.pieces.emplace_back(x.idx, x.n);
    cut.left += x.n;
  }
  return cut;
}

// Every unit the counts hold cut at floors (k2, kr): the greedy, else the exact search, else the
// exact search with whole units opened. Empty when none finds a cut.
std::optional<PieceCut> complete_tree_cut(const std::vector<long long>& count, long long unit,
                                          long long k2, long long kr) {
  long long total = 0;
  for (long long c : count) total += c % unit;
  if (auto c = cut_trees(count, unit, k2, kr, total / unit)) return c;
  if (count.size() > kExactCutHosts) return std::nullopt;
  for (bool open : {false, true}) {
    if (auto c = cut_trees_exact(count, unit, k2, kr, kExactCutBudget, open)) return c;
  }
  return std::nullopt;
}

// The best tree/ring floors (k2, kr) the greedy reaches on these counts, from two pieces of
// unit/2 down (a ring's piece must be `ring` times a tree's for the same time).
std::pair<long long, long long> tree_floors(const std::vector<long long>& count, long long unit,
                                            double ring) {
  for (long long k2 = unit / 2; k2 >= 1; --k2) {
    const auto kr = static_cast<long long>(std::ceil(static_cast<double>(k2) * ring - 1e-9));
    if (complete_tree_cut(count, unit, k2, kr)) return {k2, kr};
  }
  return {1, 1};
}

}  // namespace topoaware::mapper::internal
