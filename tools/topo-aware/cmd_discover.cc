// Placeholder registration for `topo-aware discover`; replaced by the real subcommand.
#include "cli.h"

namespace topoaware::cli {

void add_discover(CLI::App& app, Common&) {
  auto* sub = app.add_subcommand("discover", "(not built yet)");
  sub->callback([] { throw UsageError("discover: not implemented in this build"); });
}

}  // namespace topoaware::cli
