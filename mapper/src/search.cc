// The search (search.h): the baselines, the candidate orders of the dims, the starts they give,
// and topo() that scores them and refines the best.
#include "search.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "routing.h"
#include "splitmix.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::internal {

namespace {

// Refinement budget: moves per millisecond of Request::refine_budget_ms, and a cap on the
// work of all moves together (group members re-routed, resources rescanned), so that a large
// instance stays within a fraction of a second on one core. Counted, never timed. Whole-host
// steps that refine one start: kMovesPerMsLeast (100 moves for 200 ms), plus the kicks below.
// Steps that refine two starts (hosts cut into pieces, where starts differ in their cuts and
// refinement keeps finding more; whole hosts with a start of a second orientation), up to
// kTwoStartRanks ranks, each with half, and larger steps cut into pieces: a move costs more the
// larger the step, so kMovesRanks / ranks per ms between the two limits (2,000 moves on steps of
// up to 512 ranks, median 20 ms of a partial-host suite plan on one core; 100 from 10,240 ranks
// up, where more moves only spend time). Past kMovesRanks / kMovesPerMsLeast ranks, whole hosts
// or not, the same rate goes on falling to kMovesPerMsFloor (10 moves from 102,400 ranks up): a
// host exchange re-routes data-parallel groups that grow with the step, and at 131,072 ranks
// 100 of them took 0.86 s of `map`'s 2.3 s (tools/bench/cli_scale.sh) and changed none of the
// four scale rows' plans (mapper_bench --scale-only gives the same figures with --moves 0).
constexpr double kMovesPerMsMost = 10, kMovesPerMsLeast = 0.5, kMovesRanks = 5120;
constexpr double kMovesPerMsFloor = 0.05;
constexpr long long kTwoStartRanks = 4096;

// The default refinement budget in moves (above), for `budget_ms` of Request::refine_budget_ms;
// the rate falling with the step's size, capped at kMovesPerMsMost (`by_size`) or else at
// kMovesPerMsLeast, and never below kMovesPerMsFloor (past 10,240 ranks both fall).
long long default_moves(double budget_ms, bool by_size, long long ranks) {
  const double size_rate = kMovesRanks / static_cast<double>(std::max<long long>(1, ranks));
  const double per_ms =
      std::clamp(size_rate, kMovesPerMsFloor, by_size ? kMovesPerMsMost : kMovesPerMsLeast);
  return static_cast<long long>(std::max(0.0, budget_ms) * per_ms);
}
constexpr long long kRefineWork = 40'000'000;

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

}  // namespace

Score score(const Machine& m, const Traffic& t, const DomainRule& rule,
            const std::vector<std::uint32_t>& a) {
  Score s;
  s.seconds = evaluate_seconds(m, t, a, &s.crossing);
  s.split = rule.shortfall(a);
  return s;
}

Assignment Mapper::block() const {
  Assignment a(in_.block_slot.size());
  for (std::size_t r = 0; r < a.size(); ++r) a[r] = in_.block_slot[r];
  return a;
}

// Slurm's cyclic distribution: tasks dealt round-robin over the hosts in Slurm's order.
Assignment Mapper::cyclic() const {
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

Assignment Mapper::random(std::uint64_t seed) const {
  Assignment a = block();
  SplitMix rng{seed};
  for (std::size_t i = a.size(); i > 1; --i) std::swap(a[i - 1], a[rng.below(i)]);
  return a;
}

// The same hosts and GPU order made into one contiguous block of ranks per host, as a per-node
// launcher numbers its workers: hosts ordered by the first rank `a` gives them, each host's GPUs
// by the ranks `a` gives them.
Assignment Mapper::host_blocks(const Assignment& a) const {
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
Assignment Mapper::topo(double bound, long long* moves_done) {
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
    if (best_cost.split == 0 && best_cost.seconds <= good_enough) break;
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
  if (!partial && t.world > 24 && t.world <= kTwoStartRanks &&
      (best_cost.split > 0 || best_cost.seconds > good_enough)) {
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
      (best_cost.split > 0 || best_cost.seconds > good_enough)) {
    auto [c, a] = digit_orders(heavy);
    if (!a.empty()) {
      *moves_done += refine(a, c, better, budget / n / 4, kRefineWork / n / 4, good_enough);
      if (better(c, best_cost)) best = std::move(a);
    }
  }
  return best;
}

// A plan's orientation: per dim, how many of its groups lie inside one NCCL node (a host, or
// the NVLink domain holding it: what NVLink carries), then how many NCCL nodes its groups span
// in all (which dim is spread widest: an all-to-all over eight hosts with the all-reduce
// over two, or the other way round, keeps the same dims inside nodes).
std::vector<long long> Mapper::orientation(const Assignment& a) const {
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
bool Mapper::partial_hosts(const std::vector<std::size_t>& heavy) const {
  if (heavy.empty()) return false;
  const auto u = static_cast<std::size_t>(in_.traffic.dims[heavy[0]].size);
  return std::any_of(slots_of_host_.begin(), slots_of_host_.end(),
                     [&](const auto& sl) { return sl.size() % u != 0; });
}

// Dims that communicate, heaviest (bytes per rank) first.
std::vector<std::size_t> Mapper::heavy_dims() const {
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
std::vector<std::vector<std::size_t>> Mapper::candidate_orders(
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

Assignment Mapper::domain_aligned() {
  if (rule_.empty()) return {};
  const Machine& m = in_.machine;
  // Islands in the order of their first slot (hosts by name), each with its slots in order.
  std::map<std::uint32_t, std::size_t> index;
  std::vector<std::vector<std::uint32_t>> islands;
  for (std::uint32_t s = 0; s < m.slots.size(); ++s) {
    auto [it, fresh] = index.emplace(rule_.island_of_slot(s), islands.size());
    if (fresh) islands.emplace_back();
    islands[it->second].push_back(s);
  }
  // Largest blocks first: each island's whole blocks of the level, then of the level below
  // from what is left, and so on; the slots no block fills whole last.
  std::vector<std::uint32_t> seq;
  seq.reserve(m.slots.size());
  std::vector<std::size_t> used(islands.size(), 0);
  const auto& levels = rule_.levels();
  for (auto level = levels.rbegin(); level != levels.rend(); ++level) {
    const auto u = static_cast<std::size_t>(level->unit);
    for (std::size_t i = 0; i < islands.size(); ++i) {
      const std::size_t whole = (islands[i].size() - used[i]) / u * u;
      seq.insert(seq.end(), islands[i].begin() + static_cast<std::ptrdiff_t>(used[i]),
                 islands[i].begin() + static_cast<std::ptrdiff_t>(used[i] + whole));
      used[i] += whole;
    }
  }
  for (std::size_t i = 0; i < islands.size(); ++i) {
    seq.insert(seq.end(), islands[i].begin() + static_cast<std::ptrdiff_t>(used[i]),
               islands[i].end());
  }
  // Ranks with the rule's dims varying fastest, the others after in the layout's order.
  std::vector<std::size_t> order = levels.back().dims;
  for (std::size_t d = 0; d < in_.traffic.dims.size(); ++d) {
    if (in_.traffic.dims[d].size > 1 && std::find(order.begin(), order.end(), d) == order.end()) {
      order.push_back(d);
    }
  }
  return fill(seq, digits_of(order));
}

// The starts, scored, in a fixed order: block by name, every candidate order with each
// packing, then split orders. Candidate evaluations cost O(ranks) each: their count x ranks
// stays under a fixed budget so 131k ranks stay within seconds (refinement has its own).
Mapper::Starts Mapper::candidate_starts(const std::vector<std::size_t>& heavy) {
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
    Score c = score(m, t, rule_, a);
    --evals_left;
    starts.emplace_back(c, std::move(a));
  };
  consider(block_by_name());
  // The fast-domain rule's own start, so that some start keeps it whatever the hosts lend.
  if (Assignment aligned = domain_aligned(); !aligned.empty()) consider(std::move(aligned));
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
Mapper::Starts Mapper::cut_around(const std::vector<std::size_t>& heavy) {
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
          out.emplace_back(score(in_.machine, t, rule_, s), std::move(s));
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
std::pair<Score, Assignment> Mapper::digit_orders(const std::vector<std::size_t>& heavy) {
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
      const Score sc = score(in_.machine, t, rule_, a);
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
std::map<std::uint32_t, std::vector<std::uint32_t>> Mapper::hosts_by_node() const {
  std::map<std::uint32_t, std::vector<std::uint32_t>> out;
  for (std::uint32_t h = 0; h < slots_of_host_.size(); ++h) {
    if (!slots_of_host_[h].empty()) out[internal::nccl_node(in_.machine, h)].push_back(h);
  }
  return out;
}

// The slots every host of the step lends, where all lend as many; else 0.
long long Mapper::slots_per_host() const {
  long long k = 0;
  for (const auto& slots : slots_of_host_) {
    const auto n = static_cast<long long>(slots.size());
    if (n == 0 || (k != 0 && n != k)) return 0;
    k = n;
  }
  return k;
}

// Slurm's block order over hosts sorted by name: the canonical starting point.
Assignment Mapper::block_by_name() const {
  Assignment a;
  for (const auto& slots : slots_of_host_) a.insert(a.end(), slots.begin(), slots.end());
  return a;
}

Digits Mapper::digits_of(const std::vector<std::size_t>& order) const {
  Digits out;
  for (auto d : order) out.push_back({in_.traffic.dims[d].stride, in_.traffic.dims[d].size});
  return out;
}

}  // namespace topoaware::mapper::internal
