// The cost model and its lower bound (cost.h; derivations in docs/mapper.md).
#include "topoaware/mapper/cost.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

#include "node_facts.h"
#include "routing.h"

namespace topoaware::mapper {
namespace {

using internal::kGB;

using internal::kUnlimitedGbps;

// Routes flows and keeps per-resource loads for the dim being evaluated.
class Router {
 public:
  Router(const Machine& m, bool detail)
      : m_(m), res_(internal::resource_index(m)), detail_(detail) {
    load_.assign(res_.total, 0.0);
    cap_ = internal::resource_capacity(m, res_);
    links_ = internal::resource_ecmp_links(m, res_);
    square_.assign(res_.total, 0.0);
    if (detail_) {
      total_.assign(res_.total, 0.0);
      peak_.assign(res_.total, 0.0);
      tier_bytes_.assign(2 + m.levels.size(), 0.0);
    }
  }

  // routing.h's sink: loads per resource, bytes per tier, bytes up the tree.
  void load(std::size_t r, double bytes) {
    load_[r] += bytes;
    if (links_[r] > 1) square_[r] += bytes * bytes;
  }
  void tier(int t, double bytes) {
    if (detail_) tier_bytes_[static_cast<std::size_t>(t)] += bytes;
  }
  void crossed(std::size_t l, double bytes) { crossing_ += bytes * static_cast<double>(l + 1); }

  int flow(std::uint32_t a, std::uint32_t b, double bytes, bool p2p) {
    return internal::route_flow(m_, res_, a, b, bytes, p2p, *this);
  }
  const internal::ResourceIndex& resources() const { return res_; }

  // Ends a dim: returns max load / bandwidth (seconds) and clears the loads.
  double finish_dim(std::size_t* worst) {
    double best = 0;
    std::size_t arg = 0;
    for (std::size_t i = 0; i < load_.size(); ++i) {
      double l = load_[i];
      if (l <= 0) continue;
      double t = cap_[i] > 0 ? l / cap_[i] : std::numeric_limits<double>::infinity();
      if (links_[i] > 1) {
        t *= internal::ecmp_factor(l * l / square_[i], links_[i]);
        square_[i] = 0;
      }
      if (t > best) {
        best = t;
        arg = i;
      }
      if (detail_) {
        total_[i] += l;
        peak_[i] = std::max(peak_[i], t);
      }
      load_[i] = 0;
    }
    if (worst) *worst = arg;
    return best;
  }

  std::string describe(std::size_t i) const {
    auto slot_name = [&](std::size_t s) {
      const Slot& sl = m_.slots[s];
      return m_.hosts[sl.host] + " GPU" + std::to_string(sl.gpu);
    };
    auto port_name = [&](std::size_t p) {
      std::size_t h =
          std::upper_bound(m_.port_base.begin(), m_.port_base.end(), p) - m_.port_base.begin() - 1;
      return m_.hosts[h] + " port " + std::to_string(p - m_.port_base[h]);
    };
    if (i < res_.nv_in) return "NVLink out of " + slot_name(i);
    if (i < res_.nic_out) return "NVLink into " + slot_name(i - res_.nv_in);
    if (i < res_.nic_in) return "NIC out of " + port_name(i - res_.nic_out);
    if (i < res_.nic_in + m_.port_gbps.size()) return "NIC into " + port_name(i - res_.nic_in);
    for (std::size_t l = 0; l < m_.levels.size(); ++l) {
      std::size_t g = m_.levels[l].uplink_gbps.size();
      if (i >= res_.up[l] && i < res_.up[l] + g) {
        return "uplink of " + m_.levels[l].group_label[i - res_.up[l]];
      }
      if (i >= res_.down[l] && i < res_.down[l] + g) {
        return "downlink into " + m_.levels[l].group_label[i - res_.down[l]];
      }
    }
    return "?";
  }
  std::string level_of(std::size_t i) const {
    if (i < res_.nic_out) return "nvlink";
    if (i < res_.nic_in + m_.port_gbps.size()) return "nic";
    for (std::size_t l = 0; l < m_.levels.size(); ++l) {
      if (i >= res_.up[l] && i < res_.down[l] + m_.levels[l].uplink_gbps.size()) {
        return m_.levels[l].name;
      }
    }
    return "?";
  }
  void locate(std::size_t i, LinkLoad* out) const {
    if (i < res_.nic_out) {
      out->host = m_.slots[i < res_.nv_in ? i : i - res_.nv_in].host;
      return;
    }
    if (i < res_.nic_in + m_.port_gbps.size()) {
      std::size_t p = i < res_.nic_in ? i - res_.nic_out : i - res_.nic_in;
      out->host =
          std::upper_bound(m_.port_base.begin(), m_.port_base.end(), p) - m_.port_base.begin() - 1;
      return;
    }
    for (std::size_t l = 0; l < m_.levels.size(); ++l) {
      std::size_t g = m_.levels[l].uplink_gbps.size();
      if (i >= res_.up[l] && i < res_.up[l] + 2 * g) {
        out->net_level = static_cast<int>(l);
        out->group = static_cast<std::int64_t>((i - res_.up[l]) % g);
      }
    }
  }
  double cap(std::size_t i) const { return cap_[i]; }
  double crossing() const { return crossing_; }
  const std::vector<double>& total() const { return total_; }
  const std::vector<double>& peak() const { return peak_; }
  const std::vector<double>& tier_bytes() const { return tier_bytes_; }

 private:
  const Machine& m_;
  internal::ResourceIndex res_;
  bool detail_;
  std::vector<double> load_, cap_, total_, peak_, tier_bytes_, square_;
  std::vector<std::uint32_t> links_;
  double crossing_ = 0;
};

struct DimResult {
  double seconds = 0;
  int in_host = 0, in_leaf = 0, across = 0;
  std::size_t worst = 0;
  double bw_seconds = 0;
};

// Latency steps of one call of a dim: a ring's 2 (n - 1), one for an all-to-all or a stage's send.
double latency_steps(const DimTraffic& d) {
  return d.pattern == Pattern::kRing ? 2.0 * (d.size - 1.0) : 1.0;
}

// Routes one dim's groups; `finish`: ends the dim (its bandwidth time, loads cleared), else the
// loads stay for the dims that overlap it and only the latency term is returned.
DimResult route_dim(Router& router, const Machine& m, const DimTraffic& d,
                    const std::vector<std::uint32_t>& slot_of_rank, internal::NodeGroups& hg,
                    std::vector<std::uint32_t>& members, bool finish = true) {
  DimResult r;
  const long long n = d.size;
  if (n <= 1 || d.bytes <= 0) return r;
  const long long world = static_cast<long long>(slot_of_rank.size());
  const long long block = d.stride * n;
  int reached_max = 0;
  members.resize(static_cast<std::size_t>(n));
  for (long long outer = 0; outer < world; outer += block) {
    for (long long inner = 0; inner < d.stride; ++inner) {
      const long long base = outer + inner;
      for (long long i = 0; i < n; ++i) {
        members[static_cast<std::size_t>(i)] =
            slot_of_rank[static_cast<std::size_t>(base + i * d.stride)];
      }
      // 0: inside a host or NVLink domain, 1: under one switch group, more: across levels.
      const int reached =
          internal::route_group(m, router.resources(), d, members.data(), hg, router);
      if (reached == 0)
        ++r.in_host;
      else if (reached == 1)
        ++r.in_leaf;
      else
        ++r.across;
      reached_max = std::max(reached_max, reached);
    }
  }
  if (finish) r.bw_seconds = router.finish_dim(&r.worst);
  r.seconds =
      r.bw_seconds + d.calls * latency_steps(d) * internal::reach_latency_us(m, reached_max) * 1e-6;
  return r;
}

// Overlapping dims: every dim's loads together, one bandwidth time, each dim's latency added.
double overlapped_seconds(const Machine& m, const Traffic& t,
                          const std::vector<std::uint32_t>& slot_of_rank, double* crossing) {
  Router router(m, false);
  internal::NodeGroups hg;
  std::vector<std::uint32_t> members;
  double latency = 0;
  for (const auto& d : t.dims) {
    latency += route_dim(router, m, d, slot_of_rank, hg, members, false).seconds;
  }
  for (const auto& f : t.matrix)
    router.flow(slot_of_rank[f.from], slot_of_rank[f.to], f.bytes, true);
  if (crossing) *crossing = router.crossing();
  return router.finish_dim(nullptr) + latency;
}

CostReport evaluate_impl(const Machine& m, const Traffic& t,
                         const std::vector<std::uint32_t>& slot_of_rank, bool detail,
                         std::vector<LinkLoad>* loads, double* crossing = nullptr) {
  if (t.overlap) {
    // Per-dim figures as each dim alone; the total with the dims overlapping.
    Traffic alone = t;
    alone.overlap = false;
    CostReport r = evaluate_impl(m, alone, slot_of_rank, detail, loads, crossing);
    r.seconds = overlapped_seconds(m, t, slot_of_rank, crossing);
    return r;
  }
  if (static_cast<long long>(slot_of_rank.size()) != t.world) {
    throw Error("cost model: " + std::to_string(slot_of_rank.size()) +
                " ranks placed, layout has " + std::to_string(t.world));
  }
  for (auto s : slot_of_rank) {
    if (s >= m.slots.size()) throw Error("cost model: rank placed on a slot that does not exist");
  }
  Router router(m, detail);
  internal::NodeGroups hg;
  std::vector<std::uint32_t> members;
  CostReport report;
  double worst_t = -1;
  std::string worst_name;
  for (const auto& d : t.dims) {
    DimResult r = route_dim(router, m, d, slot_of_rank, hg, members);
    report.seconds += r.seconds;
    if (detail) {
      DimCost dc;
      dc.dim = d.name;
      dc.seconds = r.seconds;
      dc.groups_in_host = r.in_host;
      dc.groups_in_leaf = r.in_leaf;
      dc.groups_across = r.across;
      report.dims.push_back(dc);
      if (r.bw_seconds > worst_t && r.bw_seconds > 0) {
        worst_t = r.bw_seconds;
        std::ostringstream s;
        s << router.describe(r.worst) << " (" << d.name << ", " << router.cap(r.worst) / kGB
          << " GB/s)";
        worst_name = s.str();
      }
    }
  }
  if (!t.matrix.empty()) {
    for (const auto& f : t.matrix) {
      router.flow(slot_of_rank[f.from], slot_of_rank[f.to], f.bytes, true);
    }
    std::size_t worst = 0;
    double s = router.finish_dim(&worst);
    report.seconds += s;
    if (detail) {
      DimCost dc;
      dc.dim = "matrix";
      dc.seconds = s;
      report.dims.push_back(dc);
      if (s > worst_t && s > 0) {
        worst_t = s;
        worst_name = router.describe(worst) + " (matrix)";
      }
    }
  }
  if (crossing) *crossing = router.crossing();
  if (detail) {
    report.bottleneck = worst_name;
    const auto& tb = router.tier_bytes();
    report.tiers.push_back({"nvlink", tb[0]});
    report.tiers.push_back({"network", tb[1]});
    for (std::size_t l = 0; l < m.levels.size(); ++l) {
      report.tiers.push_back({m.levels[l].name, tb[2 + l]});
    }
    if (loads) {
      loads->clear();
      const auto& tot = router.total();
      for (std::size_t i = 0; i < tot.size(); ++i) {
        if (tot[i] <= 0) continue;
        LinkLoad ll{router.describe(i), router.level_of(i), tot[i], router.cap(i) / kGB,
                    router.peak()[i]};
        router.locate(i, &ll);
        loads->push_back(std::move(ll));
      }
    }
  }
  return report;
}

}  // namespace

Traffic job_traffic(const Layout& layout) {
  Traffic t;
  t.world = world_size(layout);
  t.dims = default_traffic(layout);
  t.matrix = layout.matrix;
  return t;
}

CostReport evaluate(const Machine& machine, const Traffic& traffic,
                    const std::vector<std::uint32_t>& slot_of_rank, std::vector<LinkLoad>* loads) {
  return evaluate_impl(machine, traffic, slot_of_rank, true, loads);
}

double evaluate_seconds(const Machine& machine, const Traffic& traffic,
                        const std::vector<std::uint32_t>& slot_of_rank, double* crossing) {
  return evaluate_impl(machine, traffic, slot_of_rank, false, nullptr, crossing).seconds;
}

// ---------------------------------------------------------------------------------------------
// Lower bound (docs/mapper.md, "Lower bound").

namespace {

// Every host's NIC ports together, bytes/s: what leaves an island, in one place.
std::vector<double> host_port_capacity(const Machine& m) {
  std::vector<double> cap(m.hosts.size(), 0);
  for (std::size_t h = 0; h < m.hosts.size(); ++h) {
    for (std::uint32_t p = 0; p < m.port_count[h]; ++p)
      cap[h] += m.port_gbps[m.port_base[h] + p] * kGB;
  }
  return cap;
}

// The least a ring group's hop between two NCCL nodes (hosts, or NVLink cliques: nccl_node())
// carries: V, or the bytes themselves where NCCL may run the all-reduce as a two-node tree: the
// `others` members not on the rank's node fit on one node of at most kmax slots.
double least_hop(const DimTraffic& dt, long long others, long long kmax) {
  const double V = internal::ring_volume(dt.size, dt.bytes);
  if (!dt.all_reduce || others > kmax) return V;
  return std::min(V, internal::two_node_tree_volume(dt.bytes));
}

// The least hop of a group split over nodes in any way: a two-node tree needs n <= 2 kmax.
double any_split_hop(const DimTraffic& dt, long long kmax) {
  return least_hop(dt, dt.size - std::min(kmax, static_cast<long long>(dt.size) - 1), kmax);
}

// Members of one group that can share a "bin" (host, NVLink domain, level group) without
// splitting: how many groups of size n must be split over bins of the given slot counts.
double split_groups(const std::vector<long long>& bin_slots, long long n, long long groups) {
  long long whole = 0;
  for (long long c : bin_slots) whole += c / n;
  return static_cast<double>(std::max(0LL, groups - whole));
}

// Floors over counts 1..k: p[k-1] = the least of v[0..k-1] (a floor for "at most k members").
std::vector<double> prefix_min(const std::vector<double>& v) {
  std::vector<double> p(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = i == 0 ? v[0] : std::min(p[i - 1], v[i]);
  return p;
}

constexpr std::size_t kNoDim = static_cast<std::size_t>(-1);

// Middle stages (docs/mapper.md, "Lower bound", middle stages). The walk speaks for a rank of
// each dim that it cannot choose, so a pipeline's floor is an end stage's (one neighbour). A
// pipeline of n >= 3 stages has W (n - 2) / n ranks in middle stages, each receiving from two
// neighbours. Walked pipeline first from a middle-stage rank of the place, the product argument
// holds with the pipeline's m the fewest over the place's middle-stage ranks alone: the bound
// then takes the middle stage's floors, on any place that holds a middle stage. With `value(c)`
// that bound on places of c slots (`slots`: every place's count), the largest value v such that
// the places whose value is below v hold fewer slots than there are middle-stage ranks: some
// middle stage sits on a place of value >= v.
template <class Value>
double middle_stage_bound(const std::vector<long long>& slots, long long middle,
                          const Value& value) {
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

// Ring and all-to-all members are alike: when a rank's place holds k < n members, the other
// n - k sit on other places holding at most n - k each, and the dim takes at least as long as
// those members' own bound. f[k-1] is the bound for k members on the rank's place.
void raise_by_other_members(std::vector<double>& f, long long n) {
  const auto kcap = static_cast<long long>(f.size());
  const std::vector<double> least = prefix_min(f);
  for (long long k = 1; k <= kcap && k < n; ++k) {
    const long long j = std::min(n - k, kcap);
    auto& v = f[static_cast<std::size_t>(k - 1)];
    v = std::max(v, least[static_cast<std::size_t>(j - 1)]);
  }
}

// Whether a place can have m as the fewest members of a dim's group (of n) that a rank on it
// finds there, and what its lines cost: the dim's groups cut the place's ranks into lines, one of
// m and the others of m to n each, so the rest, `ranks` - m, is a sum of such counts. The ranks
// counted are those of the place's quotient by the dims it holds whole (c over their sizes'
// product): the lines there have the same counts. A line of j members holds ranks with j members
// of their group on the place, so the dim takes at least f[j-1] (f: the dim's floors for the
// place's kind). Returns the least, over the ways to cut the rest into lines, of the largest
// floor among all lines, f[m-1] included, or -1 where no way exists: a place of 9 ranks in the
// quotient cuts tp=4 into lines of 2 and more only with one of 3.
double place_lines_floor(const std::vector<double>& f, long long ranks, long long m, long long n) {
  const double own = f[static_cast<std::size_t>(m - 1)];
  if (m >= n) return own;
  const long long rest = ranks - m;
  if (rest < 0) return -1;
  if (rest % m == 0) return own;  // lines of m alone (or none)
  const long long top = std::min({n, static_cast<long long>(f.size()), rest});
  bool dearer = false;  // some count's floor above the fewest's
  for (long long j = m + 1; j <= top && !dearer; ++j) {
    dearer = f[static_cast<std::size_t>(j - 1)] > own;
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
      if (f[static_cast<std::size_t>(j - 1)] > v) continue;
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
    const double v = f[static_cast<std::size_t>(j - 1)];
    if (v > own && v < best && make_up(v)) best = v;
  }
  return best;
}

// The least sum_d f_d(m_d) over vectors with 1 <= m_d <= |f_d| and prod_d m_d <= c, where, when
// the place's c slots all hold ranks (`full`), the dims with m_d = n_d (the whole group on the
// place) have a product of sizes dividing c and each m_d fits the place's lines, each dim then
// taking the larger of f_d(m_d) and its other lines' floor (place_lines_floor; the walk
// argument in docs/mapper.md). Dims whose f is a single zero constrain nothing.
double least_sum(const std::vector<std::vector<double>>& f, const std::vector<long long>& n,
                 long long c, bool full) {
  std::vector<std::size_t> live;
  for (std::size_t d = 0; d < f.size(); ++d) {
    if (f[d].size() > 1 || (f[d].size() == 1 && f[d][0] > 0)) live.push_back(d);
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
        const auto& fj = f[live[j]];
        const double lines = place_lines_floor(fj, c / whole, pick[j], n[live[j]]);
        if (lines < 0) return;
        total += lines - fj[static_cast<std::size_t>(pick[j] - 1)];
      }
      best = std::min(best, total);
      return;
    }
    const auto& fd = f[live[i]];
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
double least_sum_trees(const std::vector<std::vector<double>>& ring,
                       const std::vector<std::vector<double>>& any, const std::vector<long long>& n,
                       long long c, long long kmax, bool partners, bool full,
                       const std::vector<std::vector<double>>* host_any = nullptr,
                       std::size_t loose = kNoDim) {
  std::vector<std::size_t> live;
  for (std::size_t d = 0; d < any.size(); ++d) {
    if (any[d].size() > 1 || (any[d].size() == 1 && any[d][0] > 0)) live.push_back(d);
  }
  if (live.empty()) return 0;
  c = std::max(1LL, c);
  // g[e][q]: the least floor of dim e with at most kmax / q members on a host (`host_any`: the
  // host floors, where the place is larger than a host).
  const auto& hf = host_any ? *host_any : any;
  auto g = [&](std::size_t e, long long q) {
    const long long most = std::min<long long>(static_cast<long long>(hf[e].size()), kmax / q);
    double v = std::numeric_limits<double>::infinity();
    for (long long j = 1; j <= most; ++j) v = std::min(v, hf[e][static_cast<std::size_t>(j - 1)]);
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
        if (partners && e != d) clamp[e] = std::max(clamp[e], g(e, q));
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
    const auto& fa = any[d];
    const auto& fr = ring[d];
    const long long nd = n[d];
    for (long long k = 1; k <= room && k <= static_cast<long long>(fa.size()); ++k) {
      long long w = whole;
      if (k == nd && d != loose) {
        w *= nd;
        if (full && c % w != 0) continue;  // a place closed under these holds a multiple of w
      }
      const auto at = static_cast<std::size_t>(k - 1);
      const double r = at < fr.size() ? fr[at] : fa[at];
      pick[d] = k;
      val[d] = r;
      self(self, i + 1, room / k, w, partial + r);
      if (fa[at] < r && k < nd) {  // a two-node tree is cheaper, with its partner's floors
        val[d] = fa[at];
        trees.emplace_back(d, nd - k);
        self(self, i + 1, room / k, w, partial + fa[at]);
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
double least_sum_over(const std::vector<std::vector<double>>& f, const std::vector<long long>& n,
                      const std::vector<long long>& slots, std::size_t max_sizes, bool full) {
  double best = 0;
  for (long long c : place_sizes(slots, max_sizes)) best = std::max(best, least_sum(f, n, c, full));
  return best;
}

// A rank receives A bytes that must come over NVLink and X that may come over NVLink (from its
// NVLink domain) or into its own NIC port: the least time of the best split of X.
double least_split(double A, double X, double nv, double port) {
  const double y = port * (A + X) / (nv + port);  // bytes by NIC that balance both
  return y <= X ? (A + X) / (nv + port) : std::max(A / nv, X / port);
}

// The least time of a ring member whose NCCL node holds j of its group: all n there, V over
// NVLink; else (j-1)/j V along the node's chain over NVLink and hop/j to the next node by its own
// NICs, the hop a two-node tree's bytes where the others may fit on one node of `node_kmax`
// slots (never with `ring_only`).
double ring_on_node(const DimTraffic& dt, long long j, long long node_kmax, bool ring_only,
                    double nv, double port) {
  const double V = internal::ring_volume(dt.size, dt.bytes);
  if (j == dt.size) return V / nv;
  const double jd = static_cast<double>(j);
  const double hop = ring_only ? V : least_hop(dt, dt.size - j, node_kmax);
  return std::max((jd - 1) / jd * V / nv, hop / (jd * port));
}

// The least time of a pipeline stage with `neighbours` (1 or 2) neighbour stages, k stages of
// its group on its host (itself included): each neighbour sends it S, into its NVLink ingress
// when on its host (at most k - 1 are) or, with NVLink domains, from a host of its domain;
// otherwise into its own NIC port (a flow enters by the receiver's port, PXN or not).
double pipe_stage(int neighbours, long long k, bool domains, double S, double nv, double port) {
  const int most_nvlink =
      domains ? neighbours : static_cast<int>(std::min<long long>(neighbours, k - 1));
  double best = std::numeric_limits<double>::infinity();
  for (int a = 0; a <= most_nvlink; ++a) {
    best = std::min(best, std::max(a * S / nv, (neighbours - a) * S / port));
  }
  return best;
}

// ---- The joint crossing bound (docs/mapper.md, "Lower bound", "Joint crossing") ----

// The dims with more than one member, innermost first, when they tile the ranks as a mixed radix
// (stride of each = product of the sizes inside it, product = world); empty otherwise.
std::vector<std::size_t> radix_dims(const Traffic& t) {
  std::vector<std::size_t> idx;
  for (std::size_t d = 0; d < t.dims.size(); ++d) {
    if (t.dims[d].size > 1) idx.push_back(d);
  }
  std::sort(idx.begin(), idx.end(),
            [&](std::size_t a, std::size_t b) { return t.dims[a].stride < t.dims[b].stride; });
  long long expect = 1;
  for (std::size_t d : idx) {
    if (t.dims[d].stride != expect) return {};
    expect *= t.dims[d].size;
  }
  if (expect != t.world) return {};
  return idx;
}

// Places of one tier whose exits the crossing bound counts: their slot counts and the capacity
// every flow leaving them loads (the NIC ports of an island, a level group's uplink).
struct CrossTier {
  std::vector<long long> slots;
  std::vector<double> cap;
  std::vector<std::uint32_t> links;  // ECMP links of the place's uplink; 0: flows spread evenly
  double total_cap = 0;
};

// How many levels, from the lowest, nest: hosts sharing a level l-1 group share their level l
// group. Routing climbs to the first level where two hosts share a group, so a flow between
// hosts of different groups of a nesting level l reaches above l.
std::size_t nested_levels(const Machine& m) {
  for (std::size_t l = 1; l < m.levels.size(); ++l) {
    std::vector<long long> up(m.levels[l - 1].uplink_gbps.size(), -1);
    for (std::size_t h = 0; h < m.hosts.size(); ++h) {
      auto& u = up[m.levels[l - 1].group_of_host[h]];
      const auto g = static_cast<long long>(m.levels[l].group_of_host[h]);
      if (u >= 0 && u != g) return l;
      u = g;
    }
  }
  return m.levels.size();
}

// Islands, then each network level with its groups merged where an NVLink domain spans them (a
// flow between hosts of one domain uses NVLink and loads no uplink). A level whose groups do not
// nest inside the next level's is left out, and so are the levels above it: the routing stops
// climbing at the first level where both hosts share a group.
std::vector<CrossTier> cross_tiers(const Machine& m, const std::vector<long long>& host_slots) {
  std::vector<CrossTier> tiers;
  const std::vector<double> host_ports = host_port_capacity(m);
  auto add_tier = [&](const std::vector<std::size_t>& bin_of_host, std::size_t bins,
                      const std::vector<double>& bin_cap,
                      const std::vector<std::uint32_t>& bin_links) {
    CrossTier tier;
    std::vector<long long> slots(bins, 0);
    for (std::size_t h = 0; h < m.hosts.size(); ++h) slots[bin_of_host[h]] += host_slots[h];
    for (std::size_t b = 0; b < bins; ++b) {
      if (slots[b] == 0) continue;
      tier.slots.push_back(slots[b]);
      tier.cap.push_back(bin_cap[b]);
      tier.links.push_back(b < bin_links.size() ? bin_links[b] : 0);
      tier.total_cap += bin_cap[b];
    }
    tiers.push_back(std::move(tier));
  };
  // Union-find over the bins of a tier: hosts of one NVLink domain share a bin.
  auto merge_domains = [&](std::vector<std::size_t> key, std::size_t keys,
                           const std::vector<double>& key_cap,
                           const std::vector<std::uint32_t>& key_links) {
    std::vector<std::size_t> parent(keys);
    std::iota(parent.begin(), parent.end(), 0);
    auto root = [&](std::size_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    std::map<int, std::size_t> domain_key;
    for (std::size_t h = 0; h < m.hosts.size(); ++h) {
      if (m.domain_of_host[h] < 0) continue;
      auto [it, fresh] = domain_key.emplace(m.domain_of_host[h], key[h]);
      if (!fresh) parent[root(key[h])] = root(it->second);
    }
    std::vector<std::size_t> dense(keys, keys);
    std::vector<double> cap;
    std::size_t bins = 0;
    for (std::size_t k = 0; k < keys; ++k) {
      std::size_t r = root(k);
      if (dense[r] == keys) {
        dense[r] = bins++;
        cap.push_back(0);
      }
      // Only groups holding a host of the step exist in the machine, so each one's uplink counts.
      cap[dense[r]] += key_cap[k];
    }
    for (auto& k : key) k = dense[root(k)];
    // A bin that merged groups spreads its flows over several groups' links: no ECMP factor.
    std::vector<std::uint32_t> links(bins, 0);
    if (bins == keys) {
      for (std::size_t k = 0; k < keys && k < key_links.size(); ++k) links[dense[k]] = key_links[k];
    }
    add_tier(key, bins, cap, links);
  };
  std::vector<std::size_t> by_host(m.hosts.size());
  std::iota(by_host.begin(), by_host.end(), 0);
  merge_domains(by_host, m.hosts.size(), host_ports, {});
  const std::size_t nest = nested_levels(m);
  for (std::size_t l = 0; l < nest; ++l) {
    const NetLevel& nl = m.levels[l];
    std::vector<double> cap(nl.uplink_gbps.size());
    for (std::size_t g = 0; g < cap.size(); ++g) cap[g] = nl.uplink_gbps[g] * kGB;
    std::vector<std::uint32_t> links;
    if (nl.ecmp) {
      links.assign(cap.size(), 1);
      for (std::size_t g = 0; g < cap.size() && g < nl.uplink_links.size(); ++g) {
        links[g] = nl.uplink_links[g];
      }
    }
    merge_domains(std::vector<std::size_t>(nl.group_of_host.begin(), nl.group_of_host.end()),
                  nl.uplink_gbps.size(), cap, links);
  }
  return tiers;
}

// H[c] for c = 0..cmax: at most the least sum_d w_d p_d(A) over sets A of c ranks, p_d(A) the
// number of d-groups that A meets but does not hold whole. Peeling the outermost dim D off the
// rank space splits A into n_D slices A_i (one per coordinate of D): inner dims' p add up over
// slices, and p_D = |union A_i| - |intersection A_i| >= max |A_i| - min |A_i|. With the slice
// sizes in [x1, x2], sum_i H_inner(|A_i|) is at least n_D times the convex hull of H_inner over
// [x1, x2] at the mean c/n_D, which is a mix of two points. `n` and `w` innermost first.
std::vector<double> least_cut(const std::vector<long long>& n, const std::vector<double>& w,
                              long long cmax) {
  std::vector<double> h = {0.0, 0.0};  // the empty space's one point: 0 or 1 rank
  long long space = 1;
  for (std::size_t k = 0; k < n.size(); ++k) {
    const long long nk = n[k];
    const double nd = static_cast<double>(nk);
    const long long inner = static_cast<long long>(h.size()) - 1;  // largest slice size
    space = std::min(cmax, space * nk);
    std::vector<double> next(static_cast<std::size_t>(space + 1));
    for (long long c = 0; c <= space; ++c) {
      const double mu = static_cast<double>(c) / nd;
      double best = std::numeric_limits<double>::infinity();
      if (c % nk == 0) best = nd * h[static_cast<std::size_t>(c / nk)];
      const long long lo = c / nk, top = std::min(inner, c);
      for (long long x1 = 0; x1 <= lo; ++x1) {
        const double h1 = h[static_cast<std::size_t>(x1)];
        for (long long x2 = std::max(lo + 1, x1 + 1); x2 <= top; ++x2) {
          const double spread = w[k] * static_cast<double>(x2 - x1);
          if (spread >= best) break;  // only grows with x2; the hull term is never negative
          const double h2 = h[static_cast<std::size_t>(x2)];
          const double v = nd * (h1 * (static_cast<double>(x2) - mu) +
                                 h2 * (mu - static_cast<double>(x1))) /
                               static_cast<double>(x2 - x1) +
                           spread;
          best = std::min(best, v);
        }
      }
      next[static_cast<std::size_t>(c)] = best;
    }
    h = std::move(next);
  }
  return h;
}

// Dims the whole cuts (cut_vectors(), cut_case_bound()) take at most.
constexpr std::size_t kCutDims = 3;
using CutVector = std::array<std::int32_t, kCutDims>;

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

// Largest place the crossing bound takes (least_cut costs about cmax^3 / n per dim; at 256 the
// bound took a third of all mapping time in the benchmark to tighten one row, 1.16 s to 1.30 s).
constexpr long long kCutSlots = 128;

// The least bytes one flow of a dim carries over the network (route_group(), route_flow(): a
// flow is cut into at most `pieces` pieces): a ring's hop shared by the `members` of its group on
// the sending node (at most that many: V, or a two-node tree's S where two nodes of that many
// hold the group), an all-to-all pair's S/n, a pipeline's S.
double least_flow_bytes(const DimTraffic& dt, long long members, std::uint32_t pieces) {
  const double p = static_cast<double>(pieces);
  if (dt.pattern == Pattern::kAllToAll) return dt.bytes / static_cast<double>(dt.size) / p;
  if (dt.pattern == Pattern::kPipeline) return dt.bytes / p;
  members = std::max(1LL, members);
  return any_split_hop(dt, members) / static_cast<double>(members) / p;
}

// What the crossing bounds read off the machine and the traffic: the tiers whose exits count, the
// bytes a cut group of each radix dim sends out of a place and the least bytes of one of its
// flows, and the most flows each place can send up (ECMP). False where no tier or no dim counts
// (or not every slot holds a rank).
struct CrossSetup {
  std::vector<std::size_t> radix;  // radix_dims(), innermost first
  std::vector<long long> n;        // their sizes
  std::vector<double> out;         // per radix index: bytes a cut group sends out of a place
  std::vector<double> flow;        // per radix index: least bytes of one flow (least_flow_bytes)
  std::vector<std::size_t> live;   // radix indexes with bytes
  std::vector<CrossTier> tiers;
  std::vector<std::vector<double>> flows;  // per tier and place: the most flows it can send up
  long long cmax = 0;                      // most slots of a counted place
};

// `rings`, where given: dims known to run no group as a two-node tree, so each group a place cuts
// sends V out; `members`, where given: per dim, the most members of one group any NCCL node holds
// (else its size, at most kmax), which bounds how finely a ring's hop is cut into flows.
bool cross_setup(const Machine& m, const Traffic& t, const std::vector<long long>& host_slots,
                 long long kmax, const std::vector<bool>& rings, CrossSetup* s,
                 const std::vector<long long>& members = {}) {
  if (static_cast<long long>(m.slots.size()) != t.world) return false;  // every slot a rank
  s->radix = radix_dims(t);
  if (s->radix.empty()) return false;
  for (auto& tier : cross_tiers(m, host_slots)) {
    const long long most = *std::max_element(tier.slots.begin(), tier.slots.end());
    // A tier of one place, or one without a real uplink limit, is crossed by nothing.
    if (tier.slots.size() < 2 || most > kCutSlots || tier.total_cap >= kUnlimitedGbps * kGB) {
      continue;
    }
    s->cmax = std::max(s->cmax, most);
    s->tiers.push_back(std::move(tier));
  }
  if (s->tiers.empty()) return false;
  // Bytes a d-group that a place meets but does not hold sends out of the place, at least: a
  // ring hands the ring to a host off the place at least once (V), an all-to-all member pair
  // split j | n-j sends j (n-j) S/n >= (n-1) S/n, a pipeline chain crosses the edge once (S).
  const std::vector<std::size_t>& radix = s->radix;
  s->n.assign(radix.size(), 0);
  s->out.assign(radix.size(), 0.0);
  for (std::size_t i = 0; i < radix.size(); ++i) {
    const DimTraffic& dt = t.dims[radix[i]];
    s->n[i] = dt.size;
    const double nd = static_cast<double>(dt.size);
    if (dt.bytes <= 0) continue;
    if (dt.pattern == Pattern::kRing) {
      const bool ring = !rings.empty() && rings[radix[i]];
      s->out[i] = ring ? internal::ring_volume(dt.size, dt.bytes) : any_split_hop(dt, kmax);
    } else if (dt.pattern == Pattern::kAllToAll) {
      s->out[i] = (nd - 1) / nd * dt.bytes;
    } else {
      s->out[i] = dt.bytes;
    }
    s->live.push_back(i);
  }
  if (s->live.empty()) return false;
  // ECMP: a dim's time on a place's uplink is its exit load / cap times E(F, L), E falling as the
  // effective flow count F grows, and F is at most the flows the place's ranks can send up: per
  // rank one ring or tree hop to the next node, two pipeline neighbours, n-1 all-to-all peers,
  // each cut into at most `pieces` (the most ports a GPU or a PXN relay has); the most over the
  // dims is kept per place (ecmp_exit() prices the exit load with it).
  std::uint32_t pieces = 1;
  for (const Slot& sl : m.slots) pieces = std::max(pieces, sl.ports.count);
  for (const PortRange& r : m.relay_ranges) pieces = std::max(pieces, r.count);
  s->flow.assign(radix.size(), 0.0);
  for (std::size_t i : s->live) {
    const std::size_t d = radix[i];
    const long long most = members.empty() ? std::min<long long>(t.dims[d].size, kmax) : members[d];
    s->flow[i] = least_flow_bytes(t.dims[d], most, pieces);
  }
  s->flows.assign(s->tiers.size(), {});
  for (std::size_t ti = 0; ti < s->tiers.size(); ++ti) {
    const CrossTier& tier = s->tiers[ti];
    s->flows[ti].assign(tier.slots.size(), 0.0);
    for (std::size_t b = 0; b < tier.slots.size(); ++b) {
      if (tier.links[b] <= 1) continue;
      double most = 0;
      for (std::size_t i : s->live) {
        const DimTraffic& dt = t.dims[radix[i]];
        const double per_rank = dt.pattern == Pattern::kAllToAll   ? dt.size - 1.0
                                : dt.pattern == Pattern::kPipeline ? 2.0
                                                                   : 1.0;
        most = std::max(most, static_cast<double>(tier.slots[b]) * per_rank * pieces);
      }
      s->flows[ti][b] = most;
    }
  }
  return true;
}

// A place's exit load on an ECMP tier times its expected worst link, at least. Each dim's time
// there is its load u_d times E(F_d), F_d its effective flow count, at most the place's `most`
// flows and, every flow carrying `least` bytes or more, at most u_d / least (F <= sum b / min b).
// E never rises with F, so u E(min(most, max(1, u / least))) bounds each dim's term; it never
// falls as u grows and its ratio to u never rises, so it is subadditive: the dims' terms
// together are at least its value at their summed load, and at any floor h under that sum.
double ecmp_exit(double h, double least, double most, std::uint32_t links) {
  if (links <= 1 || h <= 0) return h;
  double flows = most;
  if (least > 0) flows = std::min(most, std::max(1.0, h / least));
  return h * internal::ecmp_factor(flows, links);
}

// The joint crossing bound. For any theta in [0,1]^D, sum_d T_d = sum_d theta_d T_d +
// sum_d (1 - theta_d) T_d: the first part is at least the walk bound over the floors scaled by
// theta, the second at least the crossing bound with each dim's bytes scaled by 1 - theta (each
// part minimized over placements on its own). Every theta gives a true bound; a coordinate
// search picks a good one. `f`, `fi`: the walk's host and island floors; `rings`, `members`: as
// cross_setup() takes them; `seed`, where given: a theta to start from, and the best one found.
double joint_crossing_bound(
    const Machine& m, const Traffic& t, const std::vector<std::vector<double>>& f,
    const std::vector<std::vector<double>>& fi, const std::vector<long long>& sizes,
    const std::vector<long long>& host_slots, const std::vector<long long>& island_slots,
    long long kmax, const std::vector<bool>& rings = {}, const std::vector<long long>& members = {},
    std::vector<double>* seed = nullptr) {
  CrossSetup setup;
  if (!cross_setup(m, t, host_slots, kmax, rings, &setup, members)) return 0;
  const std::vector<double>& flow = setup.flow;
  const std::vector<std::size_t>& radix = setup.radix;
  const std::vector<long long>& n = setup.n;
  const std::vector<double>& out = setup.out;
  const std::vector<std::size_t>& live = setup.live;
  const std::vector<CrossTier>& tiers = setup.tiers;
  const long long cmax = setup.cmax;
  constexpr std::size_t kPlaceSizes = 32;
  std::vector<std::vector<double>> fs = f, fis = fi;
  std::vector<double> w(radix.size());
  std::vector<double> full_cut;  // least_cut at theta = 0
  auto eval = [&](const std::vector<double>& theta) {  // theta per radix index
    for (std::size_t i = 0; i < radix.size(); ++i) {
      const std::size_t d = radix[i];
      for (std::size_t k = 0; k < f[d].size(); ++k) fs[d][k] = theta[i] * f[d][k];
      for (std::size_t k = 0; k < fi[d].size(); ++k) fis[d][k] = theta[i] * fi[d][k];
      w[i] = (1 - theta[i]) * out[i];
    }
    const double walk = std::max(least_sum_over(fs, sizes, host_slots, kPlaceSizes, true),
                                 least_sum_over(fis, sizes, island_slots, kPlaceSizes, true));
    // least_cut is a least sum of w-weighted counts: scaling every weight by one factor scales
    // it alike, so a theta common to all dims reuses the cut at full weight.
    std::vector<double> h;
    if (std::all_of(theta.begin(), theta.end(), [&](double x) { return x == theta[0]; })) {
      if (full_cut.empty()) full_cut = least_cut(n, out, cmax);
      h = full_cut;
      for (double& x : h) x *= 1 - theta[0];
    } else {
      h = least_cut(n, w, cmax);
    }
    // A dim's share (1 - theta_d) of its exit load u_d = (1 - theta_d) l_d has flows of at least
    // flow_d bytes each, so F_d <= l_d / flow_d = u_d / ((1 - theta_d) flow_d) (ecmp_exit()).
    double least = std::numeric_limits<double>::infinity();
    for (std::size_t i : live) {
      if (theta[i] < 1) least = std::min(least, (1 - theta[i]) * flow[i]);
    }
    double cross = 0;
    for (std::size_t ti = 0; ti < tiers.size(); ++ti) {
      const CrossTier& tier = tiers[ti];
      double sum = 0;
      for (std::size_t b = 0; b < tier.slots.size(); ++b) {
        // time_d >= this place's exit load / cap (x ECMP's expected worst link)
        const double load = h[static_cast<std::size_t>(tier.slots[b])];
        const double hb = ecmp_exit(load, least, setup.flows[ti][b], tier.links[b]);
        sum += hb;
        cross = std::max(cross, hb / tier.cap[b]);
      }
      cross = std::max(cross, sum / tier.total_cap);  // ... and >= all exit load / all caps
    }
    return walk + cross;
  };
  // The same theta for every dim first (theta = 1 alone is the walk bound), then each dim's own.
  std::vector<double> theta(radix.size(), 1.0);
  double best = eval(theta);
  double same = 1.0;
  for (int g = 0; g < 10; ++g) {
    std::vector<double> u(radix.size(), g * 0.1);
    const double x = eval(u);
    if (x > best) {
      best = x;
      same = g * 0.1;
    }
  }
  std::fill(theta.begin(), theta.end(), same);
  if (seed && seed->size() == theta.size()) {  // a start from a like search: it may do better
    const double x = eval(*seed);
    if (x > best) {
      best = x;
      theta = *seed;
    }
  } else if (same == 1.0) {
    // Where no common theta beats the walk alone the crossings cost less than the floors they
    // would replace; the per-dim search (some 200 passes of least_cut) is then skipped.
    return best;
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i : live) {
      const double start = theta[i];
      double at = start;
      auto try_value = [&](double v) {
        theta[i] = std::clamp(v, 0.0, 1.0);
        const double x = eval(theta);
        if (x > best) {
          best = x;
          at = theta[i];
        }
      };
      for (int g = 0; g <= 10; ++g) {
        if (g * 0.1 != start) try_value(g * 0.1);
      }
      const double coarse = at;
      for (int g = -4; g <= 4; ++g) {
        if (g != 0) try_value(coarse + g * 0.025);
      }
      theta[i] = at;
    }
  }
  if (seed) *seed = theta;
  return best;
}

// What the lower bound reads off the machine once: the fastest NVLink and per-GPU NIC capacity,
// slots per host and per island, and the capacities the crossing floors divide by.
struct BoundMachine {
  double nv = 0;    // fastest GPU NVLink egress, bytes/s
  double port = 0;  // most NIC capacity one GPU's ports have together, bytes/s
  bool has_domains = false;
  std::vector<long long> host_slots;
  long long kmax = 0;  // most slots of a host
  std::vector<long long> island_slots;
  long long island_kmax = 0;  // most slots of an island: an NCCL node
  double total_egress = 0;  // every NVLink and NIC egress together, bytes/s
  double lat_min = 0;       // the least latency of a step
  double lat_network = 0;   // the least latency of a step whose flows leave an island
  // Crossing bins: islands (capacity: their hosts' NIC ports), then each network level's groups
  // (capacity: their uplinks).
  struct Bins {
    std::vector<long long> slots;
    double cap = 0;
  };
  std::vector<Bins> bins;
};

// What a dim's steps wait beyond the least latency once some group of it leaves an island: the
// model charges a dim the latency of the highest level any of its flows reaches.
double network_latency(const DimTraffic& dt, const BoundMachine& b) {
  return dt.calls * latency_steps(dt) * (b.lat_network - b.lat_min) * 1e-6;
}

BoundMachine bound_machine(const Machine& m) {
  BoundMachine b;
  b.nv = *std::max_element(m.slot_nvlink_gbps.begin(), m.slot_nvlink_gbps.end()) * kGB;
  for (std::size_t s = 0; s < m.slots.size(); ++s) b.port = std::max(b.port, m.slot_port_gbps(s));
  b.port *= kGB;
  b.has_domains =
      std::any_of(m.domain_of_host.begin(), m.domain_of_host.end(), [](int d) { return d >= 0; });
  b.host_slots.assign(m.hosts.size(), 0);
  for (const auto& s : m.slots) ++b.host_slots[s.host];
  b.kmax = *std::max_element(b.host_slots.begin(), b.host_slots.end());
  for (double g : m.slot_nvlink_gbps) b.total_egress += g * kGB;
  for (double g : m.port_gbps) b.total_egress += g * kGB;
  // The latencies the model charges (reach_latency_us(): reach 0 on NVLink, 1 between hosts,
  // then across levels; a machine without the table charges defaults), least overall and least
  // beyond an island.
  b.lat_network = internal::reach_latency_us(m, 1);
  for (std::size_t r = 2; r < m.reach_latency_us.size(); ++r) {
    b.lat_network = std::min(b.lat_network, internal::reach_latency_us(m, static_cast<int>(r)));
  }
  b.lat_min = std::min(internal::reach_latency_us(m, 0), b.lat_network);
  // Islands: an NVLink domain's hosts in the step, or a host outside any domain. Flows inside an
  // island go over NVLink; every flow between islands leaves by a NIC port. (Hosts without slots
  // hold no rank and are left out.)
  const std::vector<double> host_ports = host_port_capacity(m);
  std::map<std::uint32_t, std::size_t> idx;
  BoundMachine::Bins islands;
  for (std::size_t h = 0; h < m.hosts.size(); ++h) {
    auto [it, fresh] = idx.emplace(internal::nccl_node(m, h), islands.slots.size());
    if (fresh) islands.slots.push_back(0);
    islands.slots[it->second] += b.host_slots[h];
    islands.cap += host_ports[h];
  }
  idx.clear();
  for (std::size_t h = 0; h < m.hosts.size(); ++h) {
    if (b.host_slots[h] == 0) continue;
    auto [it, fresh] = idx.emplace(internal::nccl_node(m, h), idx.size());
    if (fresh) b.island_slots.push_back(0);
    b.island_slots[it->second] += b.host_slots[h];
  }
  b.island_kmax = *std::max_element(b.island_slots.begin(), b.island_slots.end());
  b.bins.push_back(std::move(islands));
  for (const auto& l : m.levels) {
    BoundMachine::Bins bin;
    bin.slots.assign(l.uplink_gbps.size(), 0);
    for (const auto& s : m.slots) ++bin.slots[l.group_of_host[s.host]];
    for (std::size_t g = 0; g < l.uplink_gbps.size(); ++g) {
      if (bin.slots[g] > 0) bin.cap += l.uplink_gbps[g] * kGB;
    }
    b.bins.push_back(std::move(bin));
  }
  return b;
}

// An all-reduce runs as a tree only on groups that span exactly two nodes, here hosts (the floor
// is left out with NVLink domains, whose nodes are cliques of hosts). A host lending
// 1..j slots (j < n/2) holds a piece of at most j members of some group; were that group a
// two-host tree, its other host would hold n - k >= n - j members of it, and two such hosts
// cannot share one group (their pieces add up to less than n). A host of c slots holds n - j
// members of at most floor(c / (n - j)) groups. So when there are more such small hosts than
// that capacity, some small host's piece (of at most j members) is on a ring and sends its hop V
// through its own ports: the dim takes at least V / (j port). Without NVLink domains only (a ring
// hop to a host of the same domain goes over NVLink).
double tree_shortfall_floor(const DimTraffic& dt, const BoundMachine& b) {
  const long long n = dt.size;
  if (!dt.all_reduce || dt.pattern != Pattern::kRing || b.has_domains || n < 3) return 0;
  const double V = internal::ring_volume(n, dt.bytes);
  double floor = 0;
  for (long long j = 1; 2 * j < n; ++j) {
    long long small = 0, partners = 0;
    for (long long c : b.host_slots) {
      if (c >= 1 && c <= j) ++small;
      partners += c / (n - j);
    }
    if (small > partners) floor = std::max(floor, V / (static_cast<double>(j) * b.port));
  }
  // One-GPU pieces, where no host holds more than n slots: a tree needs its one-GPU piece's
  // partner to hold n - 1 of the group. A host of n - 1 slots can; a host of n slots can only by
  // leaving its last slot to a one-GPU piece of another group; smaller hosts cannot. So there are
  // at least h1 + s one-GPU pieces for at most h_{n-1} + s partners (s: hosts of n slots split
  // n-1 + 1, h_c: hosts of c slots), and where h1 > h_{n-1} some one-GPU piece is on a ring.
  if (b.kmax <= n) {
    long long h1 = 0, hn1 = 0;
    for (long long c : b.host_slots) {
      h1 += c == 1 ? 1 : 0;
      hn1 += c == n - 1 ? 1 : 0;
    }
    if (h1 > hn1) floor = std::max(floor, V / b.port);
  }
  return floor;
}

// A dim's crossing floor, which holds wherever its ranks sit: groups that cannot fit whole in the
// bins of a tier send at least so much across that tier's capacity; a group split over islands
// sends its hop out through at most min(n-1, kmax) members' ports; every rank's bytes leave
// through the machine's total egress.
double crossing_floor(const DimTraffic& dt, long long world, const BoundMachine& b) {
  const long long n = dt.size;
  const double S = dt.bytes, nd = static_cast<double>(n);
  const long long groups = world / n;
  const double hop = any_split_hop(dt, b.island_kmax);
  double cross = 0;
  for (const auto& bin : b.bins) {
    const double split = split_groups(bin.slots, n, groups);
    const long long cmax =
        bin.slots.empty() ? 0 : *std::max_element(bin.slots.begin(), bin.slots.end());
    double per_split = 0;
    if (dt.pattern == Pattern::kRing) {
      per_split = 2 * hop;
    } else if (dt.pattern == Pattern::kAllToAll) {
      per_split =
          std::max(internal::ring_volume(n, S), static_cast<double>(std::max(0LL, n - cmax)) * S);
    } else {
      per_split = 2 * S;
    }
    if (bin.cap > 0) cross = std::max(cross, split * per_split / bin.cap);
    if (&bin == &b.bins[0] && split > 0) {
      // Some group leaves its island (its NCCL node): its hop out is spread over the ports of
      // its members there (at most min(n-1, island_kmax) of them), and a split pipeline sends a
      // stage's whole message through one GPU's ports.
      if (dt.pattern == Pattern::kRing) {
        cross =
            std::max(cross, hop / (static_cast<double>(std::min(n - 1, b.island_kmax)) * b.port));
      } else if (dt.pattern == Pattern::kPipeline) {
        cross = std::max(cross, S / b.port);
      } else {
        // The smallest piece (at most n/2 members) receives half its bytes or more from off the
        // island, each flow into the receiver's own ports (PXN or not).
        cross = std::max(cross, 0.5 * S / b.port);
      }
    }
  }
  double total_bytes = 0;
  if (dt.pattern == Pattern::kRing) {
    // Each member sends (k-1)/k V by NVLink and at least hop/k by NIC, so at least the hop.
    total_bytes = static_cast<double>(world) * hop;
  } else if (dt.pattern == Pattern::kAllToAll) {
    total_bytes = static_cast<double>(world) * (nd - 1) / nd * S;
  } else {
    total_bytes = 2.0 * static_cast<double>(groups) * (nd - 1) * S;
  }
  return std::max({cross, total_bytes / b.total_egress, tree_shortfall_floor(dt, b)});
}

// f[k-1]: the least time of the dim given that some rank has k members of its group (itself
// included) on its host, k = 1..min(n, kmax). `pipe_floor` receives a pipeline's middle-stage
// floor, which holds wherever the rank sits.
std::vector<double> host_floors(const DimTraffic& dt, const BoundMachine& b, double cross,
                                double* pipe_floor, bool ring_only = false) {
  const long long n = dt.size;
  const double S = dt.bytes, nd = static_cast<double>(n);
  const double nv = b.nv, port = b.port;
  const long long kcap = std::min(n, b.kmax);
  std::vector<double> f(static_cast<std::size_t>(kcap), 0.0);
  *pipe_floor = 0;
  for (long long k = 1; k <= kcap; ++k) {
    double v = 0;
    const double kd = static_cast<double>(k);
    if (dt.pattern == Pattern::kRing) {
      // The rank's NCCL node is its host, or its NVLink clique holding some j >= k of the group.
      const long long top = b.has_domains ? std::min(n, b.island_kmax) : k;
      v = std::numeric_limits<double>::infinity();
      for (long long j = k; j <= top; ++j) {
        v = std::min(v, ring_on_node(dt, j, b.island_kmax, ring_only, nv, port));
      }
    } else if (dt.pattern == Pattern::kAllToAll) {
      // What the rank receives: A from its host over NVLink, X from off the host, each flow into
      // its own NIC ports (PXN or not) or, from a host of its NVLink domain, over NVLink.
      const double A = (kd - 1) * S / nd, X = (nd - kd) * S / nd;
      if (k == n) {
        v = A / nv;
      } else if (!b.has_domains) {
        v = std::max(A / nv, X / port);
      } else {
        v = least_split(A, X, nv, port);
      }
    } else {
      // Pipeline.
      const double end = pipe_stage(1, k, b.has_domains, S, nv, port);  // an end stage
      if (n == 2) {
        v = end;
      } else {
        // The rank the bound speaks for may be an end stage; a middle stage exists too and holds
        // at most kcap stages on its host.
        *pipe_floor = pipe_stage(2, kcap, b.has_domains, S, nv, port);
        v = std::max(std::min(pipe_stage(2, k, b.has_domains, S, nv, port), end), *pipe_floor);
      }
    }
    f[static_cast<std::size_t>(k - 1)] = std::max(v, cross);
  }
  if (dt.pattern != Pattern::kPipeline) raise_by_other_members(f, n);
  return f;
}

// fi[k-1]: the least time of the dim given that some rank has k members on its island (k < n:
// the group leaves the island, and what leaves goes through NIC ports, never NVLink). `host_f`
// are the host floors: the rank's host holds between 1 and min(k, kmax) of the k.
std::vector<double> island_floors(const DimTraffic& dt, const BoundMachine& b, double cross,
                                  double pipe_floor, const std::vector<double>& host_f,
                                  bool ring_only = false) {
  const long long n = dt.size;
  const double S = dt.bytes, nd = static_cast<double>(n);
  const double nv = b.nv, port = b.port;
  const long long kcap_i = std::min(n, b.island_kmax);
  std::vector<double> fi(static_cast<std::size_t>(kcap_i), 0.0);
  const std::vector<double> host_min = prefix_min(host_f);  // the host-count floor
  for (long long k = 1; k <= kcap_i; ++k) {
    double v = 0;
    const double kd = static_cast<double>(k);
    if (dt.pattern == Pattern::kRing) {
      v = ring_on_node(dt, k, b.island_kmax, ring_only, nv, port);  // the island is the node
    } else if (dt.pattern == Pattern::kAllToAll) {
      // The rank's k - 1 island peers use NVLink both ways; the n - k others each send bytes/n
      // into the rank's own NIC ports (a flow enters by the receiver's ports, PXN or not).
      const double A = (kd - 1) * S / nd, X = (nd - kd) * S / nd;
      v = k == n ? A / nv : std::max(A / nv, X / port);
    } else {
      // A chain of stages not all on the island crosses its edge: the stage on the island side
      // receives S from off the island through its own NIC ports. All on the island: a middle
      // stage sends S to each neighbour over NVLink.
      v = k < n ? S / port : (n == 2 ? S / nv : 2 * S / nv);
      v = std::max(v, pipe_floor);
    }
    const long long on_host = std::min(k, static_cast<long long>(host_min.size()));
    v = std::max(v, host_min[static_cast<std::size_t>(on_host - 1)]);
    fi[static_cast<std::size_t>(k - 1)] = std::max(v, cross);
  }
  if (dt.pattern != Pattern::kPipeline) raise_by_other_members(fi, n);
  return fi;
}

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
template <class Walk>
double tree_chain_bound(const Traffic& t, const BoundMachine& b,
                        const std::vector<std::vector<double>>& f,
                        const std::vector<std::vector<double>>& fr,
                        const std::vector<std::vector<double>>& fi, bool full, const Walk& walk) {
  if (!full || b.has_domains) return 0;
  const std::vector<std::size_t> radix = radix_dims(t);
  if (radix.empty()) return 0;
  std::vector<std::size_t> trees;  // all-reduce dims whose partners hold no two groups
  for (std::size_t d : radix) {
    const DimTraffic& dt = t.dims[d];
    if (dt.all_reduce && dt.pattern == Pattern::kRing && dt.bytes > 0 &&
        2 * (dt.size - 1LL) > b.kmax) {
      trees.push_back(d);
    }
  }
  double best = 0;
  for (std::size_t i = 0; i < trees.size(); ++i) {
    for (std::size_t j = i + 1; j < trees.size(); ++j) {
      const std::size_t d = trees[i], e = trees[j];
      const long long n = std::min(t.dims[d].size, t.dims[e].size);
      const bool start = std::any_of(b.host_slots.begin(), b.host_slots.end(), [&](long long c) {
        return (c == 1 || c == 2 || c == 3 || c == 5) && c < n - 1;  // a lone rank, no partner
      });
      if (!start || t.dims[d].size + t.dims[e].size - 3LL <= b.kmax) continue;
      double least = std::numeric_limits<double>::infinity();
      for (std::size_t x : {d, e}) {  // x takes at least its one-member ring floor
        auto host = f, ring = fr, island = fi;
        const double floor = fr[x][0];
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

// P[c] of cut_vectors(), per place size c, and per radix dim its coordinate in them (-1: not
// counted) and what it counts: cut groups, or for all-to-alls of three or more the pairs term.
struct CutSets {
  std::vector<std::vector<CutVector>> sets;
  std::vector<int> coord;
  std::vector<bool> pairs;
  // The bytes vector p makes radix dim i send out of the place, at least, a cut group sending
  // `out` (CrossSetup::out); an all-to-all's pairs term times S / n.
  double bytes_out(const CutVector& p, std::size_t i, const DimTraffic& dt, double out) const {
    if (coord[i] < 0) return 0;
    const double v = p[static_cast<std::size_t>(coord[i])];
    return pairs[i] ? v * dt.bytes / static_cast<double>(dt.size) : v * out;
  }
};

// The cut vectors of every place the crossing bounds count (cut_case_bound), once for each dim
// peeled last (each is a lower cover of its own, and they differ: on `3tier-4:1/whole tp=8,cp=4`
// the bound is 1.1238 s with DP outermost, 1.2043 s with CP or TP), or none where that bound
// does not apply (not every slot holds a rank, no radix dims, no tier to cross).
std::vector<CutSets> place_cut_vectors(const Machine& m, const Traffic& t, const BoundMachine& b,
                                       bool full, std::size_t most_counted = kCutDims) {
  CrossSetup setup;
  if (!full || !cross_setup(m, t, b.host_slots, b.island_kmax, {}, &setup)) return {};
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
      const DimTraffic& dt = t.dims[setup.radix[i]];
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
template <class Walk>
double cut_case_bound(const Machine& m, const Traffic& t, const BoundMachine& b,
                      const std::vector<std::vector<double>>& f,
                      const std::vector<std::vector<double>>& fr,
                      const std::vector<std::vector<double>>& fi, const std::vector<bool>& rings,
                      const std::vector<CutSets>& cuts, double known, const Walk& walk,
                      const std::vector<long long>& members = {}) {
  CrossSetup setup;
  if (cuts.empty() || !cross_setup(m, t, b.host_slots, b.island_kmax, rings, &setup, members)) {
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
          const double out = sets.bytes_out(p, i, t.dims[setup.radix[i]], setup.out[i]);
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
          std::vector<std::vector<double>> host = f, ring = fr, island = fi;
          for (std::size_t i : setup.live) {
            const std::size_t d = setup.radix[i];
            // A group the place cuts leaves its island: the dim waits for the network too.
            double g = raise(*p, i);
            if (g > 0) g += network_latency(t.dims[d], b);
            for (auto* v : {&host[d], &ring[d], &island[d]}) {
              for (double& y : *v) y = std::max(y, g);
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

// A host's members of one group and their peers (docs/mapper.md, "Lower bound", of the same
// name). Where some host holds k members of one d-group (k in [lo, hi]: a two-node
// tree's larger side, or the most of a group on a host in an ECMP case), those members differ in
// d alone: the ranks sharing one member's d coordinate lie apart from those sharing another's, so
// some member p has at most kmax / k of them on the host. p's peers of each other dim lie among
// those and meet only in p, so sum_e (m_e(p) - 1) <= kmax / k - 1, and the dims' times together
// are at least f_d(k) + sum_e f_e(m_e(p)) (f: the case's host floors, raised or not). Returns the
// least of that over k and the peer counts. `radix`: radix_dims(), every dim of more than one
// member.
double member_peers_floor(const std::vector<std::vector<double>>& host,
                          const std::vector<long long>& sizes,
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
template <class Walk>
double tree_case_bound(const Machine& m, const Traffic& t, const BoundMachine& b,
                       const std::vector<std::vector<double>>& f,
                       const std::vector<std::vector<double>>& fr,
                       const std::vector<std::vector<double>>& fi,
                       const std::vector<long long>& sizes, bool full,
                       const std::vector<CutSets>& cuts, const Walk& walk) {
  if (!full || b.has_domains) return 0;
  const std::vector<std::size_t> radix = radix_dims(t);
  std::vector<std::size_t> trees;
  for (std::size_t d : radix) {
    const DimTraffic& dt = t.dims[d];
    if (dt.all_reduce && dt.pattern == Pattern::kRing && dt.bytes > 0 && dt.size >= 3 &&
        dt.size <= 2 * b.kmax) {
      trees.push_back(d);
    }
  }
  constexpr std::size_t kMostTreeDims = 4;  // 2^4 cases
  if (trees.empty() || trees.size() > kMostTreeDims) return 0;
  using Floors = std::vector<std::vector<double>>;
  // The least of `v` over counts 1..j.
  auto least_up_to = [](const std::vector<double>& v, long long j) {
    return prefix_min(v)[static_cast<std::size_t>(std::clamp<long long>(j, 1, std::ssize(v)) - 1)];
  };
  double least = std::numeric_limits<double>::infinity();
  for (unsigned mask = 0; mask < (1u << trees.size()); ++mask) {
    Floors host = f, ring = fr, island = fi;
    std::vector<bool> rings(t.dims.size(), false);
    for (std::size_t i = 0; i < trees.size(); ++i) {
      if (mask & (1u << i)) continue;
      const std::size_t d = trees[i];
      rings[d] = true;
      host[d] = fr[d];
      for (std::size_t k = 0; k < island[d].size() && k < fr[d].size(); ++k) {
        island[d][k] = std::max(island[d][k], fr[d][k]);  // islands are hosts here
      }
    }
    std::vector<double> at_least(t.dims.size(), 0.0);
    for (std::size_t i = 0; i < trees.size(); ++i) {
      if (!(mask & (1u << i))) continue;
      const std::size_t d = trees[i];
      const long long n = t.dims[d].size;
      at_least[d] = std::max(at_least[d], least_up_to(host[d], n / 2));
      const long long peers = b.kmax / ((n + 1) / 2);
      for (std::size_t e : radix) {
        if (e != d) at_least[e] = std::max(at_least[e], least_up_to(host[e], peers));
      }
    }
    for (std::size_t d = 0; d < t.dims.size(); ++d) {
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
        v = std::max(v, member_peers_floor(h, sizes, radix, trees[j], b.kmax, (n + 1) / 2, n - 1));
      }
      return v;
    };
    double v = std::max(walk_case(host, ring, island),
                        joint_crossing_bound(m, t, host, island, sizes, b.host_slots,
                                             b.island_slots, b.island_kmax, rings));
    if (v < least) {  // the whole cuts can only raise it
      v = std::max(v, cut_case_bound(m, t, b, host, ring, island, rings, cuts, v, walk_case));
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
template <class Walk>
double ecmp_case_bound(const Machine& m, const Traffic& t, const BoundMachine& b,
                       const std::vector<std::vector<double>>& f,
                       const std::vector<std::vector<double>>& fr,
                       const std::vector<std::vector<double>>& fi,
                       const std::vector<long long>& sizes, const std::vector<CutSets>& cuts,
                       const Walk& walk) {
  if (b.has_domains ||
      std::none_of(m.levels.begin(), m.levels.end(), [](const NetLevel& l) { return l.ecmp; })) {
    return 0;
  }
  CrossSetup setup;
  if (!cross_setup(m, t, b.host_slots, b.island_kmax, {}, &setup)) return 0;
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
    const long long top = std::min<long long>(t.dims[d].size, b.kmax);
    if (t.dims[d].pattern != Pattern::kRing || top < 2) continue;
    std::vector<Range> r{{1, 1}};
    for (long long hi = 2; r.back().hi < top; hi *= 2) r.push_back({hi / 2 + 1, std::min(hi, top)});
    cases *= r.size();
    split.push_back(d);
    ranges.push_back(std::move(r));
  }
  constexpr std::size_t kMostCases = 64;
  if (split.empty() || cases > kMostCases) return 0;
  constexpr double kNever = 1e9;  // seconds: a floor for counts no rank has
  std::vector<long long> members(t.dims.size());
  for (std::size_t d = 0; d < t.dims.size(); ++d) {
    members[d] = std::min<long long>(t.dims[d].size, b.kmax);
  }
  const std::vector<std::size_t>& radix = setup.radix;
  // Each case's search for theta starts where the search over every placement ended.
  std::vector<double> start;
  joint_crossing_bound(m, t, f, fi, sizes, b.host_slots, b.island_slots, b.island_kmax, {}, {},
                       &start);
  double least = std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c < cases; ++c) {
    std::vector<std::vector<double>> host = f, ring = fr, island = fi;
    std::vector<double> at_least(t.dims.size(), 0.0);
    std::vector<bool> rings(t.dims.size(), false);
    std::vector<Range> in(split.size());
    for (std::size_t j = 0, rest = c; j < split.size(); ++j) {
      in[j] = ranges[j][rest % ranges[j].size()];
      rest /= ranges[j].size();
      const std::size_t d = split[j];
      members[d] = in[j].hi;
      if (2 * in[j].hi < t.dims[d].size) {  // no two hosts hold a group: rings, never trees
        rings[d] = true;
        host[d] = fr[d];
        for (std::size_t k = 0; k < island[d].size() && k < fr[d].size(); ++k) {
          island[d][k] = std::max(island[d][k], fr[d][k]);  // islands are hosts here
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
      const long long peers = b.kmax / in[j].lo;
      for (std::size_t e : radix) {
        if (e == d) continue;
        const auto top = static_cast<std::size_t>(std::min<long long>(peers, std::ssize(host[e])));
        at_least[e] = std::max(at_least[e], prefix_min(host[e])[top - 1]);
      }
    }
    for (std::size_t d = 0; d < t.dims.size(); ++d) {
      for (auto* v : {&host[d], &ring[d], &island[d]}) {
        for (double& y : *v) y = std::max(y, at_least[d]);
      }
    }
    // The walk, and from the most members of a group on one host their peers' floors.
    using Floors = std::vector<std::vector<double>>;
    auto walk_case = [&](const Floors& h, const Floors& r, const Floors& i) {
      double v = walk(h, r, i);
      for (std::size_t j = 0; j < split.size(); ++j) {
        v = std::max(v, member_peers_floor(h, sizes, radix, split[j], b.kmax, in[j].lo, in[j].hi));
      }
      return v;
    };
    std::vector<double> seed = start;
    double v = std::max(walk_case(host, ring, island),
                        joint_crossing_bound(m, t, host, island, sizes, b.host_slots,
                                             b.island_slots, b.island_kmax, rings, members, &seed));
    if (v < least) {  // the whole cuts can only raise it
      v = std::max(v,
                   cut_case_bound(m, t, b, host, ring, island, rings, cuts, v, walk_case, members));
    }
    least = std::min(least, v);
  }
  return least;
}

// Latency beyond a leaf. The model charges a dim the latency of the highest level any of its flows
// reaches, and the host floors charge a group that leaves its host the least latency beyond one
// (a leaf's). A group that leaves its level-l switch group reaches a level above l (routing climbs
// to the first level where both hosts share a group, and levels 0..l nest). So for a rank with
// k < n members of its group under its level-l switch: as a ring, the host's ring floor for at
// most min(k, kmax) members on its host; as a two-host tree, its host holds all k and the tree's
// floor for k, with the partner host's floors on the other dims; either plus the latency above
// level l over a leaf's. A switch of one host then prices a group split over hosts (a two-host
// TP tree) at the latency it pays. The walk runs on each level's places, without NVLink domains
// (a flow between hosts of one domain reaches no switch).
double level_latency_bound(const Machine& m, const Traffic& t, const BoundMachine& b,
                           const std::vector<std::vector<double>>& f,
                           const std::vector<std::vector<double>>& fr,
                           const std::vector<long long>& sizes, bool full,
                           const std::vector<std::vector<double>>* partner_f = nullptr,
                           std::size_t loose = kNoDim, long long middle = 0) {
  if (!full || b.has_domains) return 0;
  constexpr std::size_t kPlaceSizes = 32;
  double best = 0;
  const std::size_t nest = nested_levels(m);
  for (std::size_t l = 0; l < nest; ++l) {
    double above = std::numeric_limits<double>::infinity();
    for (std::size_t r = l + 2; r < std::max<std::size_t>(m.reach_latency_us.size(), l + 3); ++r) {
      above = std::min(above, internal::reach_latency_us(m, static_cast<int>(r)));
    }
    if (!(above > b.lat_network)) continue;
    std::vector<long long> slots(m.levels[l].uplink_gbps.size(), 0);
    for (const auto& sl : m.slots) ++slots[m.levels[l].group_of_host[sl.host]];
    const long long cmax = std::min(*std::max_element(slots.begin(), slots.end()), kCutSlots);
    const std::size_t D = t.dims.size();
    std::vector<std::vector<double>> ring(D), any(D);
    for (std::size_t d = 0; d < D; ++d) {
      const DimTraffic& dt = t.dims[d];
      if (dt.size <= 1 || dt.bytes <= 0) {
        ring[d] = any[d] = {0.0};
        continue;
      }
      const double extra = dt.calls * latency_steps(dt) * (above - b.lat_network) * 1e-6;
      const std::vector<double> f_min = prefix_min(f[d]), fr_min = prefix_min(fr[d]);
      const auto kcap = static_cast<std::size_t>(std::min<long long>(dt.size, cmax));
      ring[d].resize(kcap);
      any[d].resize(kcap);
      for (std::size_t k = 1; k <= kcap; ++k) {
        const std::size_t on_host = std::min(k, f_min.size());
        if (static_cast<long long>(k) == dt.size) {  // whole under the switch: any host count
          ring[d][k - 1] = any[d][k - 1] = f_min[on_host - 1];
          continue;
        }
        ring[d][k - 1] = fr_min[std::min(k, fr_min.size()) - 1] + extra;
        any[d][k - 1] = ring[d][k - 1];
        if (k <= f[d].size()) any[d][k - 1] = std::min(any[d][k - 1], f[d][k - 1] + extra);
      }
      // The group's other n - k members sit under other switches, at most n - k under each.
      if (dt.pattern != Pattern::kPipeline) {
        const std::vector<double> any_min = prefix_min(any[d]);
        for (long long k = 1; k <= static_cast<long long>(kcap) && k < dt.size; ++k) {
          const auto j = static_cast<std::size_t>(std::min<long long>(dt.size - k, kcap));
          for (auto* v : {&ring[d], &any[d]}) {
            (*v)[static_cast<std::size_t>(k - 1)] =
                std::max((*v)[static_cast<std::size_t>(k - 1)], any_min[j - 1]);
          }
        }
      }
    }
    std::map<long long, double> value;  // per place size; 0 where not searched
    for (long long c : place_sizes(slots, kPlaceSizes)) {
      if (c > kCutSlots) break;  // the search grows with c; small switches are where it tells
      value[c] = least_sum_trees(ring, any, sizes, c, b.kmax, true, full,
                                 partner_f ? partner_f : &f, loose);
    }
    if (loose == kNoDim) {
      for (const auto& [c, v] : value) best = std::max(best, v);
      continue;
    }
    best = std::max(best, middle_stage_bound(slots, middle, [&](long long c) {
                      const auto it = value.find(c);
                      return it == value.end() ? 0.0 : it->second;
                    }));
  }
  return best;
}

// Overlapping dims take at least as long as the slowest dim alone (its loads are part of the
// combined ones) and as every byte over all egress together; latency terms still add up.
double bound(const Machine& m, const Traffic& t, bool whole_cuts, std::size_t counted);

double overlapped_lower_bound(const Machine& m, const Traffic& t, bool whole_cuts,
                              std::size_t counted) {
  Traffic one = t;
  one.overlap = false;
  one.matrix.clear();
  double slowest = 0, latency = 0, bytes = 0;
  const BoundMachine b = bound_machine(m);
  for (std::size_t d = 0; d < t.dims.size(); ++d) {
    const DimTraffic& dt = t.dims[d];
    if (dt.size <= 1 || dt.bytes <= 0) continue;
    one.dims.assign(t.dims.size(), DimTraffic{});
    one.dims[d] = dt;
    one.dims[d].calls = 0;
    slowest = std::max(slowest, bound(m, one, whole_cuts, counted));
    latency += dt.calls * latency_steps(dt) * b.lat_min * 1e-6;
    const double nd = static_cast<double>(dt.size);
    bytes += dt.pattern == Pattern::kRing
                 ? static_cast<double>(t.world) * any_split_hop(dt, b.island_kmax)
             : dt.pattern == Pattern::kAllToAll
                 ? static_cast<double>(t.world) * (nd - 1) / nd * dt.bytes
                 : 2.0 * static_cast<double>(t.world / dt.size) * (nd - 1) * dt.bytes;
  }
  for (const auto& fl : t.matrix) bytes += fl.from != fl.to ? fl.bytes : 0;
  return std::max(slowest, bytes / b.total_egress) + latency;
}

// lower_bound(), its whole cuts counting at most `counted` dims.
double bound(const Machine& m, const Traffic& t, bool whole_cuts, std::size_t counted) {
  if (m.slots.empty()) return 0;
  if (t.overlap) return overlapped_lower_bound(m, t, whole_cuts, counted);
  const BoundMachine b = bound_machine(m);
  // Per dim, two families of floors, each combined with the crossing floor (valid for any
  // placement): f given the rank's host holds k of its group, fi given its island does.
  const std::size_t D = t.dims.size();
  std::vector<std::vector<double>> f(D), fi(D);
  std::vector<std::vector<double>> fr(D);  // host floors of all-reduces as rings, never trees
  std::vector<std::vector<double>> fir(D);  // island floors of all-reduces as rings, never trees
  double fixed = 0;  // latency floors
  for (std::size_t d = 0; d < D; ++d) {
    const DimTraffic& dt = t.dims[d];
    if (dt.size <= 1 || dt.bytes <= 0) {
      f[d] = {0.0};
      fi[d] = {0.0};
      fr[d] = {0.0};
      fir[d] = {0.0};
      continue;
    }
    const double cross = crossing_floor(dt, t.world, b);
    double pipe_floor = 0;
    f[d] = host_floors(dt, b, cross, &pipe_floor);
    fr[d] = dt.all_reduce ? host_floors(dt, b, cross, &pipe_floor, true) : f[d];
    fi[d] = island_floors(dt, b, cross, pipe_floor, f[d]);
    fir[d] = dt.all_reduce ? island_floors(dt, b, cross, pipe_floor, fr[d], true) : fi[d];
    fixed += dt.calls * latency_steps(dt) * b.lat_min * 1e-6;
    // A group that leaves its island reaches the network: the dim's every step then waits at
    // least the network's least latency, not NVLink's. Without NVLink domains islands are hosts.
    const double network = network_latency(dt, b);
    auto leaves = [&](std::vector<double>& floors) {  // k < n: the group leaves the place
      for (std::size_t k = 1; k <= floors.size() && static_cast<long long>(k) < dt.size; ++k) {
        floors[k - 1] += network;
      }
    };
    leaves(fi[d]);
    leaves(fir[d]);
    if (!b.has_domains) {
      leaves(f[d]);
      leaves(fr[d]);
    }
  }
  // Take a place (a host, or an island) with c slots and the c ranks S on it. For each dim let
  // m_d be the fewest members of its own d-group that any rank of S finds on the place, and r_d
  // a rank with that few: time_d >= f_d(m_d) through r_d. Walking from any rank of S along dim
  // 1 (at least m_1 choices), then dim 2 (m_2 choices each), ... reaches prod_d m_d distinct
  // ranks of S, so prod_d m_d <= c. Where m_d = n_d for every d of a set F, S is closed under
  // moves in F: a union of F-cosets of prod_F n_d ranks each, so prod_F n_d divides c. And d's
  // groups cut S into lines of m_d..n_d ranks, one of m_d, and a line of j members charges its
  // dim f_d(j) too (place_lines_floor). Minimize sum_d f_d(m_d) under the three, each dim at
  // least its other lines' floor; every place gives a true bound, so take the largest.
  std::vector<long long> sizes(D);
  for (std::size_t d = 0; d < D; ++d) sizes[d] = t.dims[d].size;
  constexpr std::size_t kPlaceSizes = 32;
  // Every slot holds a rank (plan()'s instances): the closure and lines conditions hold.
  const bool full = static_cast<long long>(m.slots.size()) == t.world;
  const std::vector<long long> places = place_sizes(b.host_slots, kPlaceSizes);  // trees apart
  using Floors = std::vector<std::vector<double>>;
  auto walk = [&](const Floors& host, const Floors& ring, const Floors& island) {
    double v = least_sum_over(island, sizes, b.island_slots, kPlaceSizes, full);
    for (long long c : places) {
      v = std::max(v, least_sum_trees(ring, host, sizes, c, b.kmax, !b.has_domains, full));
    }
    return v;
  };
  // The latency walk above a switch holds under any true floors whose latency part is at most
  // the network's least (every floor here: a bandwidth floor, plus that latency where the group
  // leaves its island), so the cases below run it under their floors too (docs/mapper.md,
  // "Latency under the cases").
  auto walk_latency = [&](const Floors& host, const Floors& ring, const Floors& island) {
    return std::max(walk(host, ring, island),
                    level_latency_bound(m, t, b, host, ring, sizes, full));
  };
  double lb = walk(f, fr, fi);
  lb = std::max(lb, tree_chain_bound(t, b, f, fr, fi, full, walk_latency));
  lb = std::max(
      lb, joint_crossing_bound(m, t, f, fi, sizes, b.host_slots, b.island_slots, b.island_kmax));
  const std::vector<CutSets> cuts =
      whole_cuts ? place_cut_vectors(m, t, b, full, counted) : std::vector<CutSets>{};
  lb = std::max(lb, cut_case_bound(m, t, b, f, fr, fi, {}, cuts, lb, walk_latency));
  lb = std::max(lb, tree_case_bound(m, t, b, f, fr, fi, sizes, full, cuts, walk_latency));
  lb = std::max(lb, ecmp_case_bound(m, t, b, f, fr, fi, sizes, cuts, walk_latency));
  lb = std::max(lb, level_latency_bound(m, t, b, f, fr, sizes, full));
  // Middle stages: the walk and the latency walk again with a pipeline's middle-stage floors.
  std::size_t pipe = kNoDim;
  for (std::size_t d = 0; d < D && pipe == kNoDim; ++d) {
    const DimTraffic& dt = t.dims[d];
    if (dt.pattern == Pattern::kPipeline && dt.size >= 3 && dt.bytes > 0) pipe = d;
  }
  if (full && pipe != kNoDim) {
    const DimTraffic& dt = t.dims[pipe];
    Floors fm = f;
    const double cross = crossing_floor(dt, t.world, b);
    for (std::size_t k = 1; k <= fm[pipe].size(); ++k) {
      // Two neighbours' S; leaving the host, a step's network latency too (as `leaves` above).
      const auto kk = static_cast<long long>(k);
      double v = std::max(cross, pipe_stage(2, kk, b.has_domains, dt.bytes, b.nv, b.port));
      if (!b.has_domains && kk < dt.size) v += dt.calls * (b.lat_network - b.lat_min) * 1e-6;
      fm[pipe][k - 1] = std::max(fm[pipe][k - 1], v);
    }
    Floors fmr = fr;
    fmr[pipe] = fm[pipe];
    const long long middle = t.world * (dt.size - 2) / dt.size;
    lb = std::max(lb, middle_stage_bound(b.host_slots, middle, [&](long long c) {
                    return least_sum_trees(fmr, fm, sizes, c, b.kmax, !b.has_domains, full, &f,
                                           pipe);
                  }));
    lb = std::max(lb, level_latency_bound(m, t, b, fm, fmr, sizes, full, &f, pipe, middle));
  }
  // The walk over islands with two-node trees priced as on hosts: a group that is a tree between
  // the rank's island and one other has its other n - k members there, in n - k distinct groups
  // of every other dim, so some rank of that island has at most island_kmax / (n - k) peers of
  // each on it (least_sum_trees' partner floors, with island floors and island sizes).
  if (b.has_domains) {
    for (long long c : place_sizes(b.island_slots, kPlaceSizes)) {
      lb = std::max(lb, least_sum_trees(fir, fi, sizes, c, b.island_kmax, true, full));
    }
  }
  if (!t.matrix.empty()) {
    double bytes = 0;
    for (const auto& fl : t.matrix) bytes += fl.from != fl.to ? fl.bytes : 0;
    lb += bytes / b.total_egress;
  }
  return lb + fixed;
}

}  // namespace

double lower_bound(const Machine& m, const Traffic& t, bool whole_cuts) {
  return bound(m, t, whole_cuts, kCutDims);
}

double lower_bound_counting(const Machine& m, const Traffic& t, std::size_t counted) {
  return bound(m, t, true, counted);
}

}  // namespace topoaware::mapper
