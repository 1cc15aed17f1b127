// Every input a fuzzer found a problem with (tests/fuzz/regressions/<target>/), replayed through
// the same entry point in the normal build: each must now be bad input said clearly (or load),
// which the entry point accepts, and never an unexpected exception, a crash or a sanitizer report
// (the ASan/UBSan build runs this test too).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "targets.h"

namespace topoaware::fuzz {
namespace {

namespace fs = std::filesystem;

TEST(FuzzRegressions, EveryTargetHasADirectoryAndEveryInputReplaysCleanly) {
  fs::path root = fs::path(TOPOAWARE_FUZZ_DIR) / "regressions";
  std::size_t inputs = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.path().filename() == "README.md") continue;
    ASSERT_TRUE(entry.is_directory()) << entry.path();
    ASSERT_NE(find_target(entry.path().filename().string()), nullptr)
        << entry.path() << " names no fuzz target";
  }
  for (const Target& t : targets()) {
    fs::path dir = root / t.name;
    if (!fs::exists(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().filename() == "README.md") continue;
      SCOPED_TRACE(entry.path().string());
      std::ifstream in(entry.path(), std::ios::binary);
      std::string data((std::istreambuf_iterator<char>(in)), {});
      auto t0 = std::chrono::steady_clock::now();
      EXPECT_NO_THROW(t.run(data));
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
      ++inputs;
    }
  }
  EXPECT_GE(inputs, 3u) << "the committed regressions were not found under " << root;
  EXPECT_EQ(targets().size(), 15u) << "a parser gained or lost its fuzz target: update the docs";
  RecordProperty("inputs", static_cast<int>(inputs));
}

}  // namespace
}  // namespace topoaware::fuzz
