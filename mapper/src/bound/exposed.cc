// lower_bound() (cost.h): a bound on the exposed time the cost model gives any assignment
// (docs/mapper.md, "Lower bound", "From the routed bound to the step"). The routed bound
// (lower_bound.cc and the rest of bound/) bounds the loads of rings, two-node trees, all-to-alls
// and pipelines; the model's dims take the longer of their routed loads and NCCL's own time, plus
// NCCL's latency, and the step waits for the data-parallel reduction only beyond the compute it
// hides behind. So:
// - each dim runs the routed bound as a view that its own routing never undercuts: gathers as
//   rings of half their bytes (the same (n-1)/n of every buffer), NVLink as fast as NCCL's NVLS
//   makes it (kappa); a dim NCCL may run as a tree, CollNet or PAT over three nodes or more sends
//   less than a ring there and is left to its NCCL floor;
// - each dim has NCCL floors over every shape its groups can take: the least latency of any
//   algorithm NCCL could pick, and the least time (bandwidth and latency) of what it picks; over
//   the shapes of two nodes or more where the islands cannot hold every group whole (its slowest
//   group sets the dim's NCCL time and latency);
// - the step is at least the routed bound plus the latency floors, less what the hidden dims can
//   hide; at least the routed bound of the other dims plus their latency floors plus the hidden
//   dims' exposed NCCL floors; at least the NCCL floors alone; and at least the NCCL floors of
//   the visible dims that must split plus this bound of the step without them.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "bound/bound.h"
#include "domains.h"
#include "routing.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/nccl_model.h"

namespace topoaware::mapper::internal {
namespace {

// One class of hosts as NCCL's tuning sees them.
struct HostClass {
  int sm = 90;
  bool nvswitch = true, nvlink = true, amd = false;
  double gpu = 0;        // fastest GPU link bandwidth on such a host
  double nic = 0;        // fastest port
  int ports_per_gpu = 1;  // most ports one GPU spreads over
  int ports = 1;          // most ports of an NCCL node (a host, or an NVLink domain) with such hosts
  auto key() const { return std::tie(sm, nvswitch, nvlink, amd, gpu, nic, ports_per_gpu, ports); }
  bool operator<(const HostClass& o) const { return key() < o.key(); }
};

std::vector<HostClass> host_classes(const Machine& m) {
  std::map<std::uint32_t, std::uint32_t> island_ports;  // per NCCL node: its hosts' ports
  for (std::uint32_t h = 0; h < m.hosts.size(); ++h) island_ports[nccl_node(m, h)] += m.port_count[h];
  std::map<std::uint32_t, HostClass> by_host;
  for (std::uint32_t h = 0; h < m.hosts.size(); ++h) {
    HostClass c;
    c.sm = m.host_sm[h];
    c.nvswitch = m.host_nvswitch[h];
    c.nvlink = m.pxn[h];
    c.amd = m.host_amd_cpu[h];
    c.ports = static_cast<int>(std::max<std::uint32_t>(1, island_ports[nccl_node(m, h)]));
    for (std::uint32_t p = 0; p < m.port_count[h]; ++p) {
      c.nic = std::max(c.nic, m.port_gbps[m.port_base[h] + p]);
    }
    by_host[h] = c;
  }
  for (std::size_t s = 0; s < m.slots.size(); ++s) {
    HostClass& c = by_host[m.slots[s].host];
    c.gpu = std::max(c.gpu, m.slot_nvlink_gbps[s]);
    c.ports_per_gpu = std::max(c.ports_per_gpu, static_cast<int>(m.slots[s].ports.count));
  }
  std::set<HostClass> distinct;
  for (const auto& [h, c] : by_host) distinct.insert(c);
  return {distinct.begin(), distinct.end()};
}

struct DimFloors {
  double latency = 0;   // seconds a step: the least latency any placement gives the dim
  double time = 0;      // seconds a step: the least NCCL time, bandwidth and latency
  bool routed = true;   // the routed view may count the dim
  bool all_reduce = false;
};

// The floors of one dim (see the file's comment). `split`: the islands cannot hold every group of
// the dim whole (fewer whole groups fit their slots than there are groups), so some group spans
// two NCCL nodes or more, and the dim, as slow as its slowest group (its NCCL time and its
// latency are each its groups' largest), is at least as slow as the fastest such group: its
// shapes start at two nodes, with any split of the members between them.
DimFloors dim_floors(const Traffic& t, const DimTraffic& d,
                     const std::vector<HostClass>& classes, long long island_kmax,
                     long long islands, bool split) {
  DimFloors f;
  const long long n = d.size;
  if (d.collective == Collective::kSendRecv || d.collective == Collective::kAllToAll ||
      d.collective == Collective::kRingExchange) {
    double intra = std::numeric_limits<double>::infinity();
    for (const auto& c : classes) intra = std::min(intra, c.nvlink ? 3.4 : 5.7);
    f.latency = d.calls * (n > island_kmax ? 14.0 : intra) * 1e-6;
    f.time = f.latency;
    return f;
  }
  const bool gather = d.collective == Collective::kGather;
  f.all_reduce = !gather;
  const nccl::Func func = gather ? nccl::Func::kReduceScatter : nccl::Func::kAllReduce;
  const double call = d.bytes / std::max(1.0, d.calls);
  const long long first = (n + island_kmax - 1) / std::max(1LL, island_kmax);
  // The fewest nodes the slowest group spans (its floors start there; the routed view's check
  // below covers every group's shapes).
  const long long slowest_first = split ? std::max(first, 2LL) : first;
  const long long last = std::min(n, std::max(slowest_first, islands));
  double least_latency = std::numeric_limits<double>::infinity();
  double least_time = std::numeric_limits<double>::infinity();
  // Near the fewest nodes (where a dim's latency is least) every NIC count a node can give the
  // group is tried and the latency of NCCL's choice taken; further out the least latency of any
  // algorithm NCCL could pick (cheaper, looser), so that a dim of thousands of groups' nodes
  // stays fast.
  constexpr long long kChosenNodes = 32;
  for (const auto& c : classes) {
    for (long long nodes = first; nodes <= last; ++nodes) {
      const bool near = nodes < first + kChosenNodes;
      const bool counts = nodes >= slowest_first;  // a shape the slowest group can take
      // The most members on one node: n spread evenly, or (a forced split, near the fewest
      // nodes) any uneven spread an island can hold.
      const long long even = (n + nodes - 1) / nodes;
      const long long most_local =
          split && near ? std::max(even, std::min(n - (nodes - 1), island_kmax)) : even;
      nccl::Comm comm;
      comm.ranks = static_cast<int>(n);
      comm.nodes = static_cast<int>(nodes);
      comm.sm = c.sm;
      comm.nvswitch = c.nvswitch;
      comm.nvlink = c.nvlink;
      comm.amd_cpu = c.amd;
      comm.gpu_GBps = c.gpu;
      comm.nic_GBps = c.nic;
      comm.collnet = t.collnet;
      // NCCL's NIC count is its nodes' least (routing.h): at most the ports of the node with
      // the fewest members, n / nodes at the most.
      const int most_nics = static_cast<int>(
          std::min<long long>(c.ports, std::max(1LL, n / nodes) * c.ports_per_gpu));
      for (long long local = even; local <= most_local; ++local) {
        comm.max_local_ranks = static_cast<int>(local);
        for (int nics = near ? 1 : most_nics; nics <= most_nics; ++nics) {
          comm.nics = nics;
          const nccl::Tuning tuning = nccl::tune(comm, t.nccl);
          const auto fi = static_cast<std::size_t>(func);
          const nccl::Choice ch = nccl::choose(tuning, func, call);
          // Shapes the slowest group cannot take count only for the routed view's check below.
          if (counts && near) {
            least_latency = std::min(least_latency, ch.latency_us);
          } else if (counts) {
            for (int a = 0; a < nccl::kAlgos; ++a) {
              for (int p = 0; p < nccl::kProtos; ++p) {
                const auto ai = static_cast<std::size_t>(a), pi = static_cast<std::size_t>(p);
                if (tuning.bandwidth[fi][ai][pi] > 0) {
                  least_latency = std::min(least_latency, tuning.latency[fi][ai][pi]);
                }
              }
            }
          }
          if (counts && nics == most_nics) least_time = std::min(least_time, ch.time_us);
          // Over three nodes or more only Ring (and NVLS) send what the view's ring charges.
          if (nodes >= 3 && ch.algo != nccl::Algo::kRing && ch.algo != nccl::Algo::kNvls) {
            f.routed = false;
          }
          if (nodes <= 2 && (ch.algo == nccl::Algo::kCollNetDirect ||
                             ch.algo == nccl::Algo::kCollNetChain || ch.algo == nccl::Algo::kPat)) {
            f.routed = false;
          }
        }
      }
    }
  }
  if (!std::isfinite(least_latency)) least_latency = 0;
  if (!std::isfinite(least_time)) least_time = 0;
  f.latency = d.calls * least_latency * 1e-6;
  f.time = d.calls * least_time * 1e-6;
  return f;
}

// How much faster than a ring's bytes over NVLink NCCL's NVLS runs an all-reduce inside one
// island: its bus bandwidth over the GPUs' link bandwidth, the largest over the islands' sizes.
double nvls_speedup(const std::vector<HostClass>& classes, long long island_kmax,
                    const Traffic& t) {
  double kappa = 1.0;
  for (const auto& c : classes) {
    if (!c.nvswitch || c.sm < 90 || !(c.gpu > 0)) continue;
    for (long long k = 2; k <= island_kmax; ++k) {
      nccl::Comm comm;
      comm.ranks = comm.max_local_ranks = static_cast<int>(k);
      comm.nodes = 1;
      comm.sm = c.sm;
      comm.nvswitch = true;
      comm.gpu_GBps = c.gpu;
      comm.nics = c.ports;
      comm.nic_GBps = c.nic;
      const nccl::Tuning tuning = nccl::tune(comm, t.nccl);
      const double algbw = tuning.bandwidth[0][static_cast<std::size_t>(nccl::Algo::kNvls)]
                                           [static_cast<std::size_t>(nccl::Proto::kSimple)];
      kappa = std::max(kappa, algbw * 2.0 * static_cast<double>(k - 1) / k / c.gpu);
    }
  }
  return kappa;
}

// The traffic the routed bound sees: every counted dim in its view, calls 0 (latency apart).
Traffic routed_view(const Traffic& t, const std::vector<DimFloors>& floors,
                    const std::vector<char>& keep) {
  // (The view keeps every dim's size and stride: `whole` below indexes the same dims.)
  Traffic v = t;
  for (std::size_t d = 0; d < v.dims.size(); ++d) {
    DimTraffic& dt = v.dims[d];
    dt.calls = 0;
    dt.hidden_first_s = dt.hidden_rest_s = 0;
    if (!keep[d] || !floors[d].routed) {
      dt.bytes = 0;
      continue;
    }
    switch (dt.collective) {
      case Collective::kAllReduce:
        dt.pattern = Pattern::kRing;
        dt.all_reduce = true;
        break;
      case Collective::kGather:
        // (n-1)/n of every buffer a member sends: a ring all-reduce of half the bytes.
        dt.pattern = Pattern::kRing;
        dt.all_reduce = false;
        dt.bytes /= 2;
        break;
      case Collective::kRingExchange:
        // Each member sends its bytes to the next: a ring whose V is those bytes.
        dt.pattern = Pattern::kRing;
        dt.all_reduce = false;
        dt.bytes = dt.bytes * static_cast<double>(dt.size) / (2.0 * (dt.size - 1));
        break;
      case Collective::kAllToAll:
        dt.pattern = Pattern::kAllToAll;
        break;
      case Collective::kSendRecv:
        dt.pattern = Pattern::kPipeline;
        break;
    }
  }
  return v;
}

double exposed_bound(const Machine& machine, const Traffic& traffic, bool whole_cuts,
                     std::size_t counted) {
  if (machine.slots.empty()) return 0;
  const std::vector<HostClass> classes = host_classes(machine);
  std::map<std::uint32_t, long long> island_slots;
  for (const Slot& s : machine.slots) ++island_slots[nccl_node(machine, s.host)];
  long long island_kmax = 1;
  for (const auto& [island, slots] : island_slots) island_kmax = std::max(island_kmax, slots);
  const auto islands = static_cast<long long>(island_slots.size());
  const std::size_t dims = traffic.dims.size();
  // The dims the fast-domain rule keeps whole everywhere: every level of the rule whose blocks
  // all fit the islands (domains.h) pins its dims inside them. A group of another dim then has
  // its members in distinct blocks, so at most island_kmax / (the blocks' size) on one island.
  std::vector<char> whole(dims, 0);
  long long block = 1;
  const DomainRule rule(machine, traffic, traffic.split);
  for (const auto& level : rule.levels()) {
    if (level.required < level.blocks) break;
    for (std::size_t d : level.dims) whole[d] = 1;
    block = level.unit;
  }
  std::vector<DimFloors> floors(dims);
  std::vector<char> split(dims, 0);
  bool nvls = false;
  for (std::size_t d = 0; d < dims; ++d) {
    const DimTraffic& dt = traffic.dims[d];
    if (dt.size <= 1 || dt.bytes <= 0) continue;
    const long long kmax = whole[d] ? dt.size : std::max(1LL, island_kmax / block);
    long long whole_groups = 0;
    for (const auto& [island, slots] : island_slots) whole_groups += slots / dt.size;
    split[d] = whole_groups < traffic.world / dt.size;
    floors[d] =
        dim_floors(traffic, dt, classes, std::min(kmax, island_kmax), islands, split[d] != 0);
    nvls |= floors[d].all_reduce && floors[d].routed;
  }
  // NVLink as fast as NVLS makes an all-reduce (the routing charges an NVLS group's chain over
  // NVLink at its own speed-up, at most this).
  Machine view_machine = machine;
  if (nvls) {
    const double kappa = nvls_speedup(classes, island_kmax, traffic);
    for (double& g : view_machine.slot_nvlink_gbps) g *= kappa;
  }
  std::vector<char> all(dims, 1), visible(dims, 1);
  double hidden = 0, latency = 0, visible_latency = 0, nccl_floor = 0, hidden_exposed = 0;
  bool any_hidden = false;
  for (std::size_t d = 0; d < dims; ++d) {
    const DimTraffic& dt = traffic.dims[d];
    if (dt.size <= 1 || dt.bytes <= 0) continue;
    latency += floors[d].latency;
    const bool hides = !traffic.overlap && (dt.hidden_first_s > 0 || dt.hidden_rest_s > 0);
    if (hides) {
      any_hidden = true;
      visible[d] = 0;
      hidden += dt.hidden_first_s + dt.hidden_rest_s;
      hidden_exposed += exposed_seconds(dt, floors[d].time);
    } else {
      visible_latency += floors[d].latency;
      nccl_floor += floors[d].time;
    }
  }
  const double routed_all = routed_bound(view_machine, routed_view(traffic, floors, all),
                                         whole_cuts, counted, &whole);
  if (traffic.overlap) {
    // Overlapping dims: one bandwidth time, at least every dim's NCCL time; latencies add.
    double slowest = 0;
    for (const auto& f : floors) slowest = std::max(slowest, f.time);
    return std::max(routed_all + latency, slowest);
  }
  double lb = std::max(routed_all + latency - hidden, nccl_floor + hidden_exposed);
  if (any_hidden) {
    const double routed_visible = routed_bound(
        view_machine, routed_view(traffic, floors, visible), whole_cuts, counted, &whole);
    lb = std::max(lb, routed_visible + visible_latency + hidden_exposed);
    // Between the two: the exposed part of a hidden dim is convex in its time t, so at least
    // mu t - c(mu) for every slope mu in [0, 1] (c: its conjugate, the largest mu t - exposed(t),
    // at a breakpoint). The routed bound of the view with that dim's bytes times mu bounds the
    // others' times plus mu of its own (loads scale with bytes). Taken at the slopes the exposed
    // part has between its breakpoints, where the dim is partly hidden.
    std::size_t hidden_dim = dims;
    int hidden_dims = 0;
    for (std::size_t d = 0; d < dims; ++d) {
      if (!visible[d] && traffic.dims[d].size > 1 && traffic.dims[d].bytes > 0) {
        hidden_dim = d;
        ++hidden_dims;
      }
    }
    if (hidden_dims == 1) {
      const DimTraffic& h = traffic.dims[hidden_dim];
      // The breakpoints: 0, and where each of the two parts of its time ends (at most three).
      std::array<double, 3> breaks{};
      std::size_t n_breaks = 1;
      if (h.hidden_share > 0) breaks[n_breaks++] = h.hidden_first_s / h.hidden_share;
      if (h.hidden_share < 1) breaks[n_breaks++] = h.hidden_rest_s / (1 - h.hidden_share);
      for (double mu : {h.hidden_share, 1 - h.hidden_share}) {
        if (!(mu > 0 && mu < 1)) continue;
        double conjugate = 0;
        for (std::size_t b = 0; b < n_breaks; ++b) {
          conjugate = std::max(conjugate, mu * breaks[b] - exposed_seconds(h, breaks[b]));
        }
        Traffic scaled = routed_view(traffic, floors, all);
        scaled.dims[hidden_dim].bytes *= mu;
        const double routed = routed_bound(view_machine, scaled, whole_cuts, counted, &whole);
        lb = std::max(lb, routed + visible_latency + mu * floors[hidden_dim].latency - conjugate);
      }
    }
  }
  // A visible dim some of whose groups must span islands is as slow as its fastest split group
  // (NCCL's time between islands, far above its routed loads inside one): the step is at least
  // those dims at their NCCL floors plus this bound of the others (each dim's exposed time is a
  // function of its own time, and without those dims' bytes the others' loads are no larger).
  Traffic others = traffic;
  double at_floor = 0;
  for (std::size_t d = 0; d < dims; ++d) {
    const DimTraffic& dt = traffic.dims[d];
    if (!visible[d] || !split[d] || dt.size <= 1 || dt.bytes <= 0) continue;
    at_floor += floors[d].time;
    others.dims[d].bytes = 0;
  }
  if (at_floor > 0) {
    lb = std::max(lb, at_floor + exposed_bound(machine, others, whole_cuts, counted));
  }
  return std::max(lb, 0.0);
}

}  // namespace
}  // namespace topoaware::mapper::internal

namespace topoaware::mapper {

namespace {

// exposed_bound() under Traffic::calibration. Every calibrated group's times are its uncalibrated
// ones times a factor of at least f = Calibration::least_factor(): where f is 1 the calibrated
// cost is never below the uncalibrated one, so that bound holds. Where f < 1 the exposed parts
// shrink by more than f (the compute they hide behind does not), so the bound is of the raw time
// (every window 0) times f, less the windows: a dim's exposed time is at least its time less its
// windows.
double calibrated_bound(const Machine& machine, const Traffic& traffic, bool whole_cuts,
                        std::size_t counted) {
  Traffic plain = traffic;
  plain.calibration = Calibration{};
  const double f = traffic.calibration.least_factor();
  if (f >= 1) return internal::exposed_bound(machine, plain, whole_cuts, counted);
  double windows = 0;
  for (DimTraffic& d : plain.dims) {
    windows += d.hidden_first_s + d.hidden_rest_s;
    d.hidden_first_s = d.hidden_rest_s = 0;
  }
  return std::max(0.0, f * internal::exposed_bound(machine, plain, whole_cuts, counted) - windows);
}

}  // namespace

double lower_bound(const Machine& machine, const Traffic& traffic, bool whole_cuts) {
  if (traffic.calibration.measured()) {
    return calibrated_bound(machine, traffic, whole_cuts, internal::kCutDims);
  }
  return internal::exposed_bound(machine, traffic, whole_cuts, internal::kCutDims);
}

double routed_lower_bound(const Machine& machine, const Traffic& traffic, bool whole_cuts,
                          std::size_t counted) {
  return internal::routed_bound(machine, traffic, whole_cuts, counted);
}

double lower_bound_counting(const Machine& machine, const Traffic& traffic, std::size_t counted) {
  if (traffic.calibration.measured()) return calibrated_bound(machine, traffic, true, counted);
  return internal::exposed_bound(machine, traffic, true, counted);
}

}  // namespace topoaware::mapper
