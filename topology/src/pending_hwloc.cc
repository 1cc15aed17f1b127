// Temporary definitions so everything links while this area is being built; the owner deletes
// this file when the real implementation lands. Each throws, so nothing can mistake it for done.
#include "topoaware/topology/error.h"
#include "topoaware/topology/paths.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {
[[noreturn]] void pending(const char* what) {
  throw Error(ErrorCode::kUnsupported, {}, std::string(what) + " is not implemented yet");
}
}  // namespace

NodeTopology load_hwloc_xml(const std::string&) { pending("load_hwloc_xml"); }
NodePaths::NodePaths(const NodeTopology&) { pending("NodePaths"); }
Path NodePaths::path(VertexId, VertexId) const { pending("NodePaths::path"); }
std::vector<GpuLocality> gpu_locality(const NodeTopology&) { pending("gpu_locality"); }
std::string_view to_string(PathType) { pending("to_string(PathType)"); }
std::optional<PathType> path_type_from_string(std::string_view) { pending("path_type_from_string"); }
double pcie_bandwidth(std::string_view, int) { pending("pcie_bandwidth"); }
double nvlink_lane_bandwidth(int) { pending("nvlink_lane_bandwidth"); }
double smp_bandwidth(const CpuInfo&) { pending("smp_bandwidth"); }
double net_bandwidth(double) { pending("net_bandwidth"); }
}  // namespace topoaware::topology
