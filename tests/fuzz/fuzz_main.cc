// One libFuzzer binary per parser: TOPOAWARE_FUZZ_TARGET names the entry point of targets.cc.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const topoaware::fuzz::Target* target =
      topoaware::fuzz::find_target(TOPOAWARE_FUZZ_TARGET);
  if (target == nullptr) {
    std::fprintf(stderr, "topo-aware: no fuzz target %s\n", TOPOAWARE_FUZZ_TARGET);
    std::abort();
  }
  target->run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
