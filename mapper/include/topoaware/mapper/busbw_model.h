// The cost model's figure for one nccl-tests collective, as a bus bandwidth: what
// `topo-aware nccl-check --allreduce` prints beside the measured one and what
// tools/bench/calibration_bench tabulates against published runs, here beside the cost model that
// owns the figure. Only the mapper's public API is used (make_instance, evaluate), so the figure
// follows whatever the cost model is. Its own namespace: nccl-tests' collectives are not the
// layout's (mapper::Collective).
//
// nccl-tests (doc/PERFORMANCE.md there) reports algbw = size / time and busbw = algbw x 2(n-1)/n
// for all_reduce, x (n-1)/n for all_gather and alltoall, x 1 for sendrecv. model_busbw() places
// ranks in Slurm's block order (ranks 0..k-1 on the first host, ...), as mpirun/srun start them;
// RankedRun in any order a run had (`topo-aware calibrate`).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topoaware/mapper/calibration.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/nccl_model.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper::busbw {

enum class Collective { kAllReduce, kAllGather, kAllToAll, kSendRecv };

inline const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kAllToAll:
      return "alltoall";
    case Collective::kSendRecv:
      return "sendrecv";
  }
  return "?";
}

// nccl-tests' bus bandwidth factor for n ranks: NCCL's own (nccl_model.h) for the collectives,
// 1 for sendrecv.
inline double busbw_factor(Collective c, long long n) {
  const int ranks = static_cast<int>(n);
  switch (c) {
    case Collective::kAllReduce:
      return mapper::nccl::busbw_factor(mapper::nccl::Func::kAllReduce, ranks);
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return mapper::nccl::busbw_factor(mapper::nccl::Func::kAllGather, ranks);
    case Collective::kSendRecv:
      break;
  }
  return 1.0;
}

// The traffic of one collective of `bytes` (nccl-tests' "size") over ranks 0..n-1, in the cost
// model's terms: all_reduce an all-reduce of the buffer, all_gather a gather of its output (NCCL
// tunes reduce-scatter and all-gather alike), alltoall bytes / n to each peer, sendrecv rank r to
// r+1 (a ring exchange: one group, as a calibration's p2p class applies to it).
inline mapper::Traffic collective_traffic(Collective c, long long n, double bytes) {
  mapper::Traffic t;
  t.world = n;
  mapper::DimTraffic d;
  d.name = collective_name(c);
  d.size = static_cast<int>(n);
  d.stride = 1;
  d.calls = 1;
  d.bytes = bytes;
  switch (c) {
    case Collective::kAllReduce:
      d.collective = mapper::Collective::kAllReduce;
      d.all_reduce = true;
      break;
    case Collective::kAllGather:
      d.collective = mapper::Collective::kGather;
      break;
    case Collective::kAllToAll:
      d.collective = mapper::Collective::kAllToAll;
      break;
    case Collective::kSendRecv:
      d.collective = mapper::Collective::kRingExchange;
      break;
  }
  d.pattern = mapper::pattern_of(d.collective);
  t.dims.push_back(d);
  return t;
}

struct ModeledBusbw {
  double gbps = 0;         // GB/s, nccl-tests' busbw
  double seconds = 0;      // modeled time of one collective
  std::string bottleneck;  // the cost model's most loaded resource, in words
  std::string nccl;        // what NCCL runs for it ("Ring", "NVLSTree"; empty for p2p)
  mapper::Tier tier = mapper::Tier::kNvlink;  // how far its group reaches
};

// How NCCL is set up for the run being modeled: NCCL_ALGO (empty: NCCL chooses), CollNet, the
// release; and a site's calibration of the model (none: the model as it is).
struct NcclSetup {
  std::optional<mapper::nccl::Algo> algo;
  bool collnet = false;
  mapper::nccl::Version version;
  mapper::Calibration calibration;
};

// One run's ranks on its hosts, as the model takes them: made once, modeled at every size.
class RankedRun {
 public:
  // Rank r runs on rank_hosts[r], each host's ranks on its GPUs in rank order (nccl-tests' local
  // rank is its device); node_of(host) describes each host.
  template <class NodeOf>
  RankedRun(const topology::Fabric& fabric, const std::vector<std::string>& rank_hosts,
            NodeOf node_of) {
    mapper::Request req;
    std::vector<const topology::NodeTopology*> nodes;
    std::vector<std::size_t> host_of_rank;
    for (const auto& h : rank_hosts) {
      const auto at = std::find(req.hosts.begin(), req.hosts.end(), h);
      host_of_rank.push_back(static_cast<std::size_t>(at - req.hosts.begin()));
      if (at == req.hosts.end()) {
        req.hosts.push_back(h);
        req.tasks_per_host.push_back(0);
        nodes.push_back(node_of(h));
      }
      ++req.tasks_per_host[host_of_rank.back()];
    }
    ranks_ = static_cast<long long>(rank_hosts.size());
    req.layout = mapper::parse_layout("dp=" + std::to_string(ranks_));
    instance_ = mapper::make_instance(fabric, nodes, req);
    // block_slot holds each request host's tasks in a row: rank r takes its host's next one.
    std::vector<std::size_t> next(req.hosts.size(), 0);
    for (std::size_t h = 1; h < next.size(); ++h) {
      next[h] = next[h - 1] + static_cast<std::size_t>(req.tasks_per_host[h - 1]);
    }
    for (std::size_t h : host_of_rank) slot_of_rank_.push_back(instance_.block_slot[next[h]++]);
  }

  // The modeled busbw of collective `c` of `bytes` over the run's ranks.
  ModeledBusbw model(Collective c, double bytes, const NcclSetup& setup = {}) const {
    mapper::Traffic traffic = collective_traffic(c, ranks_, bytes);
    traffic.nccl = setup.version;
    traffic.collnet = setup.collnet;
    traffic.nccl_algo = setup.algo;
    traffic.calibration = setup.calibration;
    const mapper::CostReport r = mapper::evaluate(instance_.machine, traffic, slot_of_rank_);
    ModeledBusbw out;
    out.seconds = r.seconds;
    out.bottleneck = r.bottleneck;
    if (!r.dims.empty()) {
      const mapper::DimCost& d = r.dims.front();
      out.nccl = d.nccl;
      out.tier = d.groups_across > 0    ? mapper::Tier::kSpine
                 : d.groups_in_leaf > 0 ? mapper::Tier::kLeaf
                                        : mapper::Tier::kNvlink;
    }
    if (r.seconds > 0) out.gbps = bytes / r.seconds / 1e9 * busbw_factor(c, ranks_);
    return out;
  }

 private:
  long long ranks_ = 0;
  mapper::Instance instance_;
  std::vector<std::uint32_t> slot_of_rank_;
};

// The modeled busbw of collective `c` of `bytes` over `ranks_per_host` ranks on each of the
// first `hosts` hosts of `fabric` (by the fabric's host order), all described by `node`, ranks in
// Slurm's block order.
inline ModeledBusbw model_busbw(const topology::Fabric& fabric, const topology::NodeTopology& node,
                                int hosts, int ranks_per_host, Collective c, double bytes,
                                const NcclSetup& setup = {}) {
  std::vector<std::string> rank_hosts;
  for (int h = 0; h < hosts; ++h) {
    for (int k = 0; k < ranks_per_host; ++k) {
      rank_hosts.push_back(fabric.hosts.at(static_cast<std::size_t>(h)).name);
    }
  }
  return RankedRun(fabric, rank_hosts, [&](const std::string&) { return &node; })
      .model(c, bytes, setup);
}

}  // namespace topoaware::mapper::busbw
