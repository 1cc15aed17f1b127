// Placeholder registration for `topo-aware inspect`; replaced by the real subcommand.
#include "cli.h"

namespace topoaware::cli {

void add_inspect(CLI::App& app, Common&) {
  auto* sub = app.add_subcommand("inspect", "(not built yet)");
  sub->callback([] { throw UsageError("inspect: not implemented in this build"); });
}

}  // namespace topoaware::cli
