// Temporary definitions so everything links while this area is being built; the owner deletes
// this file when the real implementation lands. Each throws, so nothing can mistake it for done.
#include "topoaware/topology/error.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {
[[noreturn]] void pending(const char* what) {
  throw Error(ErrorCode::kUnsupported, {}, std::string(what) + " is not implemented yet");
}
}  // namespace

NodeTopology discover_live(const LiveOptions&) { pending("discover_live"); }
}  // namespace topoaware::topology
