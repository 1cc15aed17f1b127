#include "topoaware/mapper/simulate.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/place.h"
#include "topoaware/mapper/slurm_select.h"

namespace topoaware::mapper {

std::string_view to_string(Placer p) {
  switch (p) {
    case Placer::kFlat:
      return "flat";
    case Placer::kTree:
      return "tree";
    case Placer::kTreeSwitches:
      return "tree-switches";
    case Placer::kPlace:
      return "place";
    case Placer::kPlaceLoad:
      return "place-load";
    case Placer::kBlock:
      return "block";
  }
  return "?";
}

Placer placer_from(std::string_view name) {
  for (auto p : {Placer::kFlat, Placer::kTree, Placer::kTreeSwitches, Placer::kBlock,
                 Placer::kPlace, Placer::kPlaceLoad}) {
    if (name == to_string(p)) return p;
  }
  throw Error("unknown placer '" + std::string(name) +
              "' (expected flat, tree, tree-switches, block, place or place-load)");
}

// ---- SlowdownModel -------------------------------------------------------------------------

namespace {

// A job of `hosts` whole hosts with the layout layout_for() gives, on an empty cluster.
PlaceInput input_for(const topology::Fabric& fabric, const topology::NodeTopology& node,
                     int gpus_per_host, long long refine_moves, std::uint32_t hosts) {
  PlaceInput in;
  in.free_gpus.assign(fabric.hosts.size(), gpus_per_host);
  in.nodes.assign(fabric.hosts.size(), &node);
  in.gpus_per_host = gpus_per_host;
  in.hosts = hosts;
  in.request.layout = parse_layout(SlowdownModel::layout_for(hosts, gpus_per_host),
                                   static_cast<int>(hosts) * gpus_per_host);
  in.request.refine_moves = refine_moves;
  return in;
}

// A group's uplink capacity as the mapper sizes it (GB/s; 0: no limit): the given one, or where
// the source gave no speed, its hosts' capacity over the tier's declared ratio (machine.cc,
// sized_uplinks).
double uplink_gbps(const topology::Fabric& fabric, std::size_t level, std::uint32_t group) {
  const topology::LocalityLevel& lv = fabric.levels[level];
  if (group >= lv.group_uplink_gbps.size()) return 0;
  if (group < lv.group_uplink_assumed.size() && lv.group_uplink_assumed[group]) {
    const auto it = fabric.declared_oversubscription.find(lv.tier);
    const double ratio =
        it != fabric.declared_oversubscription.end() && it->second >= 1 ? it->second : 1.0;
    return group < lv.group_downlink_gbps.size() ? lv.group_downlink_gbps[group] / ratio : 0;
  }
  return lv.group_uplink_gbps[group];
}

// The fabric with some groups' uplinks at `level` set to given capacities (GB/s), no longer
// sized from their hosts: what contention leaves of them (slowdown_sharing, place-load).
topology::Fabric with_uplinks(const topology::Fabric& fabric, std::size_t level,
                              const std::map<std::uint32_t, double>& gbps) {
  topology::Fabric out = fabric;
  topology::LocalityLevel& lv = out.levels[level];
  for (const auto& [group, cap] : gbps) {
    if (group >= lv.group_uplink_gbps.size()) continue;
    lv.group_uplink_gbps[group] = cap;
    if (group < lv.group_uplink_assumed.size()) lv.group_uplink_assumed[group] = 0;
  }
  return out;
}

}  // namespace

SlowdownModel::SlowdownModel(const topology::Fabric& fabric, const topology::NodeTopology& node,
                             int gpus_per_host, long long refine_moves)
    : fabric_(&fabric),
      node_(&node),
      gpus_per_host_(gpus_per_host),
      refine_moves_(refine_moves),
      levels_(group_levels(fabric)) {
  if (gpus_per_host < 1) throw Error("simulate: GPUs per host must be at least 1");
}

std::string SlowdownModel::layout_for(std::uint32_t hosts, int gpus_per_host) {
  std::uint32_t pp = 1;
  for (std::uint32_t d = std::min<std::uint32_t>(hosts / 2, 8); d >= 1; --d) {
    if (hosts % d == 0) {
      pp = d;
      break;
    }
  }
  std::string spec = "tp=" + std::to_string(gpus_per_host);
  if (pp > 1) spec += ",pp=" + std::to_string(pp);
  return spec;
}

double SlowdownModel::slowdown(const std::vector<std::uint32_t>& hosts) {
  const auto n = static_cast<std::uint32_t>(hosts.size());
  if (n <= 1) return 1;
  // Structure key: the host count, then per grouping level the sorted counts per group touched.
  std::vector<std::uint32_t> key = {n};
  for (std::size_t li : levels_) {
    std::vector<std::uint32_t> groups;
    groups.reserve(hosts.size());
    for (std::uint32_t h : hosts) groups.push_back(fabric_->levels[li].group_of_host[h]);
    std::sort(groups.begin(), groups.end());
    std::vector<std::uint32_t> counts;
    for (std::size_t i = 0; i < groups.size();) {
      std::size_t j = i;
      while (j < groups.size() && groups[j] == groups[i]) ++j;
      counts.push_back(static_cast<std::uint32_t>(j - i));
      i = j;
    }
    std::sort(counts.begin(), counts.end());
    key.push_back(std::numeric_limits<std::uint32_t>::max());  // level separator
    key.insert(key.end(), counts.begin(), counts.end());
  }
  if (const auto it = slowdowns_.find(key); it != slowdowns_.end()) {
    ++hits_;
    return it->second;
  }
  const double best = best_seconds(n);
  const PlaceInput in = input_for(*fabric_, *node_, gpus_per_host_, refine_moves_, n);
  const double seconds = score_allocation(*fabric_, in, hosts).seconds;
  ++evaluations_;
  const double s = best > 0 ? std::max(1.0, seconds / best) : 1.0;
  slowdowns_.emplace(std::move(key), s);
  return s;
}

double SlowdownModel::best_seconds(std::uint32_t n) {
  auto best = best_.find(n);
  if (best == best_.end()) {
    const Placement p =
        place(*fabric_, input_for(*fabric_, *node_, gpus_per_host_, refine_moves_, n));
    if (!p.placed)
      throw Error("simulate: no empty-cluster placement of " + std::to_string(n) +
                  " hosts: " + p.reason);
    best = best_.emplace(n, p.chosen.seconds).first;
    ++evaluations_;
  }
  return best->second;
}

double SlowdownModel::leaf_uplink_gbps(std::uint32_t group) const {
  return levels_.empty() ? 0 : uplink_gbps(*fabric_, levels_.front(), group);
}

double SlowdownModel::slowdown_sharing(const std::vector<std::uint32_t>& hosts,
                                       const std::map<std::uint32_t, double>& leaf_share) {
  const auto n = static_cast<std::uint32_t>(hosts.size());
  if (n <= 1) return 1;
  if (levels_.empty()) return slowdown(hosts);
  std::map<std::uint32_t, double> cut_gbps;
  for (const auto& [group, share] : leaf_share) {
    const double cap = leaf_uplink_gbps(group);
    if (cap > 0) cut_gbps[group] = cap * std::clamp(share, 1e-3, 1.0);
  }
  const topology::Fabric cut = with_uplinks(*fabric_, levels_.front(), cut_gbps);
  const double best = best_seconds(n);
  const PlaceInput in = input_for(cut, *node_, gpus_per_host_, refine_moves_, n);
  const double seconds = score_allocation(cut, in, hosts).seconds;
  ++evaluations_;
  return best > 0 ? std::max(1.0, seconds / best) : 1.0;
}

// ---- replay ----------------------------------------------------------------------------------

namespace {

struct Running {
  std::vector<std::uint32_t> hosts;
  int gpus_each = 0;
};

class Cluster {
 public:
  Cluster(const topology::Fabric& fabric, const topology::NodeTopology& node, Placer placer,
          const ReplayOptions& options)
      : fabric_(fabric),
        node_(node),
        placer_(placer),
        options_(options),
        g_(options.gpus_per_host),
        free_(fabric.hosts.size(), 0),
        by_free_(static_cast<std::size_t>(g_) + 1, 0),
        slurm_nodes_(slurm::nodes_of(fabric)),
        levels_(group_levels(fabric)) {
    if (!levels_.empty()) {
      crossing_gbps_.assign(fabric.levels[levels_.front()].group_uplink_gbps.size(), 0.0);
    }
    for (std::size_t h = 0; h < fabric.hosts.size(); ++h) {
      usable_.push_back(fabric.hosts[h].excluded ? 0 : 1);
      if (usable_[h]) {
        free_[h] = g_;
        ++usable_hosts_;
      }
    }
    for (std::size_t h = 0; h < free_.size(); ++h) {
      if (usable_[h]) ++by_free_[static_cast<std::size_t>(free_[h])];
    }
    if (usable_hosts_ == 0) throw Error("simulate: the fabric has no usable host");
    if (placer == Placer::kTree || placer == Placer::kTreeSwitches) {
      switches_ = slurm::switches_of(fabric);
    }
    if (placer == Placer::kBlock) blocks_ = slurm::blocks_of(fabric);
  }

  std::size_t usable_hosts() const { return usable_hosts_; }
  std::size_t whole_free() const { return by_free_[static_cast<std::size_t>(g_)]; }
  const std::vector<int>& free() const { return free_; }

  // Whole hosts a job of `gpus` takes; 0 for a part of one host.
  std::uint32_t hosts_of(int gpus) const {
    return gpus < g_ ? 0 : static_cast<std::uint32_t>((gpus + g_ - 1) / g_);
  }

  // Whether the placer would ever start a job of `n` whole hosts: on an empty cluster. Only
  // topology/block can refuse one the cluster holds (no aligned block of its size exists); it
  // would pend for ever, so the replay leaves it out and counts it.
  bool ever_fits(std::uint32_t n) {
    if (placer_ != Placer::kBlock || n <= 1) return true;
    auto it = ever_fits_.find(n);
    if (it != ever_fits_.end()) return it->second;
    std::vector<slurm::Node> empty = slurm_nodes_;
    for (std::size_t h = 0; h < empty.size(); ++h) empty[h].free = usable_[h] != 0;
    slurm::Job sj;
    sj.nodes = n;
    const slurm::Selection sel = slurm::select_block(empty, blocks_, sj);
    if (sel.outcome == slurm::Outcome::kNotModeled) throw Error("simulate: " + sel.reason);
    return ever_fits_[n] = sel.outcome == slurm::Outcome::kSelected;
  }

  // Whether resources for the job exist now, counted (no placement).
  bool count_fits(int gpus) const {
    const std::uint32_t n = hosts_of(gpus);
    if (n > 0) return whole_free() >= n;
    for (int k = gpus; k <= g_; ++k) {
      if (by_free_[static_cast<std::size_t>(k)] > 0) return true;
    }
    return false;
  }

  // Where the placer puts the job now; empty when it would not start it now.
  std::vector<std::uint32_t> choose(const TraceJob& job, double now) {
    const std::uint32_t n = hosts_of(job.gpus);
    if (n == 0) {
      // Best fit: the host with the fewest free GPUs that holds the job, lowest index first.
      std::uint32_t best = 0;
      int best_free = g_ + 1;
      for (std::size_t h = 0; h < free_.size(); ++h) {
        if (usable_[h] && free_[h] >= job.gpus && free_[h] < best_free) {
          best_free = free_[h];
          best = static_cast<std::uint32_t>(h);
        }
      }
      if (best_free > g_) return {};
      return {best};
    }
    if (whole_free() < n) return {};
    if (placer_ == Placer::kPlace || placer_ == Placer::kPlaceLoad) {
      PlaceInput in = input_for(fabric_, node_, g_, 0, n);
      in.free_gpus = free_;
      const Placement p = placer_ == Placer::kPlaceLoad && options_.contention
                              ? place(loaded_fabric(), in)
                              : place(fabric_, in);
      return p.placed ? p.chosen.hosts : std::vector<std::uint32_t>{};
    }
    for (std::size_t h = 0; h < free_.size(); ++h) {
      slurm_nodes_[h].free = usable_[h] && free_[h] == g_;
    }
    slurm::Job sj;
    sj.nodes = n;
    slurm::Selection s;
    if (placer_ == Placer::kFlat) {
      s = slurm::select_flat(slurm_nodes_, sj);
    } else if (placer_ == Placer::kBlock) {
      s = slurm::select_block(slurm_nodes_, blocks_, sj);
    } else {
      if (placer_ == Placer::kTreeSwitches) {
        sj.max_switches = 1;
        sj.switch_wait_expired = now - job.submit >= options_.switch_wait_s;
      }
      s = slurm::select_tree(slurm_nodes_, switches_, sj);
    }
    if (s.outcome == slurm::Outcome::kNotModeled) throw Error("simulate: " + s.reason);
    return s.outcome == slurm::Outcome::kSelected ? s.nodes : std::vector<std::uint32_t>{};
  }

  void take(const std::vector<std::uint32_t>& hosts, int gpus_each) { adjust(hosts, -gpus_each); }
  void give(const std::vector<std::uint32_t>& hosts, int gpus_each) { adjust(hosts, gpus_each); }

  // Groups of the grouping level above the leaves (spines, pods) the hosts touch; 1 where the
  // fabric has no such level.
  std::size_t spines(const std::vector<std::uint32_t>& hosts) const {
    if (levels_.size() < 2 || hosts.empty()) return 1;
    std::vector<std::uint32_t> g;
    for (std::uint32_t h : hosts) g.push_back(fabric_.levels[levels_[1]].group_of_host[h]);
    std::sort(g.begin(), g.end());
    return static_cast<std::size_t>(std::unique(g.begin(), g.end()) - g.begin());
  }

  // The load other jobs put on leaf uplinks (ReplayOptions::contention): `sign` +1 when a job
  // starts, -1 when it ends; only jobs that span leaves count.
  void cross(const std::vector<std::uint32_t>& hosts, double sign) {
    if (levels_.empty() || leaves(hosts).first < 2) return;
    const auto& group = fabric_.levels[levels_.front()].group_of_host;
    for (std::uint32_t h : hosts) {
      double& c = crossing_gbps_[group[h]];
      c = std::max(0.0, c + sign * host_gbps(h));
    }
  }

  // The share of each leaf's uplink left to a job on `hosts` that spans leaves, for the leaves
  // where it is less than all of it; empty where the job is in one leaf or nothing contends.
  std::map<std::uint32_t, double> shares(const std::vector<std::uint32_t>& hosts,
                                         double comm_fraction) const {
    std::map<std::uint32_t, double> out;
    if (levels_.empty() || leaves(hosts).first < 2) return out;
    const auto& group = fabric_.levels[levels_.front()].group_of_host;
    std::map<std::uint32_t, double> demand;  // this job's hosts' port capacity per leaf
    for (std::uint32_t h : hosts) demand[group[h]] += host_gbps(h);
    for (const auto& [g, mine] : demand) {
      const double others = comm_fraction * crossing_gbps_[g];
      const double cap = uplink_gbps(fabric_, levels_.front(), g);
      if (cap <= 0 || others <= 0 || mine + others <= cap) continue;
      const double share = std::max(1 - others / cap, mine / (mine + others));
      if (share < 1) out[g] = share;
    }
    return out;
  }

  std::pair<std::size_t, double> leaves(const std::vector<std::uint32_t>& hosts) const {
    if (levels_.empty() || hosts.empty()) return {1, 1.0};
    std::vector<std::uint32_t> g;
    for (std::uint32_t h : hosts) g.push_back(fabric_.levels[levels_.front()].group_of_host[h]);
    std::sort(g.begin(), g.end());
    std::size_t groups = 0, fullest = 0;
    for (std::size_t i = 0; i < g.size();) {
      std::size_t j = i;
      while (j < g.size() && g[j] == g[i]) ++j;
      ++groups;
      fullest = std::max(fullest, j - i);
      i = j;
    }
    return {groups, static_cast<double>(fullest) / static_cast<double>(hosts.size())};
  }

  double fragmentation_now() const {
    std::vector<char> whole(free_.size(), 0);
    for (std::size_t h = 0; h < free_.size(); ++h) whole[h] = usable_[h] && free_[h] == g_;
    return fragmentation(fabric_, whole);
  }

 private:
  // place-load's view: the fabric with each leaf's uplink less the expected load of the running
  // jobs that span it (their hosts at port rate for comm_fraction of the time), at least 5% of
  // it. What is left to a new job, before its own traffic.
  topology::Fabric loaded_fabric() const {
    if (levels_.empty()) return fabric_;
    std::map<std::uint32_t, double> left;
    for (std::uint32_t g = 0; g < crossing_gbps_.size(); ++g) {
      const double cap = uplink_gbps(fabric_, levels_.front(), g);
      const double load = options_.comm_fraction * crossing_gbps_[g];
      if (cap > 0 && load > 0) left[g] = std::max(cap - load, 0.05 * cap);
    }
    return with_uplinks(fabric_, levels_.front(), left);
  }

  double host_gbps(std::uint32_t h) const {
    double sum = 0;
    for (double g : fabric_.hosts[h].port_gbps) sum += g;
    return sum;
  }

  void adjust(const std::vector<std::uint32_t>& hosts, int delta) {
    for (std::uint32_t h : hosts) {
      --by_free_[static_cast<std::size_t>(free_[h])];
      free_[h] += delta;
      if (free_[h] < 0 || free_[h] > g_) throw Error("simulate: internal: free GPUs out of range");
      ++by_free_[static_cast<std::size_t>(free_[h])];
    }
  }

  const topology::Fabric& fabric_;
  const topology::NodeTopology& node_;
  Placer placer_;
  const ReplayOptions& options_;
  int g_;
  std::vector<int> free_;
  std::vector<char> usable_;
  std::size_t usable_hosts_ = 0;
  std::vector<std::size_t> by_free_;  // usable hosts per free-GPU count
  std::vector<slurm::Node> slurm_nodes_;
  std::vector<slurm::Switch> switches_;
  slurm::BlockTopology blocks_;
  std::map<std::uint32_t, bool> ever_fits_;  // block: hosts -> placed on an empty cluster
  std::vector<std::size_t> levels_;
  std::vector<double> crossing_gbps_;  // per leaf group: port capacity of running jobs that span
};

// The head's reservation: free GPUs per host projected to the shadow time, and whether the
// head fits a projection, counted incrementally as projections change.
class Shadow {
 public:
  Shadow(std::vector<int> projected, int head_gpus, int g, std::uint32_t head_hosts)
      : proj_(std::move(projected)), gpus_(head_gpus), g_(g), hosts_(head_hosts) {
    for (int f : proj_) count_ += counts(f) ? 1 : 0;
  }
  bool fits() const { return hosts_ > 0 ? count_ >= hosts_ : count_ > 0; }
  // For a head of whole hosts: the whole hosts free at the shadow time beyond its own.
  std::size_t spare_hosts() const { return hosts_ > 0 && count_ > hosts_ ? count_ - hosts_ : 0; }
  bool whole_host_head() const { return hosts_ > 0; }
  void add(std::uint32_t h, int delta) {
    count_ -= counts(proj_[h]) ? 1 : 0;
    proj_[h] += delta;
    count_ += counts(proj_[h]) ? 1 : 0;
  }

 private:
  // Whether a host of `f` free GPUs counts toward the head: a whole free host for a job of whole
  // hosts, a host that holds it for a part of one.
  bool counts(int f) const { return hosts_ > 0 ? f == g_ : f >= gpus_; }
  std::vector<int> proj_;
  int gpus_;
  int g_;
  std::uint32_t hosts_;
  std::size_t count_ = 0;
};

}  // namespace

Replay replay(const topology::Fabric& fabric, const topology::NodeTopology& node,
              const std::vector<TraceJob>& jobs, Placer placer, const ReplayOptions& options,
              SlowdownModel& model) {
  if (options.gpus_per_host < 1) throw Error("simulate: GPUs per host must be at least 1");
  Cluster cluster(fabric, node, placer, options);
  const int g = options.gpus_per_host;
  Replay out;
  out.placer = placer;
  out.capacity_gpus = static_cast<double>(cluster.usable_hosts()) * g;
  const double capacity = out.capacity_gpus;

  std::vector<Running> running(jobs.size());
  std::set<std::pair<double, std::size_t>> ends;  // (end time, job)
  std::set<double> wakeups;                       // --switches waits running out
  std::deque<std::size_t> queue;
  std::size_t next = 0, to_replay = 0;
  std::vector<char> left_out(jobs.size(), 0);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].gpus > capacity) {
      ++out.too_large;
      left_out[i] = 1;
    } else if (!cluster.ever_fits(cluster.hosts_of(jobs[i].gpus))) {
      ++out.never_placed;
      left_out[i] = 1;
    }
  }
  to_replay = jobs.size() - out.too_large - out.never_placed;
  if (!jobs.empty()) out.first_submit = jobs.front().submit;

  auto start = [&](std::size_t j, const std::vector<std::uint32_t>& hosts, double now) {
    const TraceJob& job = jobs[j];
    const int each = hosts.size() == 1 ? std::min(job.gpus, g) : g;
    cluster.take(hosts, each);
    running[j] = {hosts, each};
    JobOutcome o;
    o.job = j;
    o.start = now;
    o.hosts = static_cast<std::uint32_t>(hosts.size());
    o.placed_on = hosts;
    std::tie(o.leaves, o.locality) = cluster.leaves(hosts);
    o.spines = cluster.spines(hosts);
    if (hosts.size() > 1) {
      std::map<std::uint32_t, double> share;
      if (options.contention) share = cluster.shares(hosts, options.comm_fraction);
      o.shared = !share.empty();
      o.slowdown = o.shared ? model.slowdown_sharing(hosts, share) : model.slowdown(hosts);
      cluster.cross(hosts, +1);
    }
    const double run = job.duration * (1 + options.comm_fraction * (o.slowdown - 1));
    o.end = now + run;
    ends.emplace(o.end, j);
    out.gpu_seconds += job.gpus * run;
    out.last_end = std::max(out.last_end, o.end);
    const double frag = cluster.fragmentation_now();
    out.fragmentation_sum += frag;
    ++out.fragmentation_samples;
    out.fragmentation_over_time.emplace_back(now, frag);
    out.jobs.push_back(o);
    if (options.progress && options.progress_every > 0 &&
        out.jobs.size() % options.progress_every == 0) {
      options.progress(out.jobs.size(), to_replay, now);
    }
    return o.end;
  };

  auto schedule = [&](double now) {
    // The head and those behind it start in order while they can.
    while (!queue.empty()) {
      const std::size_t head = queue.front();
      if (!cluster.count_fits(jobs[head].gpus)) break;
      const auto hosts = cluster.choose(jobs[head], now);
      if (hosts.empty()) break;
      start(head, hosts, now);
      queue.pop_front();
    }
    if (queue.size() < 2) return;
    // The head's reservation: release running jobs in end order until it fits, counted.
    const TraceJob& head = jobs[queue.front()];
    const std::uint32_t head_hosts = cluster.hosts_of(head.gpus);
    Shadow shadow(cluster.free(), head.gpus, g, head_hosts);
    double shadow_time = now;
    auto it = ends.begin();
    while (!shadow.fits() && it != ends.end()) {
      shadow_time = it->first;
      for (; it != ends.end() && it->first == shadow_time; ++it) {
        const Running& r = running[it->second];
        for (std::uint32_t h : r.hosts) shadow.add(h, r.gpus_each);
      }
    }
    if (!shadow.fits()) shadow_time = std::numeric_limits<double>::infinity();
    for (std::size_t qi = 1; qi < queue.size();) {
      const std::size_t j = queue[qi];
      const TraceJob& job = jobs[j];
      // Counted first, so that the placer runs only for a job that can go: a whole-host job
      // that must end after the shadow time takes whole hosts that are wholly free then too, so
      // it needs that many spare ones.
      const std::uint32_t n = cluster.hosts_of(job.gpus);
      if (!cluster.count_fits(job.gpus) ||
          (n > 0 && shadow.whole_host_head() && now + job.duration > shadow_time &&
           shadow.spare_hosts() < n)) {
        ++qi;
        continue;
      }
      const auto hosts = cluster.choose(job, now);
      if (hosts.empty()) {
        ++qi;
        continue;
      }
      // Its run time where it would go: the slowdown is the model's, cached.
      const double slow = hosts.size() > 1 ? model.slowdown(hosts) : 1.0;
      const double end = now + job.duration * (1 + options.comm_fraction * (slow - 1));
      if (end > shadow_time) {
        const int each = hosts.size() == 1 ? std::min(job.gpus, g) : g;
        for (std::uint32_t h : hosts) shadow.add(h, -each);
        if (!shadow.fits()) {
          for (std::uint32_t h : hosts) shadow.add(h, each);
          ++qi;
          continue;
        }
      }
      start(j, hosts, now);
      queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(qi));
    }
  };

  while (next < jobs.size() || !queue.empty()) {
    double now = std::numeric_limits<double>::infinity();
    if (next < jobs.size()) now = jobs[next].submit;
    if (!ends.empty()) now = std::min(now, ends.begin()->first);
    if (!wakeups.empty()) now = std::min(now, *wakeups.begin());
    if (now == std::numeric_limits<double>::infinity()) break;  // nothing can change: stuck
    while (!ends.empty() && ends.begin()->first <= now) {
      const std::size_t j = ends.begin()->second;
      cluster.give(running[j].hosts, running[j].gpus_each);
      cluster.cross(running[j].hosts, -1);
      running[j] = {};
      ends.erase(ends.begin());
    }
    while (!wakeups.empty() && *wakeups.begin() <= now) wakeups.erase(wakeups.begin());
    while (next < jobs.size() && jobs[next].submit <= now) {
      if (!left_out[next]) {
        queue.push_back(next);
        if (placer == Placer::kTreeSwitches && cluster.hosts_of(jobs[next].gpus) > 1) {
          wakeups.insert(jobs[next].submit + options.switch_wait_s);
        }
      }
      ++next;
    }
    schedule(now);
  }
  if (!queue.empty()) {
    throw Error("simulate: internal: " + std::to_string(queue.size()) +
                " jobs could never start under " + std::string(to_string(placer)));
  }
  return out;
}

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

std::vector<std::pair<double, double>> utilisation_over_time(const Replay& r,
                                                             const std::vector<TraceJob>& jobs,
                                                             int gpus_per_host) {
  std::vector<std::pair<double, double>> out;
  if (r.capacity_gpus <= 0) return out;
  // (time, GPUs taken (+) or given back (-)), swept in time order.
  std::vector<std::pair<double, double>> events;
  events.reserve(2 * r.jobs.size());
  for (const JobOutcome& o : r.jobs) {
    const double held = o.hosts == 1 ? std::min<double>(jobs[o.job].gpus, gpus_per_host)
                                     : static_cast<double>(o.hosts) * gpus_per_host;
    events.emplace_back(o.start, held);
    events.emplace_back(o.end, -held);
  }
  std::sort(events.begin(), events.end());
  double busy = 0;
  for (std::size_t i = 0; i < events.size();) {
    const double t = events[i].first;
    for (; i < events.size() && events[i].first == t; ++i) busy += events[i].second;
    const double share = std::max(0.0, busy / r.capacity_gpus);  // no -0 from rounding
    out.emplace_back(t, share < 1e-12 ? 0.0 : share);
  }
  return out;
}

ReplaySummary summarize(const Replay& r, const std::vector<TraceJob>& jobs) {
  ReplaySummary s;
  s.jobs = r.jobs.size();
  s.too_large = r.too_large;
  s.never_placed = r.never_placed;
  std::vector<double> wait, jct, slow;
  double leaves = 0, spines = 0, locality = 0;
  for (const JobOutcome& o : r.jobs) {
    const double submit = jobs[o.job].submit;
    wait.push_back(o.start - submit);
    jct.push_back(o.end - submit);
    if (o.hosts > 1) {
      ++s.multi_host;
      slow.push_back(o.slowdown);
      leaves += static_cast<double>(o.leaves);
      spines += static_cast<double>(o.spines);
      s.shared += o.shared ? 1 : 0;
      locality += o.locality;
    }
  }
  s.wait_median_s = percentile(wait, 0.5);
  s.wait_p95_s = percentile(wait, 0.95);
  s.jct_median_s = percentile(jct, 0.5);
  s.jct_p95_s = percentile(jct, 0.95);
  if (!slow.empty()) {
    s.slowdown_median = percentile(slow, 0.5);
    s.slowdown_p95 = percentile(slow, 0.95);
    s.leaves_mean = leaves / static_cast<double>(slow.size());
    s.spines_mean = spines / static_cast<double>(slow.size());
    s.locality_mean = locality / static_cast<double>(slow.size());
  }
  s.makespan_s = r.last_end - r.first_submit;
  if (s.makespan_s > 0 && r.capacity_gpus > 0) {
    s.utilisation = r.gpu_seconds / (r.capacity_gpus * s.makespan_s);
  }
  if (r.fragmentation_samples > 0) {
    s.fragmentation_mean = r.fragmentation_sum / static_cast<double>(r.fragmentation_samples);
  }
  return s;
}

}  // namespace topoaware::mapper
