// splitmix64: the mapper's one random generator. Fixed and portable (std distributions differ
// between standard libraries), so a seeded plan or a synthetic instance is the same everywhere.
#pragma once

#include <cstdint>

namespace topoaware::mapper {

struct SplitMix {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }
};

}  // namespace topoaware::mapper
