// Temporary definitions so everything links while the mapper is being built; the owner replaces
// this file. Each throws, so nothing can mistake it for done.
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/plan.h"

namespace topoaware::mapper {
namespace {
[[noreturn]] void pending(const char* what) { throw Error(std::string(what) + " is not implemented yet"); }
}  // namespace
Layout parse_layout(std::string_view, int) { pending("parse_layout"); }
void resolve_layout(Layout&, int) { pending("resolve_layout"); }
RankPlan plan(const topology::Fabric&, const std::vector<const topology::NodeTopology*>&,
              const Request&) { pending("plan"); }
std::vector<std::pair<std::string, std::string>> task_environment(const RankPlan&, int,
                                                                  const EnvOptions&) {
  pending("task_environment");
}
}  // namespace topoaware::mapper
