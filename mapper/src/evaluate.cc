// The cost model's evaluation (cost.h: evaluate(), evaluate_seconds(), job_traffic()): every
// dim's groups routed over the machine as NCCL runs them (routing.h), each resource's load over its
// bandwidth, the longer of the busiest one and NCCL's own time timing the dim, plus NCCL's latency;
// each dim's exposed part summed; and the report of what was loaded. The Machine is machine.cc's,
// the lower bound bound/'s.
#include <algorithm>
#include <map>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "routing.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper {
namespace {

using internal::kGB;

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

  int flow(std::uint32_t a, std::uint32_t b, double bytes, std::uint32_t relay) {
    return internal::route_flow(m_, res_, a, b, bytes, relay, *this);
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
  double seconds = 0;       // all of the dim's time: bandwidth and latency
  int in_host = 0, in_leaf = 0, across = 0;
  std::size_t worst = 0;
  double bw_seconds = 0;    // the routed loads' time
  double nccl_seconds = 0;  // NCCL's own bandwidth time of its slowest group
  double latency_seconds = 0;
  std::map<nccl::Algo, int> algos;  // groups per algorithm NCCL runs (collectives)
};

// Routes one dim's groups; `finish`: ends the dim (its bandwidth time, loads cleared), else the
// loads stay for the dims that overlap it. A dim takes the longer of NCCL's own bandwidth time for
// its slowest group and its most loaded resource, plus its slowest group's latency.
DimResult route_dim(Router& router, const Machine& m, const Traffic& t, std::size_t dim,
                    const std::vector<std::uint32_t>& slot_of_rank,
                    internal::GroupScratch& scratch, internal::CollectiveModel& model,
                    std::vector<std::uint32_t>& members, bool finish = true) {
  DimResult r;
  const DimTraffic& d = t.dims[dim];
  const long long n = d.size;
  if (n <= 1 || d.bytes <= 0) return r;
  const long long world = static_cast<long long>(slot_of_rank.size());
  const long long block = d.stride * n;
  members.resize(static_cast<std::size_t>(n));
  for (long long outer = 0; outer < world; outer += block) {
    for (long long inner = 0; inner < d.stride; ++inner) {
      const long long base = outer + inner;
      for (long long i = 0; i < n; ++i) {
        members[static_cast<std::size_t>(i)] =
            slot_of_rank[static_cast<std::size_t>(base + i * d.stride)];
      }
      const internal::GroupCost g = internal::route_group(m, router.resources(), t, dim,
                                                          members.data(), scratch, model, router);
      // 0: inside a host or NVLink domain, 1: under one switch group, more: across levels.
      if (g.reached == 0)
        ++r.in_host;
      else if (g.reached == 1)
        ++r.in_leaf;
      else
        ++r.across;
      r.nccl_seconds = std::max(r.nccl_seconds, g.nccl_seconds);
      r.latency_seconds = std::max(r.latency_seconds, g.latency_seconds);
      if (g.collective) ++r.algos[g.algo];
    }
  }
  if (finish) r.bw_seconds = router.finish_dim(&r.worst);
  r.seconds = std::max(r.bw_seconds, r.nccl_seconds) + r.latency_seconds;
  return r;
}

// "Ring" or "NVLS 8, Ring 4": what NCCL runs for a dim's groups, most groups first.
std::string algorithms_text(const std::map<nccl::Algo, int>& algos) {
  if (algos.size() == 1) return std::string(nccl::to_string(algos.begin()->first));
  std::vector<std::pair<int, nccl::Algo>> by_count;
  for (const auto& [a, c] : algos) by_count.emplace_back(-c, a);
  std::sort(by_count.begin(), by_count.end());
  std::string out;
  for (const auto& [c, a] : by_count) {
    out += (out.empty() ? "" : ", ") + std::string(nccl::to_string(a)) + " " + std::to_string(-c);
  }
  return out;
}

// Overlapping dims: every dim's loads together, one bandwidth time (at least each dim's NCCL
// time), each dim's latency added.
double overlapped_seconds(const Machine& m, const Traffic& t,
                          const std::vector<std::uint32_t>& slot_of_rank, double* crossing) {
  Router router(m, false);
  internal::GroupScratch scratch;
  internal::CollectiveModel model(t);
  std::vector<std::uint32_t> members;
  double latency = 0, nccl = 0;
  for (std::size_t d = 0; d < t.dims.size(); ++d) {
    const DimResult r = route_dim(router, m, t, d, slot_of_rank, scratch, model, members, false);
    latency += r.latency_seconds;
    nccl = std::max(nccl, r.nccl_seconds);
  }
  for (const auto& f : t.matrix)
    router.flow(slot_of_rank[f.from], slot_of_rank[f.to], f.bytes, internal::kAnyRelay);
  if (crossing) *crossing = router.crossing();
  return std::max(router.finish_dim(nullptr), nccl) + latency;
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
  internal::GroupScratch scratch;
  internal::CollectiveModel model(t);
  std::vector<std::uint32_t> members;
  CostReport report;
  double worst_t = -1;
  std::string worst_name;
  for (std::size_t dim = 0; dim < t.dims.size(); ++dim) {
    const DimTraffic& d = t.dims[dim];
    const DimResult r = route_dim(router, m, t, dim, slot_of_rank, scratch, model, members);
    const double exposed = exposed_seconds(d, r.seconds);
    report.seconds += exposed;
    report.raw_seconds += r.seconds;
    if (detail) {
      DimCost dc;
      dc.dim = d.name;
      dc.seconds = r.seconds;
      dc.exposed = exposed;
      dc.collective = std::string(to_string(d.collective));
      dc.nccl = algorithms_text(r.algos);
      dc.groups_in_host = r.in_host;
      dc.groups_in_leaf = r.in_leaf;
      dc.groups_across = r.across;
      report.dims.push_back(dc);
      const double bound_by = std::max(r.bw_seconds, r.nccl_seconds);
      if (bound_by > worst_t && bound_by > 0) {
        worst_t = bound_by;
        std::ostringstream s;
        if (r.nccl_seconds > r.bw_seconds) {
          s << "NCCL's " << dc.nccl << " bandwidth (" << d.name << ")";
        } else {
          s << router.describe(r.worst) << " (" << d.name << ", " << router.cap(r.worst) / kGB
            << " GB/s)";
        }
        worst_name = s.str();
      }
    }
  }
  if (!t.matrix.empty()) {
    for (const auto& f : t.matrix) {
      router.flow(slot_of_rank[f.from], slot_of_rank[f.to], f.bytes, internal::kAnyRelay);
    }
    std::size_t worst = 0;
    double s = router.finish_dim(&worst);
    report.seconds += s;
    report.raw_seconds += s;
    if (detail) {
      DimCost dc;
      dc.dim = "matrix";
      dc.seconds = dc.exposed = s;
      dc.collective = "send-recv";
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
  t.nccl = layout.nccl;
  t.collnet = layout.collnet;
  t.split = layout.split;
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

}  // namespace topoaware::mapper
