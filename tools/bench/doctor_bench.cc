// Node doctor speed on the largest sysfs fixture: the DGX H100 tree (8 GPUs, 10 HCA ports, 31 PCIe
// links, 24 switch config spaces). The baseline, measured in the same run, is plain discovery of
// the same tree (discover_live + gpu_locality), which the doctor has to do anyway; the doctor's
// own cost is reading its facts and running the checks. Target: the whole doctor under 50 ms.
//
// Usage: doctor_bench [--runs N] [SYSFS_ROOT]   (exit 3 when the doctor misses the target)
// Without a root it uses tests/fixtures/sysfs/dgx-h100 (from the current directory or from this
// source file's location).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "topoaware/topology/doctor.h"
#include "topoaware/topology/doctor_source.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/paths.h"
#include "topoaware/topology/sources.h"

namespace {

namespace fs = std::filesystem;
using namespace topoaware::topology;

constexpr double kTargetMs = 50.0;

struct Stats {
  double median_ms = 0, p90_ms = 0, min_ms = 0;
};

Stats measure(int runs, const std::function<void()>& body) {
  body();  // warm the page cache outside the measurement
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

fs::path default_root() {
  for (fs::path p : {fs::path("tests/fixtures/sysfs/dgx-h100"),
                     fs::path(__FILE__).parent_path().parent_path().parent_path() / "tests" /
                         "fixtures" / "sysfs" / "dgx-h100"}) {
    if (fs::is_directory(p / "sys")) return p;
  }
  return {};
}

LiveOptions fake(const std::string& root) {
  LiveOptions o;
  o.fsroot = root;
  o.use_hwloc = false;
  return o;
}

void row(const char* what, const Stats& s, double baseline_ms) {
  std::printf("  %-34s %9.3f %9.3f %9.3f %8.2fx\n", what, s.median_ms, s.p90_ms, s.min_ms,
              baseline_ms > 0 ? s.median_ms / baseline_ms : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 50;
  std::string root;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: %s [--runs N] [SYSFS_ROOT]\n", argv[0]);
      return 0;
    } else {
      root = a;
    }
  }
  if (root.empty()) {
    fs::path p = default_root();
    if (p.empty()) {
      std::fprintf(stderr,
                   "topo-aware: doctor_bench: tests/fixtures/sysfs/dgx-h100 not found; give a "
                   "sysfs root\n");
      return 2;
    }
    root = p.string();
  }
  NodeTopology node;
  HealthReport report;
  try {
    node = discover_live(fake(root));
    report = diagnose(node, read_health_facts(node, root, nullptr));
  } catch (const Error& e) {
    std::fprintf(stderr, "topo-aware: %s\n", e.what());
    return 1;
  }
  int examined = 0;
  for (const auto& c : report.checks) examined += c.examined;
  std::printf(
      "doctor_bench: %d runs each, times in ms (median, p90, min), ratio = median / plain "
      "discovery of the same tree\n\n%s: %zu GPUs, %zu NICs, %d things examined by %zu checks, "
      "status %s\n",
      runs, root.c_str(), node.gpus().size(), node.nics().size(), examined, report.checks.size(),
      std::string(report.status()).c_str());
  std::printf("  %-34s %9s %9s %9s %9s\n", "step", "median", "p90", "min", "ratio");
  Stats base = measure(runs, [&] {
    NodeTopology n = discover_live(fake(root));
    gpu_locality(n);
  });
  row("discovery + locality (baseline)", base, base.median_ms);
  Stats facts = measure(runs, [&] { read_health_facts(node, root, nullptr); });
  row("read_health_facts (sysfs)", facts, base.median_ms);
  HealthFacts f = read_health_facts(node, root, nullptr);
  Stats checks = measure(runs, [&] { diagnose(node, f); });
  row("diagnose (the checks)", checks, base.median_ms);
  Stats json = measure(runs, [&] { health_report_to_json(report); });
  row("health_report_to_json", json, base.median_ms);
  Stats all = measure(runs, [&] {
    NodeTopology n = discover_live(fake(root));
    HealthReport r = diagnose(n, read_health_facts(n, root, nullptr));
    health_report_to_json(r);
  });
  row("doctor end to end", all, base.median_ms);
  bool ok = all.median_ms < kTargetMs;
  std::printf("  end to end %.3f ms vs target %.0f ms: %s\n", all.median_ms, kTargetMs,
              ok ? "ok" : "OVER TARGET");
  return ok ? 0 : 3;
}
