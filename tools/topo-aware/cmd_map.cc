// Placeholder registration for `topo-aware map`; replaced by the real subcommand.
#include "cli.h"

namespace topoaware::cli {

void add_map(CLI::App& app, Common&) {
  auto* sub = app.add_subcommand("map", "(not built yet)");
  sub->callback([] { throw UsageError("map: not implemented in this build"); });
}

}  // namespace topoaware::cli
