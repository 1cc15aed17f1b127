// Launch keys of a SPEC (launch.h).
#include "topoaware/mapper/launch.h"

#include <charconv>
#include <set>
#include <system_error>
#include <utility>

#include "topoaware/mapper/layout.h"

namespace topoaware::mapper {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view to_string(Launcher launcher) {
  switch (launcher) {
    case Launcher::kAuto:
      return "auto";
    case Launcher::kPerGpu:
      return "per-gpu";
    case Launcher::kPerNode:
      return "per-node";
  }
  return "auto";
}

std::string_view to_string(Ids ids) { return ids == Ids::kSlurm ? "slurm" : "plan"; }

Launcher parse_launcher(std::string_view text) {
  for (Launcher l : {Launcher::kAuto, Launcher::kPerGpu, Launcher::kPerNode}) {
    if (text == to_string(l)) return l;
  }
  throw Error("launcher=" + std::string(text) + ": expected auto, per-gpu or per-node");
}

Ids parse_ids(std::string_view text) {
  if (text == "plan") return Ids::kPlan;
  if (text == "slurm") return Ids::kSlurm;
  throw Error("ids=" + std::string(text) + ": expected plan or slurm");
}

namespace {

// Calls `visit(item, is_file_tail)` for each comma-separated item, the file:PATH tail whole.
template <typename F>
void for_each_item(std::string_view spec, F&& visit) {
  std::string_view rest = spec;
  while (!rest.empty()) {
    if (trim(rest).substr(0, 5) == "file:") {
      visit(rest, true);
      return;
    }
    const std::size_t comma = rest.find(',');
    visit(rest.substr(0, comma), false);
    if (comma == std::string_view::npos) return;
    rest = rest.substr(comma + 1);
  }
}

}  // namespace

LaunchSpec parse_launch_spec(std::string_view spec) {
  LaunchSpec out;
  std::string layout;
  bool seen_launcher = false, seen_nproc = false;
  for_each_item(trim(spec), [&](std::string_view raw, bool tail) {
    // file:PATH is the last item: its path may hold commas.
    if (tail) {
      layout += (layout.empty() ? "" : ",") + std::string(raw);
      return;
    }
    const std::string_view item = trim(raw);
    const std::size_t eq = item.find('=');
    const std::string_view key = trim(item.substr(0, eq));
    const std::string_view value = eq == std::string_view::npos ? "" : trim(item.substr(eq + 1));
    if (key == "launcher") {
      if (seen_launcher) throw Error("launcher given twice");
      seen_launcher = true;
      out.launcher = parse_launcher(value);
    } else if (key == "nproc") {
      if (seen_nproc) throw Error("nproc given twice");
      seen_nproc = true;
      int n = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || ptr != value.data() + value.size() || n < 1 || n > 4096) {
        throw Error("nproc=" + std::string(value) + ": expected workers per host (1..4096)");
      }
      out.nproc = n;
    } else if (item == "shadow") {
      if (out.shadow) throw Error("shadow given twice");
      out.shadow = true;
    } else if (key == "ids") {
      if (out.ids_given) throw Error("ids given twice");
      out.ids_given = true;
      out.ids = parse_ids(value);
    } else {
      layout += (layout.empty() ? "" : ",") + std::string(item);
    }
  });
  if (out.nproc > 0 && out.launcher == Launcher::kPerGpu) {
    throw Error("nproc=" + std::to_string(out.nproc) +
                " is for a per-node launcher; launcher=per-gpu runs one task per GPU");
  }
  // Workers per host only mean something to a per-node launcher.
  if (out.nproc > 0) out.launcher = Launcher::kPerNode;
  out.layout = std::move(layout);
  return out;
}

bool asks_shadow(std::string_view spec) {
  bool shadow = false;
  for_each_item(spec, [&](std::string_view item, bool tail) {
    if (!tail && trim(item) == "shadow") shadow = true;
  });
  return shadow;
}

std::string without_shadow(std::string_view spec) {
  std::string out;
  bool first = true;
  for_each_item(spec, [&](std::string_view item, bool tail) {
    if (!tail && trim(item) == "shadow") return;
    if (!first) out += ',';
    out += item;
    first = false;
  });
  return out;
}

Launcher resolve_launcher(Launcher asked, const std::vector<int>& tasks_per_host,
                          const std::vector<int>& gpus_per_host) {
  if (asked != Launcher::kAuto) return asked;
  if (tasks_per_host.empty() || tasks_per_host.size() != gpus_per_host.size()) {
    return Launcher::kPerGpu;
  }
  for (std::size_t h = 0; h < tasks_per_host.size(); ++h) {
    if (tasks_per_host[h] != 1 || gpus_per_host[h] < 2) return Launcher::kPerGpu;
  }
  return Launcher::kPerNode;
}

// A per-node launcher numbers a host's G workers node_rank*G + i. A block of the innermost dims
// (tp, then tp x cp, ...) of P ranks stays whole on hosts only when P divides G or G divides P;
// otherwise some of its groups straddle two hosts in every plan. Refused, naming the G that would
// fit (nproc=).
void check_host_blocks(const Layout& layout, const std::vector<int>& per_host) {
  std::set<int> sizes(per_host.begin(), per_host.end());
  for (int g : sizes) {
    long long p = 1;     // ranks in the innermost dims so far
    long long fits = 1;  // the largest such block that divides g
    std::string dims;
    for (const auto& d : layout.dims) {
      if (d.size <= 1) continue;
      p *= d.size;
      dims += (dims.empty() ? "" : "x") + d.name;
      if (p <= g && g % p == 0) {
        fits = p;
        continue;
      }
      if (p > g && p % g == 0) break;  // whole hosts make up each block: fine from here on
      long long want = 0;              // the nproc that would fit
      if (p < g) {
        want = g / p * p;
      } else {
        for (long long d2 = g; d2 >= 1; --d2) {
          if (p % d2 == 0 && d2 % fits == 0) {
            want = d2;
            break;
          }
        }
      }
      throw Error("a per-node launcher numbers each host's " + std::to_string(g) +
                  " workers node_rank*" + std::to_string(g) + "+i, so groups of the innermost " +
                  std::to_string(p) + " ranks (" + dims +
                  ") would straddle hosts; run nproc=" + std::to_string(want) +
                  " workers per host (--topo-aware=nproc=" + std::to_string(want) +
                  ",...), or one task per GPU (launcher=per-gpu)");
    }
  }
}

}  // namespace topoaware::mapper
