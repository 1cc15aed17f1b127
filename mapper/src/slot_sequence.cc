// Slots in locality order (search.h): hosts grouped by the fabric's levels, outermost first, and
// the hosts' slot counts cut into the innermost dims' units (host_cuts.h) where hosts lend parts
// of one; over NVLink islands where the step has domains.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "host_cuts.h"
#include "routing.h"
#include "search.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::internal {

// Slots in locality order: hosts grouped by the outermost level first, then inner levels,
// GPUs by index inside a host. The unit of a group is the largest block of the innermost dims
// (in `order`) that fits its largest child: packing keeps as many units as possible inside one
// child, so the groups of the innermost dims stay inside a host, a leaf, a pod.
std::vector<std::uint32_t> Mapper::slot_sequence(const Digits& order, Packing packing, bool flat) {
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
PieceCut Mapper::cut_tree_units(const std::vector<long long>& n, long long unit, const Cutting& cut,
                                bool top) {
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
std::vector<std::uint32_t> Mapper::order_group(const std::vector<std::uint32_t>& hosts, int level,
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
std::vector<std::uint32_t> Mapper::island_sequence(long long unit) const {
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
std::vector<std::uint32_t> Mapper::units_by_place(const std::vector<std::uint32_t>& seq,
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
  for (const auto& [key, at] : units) out.insert(out.end(), seq.begin() + at, seq.begin() + at + u);
  return out;
}

// The i-th slot of `seq` gets the i-th rank when ranks are enumerated with `order`'s digits
// varying fastest first (then any dims of size 1).
Assignment Mapper::fill(const std::vector<std::uint32_t>& seq, const Digits& order) {
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

}  // namespace topoaware::mapper::internal
