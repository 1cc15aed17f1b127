// How the CLI tests run `topo-aware` as a user does: the built binary in a shell, from the
// fixtures folder (so file sources print as relative paths and golden files do not depend on
// where the repository is checked out), with stdout, stderr and the exit code kept apart; and
// the golden-file comparison (tests/golden/<name>; UPDATE_GOLDEN=1 rewrites after a deliberate
// change).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

namespace topoaware::test {

struct CliRun {
  int rc = -1;
  std::string out, err;
};

// A --help text with each option's names joined as "-i,--input": CLI11 2.6 (Debian 14) pads them
// apart ("-i,     --input"), 2.1 to 2.4 (Debian 12 and 13) do not.
inline std::string joined_option_names(const std::string& help) {
  std::string out;
  for (std::size_t i = 0; i < help.size(); ++i) {
    out += help[i];
    if (help[i] != ',') continue;
    std::size_t j = i + 1;
    while (j < help.size() && help[j] == ' ') ++j;
    if (j < help.size() && help[j] == '-') i = j - 1;
  }
  return out;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline std::string scratch_prefix() { return "topoaware-cli-" + std::to_string(::getpid()) + "-"; }

// A path in the temp folder private to this test process.
inline std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (scratch_prefix() + name)).string();
}

// Whatever this process made with scratch() and did not remove is removed when it exits (ctest
// runs each test in a process of its own): a test that stops at a failed ASSERT leaves nothing,
// and neither does one that keeps a folder for the next steps of the same test.
struct ScratchSweeper {
  ScratchSweeper() = default;
  ScratchSweeper(const ScratchSweeper&) = delete;
  ScratchSweeper& operator=(const ScratchSweeper&) = delete;
  ~ScratchSweeper() {
    std::error_code ec;
    const std::string prefix = scratch_prefix();
    std::vector<std::filesystem::path> mine;  // listed first: no removal while reading the folder
    std::filesystem::directory_iterator it(std::filesystem::temp_directory_path(ec), ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      if (it->path().filename().string().rfind(prefix, 0) == 0) mine.push_back(it->path());
    }
    for (const auto& p : mine) std::filesystem::remove_all(p, ec);
  }
};
inline ScratchSweeper scratch_sweeper;

// `limits` prefixes a ulimit (address space, CPU seconds) to prove bounded cost.
inline CliRun cli(const std::string& args, const std::string& limits = {}) {
  std::string out = scratch("stdout"), err = scratch("stderr");
  std::string cmd = "cd '" + std::string(TOPOAWARE_TEST_FIXTURES) + "' && (" + limits + " '" +
                    std::string(TOPOAWARE_CLI) + "' " + args + ") >'" + out + "' 2>'" + err + "'";
  int status = std::system(cmd.c_str());
  CliRun r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// Compares with tests/golden/<name>, or rewrites it when UPDATE_GOLDEN=1.
// The source tree's root: the fixtures' grandparent.
inline std::string source_dir() {
  return std::filesystem::path(TOPOAWARE_TEST_FIXTURES).parent_path().parent_path().string();
}

// The 4-node lab as map takes it: its fabric and the DGX H100 capture for every host.
inline std::string lab_args() {
  return "--fabric " + source_dir() + "/etc/lab-cluster.toml --node-type " +
         std::string(TOPOAWARE_TEST_FIXTURES) + "/nccl-topo/dgx-h100-topo.xml";
}

inline void expect_golden(const std::string& name, const std::string& actual) {
  namespace fs = std::filesystem;
  std::string path = std::string(TOPOAWARE_TEST_FIXTURES) + "/../golden/" + name;
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " missing; run with UPDATE_GOLDEN=1 to create it";
  EXPECT_EQ(slurp(path), actual) << "differs from " << path
                                 << " (UPDATE_GOLDEN=1 regenerates after a deliberate change)";
}

}  // namespace topoaware::test
