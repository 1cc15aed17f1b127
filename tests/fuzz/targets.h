// The parsers topo-aware exposes to hostile input, each behind one entry point that takes raw
// bytes: shared by the libFuzzer binaries (fuzz_main.cc, one per target, built with
// TOPOAWARE_FUZZ=ON) and by the regression test that replays tests/fuzz/regressions/<target>/ in
// the normal build. An entry point swallows the errors a parser is allowed to report
// (topology::Error, mapper::Error: bad input said clearly); anything else -- another exception, a
// crash, a sanitizer report, a hang -- is a finding.
#pragma once

#include <string_view>
#include <vector>

namespace topoaware::fuzz {

struct Target {
  const char* name;  // tests/fuzz/regressions/<name>/, build/fuzz/fuzz_<name>
  void (*run)(std::string_view data);
};

const std::vector<Target>& targets();

// The target called `name`, or nullptr.
const Target* find_target(std::string_view name);

}  // namespace topoaware::fuzz
