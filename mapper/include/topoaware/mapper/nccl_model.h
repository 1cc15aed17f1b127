// What NCCL runs for one collective: the algorithm, protocol and channel count its tuning model
// picks for a communicator and a message size, and the bandwidth and latency that model gives
// it. This is NCCL's own selection (src/graph/tuning.cc ncclTopoTuneModel and
// ncclTopoGetAlgoTime, src/enqueue.cc updateCollCostTable and topoGetAlgoInfo) rewritten from
// the rules, not the code, over a closed form of what its topology search (src/graph/search.cc
// ncclTopoCompute) finds on the node classes the mapper models. docs/nccl-model.md cites each
// rule with the NCCL version that introduced it; tests/unit/mapper/nccl_model_test.cc works the
// published cases by hand.
//
// Units: GB/s (1e9 bytes per second, NCCL's), microseconds, bytes. Pure: no I/O, no environment
// (NCCL_ALGO/NCCL_PROTO overrides are inputs, never read here).
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace topoaware::mapper::nccl {

// The collectives NCCL tunes (send/recv and all-to-all are point-to-point: no algorithm choice).
enum class Func { kAllReduce, kReduceScatter, kAllGather };
enum class Algo { kTree, kRing, kCollNetDirect, kCollNetChain, kNvls, kNvlsTree, kPat };
enum class Proto { kLL, kLL128, kSimple };
constexpr int kAlgos = 7;
constexpr int kProtos = 3;
std::string_view to_string(Func f);   // "AllReduce", NCCL's spelling in its INFO lines
std::string_view to_string(Algo a);   // "Ring", "Tree", "NVLS", "NVLSTree", "CollNetDirect", ...
std::string_view to_string(Proto p);  // "LL", "LL128", "Simple"

// The NCCL release whose rules apply. Rules change at: 2.18 (NVLS-Tree across nodes), 2.23 (PAT
// for one GPU per node), 2.28 (NVLS efficiency, per-channel NVLS-Tree limits, the NVLS latency
// table). Older releases than 2.18 are refused: the model has no rules for them.
struct Version {
  int major = 2;
  int minor = 30;
  bool operator<(const Version& o) const {
    return major != o.major ? major < o.major : minor < o.minor;
  }
};
constexpr Version kNewest{2, 30};
constexpr Version kOldest{2, 18};
// "2.27", "2.27.3", "2.27.3-1": throws mapper::Error naming the text and the range supported.
Version parse_version(std::string_view text);
std::string to_string(const Version& v);  // "2.27"

// One communicator as NCCL's topology search and tuning see it: its ranks over its nodes (hosts,
// or NVLink cliques under MNNVL), and the narrowest node's hardware (NCCL takes the minimum of
// every node's channels and speeds, src/init.cc AllGather3).
struct Comm {
  int ranks = 1;
  int nodes = 1;
  int max_local_ranks = 1;     // the most ranks on one node (NVLS/CollNet arity limits)
  int sm = 90;                 // the lowest compute capability x10 (70 Volta .. 100 Blackwell)
  bool nvlink = true;          // GPUs of a node reach each other over NVLink (typeIntra NVL)
  bool nvswitch = true;        // ... through an NVSwitch (NVLS needs one and sm90+)
  double gpu_GBps = 370.8;     // one GPU's bandwidth to the node's other GPUs (NVLink, else PCIe)
  int nics = 8;                // NICs the communicator's GPUs use on the narrowest node
  double nic_GBps = 50;        // the slowest of them
  bool collnet = false;        // in-network reduction (SHARP) enabled (NCCL_COLLNET_ENABLE)
  bool amd_cpu = false;        // AMD CPUs (network overhead, LL bandwidth table)
};

// One topology graph (search.cc's result): channels and the speed of each, GB/s.
struct Graph {
  int channels = 0;
  double bw_intra = 0;
  double bw_inter = 0;
};

// ncclTopoTuneModel's tables for one communicator: per function, algorithm and protocol, the
// bandwidth (GB/s of the collective's buffer: its algorithm bandwidth, 0 = not available) and
// latency (us), and the graphs they came from.
struct Tuning {
  Comm comm;
  Version version;
  Graph ring, tree, nvls, collnet;
  std::array<std::array<std::array<double, kProtos>, kAlgos>, 3> bandwidth{};
  std::array<std::array<std::array<double, kProtos>, kAlgos>, 3> latency{};
  int channels = 0;  // comm->nChannels: min(tree, ring)
};
Tuning tune(const Comm& comm, const Version& version = kNewest);

// What NCCL picks for one call of `bytes` (its nBytes: the whole buffer of an all-reduce, the
// output of an all-gather, the input of a reduce-scatter).
struct Choice {
  Algo algo = Algo::kRing;
  Proto proto = Proto::kSimple;
  int channels = 0;
  double algbw_GBps = 0;  // bytes / time of the bandwidth part
  double latency_us = 0;
  double time_us = 0;     // latency_us + bytes / algbw (ncclTopoGetAlgoTime, one operation)
  // nccl-tests' bus bandwidth of this call: bytes / time x 2(n-1)/n (all-reduce) or (n-1)/n.
  double busbw_GBps = 0;
};
// The fastest available (algorithm, protocol) by NCCL's own time estimate; ties keep NCCL's
// loop order (algorithm, then protocol). `only` (optional, like NCCL_ALGO=X) restricts the
// algorithm. Throws mapper::Error where none is available (a one-rank communicator is free).
Choice choose(const Tuning& tuning, Func func, double bytes, const Algo* only = nullptr);

// nccl-tests' bus bandwidth factor: 2(n-1)/n for all-reduce, (n-1)/n for the others.
double busbw_factor(Func func, int ranks);

// The per-NIC speed NCCL's channels run at over a NIC of `nic_GBps` (search.cc's speed arrays:
// the fastest speed the NIC holds): 48 GB/s on a 400 Gb/s port, 24 on 200 Gb/s. What the cost
// model charges a NIC at.
double nic_channel_GBps(double nic_GBps, int sm);

}  // namespace topoaware::mapper::nccl
