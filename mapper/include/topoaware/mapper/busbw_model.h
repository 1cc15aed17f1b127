// The cost model's figure for one nccl-tests collective, as a bus bandwidth: what
// `topo-aware nccl-check --allreduce` prints beside the measured one and what
// tools/bench/calibration_bench tabulates against published runs, here beside the cost model that
// owns the figure. Only the mapper's public API is used (make_instance, evaluate), so the figure
// follows whatever the cost model is. Its own namespace: nccl-tests' collectives are not the
// layout's (mapper::Collective).
//
// nccl-tests (doc/PERFORMANCE.md there) reports algbw = size / time and busbw = algbw x 2(n-1)/n
// for all_reduce, x (n-1)/n for all_gather and alltoall, x 1 for sendrecv; ranks are placed in
// Slurm's block order (ranks 0..k-1 on the first host, ...), as mpirun/srun start them.
#pragma once

#include <optional>
#include <string>
#include <vector>

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

// nccl-tests' bus bandwidth factor for n ranks.
inline double busbw_factor(Collective c, long long n) {
  const double nn = static_cast<double>(n);
  switch (c) {
    case Collective::kAllReduce:
      return 2.0 * (nn - 1) / nn;
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return (nn - 1) / nn;
    case Collective::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

// The traffic of one collective of `bytes` (nccl-tests' "size") over ranks 0..n-1, in the cost
// model's terms: all_reduce an all-reduce of the buffer, all_gather a gather of its output (NCCL
// tunes reduce-scatter and all-gather alike), alltoall bytes / n to each peer, sendrecv a flow
// from each rank to the next.
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
      // nccl-tests sendrecv: rank r sends `bytes` to r+1 and receives from r-1.
      for (long long r = 0; r < n; ++r) {
        t.matrix.push_back({static_cast<int>(r), static_cast<int>((r + 1) % n), bytes});
      }
      return t;
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
};

// How NCCL is set up for the run being modeled: NCCL_ALGO (empty: NCCL chooses), CollNet, the
// release.
struct NcclSetup {
  std::optional<mapper::nccl::Algo> algo;
  bool collnet = false;
  mapper::nccl::Version version;
};

// The modeled busbw of collective `c` of `bytes` over `ranks_per_host` ranks on each of the
// first `hosts` hosts of `fabric` (by the fabric's host order), all described by `node`.
inline ModeledBusbw model_busbw(const topology::Fabric& fabric, const topology::NodeTopology& node,
                                int hosts, int ranks_per_host, Collective c, double bytes,
                                const NcclSetup& setup = {}) {
  mapper::Request req;
  std::vector<const topology::NodeTopology*> nodes;
  for (int h = 0; h < hosts; ++h) {
    req.hosts.push_back(fabric.hosts.at(static_cast<std::size_t>(h)).name);
    req.tasks_per_host.push_back(ranks_per_host);
    nodes.push_back(&node);
  }
  const long long n = static_cast<long long>(hosts) * ranks_per_host;
  req.layout = mapper::parse_layout("dp=" + std::to_string(n));
  mapper::Instance in = mapper::make_instance(fabric, nodes, req);
  in.traffic = collective_traffic(c, n, bytes);
  in.traffic.nccl = setup.version;
  in.traffic.collnet = setup.collnet;
  in.traffic.nccl_algo = setup.algo;
  mapper::CostReport r = mapper::evaluate(in.machine, in.traffic, in.block_slot);
  ModeledBusbw out;
  out.seconds = r.seconds;
  out.bottleneck = r.bottleneck;
  if (!r.dims.empty()) out.nccl = r.dims.front().nccl;
  if (r.seconds > 0) out.gbps = bytes / r.seconds / 1e9 * busbw_factor(c, n);
  return out;
}

}  // namespace topoaware::mapper::busbw
