// Which build this is: "<version> <source revision>", with "-dirty-<hash of the diff>" for a tree
// with uncommitted changes, or "<version>-nogit" outside git (cmake/BuildId.cmake). srun and every
// node compare it (the plugin's digest): two builds may plan differently from the same inputs, so
// a step must not mix them. `topo-aware --version` prints it too.
#pragma once

namespace topoaware::launch {

const char* build_id();

}  // namespace topoaware::launch
