// Temporary definitions so everything links while this area is being built; the owner deletes
// this file when the real implementation lands. Each throws, so nothing can mistake it for done.
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::topology {
namespace {
[[noreturn]] void pending(const char* what) {
  throw Error(ErrorCode::kUnsupported, {}, std::string(what) + " is not implemented yet");
}
}  // namespace

Fabric load_fabric(const std::string&, const std::string&) { pending("load_fabric"); }
std::string to_slurm_tree(const Fabric&) { pending("to_slurm_tree"); }
std::string to_slurm_block(const Fabric&) { pending("to_slurm_block"); }
std::string fabric_to_json(const Fabric&) { pending("fabric_to_json"); }
std::string fabric_to_dot(const Fabric&) { pending("fabric_to_dot"); }
void analyze(Fabric&) { pending("analyze"); }
std::vector<std::uint32_t> Fabric::locality_key(std::uint32_t) const { pending("locality_key"); }
std::vector<std::string> expand_hostlist(std::string_view, const std::string&, std::size_t) { pending("expand_hostlist"); }
std::size_t hostlist_count(std::string_view, const std::string&) { pending("hostlist_count"); }
std::string compress_hostlist(const std::vector<std::string>&) { pending("compress_hostlist"); }
}  // namespace topoaware::topology
