// IncrementalCost (cost.h): the cost model's loads kept per dim and resource, so a move
// re-routes only the groups of the ranks it moves. Routing is routing.h's, the same as the full
// evaluation's.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "routing.h"
#include "topoaware/mapper/cost.h"

namespace topoaware::mapper {

using internal::GroupCost;
using internal::GroupScratch;
using internal::ResourceIndex;

struct IncrementalCost::State {
  const Machine& m;
  const Traffic& t;
  ResourceIndex res;
  std::vector<double> cap;
  std::vector<std::uint32_t> links;  // ECMP links per resource (0: flows spread evenly)
  std::vector<std::uint32_t> a;  // slot of rank
  // Per dim (and one more for the explicit matrix): loads, the worst resource's time; per dim the
  // groups' NCCL bandwidth times and latencies (counted by value: the dim takes the largest).
  std::size_t dims = 0;
  std::vector<std::vector<double>> load;
  std::vector<std::vector<double>> square;  // per lane, on ECMP resources: sum of flows' bytes^2
  std::vector<double> worst;
  std::vector<std::size_t> worst_at;
  std::vector<std::map<double, long long>> nccl_count, latency_count;
  std::vector<std::vector<std::uint32_t>> flows_of_rank;  // matrix flows touching each rank
  double crossing = 0;
  double zero = 0;  // loads below this are rounding residue of removed flows
  long long work = 0;
  GroupScratch scratch;
  internal::CollectiveModel model;
  std::vector<std::uint32_t> members;
  std::vector<std::size_t> touched;  // resources whose load rose since the last update_worst
  // The last exchange's undo journal: every load it changed with the value before, and the
  // figures it replaced.
  struct Saved {
    std::size_t lane, resource;
    double load, square;
  };
  std::vector<Saved> journal;
  std::vector<double> saved_worst;
  std::vector<std::size_t> saved_worst_at;
  struct Counted {
    bool latency;
    std::size_t dim;
    double value;
    long long delta;
  };
  std::vector<Counted> counted;  // the last exchange's changes to nccl_count and latency_count
  double saved_crossing = 0;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> last;
  bool journaling = false;

  struct Sink {
    State& s;
    std::size_t lane;
    double sign;
    void load(std::size_t r, double bytes) {
      double& l = s.load[lane][r];
      const bool ecmp = s.links[r] > 1;
      if (s.journaling) s.journal.push_back({lane, r, l, ecmp ? s.square[lane][r] : 0.0});
      l += sign * bytes;
      if (ecmp) s.square[lane][r] += sign * bytes * bytes;
      if (sign > 0) s.touched.push_back(r);
    }
    void tier(int, double) {}
    void crossed(std::size_t l, double bytes) {
      s.crossing += sign * bytes * static_cast<double>(l + 1);
    }
  };

  State(const Machine& machine, const Traffic& traffic, std::vector<std::uint32_t> slots)
      : m(machine), t(traffic), a(std::move(slots)), model(traffic) {
    if (static_cast<long long>(a.size()) != t.world) {
      throw Error("cost model: " + std::to_string(a.size()) + " ranks placed, layout has " +
                  std::to_string(t.world));
    }
    for (auto s : a) {
      if (s >= m.slots.size()) throw Error("cost model: rank placed on a slot that does not exist");
    }
    res = internal::resource_index(m);
    cap = internal::resource_capacity(m, res);
    links = internal::resource_ecmp_links(m, res);
    dims = t.dims.size();
    // A lane per dim (and one for the matrix), or one for all when the dims overlap.
    const std::size_t lanes = t.overlap ? 1 : dims + (t.matrix.empty() ? 0 : 1);
    load.assign(lanes, std::vector<double>(res.total, 0.0));
    const bool any_ecmp = std::any_of(links.begin(), links.end(), [](auto k) { return k > 1; });
    square.assign(lanes, std::vector<double>(any_ecmp ? res.total : 0, 0.0));
    worst.assign(lanes, 0.0);
    worst_at.assign(lanes, 0);
    nccl_count.assign(dims, {});
    latency_count.assign(dims, {});
    double biggest = 0;
    for (const auto& d : t.dims) biggest = std::max(biggest, d.bytes);
    for (const auto& f : t.matrix) biggest = std::max(biggest, f.bytes);
    zero = 1e-9 * biggest;
    if (!t.matrix.empty()) {
      flows_of_rank.assign(a.size(), {});
      for (std::uint32_t i = 0; i < t.matrix.size(); ++i) {
        const auto& f = t.matrix[i];
        if (f.from < 0 || f.to < 0 || static_cast<std::size_t>(f.from) >= a.size() ||
            static_cast<std::size_t>(f.to) >= a.size()) {
          throw Error("cost model: a flow names a rank outside the layout");
        }
        flows_of_rank[static_cast<std::size_t>(f.from)].push_back(i);
        if (f.to != f.from) flows_of_rank[static_cast<std::size_t>(f.to)].push_back(i);
      }
    }
    for (std::size_t d = 0; d < dims; ++d) {
      const DimTraffic& dt = t.dims[d];
      if (dt.size <= 1 || dt.bytes <= 0) continue;
      const long long block = dt.stride * dt.size;
      for (long long outer = 0; outer < t.world; outer += block) {
        for (long long inner = 0; inner < dt.stride; ++inner) route(d, outer + inner, 1.0);
      }
    }
    for (std::uint32_t i = 0; i < t.matrix.size(); ++i) route_flow(i, 1.0);
    touched.clear();
    for (std::size_t l = 0; l < lanes; ++l) rescan(l);
  }

  // The lane of dim d (d = dims: the matrix).
  std::size_t lane_of(std::size_t d) const { return t.overlap ? 0 : d; }

  double value(std::size_t lane, std::size_t r) const {
    const double l = load[lane][r];
    if (l <= zero) return 0;
    const double time = cap[r] > 0 ? l / cap[r] : std::numeric_limits<double>::infinity();
    if (links[r] <= 1) return time;
    const double q = square[lane][r];
    return q > 0 ? time * internal::ecmp_factor(l * l / q, links[r]) : time;
  }

  void rescan(std::size_t lane) {
    double best = 0;
    std::size_t at = 0;
    for (std::size_t r = 0; r < res.total; ++r) {
      double v = value(lane, r);
      if (v > best) {
        best = v;
        at = r;
      }
    }
    worst[lane] = best;
    worst_at[lane] = at;
    work += static_cast<long long>(res.total);
  }

  // Adds (sign 1) or removes (sign -1) the flows of the group of dim d starting at rank `base`.
  void route(std::size_t d, long long base, double sign) {
    const DimTraffic& dt = t.dims[d];
    members.resize(static_cast<std::size_t>(dt.size));
    for (long long i = 0; i < dt.size; ++i) {
      members[static_cast<std::size_t>(i)] = a[static_cast<std::size_t>(base + i * dt.stride)];
    }
    Sink sink{*this, lane_of(d), sign};
    const GroupCost g = internal::route_group(m, res, t, d, members.data(), scratch, model, sink);
    const long long delta = sign > 0 ? 1 : -1;
    count(false, d, g.nccl_seconds, delta);
    count(true, d, g.latency_seconds, delta);
    work += dt.pattern == Pattern::kAllToAll ? dt.size * (dt.size - 1) : 2 * dt.size;
  }

  // A group's NCCL time or latency added to (delta 1) or taken from (-1) its dim's counts.
  void count(bool latency, std::size_t d, double value, long long delta) {
    auto& c = (latency ? latency_count : nccl_count)[d];
    auto it = c.emplace(value, 0).first;
    it->second += delta;
    if (it->second == 0) c.erase(it);
    if (journaling) counted.push_back({latency, d, value, delta});
  }
  static double largest(const std::map<double, long long>& c) {
    return c.empty() ? 0.0 : c.rbegin()->first;
  }

  void route_flow(std::uint32_t i, double sign) {
    const Flow& f = t.matrix[i];
    Sink sink{*this, lane_of(dims), sign};
    internal::route_flow(m, res, a[static_cast<std::size_t>(f.from)],
                         a[static_cast<std::size_t>(f.to)], f.bytes, internal::kAnyRelay, sink);
    work += 1;
  }

  // After loads of `lane` changed (those that rose are in `touched`): the worst resource again.
  // Resources that did not rise are at most the old worst, so only a drop of the old worst
  // itself needs a rescan.
  void update_worst(std::size_t lane) {
    const double old = worst[lane];
    double best = old;
    std::size_t at = worst_at[lane];
    const bool dropped = value(lane, at) < old;
    for (std::size_t r : touched) {
      double v = value(lane, r);
      if (v > best) {
        best = v;
        at = r;
      }
    }
    if (dropped && !(best > old)) {
      rescan(lane);
    } else {
      worst[lane] = best;
      worst_at[lane] = at;
    }
    touched.clear();
  }

  // The step's exposed time, as evaluate_seconds() computes it: per dim the longer of its
  // busiest resource and its slowest group's NCCL time, plus its slowest group's latency, and of
  // that what the step waits for.
  double seconds() const {
    double s = 0, nccl = 0;
    for (std::size_t d = 0; d < dims; ++d) {
      const DimTraffic& dt = t.dims[d];
      if (dt.size <= 1 || dt.bytes <= 0) continue;
      if (t.overlap) {
        nccl = std::max(nccl, largest(nccl_count[d]));
        s += largest(latency_count[d]);
        continue;
      }
      s += exposed_seconds(dt, std::max(worst[d], largest(nccl_count[d])) +
                                   largest(latency_count[d]));
    }
    if (t.overlap) {
      s += std::max(worst[0], nccl);
    } else if (!t.matrix.empty()) {
      s += worst[dims];
    }
    return s;
  }

  void exchange(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs) {
    journal.clear();
    saved_worst = worst;
    saved_worst_at = worst_at;
    counted.clear();
    saved_crossing = crossing;
    last = pairs;
    journaling = true;
    struct Off {
      bool& flag;
      ~Off() { flag = false; }
    } off{journaling};
    std::vector<std::uint32_t> moved;
    for (const auto& [x, y] : pairs) {
      if (x >= a.size() || y >= a.size()) throw Error("cost model: exchange of a rank not placed");
      moved.push_back(x);
      moved.push_back(y);
    }
    std::vector<std::uint32_t> check = moved;
    std::sort(check.begin(), check.end());
    if (std::adjacent_find(check.begin(), check.end()) != check.end()) {
      throw Error("cost model: exchange names a rank twice");
    }
    std::vector<long long> bases;
    for (std::size_t d = 0; d < dims; ++d) {
      const DimTraffic& dt = t.dims[d];
      if (dt.size <= 1 || dt.bytes <= 0) continue;
      bases.clear();
      const long long block = dt.stride * dt.size;
      for (auto r : moved) {
        const long long rr = r;
        bases.push_back(rr / block * block + rr % dt.stride);
      }
      std::sort(bases.begin(), bases.end());
      bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
      for (long long b : bases) route(d, b, -1.0);
      for (const auto& [x, y] : pairs) std::swap(a[x], a[y]);
      for (long long b : bases) route(d, b, 1.0);
      for (const auto& [x, y] : pairs) std::swap(a[x], a[y]);
      update_worst(lane_of(d));
    }
    if (!t.matrix.empty()) {
      std::vector<std::uint32_t> flows;
      for (auto r : moved) {
        flows.insert(flows.end(), flows_of_rank[r].begin(), flows_of_rank[r].end());
      }
      std::sort(flows.begin(), flows.end());
      flows.erase(std::unique(flows.begin(), flows.end()), flows.end());
      for (auto i : flows) route_flow(i, -1.0);
      for (const auto& [x, y] : pairs) std::swap(a[x], a[y]);
      for (auto i : flows) route_flow(i, 1.0);
      for (const auto& [x, y] : pairs) std::swap(a[x], a[y]);
      update_worst(lane_of(dims));
    }
    for (const auto& [x, y] : pairs) std::swap(a[x], a[y]);
  }

  void undo() {
    if (last.empty()) throw Error("cost model: nothing to undo");
    for (auto it = journal.rbegin(); it != journal.rend(); ++it) {
      load[it->lane][it->resource] = it->load;
      if (!square[it->lane].empty()) square[it->lane][it->resource] = it->square;
    }
    worst = saved_worst;
    worst_at = saved_worst_at;
    for (auto it = counted.rbegin(); it != counted.rend(); ++it) {
      auto& c = (it->latency ? latency_count : nccl_count)[it->dim];
      auto at = c.emplace(it->value, 0).first;
      at->second -= it->delta;
      if (at->second == 0) c.erase(at);
    }
    counted.clear();
    crossing = saved_crossing;
    for (const auto& [x, y] : last) std::swap(a[x], a[y]);
    journal.clear();
    last.clear();
  }
};

IncrementalCost::IncrementalCost(const Machine& machine, const Traffic& traffic,
                                 std::vector<std::uint32_t> slot_of_rank)
    : s_(std::make_unique<State>(machine, traffic, std::move(slot_of_rank))) {}
IncrementalCost::~IncrementalCost() = default;
double IncrementalCost::seconds() const { return s_->seconds(); }
double IncrementalCost::crossing() const { return s_->crossing; }
const std::vector<std::uint32_t>& IncrementalCost::slot_of_rank() const { return s_->a; }
void IncrementalCost::exchange(
    const std::vector<std::pair<std::uint32_t, std::uint32_t>>& rank_pairs) {
  s_->exchange(rank_pairs);
}
void IncrementalCost::undo() { s_->undo(); }
long long IncrementalCost::work() const { return s_->work; }

}  // namespace topoaware::mapper
