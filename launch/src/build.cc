// The build id (build.h); the generated header is included here only, so a new revision
// recompiles this one file.
#include "topoaware/launch/build.h"

#include "topoaware_build_id.h"

namespace topoaware::launch {

const char* build_id() { return TOPOAWARE_BUILD_ID; }

}  // namespace topoaware::launch
