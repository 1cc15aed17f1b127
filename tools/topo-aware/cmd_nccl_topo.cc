// Placeholder registration for `topo-aware nccl-topo`; replaced by the real subcommand.
#include "cli.h"

namespace topoaware::cli {

void add_nccl_topo(CLI::App& app, Common&) {
  auto* sub = app.add_subcommand("nccl-topo", "(not built yet)");
  sub->callback([] { throw UsageError("nccl-topo: not implemented in this build"); });
}

}  // namespace topoaware::cli
