// Temporary definitions so everything links while this area is being built; the owner deletes
// this file when the real implementation lands. Each throws, so nothing can mistake it for done.
#include "fabric_build.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"

namespace topoaware::topology {
namespace {
[[noreturn]] void pending(const char* what) {
  throw Error(ErrorCode::kUnsupported, {}, std::string(what) + " is not implemented yet");
}
}  // namespace

namespace detail {
Fabric parse_fabric_toml(const std::string&, std::string_view) { pending("TOML fabric"); }
}  // namespace detail
}  // namespace topoaware::topology
