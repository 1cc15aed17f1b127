// NCCL's algorithm selection (nccl_model.h): the search's graphs in closed form, the tuning
// tables, the choice. Each rule names where NCCL has it; docs/nccl-model.md has the citations
// and the releases. Read in NVIDIA/nccl at 2.30.7 (5067397c) and 2.27.7 (593de54e); no code is
// copied, the constants are NCCL's figures.
#include "topoaware/mapper/nccl_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::nccl {
namespace {

constexpr int kMaxRingChannels = 32;  // MAXCHANNELS / 2 (init.cc: ringGraph->maxChannels)
constexpr int kMaxNvlsArity = 32;     // NCCL_MAX_NVLS_ARITY (device.h)
constexpr int kMaxDirectArity = 7;    // NCCL_MAX_DIRECT_ARITY (device.h)

int fidx(Func f) { return static_cast<int>(f); }
int aidx(Algo a) { return static_cast<int>(a); }
int pidx(Proto p) { return static_cast<int>(p); }

// GPU generations as tuning.cc indexes its tables: Volta, Ampere, Hopper, Blackwell.
int arch_index(int sm) { return sm >= 100 ? 3 : sm >= 90 ? 2 : sm >= 80 ? 1 : 0; }

// search.cc's speed arrays (GB/s per channel), tried fastest first: intra-node searches (one
// node) and inter-node ones, per generation (sm90 and sm100 have their own since 2.16 and 2.25).
const std::vector<double>& intra_speeds(int sm) {
  static const std::vector<double> base = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
  static const std::vector<double> sm90 = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
  static const std::vector<double> sm100 = {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
  return sm >= 100 ? sm100 : sm >= 90 ? sm90 : base;
}
const std::vector<double>& inter_speeds(int sm) {
  static const std::vector<double> base = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9,
                                           7,  6,  5,  4,  3,  2.4, 1.2, 0.24, 0.12};
  static const std::vector<double> sm90 = {48, 45, 42, 40, 30, 24, 22, 20, 17.5,
                                           15, 12, 6,  3,  2.4, 1.2, 0.24, 0.12};
  static const std::vector<double> sm100 = {96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22,
                                            20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
  return sm >= 100 ? sm100 : sm >= 90 ? sm90 : base;
}

// The first speed of `speeds` at most `limit` (the slowest where none is).
std::size_t first_at_most(const std::vector<double>& speeds, double limit) {
  std::size_t i = 0;
  while (i + 1 < speeds.size() && speeds[i] > limit) ++i;
  return i;
}

// ncclTopoDupChannels: a graph fast enough gets its channels doubled at half the speed each.
void dup_channels(Graph& g, int sm, int max_channels) {
  if (g.channels == 0 || g.bw_intra < 25.0) return;
  if (sm > 80 && g.bw_intra < 50.0 && g.channels > 4) return;
  const int dup = std::min(g.channels * 2, max_channels);
  const int factor = (dup + g.channels - 1) / g.channels;
  g.bw_intra /= factor;
  g.bw_inter /= factor;
  g.channels = dup;
}

// GPU bandwidth one channel at `speed` takes from each GPU's links on a node of `gpus` GPUs:
// a ring or chain channel through g GPUs leaves g-1 of them over the node's links.
// `closed`: a ring on one node, which leaves every GPU over the node's links once a channel.
bool intra_fits(const Comm& c, int channels, double speed, int gpus, bool closed = false) {
  if (gpus <= 1) return true;
  const double share = closed ? 1.0 : static_cast<double>(gpus - 1) / gpus;
  return channels * speed * share <= c.gpu_GBps * (1 + 1e-9);
}

// The ring graph (init.cc ringGraph, search.cc ncclTopoCompute): on one node, the speed whose
// channels carry the most of the GPU's link bandwidth, tried fastest first while a slower speed
// is more than 0.49 of the best so far; across nodes, the fastest speed a NIC holds, one channel
// per NIC per multiple of it. Then ncclTopoDupChannels.
Graph ring_graph(const Comm& c, int local_ranks) {
  Graph g;
  if (c.nodes == 1) {
    const auto& speeds = intra_speeds(c.sm);
    double best = 0;
    double best_speed = 0;
    for (std::size_t i = first_at_most(speeds, c.gpu_GBps); i < speeds.size(); ++i) {
      const double s = speeds[i];
      if (best_speed > 0 && s / best_speed <= 0.49) break;
      int ch = kMaxRingChannels;
      while (ch > 0 && !intra_fits(c, ch, s, local_ranks, true)) --ch;
      if (ch > 0 && ch * s > best + 1e-9) {
        best = ch * s;
        best_speed = s;
        g.channels = ch;
        g.bw_intra = g.bw_inter = s;
      }
      if (best >= c.gpu_GBps * (1 - 1e-9)) break;  // "nChannels * bw >= totalBw": done
    }
    if (g.channels == 0) g = Graph{1, speeds.back(), speeds.back()};
  } else {
    const auto& speeds = inter_speeds(c.sm);
    const double s = speeds[first_at_most(speeds, c.nic_GBps)];
    const int per_nic = std::max(1, static_cast<int>(std::floor(c.nic_GBps / s + 1e-9)));
    int ch = std::min(kMaxRingChannels, std::max(1, c.nics) * per_nic);
    while (ch > 1 && !intra_fits(c, ch, s, local_ranks)) --ch;
    g = Graph{ch, s, s};
  }
  dup_channels(g, c.sm, kMaxRingChannels);
  return g;
}

// The tree graph: as many channels as the ring (init.cc treeGraph min = max = ring channels),
// each at the fastest speed the NICs hold for that many; on one or two nodes the second pass
// raises the intra-node speed up the array while under twice the inter-node one ("increase
// bwIntra for trees (2 nodes or collnet)") and the GPUs' links carry it.
Graph tree_graph(const Comm& c, const Graph& ring, int local_ranks) {
  Graph g = ring;
  if (c.nodes == 1) return g;
  const auto& speeds = inter_speeds(c.sm);
  std::size_t i = first_at_most(speeds, c.nic_GBps);
  auto held = [&](double s) {
    return std::max(1, c.nics) * std::max(1, static_cast<int>(std::floor(c.nic_GBps / s + 1e-9)));
  };
  while (i + 1 < speeds.size() && held(speeds[i]) < ring.channels) ++i;
  g.bw_inter = g.bw_intra = speeds[i];
  if (c.nodes <= 2) {
    while (i > 0 && g.bw_intra < 2 * g.bw_inter && intra_fits(c, g.channels, speeds[i - 1], local_ranks)) {
      g.bw_intra = speeds[--i];
    }
  }
  return g;
}

// The NVLS graph (NVSwitch, sm90+; search.cc ncclTopoSearchTryNvls): one channel per head GPU
// (NCCL_MAX_NVLS_ARITY at most; across nodes, per GPU with its own NIC), as many as possible
// ("the more the better"), at the fastest intra speed the GPUs' links hold with a head pulling
// twice: (channels + 1) x speed. On one node the second pass then raises the inter speed up the
// array while under twice the intra one. Across nodes both run at the NICs' channel speed, which
// gives NCCL's 2-node NVLS-Tree figure (57.7 GB/s a channel on H100, 8 heads); the search's
// exact head count there is not reproduced (docs/nccl-model.md).
Graph nvls_graph(const Comm& c, int local_ranks) {
  Graph g;
  if (!c.nvswitch || c.sm < 90) return g;
  g.channels = std::min(kMaxNvlsArity, local_ranks);
  if (c.nodes > 1) g.channels = std::min(g.channels, std::max(1, c.nics));
  if (g.channels < 2) return Graph{};
  if (c.nodes > 1) {
    const auto& inter = inter_speeds(c.sm);
    g.bw_intra = g.bw_inter = inter[first_at_most(inter, c.nic_GBps)];
    return g;
  }
  const auto& speeds = intra_speeds(c.sm);
  std::size_t i = 0;
  while (i + 1 < speeds.size() && (g.channels + 1) * speeds[i] > c.gpu_GBps * (1 + 1e-9)) ++i;
  g.bw_intra = g.bw_inter = speeds[i];
  while (i > 0 && g.bw_inter < 2 * g.bw_intra) g.bw_inter = speeds[--i];
  return g;
}

double log2i(int n) {
  int l = 0;
  while (n > 1) {
    n >>= 1;
    ++l;
  }
  return l;
}

// Base latencies (us) per algorithm and protocol, and hardware latencies per link class
// (NVLink, PCI, network); tuning.cc's tables, NCCL 2.28+ (the NVLS-Tree network figure was 14
// before 2.28, the Tree/Simple NVLink figure 4.0 throughout this range).
struct Latencies {
  double base[kAlgos][kProtos];
  double hw[3][kAlgos][kProtos];
};
Latencies latency_table(const Version& v) {
  Latencies t = {
      {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {8, 8, 8}},
      {{{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25},
        {0, 0, 4.0}},
       {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0},
        {0, 0, 4.0}},
       {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9},
        {0, 0, 14}}}};
  if (v < Version{2, 28}) t.hw[2][aidx(Algo::kNvlsTree)][pidx(Proto::kSimple)] = 14;
  return t;
}

// Per-channel limits per generation (rows) and node count (1, 2, more).
constexpr double kLlMaxBw[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
constexpr double kRingLl128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {40.0, 40.0, 40.0}};
constexpr double kTreeLl128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kTreeBw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kNvlsTreeBw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
constexpr double kNvlsEfficiency[4] = {0.0, 0.0, 0.85, 0.74};
// Before 2.28 Blackwell's per-channel limits were Hopper's doubled.
constexpr double kLegacyBlackwellRingLl128 = 2 * 36.7;
constexpr double kLegacyBlackwellTreeLl128[3] = {2 * 36.7, 2 * 36.7, 2 * 29.0};
constexpr double kLegacyBlackwellTree[3] = {2 * 38.7, 2 * 41.4, 2 * 36.0};

// Tree all-reduce's size correction per protocol, powers of two from 64 B (ncclTopoGetAlgoTime).
constexpr double kTreeCorrection[kProtos][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0,
     1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
     1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9,
     .9}};

}  // namespace

std::string_view to_string(Func f) {
  switch (f) {
    case Func::kAllReduce:
      return "AllReduce";
    case Func::kReduceScatter:
      return "ReduceScatter";
    case Func::kAllGather:
      return "AllGather";
  }
  return "?";
}

std::string_view to_string(Algo a) {
  switch (a) {
    case Algo::kTree:
      return "Tree";
    case Algo::kRing:
      return "Ring";
    case Algo::kCollNetDirect:
      return "CollNetDirect";
    case Algo::kCollNetChain:
      return "CollNetChain";
    case Algo::kNvls:
      return "NVLS";
    case Algo::kNvlsTree:
      return "NVLSTree";
    case Algo::kPat:
      return "PAT";
  }
  return "?";
}

std::string_view to_string(Proto p) {
  switch (p) {
    case Proto::kLL:
      return "LL";
    case Proto::kLL128:
      return "LL128";
    case Proto::kSimple:
      return "Simple";
  }
  return "?";
}

Version parse_version(std::string_view text) {
  auto fail = [&]() -> Version {
    throw Error("NCCL version '" + std::string(text) + "': give MAJOR.MINOR, " +
                to_string(kOldest) + " to " + to_string(kNewest));
  };
  Version v;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  auto r = std::from_chars(p, end, v.major);
  if (r.ec != std::errc() || r.ptr == end || *r.ptr != '.') return fail();
  r = std::from_chars(r.ptr + 1, end, v.minor);
  if (r.ec != std::errc()) return fail();
  // A patch ("2.27.3") and a package revision ("-1") may follow.
  for (const char* q = r.ptr; q != end; ++q) {
    if (!((*q >= '0' && *q <= '9') || *q == '.' || *q == '-')) return fail();
  }
  if (v < kOldest || kNewest < v) return fail();
  return v;
}

std::string to_string(const Version& v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

double nic_channel_GBps(double nic_GBps, int sm) {
  if (!(nic_GBps > 0)) return nic_GBps;
  const auto& speeds = inter_speeds(sm);
  const double s = speeds[first_at_most(speeds, nic_GBps)];
  return s <= nic_GBps ? s * std::floor(nic_GBps / s + 1e-9) : nic_GBps;
}

double busbw_factor(Func func, int ranks) {
  const double n = ranks;
  return func == Func::kAllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
}

Tuning tune(const Comm& comm, const Version& version) {
  Tuning t;
  t.comm = comm;
  t.version = version;
  const Comm& c = comm;
  const int ranks = std::max(1, c.ranks);
  const int nodes = std::clamp(c.nodes, 1, ranks);
  if (ranks <= 1) return t;
  const int local = std::max(1, ranks / nodes);  // the narrowest node's share
  t.ring = ring_graph(c, local);
  t.tree = tree_graph(c, t.ring, local);
  t.nvls = version < Version{2, 18} ? Graph{} : nvls_graph(c, local);
  t.collnet = t.ring;
  t.channels = std::min(t.ring.channels, t.tree.channels);
  const bool modern = !(version < Version{2, 28});
  const int arch = arch_index(c.sm);
  const int n2 = nodes <= 2 ? nodes - 1 : 2;
  // LL's limit: the GPU generation on one node, the CPU vendor across nodes.
  const double ll_max = kLlMaxBw[nodes == 1 ? arch : (c.amd_cpu ? 1 : 0)][n2];
  double ring_ll128 = kRingLl128Bw[arch][n2];
  double tree_ll128 = kTreeLl128Bw[arch][n2];
  double tree_max = kTreeBw[arch][n2];
  if (!modern && arch == 3) {
    ring_ll128 = kLegacyBlackwellRingLl128;
    tree_ll128 = kLegacyBlackwellTreeLl128[n2];
    tree_max = kLegacyBlackwellTree[n2];
  }
  const double nvls_tree_max = kNvlsTreeBw[arch][n2];
  const double ppn = static_cast<double>(ranks) / nodes;
  const Latencies lat = latency_table(version);
  // Links inside a node: NVLink (0) or PCI (1); across nodes the network (2).
  const int intra_hw = c.nvlink ? 0 : 1;
  const double net_overhead = c.amd_cpu ? 2.0 : 1.0;  // getNetOverhead, us (Intel 1, AMD 2)
  const bool pat = !(version < Version{2, 23}) && c.sm >= 60 && nodes == ranks;
  // LL128 by default on NVLink nodes (typeIntra <= NVB; the NIC path assumed within PXN).
  const bool ll128 = c.nvlink && c.sm >= 70;
  const Graph* graph_of[kAlgos] = {&t.tree, &t.ring, &t.collnet, &t.collnet,
                                   &t.nvls, &t.nvls, &t.ring};
  for (Func f : {Func::kAllReduce, Func::kReduceScatter, Func::kAllGather}) {
    const int steps = f == Func::kAllReduce ? 2 * (ranks - 1) : ranks - 1;
    const bool gather = f != Func::kAllReduce;
    for (int a = 0; a < kAlgos; ++a) {
      const Algo algo = static_cast<Algo>(a);
      if (gather && algo != Algo::kPat && algo != Algo::kRing && algo != Algo::kNvls &&
          algo != Algo::kCollNetDirect) {
        continue;
      }
      if (!gather && algo == Algo::kPat) continue;
      const Graph& g = *graph_of[a];
      for (int p = 0; p < kProtos; ++p) {
        const Proto proto = static_cast<Proto>(p);
        const bool nvls = algo == Algo::kNvls || algo == Algo::kNvlsTree;
        if (nvls && proto != Proto::kSimple) continue;
        if (algo == Algo::kPat && (proto != Proto::kSimple || !pat)) continue;
        const bool collnet = algo == Algo::kCollNetDirect || algo == Algo::kCollNetChain;
        double bw = nodes <= 2 || collnet ? g.bw_intra : g.bw_inter;
        if (nvls) {
          if (g.channels < 2) continue;  // "NVLS/NVLStree needs at least 2 channels"
          if (modern) {
            double intra = g.bw_intra * kNvlsEfficiency[arch] * (g.channels - 1) / g.channels;
            intra *= gather ? (ppn - 1) / ppn : 2.0;  // all-reduce pipelines two operations
            const double inter =
                g.bw_inter * (nodes <= 2 && algo == Algo::kNvlsTree ? 2.0 : 1.0);
            bw = std::min(intra, inter);
            if (algo == Algo::kNvlsTree) bw = std::min(bw, nvls_tree_max);
          } else if (algo == Algo::kNvls) {
            bw = gather ? std::min(g.bw_intra * (ppn - 1) / ppn, g.bw_inter * 0.9)
                        : std::min(g.bw_intra, g.bw_inter);
          } else {
            bw = std::min(g.bw_intra, nodes <= 2 ? g.bw_inter : g.bw_inter / 2);
          }
        }
        double bus = g.channels * bw;
        if (algo == Algo::kRing && proto == Proto::kLL) bus = std::min(ll_max, bus * .5);
        if (algo == Algo::kRing && proto == Proto::kLL128) {
          bus = std::min(bus * 0.92, g.channels * ring_ll128);
        }
        if (algo == Algo::kTree && f == Func::kAllReduce) {
          bus = std::min(bus * .92, g.channels * tree_max);
        }
        if (algo == Algo::kTree && proto == Proto::kLL) bus = std::min(bus / 3.8, ll_max);
        if (algo == Algo::kTree && proto == Proto::kLL128) {
          bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), g.channels * tree_ll128);
        }
        if (algo == Algo::kPat) bus *= .75;
        if (collnet && proto != Proto::kSimple) bus = 0;
        if (algo == Algo::kCollNetDirect && proto == Proto::kSimple) {
          if (gather) {
            bus = ppn * std::min(g.bw_intra, g.bw_inter * 0.9);
          } else {
            double factor = ppn / g.channels;  // GPUs per NIC
            factor -= (factor - 1) / 2;
            bus /= factor;
            if (c.sm >= 90) bus *= .85;
          }
        }
        // Gathers over nodes by NVLS or CollNet Direct need the network's own gather/scatter
        // (collnet) and a NIC head per local rank.
        if ((algo == Algo::kNvls || algo == Algo::kCollNetDirect) && gather && nodes > 1) {
          if (!c.collnet || c.max_local_ranks > std::max(1, c.nics)) bus = 0;
        }
        // Bus bandwidth to the buffer's (algorithm) bandwidth.
        if (!(algo != Algo::kRing && gather)) {
          double ratio = 1.0;
          if (algo == Algo::kRing) {
            ratio = static_cast<double>(ranks) / steps;
          } else if (nvls) {
            ratio = modern ? static_cast<double>(ranks) / steps : 5.0 / 6.0;
          } else {
            ratio = .5;
          }
          bus *= ratio;
        }
        // Latency.
        double l = lat.base[a][p];
        double intra_lat = lat.hw[intra_hw][a][p];
        // With one GPU per node the network latency is the Tree's (fully exposed).
        const double inter_lat = ppn == 1 ? lat.hw[2][aidx(Algo::kTree)][p] : lat.hw[2][a][p];
        if (algo == Algo::kRing) {
          // Inter-node rings still launch every step's network operation.
          const double overhead = nodes > 1 ? net_overhead * (proto == Proto::kSimple ? 3 : 1) : 0;
          intra_lat = std::max(intra_lat, overhead);
          const int inter_steps = nodes == 1 ? 0 : f == Func::kAllReduce ? 2 * (nodes - 1) : nodes - 1;
          l += (steps - inter_steps) * intra_lat + inter_steps * inter_lat;
        } else if (algo == Algo::kTree) {
          if (f == Func::kAllReduce) {
            l += 2 * ((ranks / nodes - 1) * intra_lat + log2i(nodes) * inter_lat);
          }
        } else if (algo == Algo::kCollNetDirect) {
          l += 2 * (std::min(1, ranks / nodes - 1) * intra_lat + (ranks / nodes - 1) * 0.4) +
               inter_lat;
        } else if (algo == Algo::kCollNetChain) {
          l += 2 * (ranks / nodes - 1) * intra_lat + inter_lat;
        } else if (algo == Algo::kNvls) {
          l = intra_lat + (nodes > 1 ? inter_lat : 0);
        } else if (algo == Algo::kNvlsTree) {
          l += intra_lat + 2 * log2i(nodes) * inter_lat;
        } else if (algo == Algo::kPat) {
          l = (modern ? lat.base[a][p] : 8.0) + log2i(nodes) * (inter_lat / 3.5) + ranks * 2.8;
        }
        // Enabled at all: NVLS-Tree needs nodes; CollNet and multi-node NVLS need collnet;
        // CollNet Direct an NVSwitch; arity limits (updateCollCostTable); LL128's default.
        bool on = true;
        if (algo == Algo::kNvlsTree && nodes == 1) on = false;
        if (!c.collnet && (collnet || (algo == Algo::kNvls && nodes > 1))) on = false;
        if (algo == Algo::kCollNetDirect && !c.nvswitch) on = false;
        if (collnet && c.max_local_ranks > kMaxDirectArity + 1) on = false;
        if (nvls && gather && c.max_local_ranks > kMaxNvlsArity) on = false;
        if (proto == Proto::kLL128 && !ll128) on = false;
        t.bandwidth[fidx(f)][a][p] = on ? bus : 0.0;
        t.latency[fidx(f)][a][p] = l;
      }
    }
  }
  return t;
}

Choice choose(const Tuning& t, Func func, double bytes, const Algo* only) {
  Choice best;
  const Comm& c = t.comm;
  if (c.ranks <= 1) {
    best.time_us = 0;
    return best;
  }
  const int nodes = std::clamp(c.nodes, 1, c.ranks);
  double best_time = std::numeric_limits<double>::infinity();
  // log2 of bytes / 64, as ncclTopoGetAlgoTime indexes the tree correction.
  int log_size = -1;
  for (double b = std::floor(bytes / 64); b >= 1; b /= 2) ++log_size;
  for (int a = 0; a < kAlgos; ++a) {
    if (only && aidx(*only) != a) continue;
    for (int p = 0; p < kProtos; ++p) {
      double bw = t.bandwidth[fidx(func)][a][p];
      if (!(bw > 0)) continue;
      double l = t.latency[fidx(func)][a][p];
      const Algo algo = static_cast<Algo>(a);
      if (algo == Algo::kTree && func == Func::kAllReduce && log_size >= 0 && log_size < 23) {
        bw *= kTreeCorrection[p][log_size];
      }
      // NVLS-Tree's correction applies on Blackwell x86 only: not modeled (AMD/Intel x86 is
      // assumed, and Blackwell NVLS-Tree rows say so in docs/nccl-model.md).
      if (algo == Algo::kRing && p == pidx(Proto::kSimple) && nodes > 1 &&
          func == Func::kAllReduce && bytes / (static_cast<double>(t.channels) * c.ranks) >= 64) {
        l *= c.sm < 80 ? 1.9 : 1.4;  // "Plateau effect of ring"
      }
      const double time = l + bytes / (1000.0 * bw);
      if (time < best_time) {
        best_time = time;
        best.algo = algo;
        best.proto = static_cast<Proto>(p);
        best.algbw_GBps = bw;
        best.latency_us = l;
        best.time_us = time;
      }
    }
  }
  if (!std::isfinite(best_time)) {
    throw Error(std::string("NCCL model: no algorithm available for ") +
                std::string(to_string(func)) + (only ? " with " + std::string(to_string(*only)) : ""));
  }
  switch (best.algo) {
    case Algo::kTree:
      best.channels = t.tree.channels;
      break;
    case Algo::kNvls:
    case Algo::kNvlsTree:
      best.channels = t.nvls.channels;
      break;
    case Algo::kCollNetDirect:
    case Algo::kCollNetChain:
      best.channels = t.collnet.channels;
      break;
    default:
      best.channels = t.ring.channels;
  }
  best.busbw_GBps = bytes / (best.time_us * 1e3) * busbw_factor(func, c.ranks);
  return best;
}

}  // namespace topoaware::mapper::nccl
