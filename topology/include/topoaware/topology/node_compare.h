// Two views of one node compared the way NCCL would see the difference: NCCL's own view (the
// XML it dumps with NCCL_TOPO_DUMP_FILE) against ours (live discovery, or the NCCL XML we write,
// read back).
//
// What `topo-aware nccl-check` reports, kept in the library so that it can be tested on real
// NCCL dumps without a GPU. Devices are matched by what NCCL keys them by: GPUs by PCI bus id,
// NICs by port name (`mlx5_0`), else bus id. For every GPU and NIC present in both, the
// attributes NCCL's search uses are compared (NVML index, SM, NUMA node, PCIe link, NVLink
// lanes and bandwidth, port speed), and the paths between them are recomputed on both trees
// with NCCL's rules (paths.h): class and bandwidth of every GPU-GPU and GPU-NIC path and each
// GPU's nearest NICs. A dump holds only the communicator's GPUs and the NICs NCCL's plugin
// listed (trimmed, see reference nccl-topology.md section 2), so devices missing from NCCL's
// view are warnings, not mismatches; a device NCCL sees and we do not is a mismatch.
//
// Pure functions of two models: no I/O, no exceptions beyond std::bad_alloc.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "topoaware/topology/node.h"

namespace topoaware::topology {

struct NodeDifference {
  enum class Severity {
    kNote,      // worth knowing, changes nothing NCCL decides
    kWarning,   // NCCL would decide the same here, but the views differ
    kMismatch,  // NCCL's search would see another machine than ours
  };
  Severity severity = Severity::kNote;
  std::string subject;    // "GPU 0000:18:00.0", "NIC mlx5_3", "path GPU 0000:18:00.0 -> mlx5_0"
  std::string attribute;  // "sm", "nvlink GB/s", "path", "nearest NIC", "present"
  std::string ours;       // the value in our view ("-" when absent)
  std::string nccl;       // the value in NCCL's view
};
std::string_view to_string(NodeDifference::Severity s);  // "note", "warning", "MISMATCH"

struct NodeComparison {
  int gpus_matched = 0;  // present in both views
  int nics_matched = 0;
  int paths_compared = 0;  // GPU-GPU and GPU-NIC pairs whose paths were recomputed on both
  std::vector<NodeDifference> differences;  // ordered: GPUs, NICs, paths

  int count(NodeDifference::Severity s) const;
  // No mismatch: NCCL sees the machine we model.
  bool agrees() const { return count(NodeDifference::Severity::kMismatch) == 0; }
};

// `ours` against `nccl` (NCCL's dump, or any view NCCL would read).
NodeComparison compare_nodes(const NodeTopology& ours, const NodeTopology& nccl);

// The comparison as text: one summary line, then one line per difference ("  MISMATCH GPU
// 0000:18:00.0 sm: ours 80, NCCL 90"), at most `limit` of them (0: all) with a count of the rest.
std::string format_comparison(const NodeComparison& c, const std::string& ours_label,
                              const std::string& nccl_label, std::size_t limit = 0);

}  // namespace topoaware::topology
