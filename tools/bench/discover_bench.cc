// Discovery speed from hwloc captures: how long load_hwloc_xml, NodePaths and gpu_locality take on
// the largest real machines we have, against hwloc's own XML import of the same bytes (the floor
// no converter can beat), measured in the same run. Target: a whole discovery under 50 ms. The
// live discovery of this machine is timed last, for comparison.
//
// Usage: discover_bench [--runs N] [FILE.xml ...]   (exit 3 when a file misses the target)
// Without files it uses the 24-NUMA SGI UV capture (the largest) and the DGX-2H from
// tests/fixtures/hwloc (found from the current directory or from this source file's location).
#include <hwloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "topoaware/topology/error.h"
#include "topoaware/topology/hwloc_source.h"
#include "topoaware/topology/paths.h"
#include "topoaware/topology/sources.h"

namespace {

namespace fs = std::filesystem;
using topoaware::topology::NodeTopology;

constexpr double kTargetMs = 50.0;

struct Stats {
  double median_ms = 0, p90_ms = 0, min_ms = 0;
};

Stats measure(int runs, const std::function<void()>& body) {
  body();  // warm caches and hwloc's plugin loading outside the measurement
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    body();
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  Stats s;
  s.min_ms = ms.front();
  s.median_ms = ms[ms.size() / 2];
  s.p90_ms = ms[std::min(ms.size() - 1, ms.size() * 9 / 10)];
  return s;
}

// hwloc alone: import the XML and destroy it, the same configuration load_hwloc_xml uses.
void hwloc_only(const std::string& xml) {
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_IMPORT_SUPPORT);
  if (hwloc_topology_set_xmlbuffer(t, xml.c_str(), static_cast<int>(xml.size() + 1)) == 0) {
    hwloc_topology_load(t);
  }
  hwloc_topology_destroy(t);
}

fs::path default_fixture_dir() {
  for (fs::path p : {fs::path("tests/fixtures/hwloc"),
                     fs::path(__FILE__).parent_path().parent_path().parent_path() / "tests" /
                         "fixtures" / "hwloc"}) {
    if (fs::is_directory(p)) return p;
  }
  return {};
}

void row(const char* what, const Stats& s, double baseline_ms) {
  std::printf("  %-28s %9.3f %9.3f %9.3f %8.2fx\n", what, s.median_ms, s.p90_ms, s.min_ms,
              baseline_ms > 0 ? s.median_ms / baseline_ms : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 50;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: %s [--runs N] [FILE.xml ...]\n", argv[0]);
      return 0;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    fs::path dir = default_fixture_dir();
    if (dir.empty()) {
      std::fprintf(stderr,
                   "topo-aware: discover_bench: tests/fixtures/hwloc not found; give files\n");
      return 2;
    }
    files = {(dir / "hwloc-v2fmt-24s-xeon-e5-4640-24numa-connectx3.xml").string(),
             (dir / "hwloc-v2fmt-nvidia-dgx2h-16xV100-nvml-nvlinkbw.xml").string()};
  }

  bool all_ok = true;
  std::printf(
      "discover_bench: %d runs each, times in ms (median, p90, min), ratio = median / "
      "hwloc's own XML import\n",
      runs);
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string xml = ss.str();
    NodeTopology node;
    try {
      node = topoaware::topology::load_hwloc_xml(file);
    } catch (const topoaware::topology::Error& e) {
      std::fprintf(stderr, "topo-aware: %s\n", e.what());
      return 1;
    }
    std::printf("\n%s (%zu KB): %zu vertices, %zu links, %zu GPUs, %zu NICs, %zu CPUs\n",
                fs::path(file).filename().c_str(), xml.size() / 1024, node.graph.vertex_count(),
                node.graph.link_count(), node.gpus().size(), node.nics().size(),
                node.cpus().size());
    std::printf("  %-28s %9s %9s %9s %9s\n", "step", "median", "p90", "min", "ratio");
    Stats base = measure(runs, [&] { hwloc_only(xml); });
    row("hwloc XML import (baseline)", base, base.median_ms);
    Stats load = measure(runs, [&] { topoaware::topology::load_hwloc_xml(file); });
    row("load_hwloc_xml", load, base.median_ms);
    Stats paths = measure(runs, [&] { topoaware::topology::NodePaths p(node); });
    row("NodePaths", paths, base.median_ms);
    Stats loc = measure(runs, [&] { topoaware::topology::gpu_locality(node); });
    row("gpu_locality (with paths)", loc, base.median_ms);
    Stats all = measure(runs, [&] {
      NodeTopology n = topoaware::topology::load_hwloc_xml(file);
      topoaware::topology::gpu_locality(n);
    });
    row("discovery end to end", all, base.median_ms);
    bool ok = all.median_ms < kTargetMs;
    all_ok = all_ok && ok;
    std::printf("  end to end %.3f ms vs target %.0f ms: %s\n", all.median_ms, kTargetMs,
                ok ? "ok" : "OVER TARGET");
  }
  // This machine, as a launch would see it (hwloc's sysfs/PCI scan dominates).
  Stats live = measure(std::max(1, runs / 5), [] {
    NodeTopology n = topoaware::topology::load_hwloc_live();
    topoaware::topology::gpu_locality(n);
  });
  std::printf("\nthis machine, live: median %.3f ms, p90 %.3f ms, min %.3f ms\n", live.median_ms,
              live.p90_ms, live.min_ms);
  return all_ok ? 0 : 3;
}
