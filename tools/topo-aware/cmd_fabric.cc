// Placeholder registration for `topo-aware fabric`; replaced by the real subcommand.
#include "cli.h"

namespace topoaware::cli {

void add_fabric(CLI::App& app, Common&) {
  auto* sub = app.add_subcommand("fabric", "(not built yet)");
  sub->callback([] { throw UsageError("fabric: not implemented in this build"); });
}

}  // namespace topoaware::cli
