// plan(): the rank mapping algorithms (block, cyclic, random, topo) and the launch plan.
//
// Everything inside works on the canonical machine (hosts sorted by name, slots by GPU), so the
// plan does not depend on the order the hosts came in; only the block baseline (and the guard
// that falls back to it) reads Slurm's order.
#include "topoaware/mapper/plan.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "node_facts.h"
#include "routing.h"
#include "splitmix.h"
#include "topoaware/mapper/cost.h"

namespace topoaware::mapper {
namespace {


using Assignment = std::vector<std::uint32_t>;  // slot of each rank

// A score: modeled seconds, then bytes crossing levels.
struct Score {
  double seconds = 0;
  double crossing = 0;
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
  std::pair<double, double> key(const Score& s) const {
    return {std::floor(s.seconds / second_step_), std::floor(s.crossing / crossing_step_)};
  }
  double second_step_, crossing_step_;
};

Score score(const Machine& m, const Traffic& t, const std::vector<std::uint32_t>& a) {
  Score s;
  s.seconds = evaluate_seconds(m, t, a, &s.crossing);
  return s;
}

long long total_tasks(const Request& r) {
  long long n = 0;
  for (int t : r.tasks_per_host) {
    if (t < 0) throw Error("tasks_per_host: negative count");
    n += t;
  }
  return n;
}

// Weight of a dim per rank: the bytes each rank sends in it, so heavier dims go innermost.
double dim_weight(const DimTraffic& d) {
  const double n = d.size;
  switch (d.pattern) {
    case Pattern::kRing:
      return internal::ring_volume(d.size, d.bytes);
    case Pattern::kAllToAll:
      return (n - 1) / n * d.bytes;
    case Pattern::kPipeline:
      return 2 * d.bytes;
  }
  return d.bytes;
}

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

// Refinement budget: moves per millisecond of Request::refine_budget_ms, and a cap on the
// work of all moves together (group members re-routed, resources rescanned), so that a large
// instance stays within a fraction of a second on one core. Counted, never timed. Whole-host
// steps that refine one start: kMovesPerMsLeast (100 moves for 200 ms), plus the kicks below.
// Steps that refine two starts (hosts cut into pieces, where starts differ in their cuts and
// refinement keeps finding more; whole hosts with a start of a second orientation), up to
// kTwoStartRanks ranks, each with half, and larger steps cut into pieces: a move costs more the
// larger the step, so kMovesRanks / ranks per ms between the two limits (2,000 moves on steps of
// up to 512 ranks, median 20 ms of a partial-host suite plan on one core; 100 from 10,240 ranks
// up, where more moves only spend time).
constexpr double kMovesPerMsMost = 10, kMovesPerMsLeast = 0.5, kMovesRanks = 5120;
constexpr long long kTwoStartRanks = 4096;

// The default refinement budget in moves (above), for `budget_ms` of Request::refine_budget_ms;
// `by_size`: the rate that falls with the step's size, else kMovesPerMsLeast.
long long default_moves(double budget_ms, bool by_size, long long ranks) {
  const double per_ms =
      by_size ? std::clamp(kMovesRanks / static_cast<double>(std::max<long long>(1, ranks)),
                           kMovesPerMsLeast, kMovesPerMsMost)
              : kMovesPerMsLeast;
  return static_cast<long long>(std::max(0.0, budget_ms) * per_ms);
}
constexpr long long kRefineWork = 40'000'000;
// Kicks out of host-order plateaus (refine_hosts) on jobs of at most this many hosts: how many,
// and the moves they may spend together.
constexpr std::size_t kKickHosts = 32;
constexpr int kKicks = 48;
constexpr int kKickPatience = 12;  // kicks in a row that gain nothing end them
constexpr long long kKickMoves = 2'000;
constexpr long long kKickWork = 500'000;  // a few ms: kicks must not slow a launch much

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
                                        long long k2, long long kr, long long budget,
                                        bool open = false) {
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

// A rank digit: ranks are enumerated with digits varying fastest first; a digit is a dim, or
// part of one (a dim of size n split into a low digit of size a and a high one of size n / a).
struct Digit {
  long long stride;  // rank distance between neighbours in this digit
  long long size;
};
using Digits = std::vector<Digit>;

class Mapper {
 public:
  Mapper(const Instance& inst, const Request& req) : in_(inst), req_(req) {
    const Machine& m = inst.machine;
    slots_of_host_.assign(m.hosts.size(), {});
    for (std::uint32_t s = 0; s < m.slots.size(); ++s) slots_of_host_[m.slots[s].host].push_back(s);
  }

  Assignment block() const {
    Assignment a(in_.block_slot.size());
    for (std::size_t r = 0; r < a.size(); ++r) a[r] = in_.block_slot[r];
    return a;
  }

  // Slurm's cyclic distribution: tasks dealt round-robin over the hosts in Slurm's order.
  Assignment cyclic() const {
    std::vector<std::vector<std::uint32_t>> per_host(req_.hosts.size());
    std::size_t t = 0;
    for (std::size_t h = 0; h < req_.hosts.size(); ++h) {
      for (int j = 0; j < req_.tasks_per_host[h]; ++j) per_host[h].push_back(in_.block_slot[t++]);
    }
    Assignment a;
    for (std::size_t round = 0; a.size() < in_.block_slot.size(); ++round) {
      for (auto& slots : per_host) {
        if (round < slots.size()) a.push_back(slots[round]);
      }
    }
    return a;
  }

  Assignment random(std::uint64_t seed) const {
    Assignment a = block();
    SplitMix rng{seed};
    for (std::size_t i = a.size(); i > 1; --i) std::swap(a[i - 1], a[rng.below(i)]);
    return a;
  }

  // The same hosts and GPU order made into one contiguous block of ranks per host, as a per-node
  // launcher numbers its workers: hosts ordered by the first rank `a` gives them, each host's GPUs
  // by the ranks `a` gives them.
  Assignment host_blocks(const Assignment& a) const {
    const Machine& m = in_.machine;
    std::vector<std::vector<std::uint32_t>> slots(m.hosts.size());
    std::vector<std::uint32_t> order;
    for (std::uint32_t s : a) {
      auto& held = slots[m.slots[s].host];
      if (held.empty()) order.push_back(m.slots[s].host);
      held.push_back(s);
    }
    Assignment out;
    out.reserve(a.size());
    for (auto h : order) out.insert(out.end(), slots[h].begin(), slots[h].end());
    return out;
  }

  // `bound`: lower_bound() of the instance; refinement stops once a plan is within 0.5% of it.
  // Steps: candidate rank orders, the starts they give (scored), refinement of the best.
  Assignment topo(double bound, long long* moves_done) {
    const Traffic& t = in_.traffic;
    const std::vector<std::size_t> heavy = heavy_dims();
    Starts starts = candidate_starts(heavy);
    const ScoreOrder better(starts.front().first);
    std::stable_sort(starts.begin(), starts.end(),
                     [&](const auto& x, const auto& y) { return better(x.first, y.first); });
    const bool partial = partial_hosts(heavy);
    // Small instances: steepest descent from the best few starts (local optima differ); pieces
    // on up to kTwoStartRanks: the best two; whole hosts on up to kTwoStartRanks: the best start
    // and the best of another orientation (other dims inside NCCL nodes, or spread widest), which
    // refinement's moves rarely reach from the first; else the best start.
    std::vector<std::size_t> picks = {0};
    bool two_orientations = false;
    if (t.world <= 24 || (partial && t.world <= kTwoStartRanks)) {
      const std::size_t few = std::min<std::size_t>(t.world <= 24 ? 4 : 2, starts.size());
      for (std::size_t i = 1; i < few; ++i) picks.push_back(i);
    } else if (t.world <= kTwoStartRanks) {
      const std::vector<long long> first = orientation(starts[0].second);
      for (std::size_t i = 1; i < starts.size() && !two_orientations; ++i) {
        two_orientations = orientation(starts[i].second) != first;
        if (two_orientations) picks.push_back(i);
      }
    }
    // Two orientations get the budget of steps cut into pieces (default_moves()).
    const long long budget =
        req_.refine_moves >= 0
            ? req_.refine_moves
            : default_moves(req_.refine_budget_ms, partial || two_orientations, t.world);
    // Within 0.5% of the bound the optimum is at most that much better: stop searching.
    const double good_enough = t.world <= 24 ? 0.0 : bound * 1.005;
    Assignment best = starts[0].second;
    Score best_cost = starts[0].first;
    *moves_done = 0;
    const auto n = static_cast<long long>(picks.size());
    for (std::size_t k = 0; k < picks.size(); ++k) {
      if (best_cost.seconds <= good_enough) break;
      Assignment a = starts[picks[k]].second;
      Score c = starts[picks[k]].first;
      // The budget shared out exactly: refine_moves = 1 still makes one move.
      const long long share = budget / n + (static_cast<long long>(k) < budget % n ? 1 : 0);
      *moves_done += refine(a, c, better, share, kRefineWork / n, good_enough);
      if (better(c, best_cost)) {
        best_cost = c;
        best = std::move(a);
      }
    }
    // Whole hosts: also the best start with a dim cut around another (cut_around), refined with
    // a quarter of a share of its own (a full share took the suite's slowest plan from 221 to 525
    // ms for about the same gains). Kept apart from the starts above: among them it would take
    // the place of a start that refines better elsewhere; here it can only add a plan.
    Starts cut;
    if (!partial && t.world > 24 && t.world <= kTwoStartRanks && best_cost.seconds > good_enough) {
      cut = cut_around(heavy);
    }
    if (!cut.empty()) {
      auto first = std::min_element(cut.begin(), cut.end(), [&](const auto& x, const auto& y) {
        return better(x.first, y.first);
      });
      Assignment a = std::move(first->second);
      Score c = first->first;
      *moves_done += refine(a, c, better, budget / n / 4, kRefineWork / n / 4, good_enough);
      if (better(c, best_cost)) {
        best = std::move(a);
        best_cost = c;
      }
    }
    // Hosts of one slot count: also the best order of the dims' prime digits (digit_orders),
    // refined alike. A dim's digits may lie apart there (tp's low digits on a host with a dp
    // digit, its high one over two hosts), which neither the starts nor cut_around lay out.
    if ((!partial || slots_per_host() > 0) && t.world > 24 && t.world <= kTwoStartRanks &&
        best_cost.seconds > good_enough) {
      auto [c, a] = digit_orders(heavy);
      if (!a.empty()) {
        *moves_done += refine(a, c, better, budget / n / 4, kRefineWork / n / 4, good_enough);
        if (better(c, best_cost)) best = std::move(a);
      }
    }
    return best;
  }

 private:
  using Starts = std::vector<std::pair<Score, Assignment>>;

  // A plan's orientation: per dim, how many of its groups lie inside one NCCL node (a host, or
  // the NVLink domain holding it: what NVLink carries), then how many NCCL nodes its groups span
  // in all (which dim is spread widest: an all-to-all over eight hosts with the all-reduce
  // over two, or the other way round, keeps the same dims inside nodes).
  std::vector<long long> orientation(const Assignment& a) const {
    const Traffic& t = in_.traffic;
    const Machine& m = in_.machine;
    auto node = [&](long long rank) {
      return internal::nccl_node(m, m.slots[a[static_cast<std::size_t>(rank)]].host);
    };
    std::vector<long long> inside(t.dims.size(), 0), spans(t.dims.size(), 0);
    std::vector<std::uint32_t> nodes;
    for (std::size_t i = 0; i < t.dims.size(); ++i) {
      const DimTraffic& d = t.dims[i];
      for (long long r = 0; d.size > 1 && r < t.world; ++r) {
        if ((r / d.stride) % d.size != 0) continue;  // one member per group: its first
        nodes.clear();
        for (long long k = 0; k < d.size; ++k) nodes.push_back(node(r + k * d.stride));
        std::sort(nodes.begin(), nodes.end());
        const auto n = std::unique(nodes.begin(), nodes.end()) - nodes.begin();
        inside[i] += n == 1 ? 1 : 0;
        spans[i] += n;
      }
    }
    inside.insert(inside.end(), spans.begin(), spans.end());
    return inside;
  }

  // Whether some host lends fewer slots than a unit of the heaviest dim, or a number that is no
  // multiple of one: then its groups are cut into pieces.
  bool partial_hosts(const std::vector<std::size_t>& heavy) const {
    if (heavy.empty()) return false;
    const auto u = static_cast<std::size_t>(in_.traffic.dims[heavy[0]].size);
    return std::any_of(slots_of_host_.begin(), slots_of_host_.end(),
                       [&](const auto& sl) { return sl.size() % u != 0; });
  }

  // Dims that communicate, heaviest (bytes per rank) first.
  std::vector<std::size_t> heavy_dims() const {
    const Traffic& t = in_.traffic;
    std::vector<std::size_t> heavy;
    for (std::size_t d = 0; d < t.dims.size(); ++d) {
      if (t.dims[d].size > 1) heavy.push_back(d);
    }
    std::stable_sort(heavy.begin(), heavy.end(),
                     [&](auto a, auto b) { return dim_weight(t.dims[a]) > dim_weight(t.dims[b]); });
    return heavy;
  }

  // Candidate orders of the dims (innermost first): by weight, the layout's own, and every
  // permutation up to 4 dims (beyond: the heavy order with each adjacent pair swapped).
  std::vector<std::vector<std::size_t>> candidate_orders(
      const std::vector<std::size_t>& heavy) const {
    const Traffic& t = in_.traffic;
    std::vector<std::size_t> dims;
    for (std::size_t d = 0; d < t.dims.size(); ++d) {
      if (t.dims[d].size > 1) dims.push_back(d);
    }
    std::vector<std::vector<std::size_t>> orders;
    auto add_order = [&](const std::vector<std::size_t>& o) {
      if (std::find(orders.begin(), orders.end(), o) == orders.end()) orders.push_back(o);
    };
    add_order(heavy);
    add_order(dims);
    if (dims.size() <= 4) {
      std::vector<std::size_t> p = dims;
      std::sort(p.begin(), p.end());
      do add_order(p);
      while (std::next_permutation(p.begin(), p.end()));
    } else {
      for (std::size_t i = 0; i + 1 < heavy.size(); ++i) {
        std::vector<std::size_t> p = heavy;
        std::swap(p[i], p[i + 1]);
        add_order(p);
      }
    }
    return orders;
  }

  // The starts, scored, in a fixed order: block by name, every candidate order with each
  // packing, then split orders. Candidate evaluations cost O(ranks) each: their count x ranks
  // stays under a fixed budget so 131k ranks stay within seconds (refinement has its own).
  Starts candidate_starts(const std::vector<std::size_t>& heavy) {
    const Machine& m = in_.machine;
    const Traffic& t = in_.traffic;
    const double work_cap = 1.5e6;
    long long evals_left = std::max<long long>(4, static_cast<long long>(work_cap / t.world));
    Starts starts;
    auto consider = [&](Assignment a) {
      if (req_.host_blocks) a = host_blocks(a);
      for (const auto& [sc, x] : starts) {
        if (x == a) return;  // orders that lay ranks alike: scored once
      }
      Score c = score(m, t, a);
      --evals_left;
      starts.emplace_back(c, std::move(a));
    };
    consider(block_by_name());
    // Hosts lending fewer slots than a unit of the innermost dim: pieces, for the two orders
    // that put the heaviest dims innermost (the layout's and by weight).
    const bool partial = partial_hosts(heavy);
    const std::vector<std::vector<std::size_t>> orders = candidate_orders(heavy);
    for (std::size_t o = 0; o < orders.size(); ++o) {
      for (Packing packing :
           {Packing::kPieces, Packing::kTrees, Packing::kAligned, Packing::kRuns, Packing::kNone}) {
        if (evals_left <= 0) break;
        const bool cuts = packing == Packing::kPieces || packing == Packing::kTrees;
        if (cuts && (!partial || o >= 2)) continue;
        const Digits dg = digits_of(orders[o]);
        const std::vector<std::uint32_t> seq = slot_sequence(dg, packing);
        if (seq.empty()) continue;  // kTrees where the innermost dim is no all-reduce
        consider(fill(seq, dg));
        if (packing != Packing::kTrees) continue;
        long long unit = 1;  // the innermost dim's groups
        for (const auto& d : dg) unit = unit > 1 ? unit : d.size;
        // Cut over NVLink domains as wholes, where the step has them.
        const std::vector<std::uint32_t> by_island = island_sequence(unit);
        if (!by_island.empty() && evals_left > 0) consider(fill(by_island, dg));
        // Trees cut over the step's hosts at once, ignoring switch groups: a chain of split
        // hosts the per-group cuts miss (refinement restores locality where it pays).
        if (!in_.machine.levels.empty() && evals_left > 0) {
          const std::vector<std::uint32_t> flat = slot_sequence(dg, packing, true);
          if (!flat.empty()) {
            consider(fill(flat, dg));
            if (evals_left > 0) consider(fill(units_by_place(flat, unit), dg));
          }
        }
      }
    }
    // Two heavy dims split between levels: each switch group holds a block of a few
    // coordinates of both (a x b of an n_i x n_j plane), so both cross uplinks, each half as
    // much, where keeping either whole inside the group sends the other's every byte across.
    for (std::size_t i = 0; i + 1 < std::min<std::size_t>(heavy.size(), 3); ++i) {
      const DimTraffic& di = t.dims[heavy[i]];
      const DimTraffic& dj = t.dims[heavy[i + 1]];
      for (long long a = 2; a < di.size; ++a) {
        if (di.size % a) continue;
        for (long long b = 2; b < dj.size; ++b) {
          if (dj.size % b || evals_left <= 0) continue;
          Digits dg = digits_of(heavy);
          dg.erase(dg.begin() + static_cast<long long>(i),
                   dg.begin() + static_cast<long long>(i) + 2);
          const Digits mid = {{di.stride, a},
                              {dj.stride, b},
                              {di.stride * a, di.size / a},
                              {dj.stride * b, dj.size / b}};
          dg.insert(dg.begin() + static_cast<long long>(i), mid.begin(), mid.end());
          consider(fill(slot_sequence(dg, Packing::kAligned), dg));
        }
      }
    }
    // Pipeline stages straddling two NVLink domains, over name order and a domain order.
    const bool domains =
        std::any_of(m.domain_of_host.begin(), m.domain_of_host.end(), [](int d) { return d >= 0; });
    for (int k = 0; k < 2 && domains && evals_left > 0; ++k) {
      Assignment split = split_stages(k == 0 ? block_by_name() : domains_in_turn());
      if (!split.empty()) consider(std::move(split));
    }
    if (domains && evals_left > 0) {
      Assignment columns = column_blocks();
      if (!columns.empty()) consider(std::move(columns));
    }
    return starts;
  }

  // A dim cut around another: the inner part of dim i, then dim j whole, then the rest of i (in
  // both orders, for each pair of the three heaviest dims that are neighbours by weight). Where
  // a host holds tp and part of dp, j spans as many hosts as it has members and i's groups only
  // a few: an all-to-all kept NIC-bound over the hosts of few leaves with the all-reduce
  // across pairs of hosts, which whole dims in any order do not give (i whole inside j puts
  // j's members hosts apart). Empty past the start budget.
  Starts cut_around(const std::vector<std::size_t>& heavy) {
    const Traffic& t = in_.traffic;
    long long evals_left = std::max<long long>(4, static_cast<long long>(3e5 / t.world));
    const long long host = slots_per_host();
    Starts out;
    for (std::size_t i = 0; i + 1 < std::min<std::size_t>(heavy.size(), 3); ++i) {
      for (const auto& [x, y] : {std::pair{i, i + 1}, std::pair{i + 1, i}}) {
        const DimTraffic& di = t.dims[heavy[x]];
        const DimTraffic& dj = t.dims[heavy[y]];
        for (long long a = 2; a < di.size && evals_left > 0; ++a) {
          if (di.size % a) continue;
          Digits dg = digits_of(heavy);
          dg.erase(dg.begin() + static_cast<long long>(i),
                   dg.begin() + static_cast<long long>(i) + 2);
          const Digits mid = {{di.stride, a}, {dj.stride, dj.size}, {di.stride * a, di.size / a}};
          dg.insert(dg.begin() + static_cast<long long>(i), mid.begin(), mid.end());
          std::vector<std::vector<std::uint32_t>> seqs = {slot_sequence(dg, Packing::kAligned)};
          // With NVLink domains: j's groups over blocks of hosts cut from at most two domains,
          // where the host boundary falls just inside j (domain_blocks).
          long long inner = 1;
          for (std::size_t k = 0; k < i; ++k) inner *= dg[k].size;
          if (host > 0 && inner * a == host && dj.size > 1) {
            std::vector<std::uint32_t> blocks = domain_blocks(dj.size);
            if (!blocks.empty()) seqs.push_back(std::move(blocks));
          }
          for (const auto& seq : seqs) {
            if (evals_left <= 0) break;
            Assignment s = fill(seq, dg);
            if (req_.host_blocks) s = host_blocks(s);
            --evals_left;
            out.emplace_back(score(in_.machine, t, s), std::move(s));
          }
        }
      }
    }
    return out;
  }

  // The best order of the dims' prime digits (tp=8 as three digits of 2), each laid over the
  // slots in locality order and, where it differs, in name order. Every order where the count
  // (n! over the repeats' factorials, both sequences) fits the evaluation budget; else a descent
  // from each candidate order of whole dims, moving one digit to another place while the step
  // gets faster, in locality order. A dim's digits number its coordinate low first in the order
  // they appear. Empty where nothing was scored.
  std::pair<Score, Assignment> digit_orders(const std::vector<std::size_t>& heavy) {
    const Traffic& t = in_.traffic;
    long long evals_left = std::max<long long>(4, static_cast<long long>(3e5 / t.world));
    using Labels = std::vector<std::pair<std::size_t, long long>>;  // (dim, prime)
    auto labels_of = [&](const std::vector<std::size_t>& order) {
      Labels labels;
      for (std::size_t d : order) {
        long long n = t.dims[d].size;
        for (long long q = 2; n > 1; ++q) {
          for (; n % q == 0; n /= q) labels.push_back({d, q});
        }
      }
      return labels;
    };
    std::vector<std::uint32_t> by_name(in_.machine.slots.size());
    std::iota(by_name.begin(), by_name.end(), 0u);
    std::pair<Score, Assignment> best;
    std::optional<ScoreOrder> better;
    // Scores one order in locality order and, with `name` where it differs, in name order too,
    // keeping the best; returns the first score, none where the order is not laid out.
    auto eval = [&](const Labels& labels, bool name) -> std::optional<Score> {
      std::vector<long long> stride(t.dims.size());
      for (std::size_t d = 0; d < t.dims.size(); ++d) stride[d] = t.dims[d].stride;
      Digits dg;
      for (const auto& [d, q] : labels) {
        dg.push_back({stride[d], q});
        stride[d] *= q;
      }
      auto take = [&](const std::vector<std::uint32_t>& seq) {
        Assignment a = fill(seq, dg);
        if (req_.host_blocks) a = host_blocks(a);
        --evals_left;
        const Score sc = score(in_.machine, t, a);
        if (!better) better.emplace(sc);
        if (best.second.empty() || (*better)(sc, best.first)) best = {sc, std::move(a)};
        return sc;
      };
      const std::vector<std::uint32_t> seq = slot_sequence(dg, Packing::kAligned);
      if (seq.empty()) return std::nullopt;
      const Score first = take(seq);
      if (name && seq != by_name) take(by_name);
      return first;
    };
    Labels all = labels_of(heavy);
    std::sort(all.begin(), all.end());
    double count = 1;
    for (std::size_t i = 0, run = 0; i < all.size(); ++i) {
      run = i > 0 && all[i] == all[i - 1] ? run + 1 : 1;
      count *= static_cast<double>(i + 1) / static_cast<double>(run);
    }
    if (2 * count <= static_cast<double>(evals_left)) {
      do eval(all, true);
      while (std::next_permutation(all.begin(), all.end()));
      return best;
    }
    for (const auto& order : candidate_orders(heavy)) {
      if (evals_left <= 0) break;
      Labels at = labels_of(order);
      std::optional<Score> cur = eval(at, false);
      for (bool moved = cur.has_value(); moved && evals_left > 0;) {
        moved = false;
        for (std::size_t i = 0; i < at.size() && evals_left > 0; ++i) {
          for (std::size_t j = 0; j < at.size() && evals_left > 0; ++j) {
            if (i == j || j + 1 == i) continue;  // j = i - 1 is the move of digit i - 1 to i
            Labels o = at;
            const auto x = o[i];
            o.erase(o.begin() + static_cast<long long>(i));
            o.insert(o.begin() + static_cast<long long>(j), x);
            const std::optional<Score> c = eval(o, false);
            if (c && (*better)(*c, *cur)) {
              cur = c;
              at = std::move(o);
              moved = true;
            }
          }
        }
      }
    }
    return best;
  }

  // The step's hosts (those lending slots) by NCCL node: a host alone, or the NVLink domain
  // holding it; nodes in nccl_node() order, hosts in name order.
  std::map<std::uint32_t, std::vector<std::uint32_t>> hosts_by_node() const {
    std::map<std::uint32_t, std::vector<std::uint32_t>> out;
    for (std::uint32_t h = 0; h < slots_of_host_.size(); ++h) {
      if (!slots_of_host_[h].empty()) out[internal::nccl_node(in_.machine, h)].push_back(h);
    }
    return out;
  }

  // The slots every host of the step lends, where all lend as many; else 0.
  long long slots_per_host() const {
    long long k = 0;
    for (const auto& slots : slots_of_host_) {
      const auto n = static_cast<long long>(slots.size());
      if (n == 0 || (k != 0 && n != k)) return 0;
      k = n;
    }
    return k;
  }

  // The step's slots, host by host, with the hosts cut into blocks of R that each lie in at
  // most two NCCL nodes (NVLink domains), the smallest part of any block as large as can be: a
  // group with one member on each of a block's hosts, on a part of q of them, has R - q of its R
  // members off its node, and an all-to-all's time follows the largest such count. Steps with
  // NVLink domains and whole hosts of one slot count only; else empty. Worked by hand in
  // docs/mapper.md (nvl72 findings).
  std::vector<std::uint32_t> domain_blocks(long long R) const {
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
    for (std::size_t n = 0; n < nodes.size(); ++n)
      left[n] = static_cast<long long>(nodes[n].size());
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
  // hand in docs/mapper.md (nvl72 findings).
  Assignment column_blocks() const {
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
  // (docs/mapper.md, nvl72 findings). Returns `a` with such stages rearranged, or nothing.
  // Called only where the step has NVLink domains (else every node is a host).
  Assignment split_stages(Assignment a) const {
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
  Assignment domains_in_turn() const {
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
  bool stage_grid(long long* C, long long* R, long long* U) const {
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
  static std::vector<bool> even_halves(long long R, long long C, long long x) {
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

  // Slurm's block order over hosts sorted by name: the canonical starting point.
  Assignment block_by_name() const {
    Assignment a;
    for (const auto& slots : slots_of_host_) a.insert(a.end(), slots.begin(), slots.end());
    return a;
  }

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

  // Slots in locality order: hosts grouped by the outermost level first, then inner levels,
  // GPUs by index inside a host. The unit of a group is the largest block of the innermost dims
  // (in `order`) that fits its largest child: packing keeps as many units as possible inside one
  // child, so the groups of the innermost dims stay inside a host, a leaf, a pod.
  std::vector<std::uint32_t> slot_sequence(const Digits& order, Packing packing,
                                           bool flat = false) {
    const Machine& m = in_.machine;
    Cutting cut;
    cut.packing = packing;
    cut.flat = flat;
    long long p = 1;
    for (const auto& dg : order) {
      p *= dg.size;
      cut.prefix.push_back(p);
    }
    for (long long x : cut.prefix) {
      if (x > 1) {
        cut.piece_unit = x;
        break;
      }
    }
    if (packing == Packing::kPieces && cut.piece_unit > 1) {
      // The smallest piece the whole step allows, ignoring locality: no level cuts finer.
      std::vector<long long> n;
      for (const auto& sl : slots_of_host_) n.push_back(static_cast<long long>(sl.size()));
      cut.piece_floor = n.size() <= 1024 ? cut_pieces(n, cut.piece_unit, 1, true).smallest : 1;
    }
    if (packing == Packing::kTrees) {
      // Only where the innermost digit is a whole all-reduce dim: its units are its groups.
      const DimTraffic* inner = nullptr;
      for (const auto& dg : order) {
        if (dg.size <= 1) continue;
        for (const auto& d : in_.traffic.dims) {
          if (d.stride == dg.stride && d.size == dg.size) inner = &d;
        }
        break;
      }
      if (!inner || !inner->all_reduce || slots_of_host_.size() > 1024) return {};
      std::vector<long long> n;
      for (const auto& sl : slots_of_host_) n.push_back(static_cast<long long>(sl.size()));
      const double ring = internal::ring_volume(inner->size, 1.0);
      std::tie(cut.tree_floor, cut.ring_floor) = tree_floors(n, cut.piece_unit, ring);
    }
    std::vector<std::uint32_t> hosts(m.hosts.size());
    std::iota(hosts.begin(), hosts.end(), 0);
    std::size_t tail = 0;
    return order_group(hosts, flat ? -1 : static_cast<int>(m.levels.size()) - 1, cut, &tail);
  }

  // kTrees: the top completes every unit at the step's floors (or any it can); a switch group
  // cuts as many as it can at those floors and leaves the rest to the level above.
  static PieceCut cut_tree_units(const std::vector<long long>& n, long long unit,
                                 const Cutting& cut, bool top) {
    long long total = 0;
    for (long long c : n) total += c % unit;
    if (top) {
      if (auto c = complete_tree_cut(n, unit, cut.tree_floor, cut.ring_floor)) return *c;
      return cut_pieces(n, unit, 1, true);
    }
    for (long long b = total / unit; b > 0; --b) {
      if (auto c = cut_trees(n, unit, cut.tree_floor, cut.ring_floor, b)) return *c;
    }
    return *cut_trees(n, unit, 1, 1, 0);
  }

  // `tail` (kPieces): how many slots at the end of the result were left over for the level above.
  std::vector<std::uint32_t> order_group(const std::vector<std::uint32_t>& hosts, int level,
                                         const Cutting& cut, std::size_t* tail) {
    const Packing packing = cut.packing;
    *tail = 0;
    // Children: level groups (dense ids follow name order), or the hosts of an innermost group.
    std::vector<std::vector<std::uint32_t>> children;
    std::vector<std::size_t> child_tail;  // kPieces: each child's leftover slots
    if (level < 0) {
      for (auto h : hosts) children.push_back(slots_of_host_[h]);
    } else {
      const NetLevel& l = in_.machine.levels[static_cast<std::size_t>(level)];
      std::map<std::uint32_t, std::vector<std::uint32_t>> groups;
      for (auto h : hosts) groups[l.group_of_host[h]].push_back(h);
      for (auto& [g, hs] : groups) {
        child_tail.push_back(0);
        children.push_back(order_group(hs, level - 1, cut, &child_tail.back()));
      }
    }
    std::vector<long long> count;
    long long cap = 0;
    for (const auto& c : children) {
      count.push_back(static_cast<long long>(c.size()));
      cap = std::max(cap, count.back());
    }
    const long long unit = cut.unit_for(cap);
    std::vector<std::uint32_t> out;
    if ((packing == Packing::kPieces || packing == Packing::kTrees) && cut.piece_unit > 1) {
      // Hosts (innermost) or what the children's own pieces left over (their tails, split by
      // host): cut into units whose smallest piece is as large as possible.
      const long long u = cut.piece_unit;
      std::vector<std::vector<std::uint32_t>> items;
      for (std::size_t i = 0; i < children.size(); ++i) {
        const auto& c = children[i];
        if (level < 0) {
          items.push_back(c);
          continue;
        }
        const auto whole = static_cast<long long>(c.size() - child_tail[i]);
        out.insert(out.end(), c.begin(), c.begin() + whole);
        for (auto it = c.begin() + whole; it != c.end();) {
          auto run = it;
          const auto host = in_.machine.slots[*it].host;
          while (run != c.end() && in_.machine.slots[*run].host == host) ++run;
          items.emplace_back(it, run);
          it = run;
        }
      }
      if (items.size() > 512) {  // keep it near-linear: runs of whole items instead
        for (const auto& it : items) out.insert(out.end(), it.begin(), it.end());
        return out;  // nothing left over: the level above takes it as cut
      }
      std::vector<long long> n;
      for (const auto& it : items) n.push_back(static_cast<long long>(it.size()));
      std::vector<std::size_t> used(items.size(), 0);
      const bool top = cut.flat || level == static_cast<int>(in_.machine.levels.size()) - 1;
      const PieceCut pieces = packing == Packing::kTrees ? cut_tree_units(n, u, cut, top)
                                                         : cut_pieces(n, u, cut.piece_floor, top);
      for (const auto& [i, k] : pieces.pieces) {
        const auto& it = items[i];
        out.insert(out.end(), it.begin() + static_cast<long long>(used[i]),
                   it.begin() + static_cast<long long>(used[i]) + k);
        used[i] += static_cast<std::size_t>(k);
      }
      *tail = static_cast<std::size_t>(pieces.left);
      return out;
    }
    if (packing == Packing::kAligned && unit > 1) {
      // Whole units of every child, in name order, then the leftovers (count mod unit, the
      // tail of each child's own sequence) in runs that complete units.
      std::vector<long long> rest(children.size());
      for (std::size_t i = 0; i < children.size(); ++i) {
        const long long whole = count[i] / unit * unit;
        rest[i] = count[i] - whole;
        out.insert(out.end(), children[i].begin(), children[i].begin() + whole);
      }
      std::vector<long long> left;
      std::vector<std::size_t> which;
      for (std::size_t i = 0; i < children.size(); ++i) {
        if (rest[i] > 0) {
          left.push_back(rest[i]);
          which.push_back(i);
        }
      }
      for (auto k : pack(left, unit)) {
        const auto& c = children[which[k]];
        out.insert(out.end(), c.end() - rest[which[k]], c.end());
      }
      return out;
    }
    std::vector<std::size_t> idx(children.size());
    std::iota(idx.begin(), idx.end(), 0);
    if (packing == Packing::kRuns) idx = pack(count, unit);
    for (auto i : idx) out.insert(out.end(), children[i].begin(), children[i].end());
    return out;
  }

  // Units of `unit` slots cut over NVLink islands (a domain's hosts in the step, or a host
  // outside any domain) where the step has domains: inside an island every flow goes over
  // NVLink whatever the pieces, so the islands' slot counts are cut as items (the tree cut,
  // whole units opened where that helps: 33 + 31 GPUs to TP8 cross as 5 + 3 and 4 + 4, not
  // 1 + 7), and each piece that leaves its island is laid on the island's hosts with the most
  // free slots, as evenly as they allow, since its ring hops leave and enter by those hosts'
  // NICs. Empty without domains.
  std::vector<std::uint32_t> island_sequence(long long unit) const {
    const Machine& m = in_.machine;
    if (unit <= 1 || std::none_of(m.domain_of_host.begin(), m.domain_of_host.end(),
                                  [](int d) { return d >= 0; })) {
      return {};
    }
    std::map<std::uint32_t, std::size_t> index;       // nccl_node() -> island
    std::vector<std::vector<std::uint32_t>> islands;  // hosts in name order
    for (std::uint32_t h = 0; h < m.hosts.size(); ++h) {
      if (slots_of_host_[h].empty()) continue;
      auto [it, fresh] = index.emplace(internal::nccl_node(m, h), islands.size());
      if (fresh) islands.emplace_back();
      islands[it->second].push_back(h);
    }
    std::vector<long long> count;
    for (const auto& hs : islands) {
      long long c = 0;
      for (auto h : hs) c += static_cast<long long>(slots_of_host_[h].size());
      count.push_back(c);
    }
    if (islands.size() > kExactCutHosts) return {};
    const auto [k2, kr] = tree_floors(count, unit, internal::ring_volume(unit, 1.0));
    std::optional<PieceCut> cut = complete_tree_cut(count, unit, k2, kr);
    if (!cut) cut = cut_pieces(count, unit, 1, true);
    if (cut->left != 0) return {};
    // Each island's pieces that leave it, laid on its hosts with the most free slots first.
    std::vector<long long> free(m.hosts.size(), 0);
    for (std::uint32_t h = 0; h < m.hosts.size(); ++h) {
      free[h] = static_cast<long long>(slots_of_host_[h].size());
    }
    std::vector<std::size_t> next(m.hosts.size(), 0);  // next unused slot of each host
    auto take = [&](std::uint32_t h, long long k, std::vector<std::uint32_t>& out) {
      const auto& sl = slots_of_host_[h];
      for (long long j = 0; j < k; ++j) out.push_back(sl[next[h]++]);
      free[h] -= k;
    };
    std::vector<std::vector<std::uint32_t>> laid(cut->pieces.size());
    std::vector<std::size_t> crossing;
    for (std::size_t i = 0; i < cut->pieces.size(); ++i) {
      if (cut->pieces[i].second < unit) crossing.push_back(i);
    }
    std::stable_sort(crossing.begin(), crossing.end(), [&](std::size_t a, std::size_t b) {
      return cut->pieces[a].second > cut->pieces[b].second;
    });
    for (std::size_t i : crossing) {
      const auto& [item, k] = cut->pieces[i];
      std::vector<std::uint32_t> hs = islands[item];
      std::stable_sort(hs.begin(), hs.end(),
                       [&](std::uint32_t a, std::uint32_t b) { return free[a] > free[b]; });
      std::size_t q = 0;
      for (long long got = 0; got < k && q < hs.size(); ++q) got += free[hs[q]];
      long long rest = k;
      for (std::size_t j = 0; j < q && rest > 0; ++j) {
        const auto parts = static_cast<long long>(q - j);
        const long long now = std::min({free[hs[j]], (rest + parts - 1) / parts, rest});
        take(hs[j], now, laid[i]);
        rest -= now;
      }
      for (std::size_t j = 0; j < hs.size() && rest > 0; ++j) {  // uneven hosts: fill up
        const long long more = std::min(free[hs[j]], rest);
        take(hs[j], more, laid[i]);
        rest -= more;
      }
    }
    // Whole units from what is left of each island, hosts in name order.
    std::vector<std::size_t> at(islands.size(), 0);  // next host of each island with room
    std::vector<std::uint32_t> out;
    out.reserve(m.slots.size());
    for (std::size_t i = 0; i < cut->pieces.size(); ++i) {
      const auto& [item, k] = cut->pieces[i];
      if (k < unit) {
        out.insert(out.end(), laid[i].begin(), laid[i].end());
        continue;
      }
      for (long long need = k; need > 0;) {
        const auto& hs = islands[item];
        while (at[item] < hs.size() && free[hs[at[item]]] == 0) ++at[item];
        if (at[item] == hs.size()) return {};  // cannot happen: the cut adds up
        const long long now = std::min(free[hs[at[item]]], need);
        take(hs[at[item]], now, out);
        need -= now;
      }
    }
    return out;
  }

  // A flat cut's units (`unit` slots each) in locality order: by the switch groups, outermost
  // first, of the first host each unit uses in that order, so units that share a leaf or pod
  // sit next to each other in the sequence. (Name order, the flat cut's own, wins on some
  // steps, this on others: both are candidates.)
  std::vector<std::uint32_t> units_by_place(const std::vector<std::uint32_t>& seq,
                                            long long unit) const {
    const Machine& m = in_.machine;
    const auto u = static_cast<std::size_t>(unit);
    if (u == 0 || seq.size() % u != 0) return seq;
    auto place = [&](std::uint32_t slot) {
      const std::uint32_t h = m.slots[slot].host;
      std::vector<std::uint32_t> key;
      for (std::size_t l = m.levels.size(); l-- > 0;) key.push_back(m.levels[l].group_of_host[h]);
      key.push_back(h);
      return key;
    };
    std::vector<std::pair<std::vector<std::uint32_t>, std::size_t>> units;
    for (std::size_t at = 0; at < seq.size(); at += u) {
      std::vector<std::uint32_t> key = place(seq[at]);
      for (std::size_t i = at + 1; i < at + u; ++i) key = std::min(key, place(seq[i]));
      units.emplace_back(std::move(key), at);
    }
    std::stable_sort(units.begin(), units.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<std::uint32_t> out;
    out.reserve(seq.size());
    for (const auto& [key, at] : units)
      out.insert(out.end(), seq.begin() + at, seq.begin() + at + u);
    return out;
  }

  // The i-th slot of `seq` gets the i-th rank when ranks are enumerated with `order`'s digits
  // varying fastest first (then any dims of size 1).
  Assignment fill(const std::vector<std::uint32_t>& seq, const Digits& order) {
    Assignment a(seq.size());
    std::vector<long long> digit(order.size(), 0);
    for (std::size_t i = 0; i < seq.size(); ++i) {
      long long rank = 0;
      for (std::size_t k = 0; k < order.size(); ++k) rank += digit[k] * order[k].stride;
      a[static_cast<std::size_t>(rank)] = seq[i];
      for (std::size_t k = 0; k < order.size(); ++k) {
        if (++digit[k] < order[k].size) break;
        digit[k] = 0;
      }
    }
    return a;
  }

  Digits digits_of(const std::vector<std::size_t>& order) const {
    Digits out;
    for (auto d : order) out.push_back({in_.traffic.dims[d].stride, in_.traffic.dims[d].size});
    return out;
  }

  // One refinement run: host exchanges, then rank exchanges, each accepted when the model says
  // the step gets faster (ties: less traffic up the tree). Moves are scored incrementally
  // (IncrementalCost: only the moved ranks' groups are re-routed). Every move counts against
  // `budget`, and the work of all moves against `work_cap`: deterministic, never wall time.
  long long refine(Assignment& a, Score& cost, const ScoreOrder& better, long long budget,
                   long long work_cap, double good_enough) {
    if (a.size() < 2 || budget <= 0) return 0;
    IncrementalCost inc(in_.machine, in_.traffic, a);
    Refiner r{inc, better, cost, budget, work_cap, 0, good_enough};
    refine_hosts(r);
    refine_ranks(r);
    a = inc.slot_of_rank();
    cost = r.cost;
    return r.used;
  }

  struct Refiner {
    IncrementalCost& inc;
    const ScoreOrder& better;
    Score cost;
    long long budget, work_cap, used;
    double good_enough;  // seconds: no move can gain enough below this to be worth a search
    bool spent() const {
      return used >= budget || inc.work() >= work_cap || cost.seconds <= good_enough;
    }
    // Tries a move; keeps it when better. Returns whether it was kept.
    bool attempt(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs) {
      inc.exchange(pairs);
      ++used;
      Score c{inc.seconds(), inc.crossing()};
      if (better(c, cost)) {
        cost = c;
        return true;
      }
      inc.undo();
      return false;
    }
  };

  // Host exchanges: everything two hosts with as many slots hold, GPU k for GPU k (rails stay
  // aligned). The move whole-host allocations need: a rank exchange splits the groups a host
  // holds, a host exchange moves them together. Up to 64 hosts every pair in sweeps until one
  // gains nothing; more, pairs from a fixed-seed generator until a run of fruitless moves.
  void refine_hosts(Refiner& r) {
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
      for (std::size_t i = 0; i < sx.size(); ++i)
        pairs.emplace_back(rank_on[sx[i]], rank_on[sy[i]]);
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
      r.inc.exchange(pairs);
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
        r.cost = Score{r.inc.seconds(), r.inc.crossing()};
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
  void refine_ranks(Refiner& r) {
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
            r.inc.exchange(pair);
            ++r.used;
            Score c{r.inc.seconds(), r.inc.crossing()};
            r.inc.undo();
            if (r.better(c, best)) {
              best = c;
              bi = i;
              bj = j;
            }
          }
        }
        if (r.better(best, r.cost)) {
          pair[0] = {bi, bj};
          r.inc.exchange(pair);
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

  const Instance& in_;
  const Request& req_;
  std::vector<std::vector<std::uint32_t>> slots_of_host_;
};

}  // namespace

namespace {

// The k GPUs a host's tasks use when the plan may choose them: the first k by NVML index, except
// that GPUs whose nearest NIC the node doctor found degraded (HostInfo::nic_fraction) come last,
// so a step that does not need every GPU of a host leaves the slow NIC's out.
std::vector<int> healthiest_gpus(const topology::Fabric& fabric, const std::string& host,
                                 const topology::NodeTopology& node, const std::vector<int>& devs,
                                 int k) {
  std::vector<int> out(devs.begin(), devs.begin() + k);
  const std::int64_t fi = fabric.find_host(host);
  if (fi < 0 || static_cast<std::size_t>(k) == devs.size()) return out;
  const auto& fraction = fabric.hosts[static_cast<std::size_t>(fi)].nic_fraction;
  if (fraction.empty()) return out;
  const internal::NodeFacts facts = internal::node_facts(node);
  auto health = [&](int dev) {
    const internal::GpuFacts* g = facts.find(dev);
    if (g == nullptr || g->nics.empty()) return 1.0;
    auto it = fraction.find(g->nics.front());
    return it == fraction.end() ? 1.0 : it->second;
  };
  std::vector<int> ranked = devs;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](int a, int b) { return health(a) > health(b); });
  out.assign(ranked.begin(), ranked.begin() + k);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

namespace {

// make_instance(), with the GPUs of a host chosen by health (the plan's) or the first k by index
// (Slurm's: local task j on GPU j).
Instance instance_of(const topology::Fabric& fabric,
                     const std::vector<const topology::NodeTopology*>& nodes_in,
                     const Request& request, bool choose_gpus) {
  if (request.hosts.empty()) throw Error("request: no hosts");
  if (request.tasks_per_host.size() != request.hosts.size()) {
    throw Error("request: " + std::to_string(request.hosts.size()) + " hosts but " +
                std::to_string(request.tasks_per_host.size()) + " task counts");
  }
  std::vector<const topology::NodeTopology*> nodes = nodes_in;
  if (nodes.empty()) nodes.assign(request.hosts.size(), nullptr);
  if (nodes.size() != request.hosts.size()) {
    throw Error("request: " + std::to_string(request.hosts.size()) + " hosts but " +
                std::to_string(nodes.size()) + " node models");
  }
  const long long world = total_tasks(request);
  if (world <= 0) throw Error("request: no tasks");
  if (world > (1LL << 22)) throw Error("request: more than 4M tasks");
  const bool bound = !request.bound_gpu.empty();
  if (bound && request.host_blocks) {
    throw Error("request: host blocks (a per-node launcher) choose GPUs; bound_gpu fixes them");
  }
  if (bound && static_cast<long long>(request.bound_gpu.size()) != world) {
    throw Error("request: bound_gpu has " + std::to_string(request.bound_gpu.size()) +
                " entries for " + std::to_string(world) + " tasks");
  }
  // GPUs used per host: bound ones, else the first tasks_per_host by NVML index.
  std::map<const topology::NodeTopology*, std::vector<int>> devs_of;
  std::vector<std::vector<int>> gpus(request.hosts.size());
  std::size_t t = 0;
  for (std::size_t h = 0; h < request.hosts.size(); ++h) {
    const int k = request.tasks_per_host[h];
    if (bound) {
      for (int j = 0; j < k; ++j)
        gpus[h].push_back(request.bound_gpu[t + static_cast<std::size_t>(j)]);
    } else if (nodes[h]) {
      auto it = devs_of.find(nodes[h]);
      if (it == devs_of.end()) {
        std::vector<int> devs;
        for (const auto& g : internal::node_facts(*nodes[h]).gpus) devs.push_back(g.dev);
        it = devs_of.emplace(nodes[h], devs).first;
      }
      if (static_cast<int>(it->second.size()) < k) {
        throw Error("host " + request.hosts[h] + ": " + std::to_string(k) +
                    " tasks but its node has " + std::to_string(it->second.size()) + " GPUs");
      }
      gpus[h] = choose_gpus ? healthiest_gpus(fabric, request.hosts[h], *nodes[h], it->second, k)
                            : std::vector<int>(it->second.begin(), it->second.begin() + k);
    } else {
      for (int j = 0; j < k; ++j) gpus[h].push_back(j);
    }
    t += static_cast<std::size_t>(k);
  }
  Instance in;
  in.machine = build_machine(fabric, request.hosts, nodes, gpus);
  in.layout = request.layout;
  resolve_layout(in.layout, static_cast<int>(world));
  in.traffic = job_traffic(in.layout);
  in.traffic.overlap = request.overlap_dims;
  // Each task's slot under block order: the j-th task of a host takes its j-th GPU (free) or
  // the GPU bound to it.
  std::map<std::string, std::uint32_t> host_idx;
  for (std::uint32_t i = 0; i < in.machine.hosts.size(); ++i) host_idx[in.machine.hosts[i]] = i;
  std::vector<std::uint32_t> first_slot(in.machine.hosts.size(), 0);
  for (std::uint32_t s = static_cast<std::uint32_t>(in.machine.slots.size()); s-- > 0;) {
    first_slot[in.machine.slots[s].host] = s;
  }
  t = 0;
  for (std::size_t h = 0; h < request.hosts.size(); ++h) {
    std::uint32_t mh = host_idx.at(request.hosts[h]);
    for (int j = 0; j < request.tasks_per_host[h]; ++j, ++t) {
      std::uint32_t slot = first_slot[mh] + static_cast<std::uint32_t>(j);
      if (bound) {
        int want = request.bound_gpu[t];
        slot = first_slot[mh];
        while (in.machine.slots[slot].gpu != want) ++slot;
      }
      in.block_slot.push_back(slot);
      in.host_of_task.push_back(mh);
    }
  }
  return in;
}

}  // namespace

Instance make_instance(const topology::Fabric& fabric,
                       const std::vector<const topology::NodeTopology*>& nodes_in,
                       const Request& request) {
  return instance_of(fabric, nodes_in, request, true);
}

RankPlan plan(const topology::Fabric& fabric,
              const std::vector<const topology::NodeTopology*>& nodes_in, const Request& request) {
  Instance in = make_instance(fabric, nodes_in, request);
  std::vector<const topology::NodeTopology*> nodes = nodes_in;
  if (nodes.empty()) nodes.assign(request.hosts.size(), nullptr);
  const Machine& m = in.machine;
  Mapper mapper(in, request);
  RankPlan out;
  out.hosts = request.hosts;
  out.layout = in.layout;
  out.algorithm = request.algorithm;
  out.rail_optimized = fabric.rail_optimized;
  out.host_blocks = request.host_blocks;
  out.lower_bound = lower_bound(m, in.traffic, false);  // without whole cuts: fast
  out.assumptions = m.assumptions;
  Assignment block = mapper.block();
  Assignment a;
  switch (request.algorithm) {
    case Algorithm::kBlock:
      a = block;
      break;
    case Algorithm::kCyclic:
      a = mapper.cyclic();
      break;
    case Algorithm::kRandom:
      a = mapper.random(request.seed);
      break;
    case Algorithm::kTopo:
      a = mapper.topo(out.lower_bound, &out.refine_moves);
      break;
  }
  // Every baseline as a per-node launcher would run it (block order already is).
  if (request.host_blocks) a = mapper.host_blocks(a);
  out.cost = evaluate(m, in.traffic, a);
  out.block_cost = evaluate(m, in.traffic, block);
  // Slurm's order runs local task j on GPU j. Where the plan chose other GPUs (to leave a
  // degraded NIC's out), Slurm's order is scored on Slurm's GPUs.
  bool health = false;
  for (std::uint32_t fh : m.fabric_host) health |= !fabric.hosts[fh].nic_fraction.empty();
  if (health) {
    Instance slurm = instance_of(fabric, nodes_in, request, false);
    bool same_gpus = slurm.machine.slots.size() == m.slots.size();
    for (std::size_t i = 0; same_gpus && i < m.slots.size(); ++i) {
      same_gpus = slurm.machine.slots[i].gpu == m.slots[i].gpu;
    }
    if (!same_gpus) out.block_cost = evaluate(slurm.machine, slurm.traffic, slurm.block_slot);
  }
  if (request.algorithm == Algorithm::kTopo && out.cost.seconds > out.block_cost.seconds) {
    a = block;  // the guard: never hand out a plan the model says is slower than Slurm's
    out.cost = evaluate(m, in.traffic, block);
    out.kept_block = true;
  }

  // Tasks: in free mode a host's tasks take its ranks in ascending order (LOCAL_RANK order);
  // with bound GPUs each task keeps its GPU and takes the rank placed on it.
  const long long world = in.traffic.world;
  std::vector<long long> rank_of_slot(m.slots.size(), -1);
  for (long long r = 0; r < world; ++r) rank_of_slot[a[static_cast<std::size_t>(r)]] = r;
  std::vector<std::vector<long long>> ranks_of_host(m.hosts.size());
  for (long long r = 0; r < world; ++r) {
    ranks_of_host[m.slots[a[static_cast<std::size_t>(r)]].host].push_back(r);
  }
  for (auto& v : ranks_of_host) std::sort(v.begin(), v.end());
  // NODE_RANK: hosts numbered by their smallest rank (NCCL's and torchrun's node order).
  std::vector<std::uint32_t> by_first(m.hosts.size());
  std::iota(by_first.begin(), by_first.end(), 0);
  std::sort(by_first.begin(), by_first.end(),
            [&](auto x, auto y) { return ranks_of_host[x].front() < ranks_of_host[y].front(); });
  std::vector<int> node_rank(m.hosts.size());
  for (std::size_t i = 0; i < by_first.size(); ++i) node_rank[by_first[i]] = static_cast<int>(i);
  std::map<std::string, std::uint32_t> req_index;
  for (std::uint32_t i = 0; i < request.hosts.size(); ++i) req_index[request.hosts[i]] = i;
  std::map<const topology::NodeTopology*, internal::NodeFacts> facts;
  const bool bound = !request.bound_gpu.empty();
  std::vector<int> local_seen(m.hosts.size(), 0);
  out.tasks.resize(static_cast<std::size_t>(world));
  for (std::size_t t = 0; t < out.tasks.size(); ++t) {
    const std::uint32_t mh = in.host_of_task[t];
    const int j = local_seen[mh]++;
    long long rank =
        bound ? rank_of_slot[in.block_slot[t]] : ranks_of_host[mh][static_cast<std::size_t>(j)];
    const Slot& slot = m.slots[a[static_cast<std::size_t>(rank)]];
    TaskPlan& tp = out.tasks[t];
    tp.task = static_cast<int>(t);
    tp.rank = static_cast<int>(rank);
    tp.host = req_index.at(m.hosts[mh]);
    const auto& on_host = ranks_of_host[mh];
    tp.local_rank =
        static_cast<int>(std::lower_bound(on_host.begin(), on_host.end(), rank) - on_host.begin());
    tp.node_rank = node_rank[mh];
    tp.gpu = slot.gpu;
    tp.coords = rank_coords(in.layout, rank);
    if (const topology::NodeTopology* node = nodes[tp.host]) {
      auto it = facts.find(node);
      if (it == facts.end()) it = facts.emplace(node, internal::node_facts(*node)).first;
      if (const internal::GpuFacts* g = it->second.find(slot.gpu)) {
        tp.gpu_busid = g->busid;
        tp.nics = g->nics;
        tp.netdev = g->netdev;
        tp.cpus = g->cpus;
      }
    }
    if (tp.nics.empty() || !is_device_name(tp.nics.front())) {
      // The node model names no device for the NIC (a plain node's "port-K"): the fabric's name
      // for this host's port when it has one ("mlx5_3"; or a dump's label "HCA-1", shown but
      // never exported).
      const auto& hi = fabric.hosts[m.fabric_host[mh]];
      const auto port = static_cast<std::size_t>(slot.port);
      if (port < hi.port_nic.size() && !hi.port_nic[port].empty()) tp.nics = {hi.port_nic[port]};
    }
    out.rank_of_task.push_back(tp.rank);
  }
  return out;
}

std::string assumptions_line(const std::vector<std::string>& assumptions) {
  if (assumptions.empty()) return {};
  std::string s = "figures assume: ";
  for (std::size_t i = 0; i < assumptions.size(); ++i) s += (i ? "; " : "") + assumptions[i];
  return s;
}

bool is_device_name(std::string_view s) {
  if (s.empty() || !std::islower(static_cast<unsigned char>(s.front())) ||
      !std::isdigit(static_cast<unsigned char>(s.back()))) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

namespace {

std::string join_text(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& x : items) s += (s.empty() ? "" : ",") + x;
  return s;
}

// The host's tasks (workers) ordered by local rank.
std::vector<const TaskPlan*> tasks_on(const RankPlan& plan, std::uint32_t host) {
  std::vector<const TaskPlan*> out;
  for (const auto& t : plan.tasks) {
    if (t.host == host) out.push_back(&t);
  }
  std::sort(out.begin(), out.end(),
            [](const TaskPlan* x, const TaskPlan* y) { return x->local_rank < y->local_rank; });
  return out;
}

// What every task of a plan shares: rank 0's address and the port.
std::pair<std::string, std::string> master_of(const RankPlan& plan, const EnvOptions& options) {
  std::string addr = options.master_addr;
  for (const auto& t : plan.tasks) {
    if (t.rank == 0 && addr.empty()) addr = plan.hosts.at(t.host);
  }
  return {addr, options.master_port.empty() ? std::to_string(20000 + options.job_id % 20000)
                                            : options.master_port};
}

// NCCL_IB_HCA / NCCL_SOCKET_IFNAME for these tasks' NICs (device names only), in first-use order
// without repeats; NCCL_CROSS_NIC on rail-optimized fabrics; NCCL_TOPO_FILE.
void add_nccl(const RankPlan& plan, const std::vector<const TaskPlan*>& tasks,
              const EnvOptions& options, Environment& env) {
  if (plan.rail_optimized) env.emplace_back("NCCL_CROSS_NIC", "0");
  std::vector<std::string> hcas, netdevs;
  auto add = [](std::vector<std::string>& v, const std::string& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  for (const TaskPlan* t : tasks) {
    for (const auto& n : t->nics) {
      if (is_device_name(n)) add(hcas, n);
    }
    if (!t->netdev.empty()) add(netdevs, t->netdev);
  }
  if (!hcas.empty()) env.emplace_back("NCCL_IB_HCA", "=" + join_text(hcas));
  if (!netdevs.empty()) env.emplace_back("NCCL_SOCKET_IFNAME", "=" + join_text(netdevs));
  if (!options.topo_file.empty()) env.emplace_back("NCCL_TOPO_FILE", options.topo_file);
}

}  // namespace

Environment task_environment(const RankPlan& plan, int task, const EnvOptions& options) {
  if (plan.host_blocks) {
    throw Error(
        "a per-node launcher's plan: its tasks' environment is "
        "launcher_environment()");
  }
  if (task < 0 || static_cast<std::size_t>(task) >= plan.tasks.size()) {
    throw Error("task " + std::to_string(task) + " is not in the plan (" +
                std::to_string(plan.tasks.size()) + " tasks)");
  }
  const TaskPlan& me = plan.tasks[static_cast<std::size_t>(task)];
  // The host's GPUs in LOCAL_RANK order, so device index LOCAL_RANK is this task's GPU.
  const std::vector<const TaskPlan*> local = tasks_on(plan, me.host);
  Environment env;
  if (options.one_gpu_visible) {
    env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(me.gpu));
  } else {
    std::vector<std::string> gpus;
    for (const TaskPlan* t : local) gpus.push_back(std::to_string(t->gpu));
    env.emplace_back("CUDA_VISIBLE_DEVICES", join_text(gpus));
  }
  env.emplace_back("LOCAL_RANK", std::to_string(me.local_rank));
  env.emplace_back("LOCAL_WORLD_SIZE", std::to_string(local.size()));
  const auto [addr, port] = master_of(plan, options);
  env.emplace_back("MASTER_ADDR", addr);
  env.emplace_back("MASTER_PORT", port);
  add_nccl(plan, {&me}, options, env);
  env.emplace_back("NODE_RANK", std::to_string(me.node_rank));
  env.emplace_back("RANK", std::to_string(me.rank));
  if (options.ids == Ids::kSlurm) {
    // Slurm's own numbering: the task's index in block order, its place among its host's tasks, and
    // its host's place in the step's node list.
    int slurm_local = 0;
    for (std::size_t t = 0; t < static_cast<std::size_t>(task); ++t) {
      if (plan.tasks[t].host == me.host) ++slurm_local;
    }
    // JAX started from SLURM_* takes the first host of SLURM_STEP_NODELIST for its coordinator,
    // which process 0 serves: it must be told where the plan's rank 0 is.
    env.emplace_back("JAX_COORDINATOR_ADDRESS", addr + ":" + port);
    env.emplace_back("SLURM_LOCALID", std::to_string(me.local_rank));
    env.emplace_back("SLURM_NODEID", std::to_string(me.node_rank));
    env.emplace_back("SLURM_PROCID", std::to_string(me.rank));
    env.emplace_back("TOPO_AWARE_SLURM_LOCALID", std::to_string(slurm_local));
    env.emplace_back("TOPO_AWARE_SLURM_NODEID", std::to_string(me.host));
    env.emplace_back("TOPO_AWARE_SLURM_PROCID", std::to_string(task));
  }
  std::vector<std::string> coords;
  for (const auto& [name, c] : me.coords) coords.push_back(name + ":" + std::to_string(c));
  env.emplace_back("TOPO_AWARE_COORDS", join_text(coords));
  env.emplace_back("TOPO_AWARE_RANK", std::to_string(me.rank));
  env.emplace_back("WORLD_SIZE", std::to_string(plan.tasks.size()));
  std::sort(env.begin(), env.end());
  return env;
}

Environment launcher_environment(const RankPlan& plan, std::uint32_t host,
                                 const EnvOptions& options) {
  if (!plan.host_blocks) {
    throw Error(
        "launcher_environment() needs a per-node launcher's plan (host "
        "blocks)");
  }
  if (host >= plan.hosts.size()) {
    throw Error("host " + std::to_string(host) + " is not in the plan (" +
                std::to_string(plan.hosts.size()) + " hosts)");
  }
  const std::vector<const TaskPlan*> workers = tasks_on(plan, host);
  if (workers.empty()) throw Error("host " + plan.hosts[host] + " runs no worker of the plan");
  Environment env;
  std::vector<std::string> gpus;
  for (const TaskPlan* t : workers) gpus.push_back(std::to_string(t->gpu));
  env.emplace_back("CUDA_VISIBLE_DEVICES", join_text(gpus));
  const auto [addr, port] = master_of(plan, options);
  env.emplace_back("MASTER_ADDR", addr);
  env.emplace_back("MASTER_PORT", port);
  add_nccl(plan, workers, options, env);
  const std::string node_rank = std::to_string(workers.front()->node_rank);
  const std::string nnodes = std::to_string(plan.hosts.size());
  const std::string nproc = std::to_string(workers.size());
  env.emplace_back("NNODES", nnodes);
  env.emplace_back("NODE_RANK", node_rank);
  env.emplace_back("NPROC_PER_NODE", nproc);
  // torchrun (torch.distributed.run) takes a flag's default from PET_<FLAG>: a bare `torchrun
  // train.py` (static rendezvous, its default) then runs the plan.
  env.emplace_back("PET_MASTER_ADDR", addr);
  env.emplace_back("PET_MASTER_PORT", port);
  env.emplace_back("PET_NNODES", nnodes);
  env.emplace_back("PET_NODE_RANK", node_rank);
  env.emplace_back("PET_NPROC_PER_NODE", nproc);
  if (options.ids == Ids::kSlurm) {
    // One task per host: Slurm's task id, node id and local id are the host's.
    env.emplace_back("SLURM_LOCALID", "0");
    env.emplace_back("SLURM_NODEID", node_rank);
    env.emplace_back("SLURM_PROCID", node_rank);
    env.emplace_back("TOPO_AWARE_SLURM_LOCALID", "0");
    env.emplace_back("TOPO_AWARE_SLURM_NODEID", std::to_string(host));
    env.emplace_back("TOPO_AWARE_SLURM_PROCID", std::to_string(host));
  }
  env.emplace_back("TOPO_AWARE_LAUNCHER", "per-node");
  env.emplace_back("WORLD_SIZE", std::to_string(plan.tasks.size()));
  std::sort(env.begin(), env.end());
  return env;
}

}  // namespace topoaware::mapper
