// Helpers shared by the unit tests: where fixtures live, and skipping when shared/ is absent.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace topoaware::test {

// A fixture checked into tests/fixtures.
inline std::string fixture(const std::string& rel) {
  return std::string(TOPOAWARE_TEST_FIXTURES) + "/" + rel;
}

// A file under ../shared/fixtures; empty when shared/ is absent (the caller skips).
inline std::string shared_fixture(const std::string& rel) {
  std::string p = std::string(TOPOAWARE_SHARED_DIR) + "/fixtures/" + rel;
  return std::filesystem::exists(p) ? p : std::string();
}

}  // namespace topoaware::test

// Skips the test with a reason when a ../shared fixture is not there.
#define TOPOAWARE_SHARED_OR_SKIP(var, rel)                                      \
  std::string var = ::topoaware::test::shared_fixture(rel);                     \
  if (var.empty()) GTEST_SKIP() << "../shared/fixtures/" << (rel) << " absent"
