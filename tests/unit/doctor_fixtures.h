// The node doctor's fault fixtures (tests/fixtures/sysfs/make-doctor-faults.sh), generated at
// test time instead of being checked in. ctest runs every test in its own process, so the
// generated folder is shared: it is named after a hash of the scripts and the capture they read,
// built in a private folder and renamed into place (the first process to finish wins, the
// others reuse it), and regenerated whenever a script changes.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <system_error>

namespace topoaware::test {

inline std::filesystem::path doctor_faults() {
  namespace fs = std::filesystem;
  static const fs::path dir = [] {
    const std::string fixtures = TOPOAWARE_TEST_FIXTURES;
    std::string all;
    for (const char* rel : {"/sysfs/make-dgx-h100.sh", "/sysfs/make-doctor-faults.sh",
                            "/nccl-topo/dgx-h100-topo.xml"}) {
      std::ifstream in(fixtures + rel, std::ios::binary);
      all += std::string(std::istreambuf_iterator<char>(in), {});
    }
    fs::path base = fs::temp_directory_path() /
                    ("topoaware-doctor-faults-" + std::to_string(std::hash<std::string>{}(all)));
    if (fs::exists(base / "capture-nvlink-down.xml")) return base;
    fs::path mine = base.string() + ".tmp" + std::to_string(::getpid());
    std::string cmd = "bash '" + fixtures + "/sysfs/make-doctor-faults.sh' '" + mine.string() +
                      "' >/dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    std::error_code ec;
    fs::rename(mine, base, ec);  // fails when another process got there first: use theirs
    if (ec) fs::remove_all(mine, ec);
    return base;
  }();
  return dir;
}

}  // namespace topoaware::test
