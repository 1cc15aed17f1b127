// Temporary definitions so everything links while this area is being built; the owner deletes
// this file when the real implementation lands. Each throws, so nothing can mistake it for done.
#include "topoaware/topology/error.h"
#include "topoaware/topology/node_io.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {
[[noreturn]] void pending(const char* what) {
  throw Error(ErrorCode::kUnsupported, {}, std::string(what) + " is not implemented yet");
}
}  // namespace

NodeTopology load_nccl_xml(const std::string&) { pending("load_nccl_xml"); }
NodeTopology load_node_file(const std::string&) { pending("load_node_file"); }
std::string node_to_json(const NodeTopology&) { pending("node_to_json"); }
std::string node_to_nccl_xml(const NodeTopology&) { pending("node_to_nccl_xml"); }
std::string node_to_dot(const NodeTopology&) { pending("node_to_dot"); }
}  // namespace topoaware::topology
