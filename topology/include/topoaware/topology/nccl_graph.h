// NCCL's search result as it dumps it (NCCL_GRAPH_DUMP_FILE): one graph per algorithm pattern
// with its channel count, per-channel bandwidth and the path classes it settled for (reference
// nccl-topology.md section 2). What `topo-aware nccl-check` reports beside the node comparison:
// the bandwidth NCCL's own search found on this node is the ring figure the cost model's NVLink
// and NIC capacities should reproduce.
#pragma once

#include <string>
#include <vector>

namespace topoaware::topology {

struct NcclGraph {
  int id = -1;       // 0 ring, 1 tree, 2 collnet chain, 3 NVLS, 4 collnet direct
  int pattern = -1;  // 1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS, 6 collnet
  int nchannels = 0;
  double speed_intra = 0;  // GB/s per channel inside the node
  double speed_inter = 0;  // GB/s per channel across nodes
  std::string type_intra;  // path class: "NVL", "PIX", "SYS", ...
  std::string type_inter;
  int crossnic = 0;
  std::vector<std::vector<std::string>> channels;  // per channel: "net 0", "gpu 3", ...
};

// "ring", "tree", "collnet-chain", "nvls", "collnet-direct", or "graph <id>".
std::string nccl_graph_name(int id);

// Reads a <graphs version="1"> file. Throws topology::Error naming path:line.
std::vector<NcclGraph> load_nccl_graphs(const std::string& path);

}  // namespace topoaware::topology
