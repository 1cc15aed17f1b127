// `topo-aware inspect PLAN.json`: explains a plan written by `map --of json`. It reloads the
// inputs the plan names (fabric, hosts, node type, layout), scores the plan's own assignment
// with the cost model, and compares it with another order (block by default): per dim how many
// groups stay inside a host, inside a leaf group or cross above, bytes per tier, time; with
// --svg, a picture of the fabric with the plan's traffic drawn on its links.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "plan_io.h"
#include "text_table.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/place.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::cli {
namespace {

struct InspectOptions {
  std::string plan;
  std::string oversubscription, routing;  // replace the plan's own inputs when given
  std::string compare = "block";
  std::string fabric_format;  // --format: overrides the one the plan records
  std::string svg;
  std::string format = "text";
  std::string output;
  std::string health_dir;  // re-score under these health reports instead of the plan's own
  std::string free;        // hosts free when the allocation was made, besides its own
};

struct Scored {
  mapper::Instance instance;
  std::vector<std::uint32_t> slot_of_rank;
  mapper::CostReport cost;
  std::vector<mapper::LinkLoad> loads;
};

nlohmann::json read_plan(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw topology::Error(topology::ErrorCode::kNotFound, path, "cannot open");
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw topology::Error(topology::ErrorCode::kBadInput, path, e.what());
  }
}

// The plan's assignment, scored on the same inputs: each task keeps the GPU the plan gave it.
Scored score_plan(const Loaded& l, const nlohmann::json& ranks, const std::string& path) {
  mapper::Request r = l.request;
  r.host_blocks = false;  // the plan's assignment is replayed as it stands
  const std::size_t world = ranks.size();
  std::vector<int> rank_of_task(world, -1);
  r.bound_gpu.assign(world, -1);
  try {
    for (const auto& t : ranks) {
      auto task = t.at("task").get<std::size_t>();
      if (task >= world)
        throw topology::Error(topology::ErrorCode::kBadInput, path, "task out of range");
      rank_of_task[task] = t.at("rank").get<int>();
      r.bound_gpu[task] = t.at("gpu").get<int>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw topology::Error(topology::ErrorCode::kBadInput, path, std::string("ranks: ") + e.what());
  }
  Scored s;
  s.instance = mapper::make_instance(l.fabric, l.nodes, r);
  s.slot_of_rank.assign(world, 0);
  std::vector<bool> seen(world, false);
  for (std::size_t t = 0; t < world; ++t) {
    int rank = rank_of_task[t];
    if (rank < 0 || static_cast<std::size_t>(rank) >= world ||
        seen[static_cast<std::size_t>(rank)]) {
      throw topology::Error(topology::ErrorCode::kBadInput, path,
                            "ranks: not a permutation of 0.." + std::to_string(world - 1));
    }
    seen[static_cast<std::size_t>(rank)] = true;
    s.slot_of_rank[static_cast<std::size_t>(rank)] = s.instance.block_slot[t];
  }
  s.cost = mapper::evaluate(s.instance.machine, s.instance.traffic, s.slot_of_rank, &s.loads);
  return s;
}

Scored score_algorithm(const Loaded& l, mapper::Algorithm a) {
  mapper::Request r = l.request;
  r.algorithm = a;
  mapper::RankPlan p = mapper::plan(l.fabric, l.nodes, r);
  // Score it in the same way as the plan: through its tasks' GPUs.
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& t : p.tasks)
    ranks.push_back({{"task", t.task}, {"rank", t.rank}, {"gpu", t.gpu}});
  return score_plan(l, ranks, "(" + to_string(a) + ")");
}

std::string color(double u) {
  // Utilization 0..1 from green over yellow to red.
  u = std::clamp(u, 0.0, 1.0);
  int r = static_cast<int>(std::round(255 * std::min(1.0, 2 * u)));
  int g = static_cast<int>(std::round(200 * std::min(1.0, 2 * (1 - u))));
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x30", r, g);
  return buf;
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

// Hosts along the bottom in locality order, labelled with their names and ranks, one row of
// group nodes per network level above (labelled where there is room); each edge's colour is its
// busiest dim's load / bandwidth relative to the step's worst link, its width the bytes it
// carries per step. Every element has a <title> with the exact figures.
std::string render_svg(const Scored& s) {
  const mapper::Machine& m = s.instance.machine;
  const std::size_t H = m.hosts.size();
  std::vector<std::uint32_t> order(H);
  for (std::uint32_t i = 0; i < H; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
    for (std::size_t l = m.levels.size(); l-- > 0;) {
      if (m.levels[l].group_of_host[a] != m.levels[l].group_of_host[b]) {
        return m.levels[l].group_of_host[a] < m.levels[l].group_of_host[b];
      }
    }
    return false;
  });
  std::vector<std::vector<std::uint32_t>> ranks_of_host(H);
  for (std::size_t r = 0; r < s.slot_of_rank.size(); ++r) {
    ranks_of_host[m.slots[s.slot_of_rank[r]].host].push_back(static_cast<std::uint32_t>(r));
  }
  const double dx = std::max(6.0, std::min(60.0, 1400.0 / static_cast<double>(H)));
  const double width = std::max(960.0, 80 + dx * static_cast<double>(H));
  const double row = 90, top = 60;
  // Host labels run downwards under the hosts, when a host is wide enough for a line of text.
  const double label_font = std::min(11.0, dx * 0.8);
  const bool host_labels = label_font >= 6;
  std::size_t longest = 0;
  for (std::size_t h = 0; h < H; ++h) {
    longest = std::max(longest, m.hosts[h].size() + 1 + std::min<std::size_t>(
                                                          20, cpu_ranges(ranks_of_host[h]).size()));
  }
  const double label_room =
      host_labels ? 16 + 0.62 * label_font * static_cast<double>(longest) : 20;
  const double base_y = top + row * static_cast<double>(m.levels.size());
  const double height = base_y + 14 + label_room;
  std::vector<double> hx(H);
  const double x0 = std::max(40.0, (width - dx * static_cast<double>(H)) / 2);
  for (std::size_t i = 0; i < H; ++i) hx[order[i]] = x0 + dx * (static_cast<double>(i) + 0.5);
  // Loads per host (NIC) and per (level, group) uplink.
  double worst = 0, max_bytes = 0;
  std::vector<double> host_bytes(H, 0), host_peak(H, 0);
  std::map<std::pair<int, std::int64_t>, std::pair<double, double>> up;  // bytes, peak
  for (const auto& l : s.loads) {
    worst = std::max(worst, l.peak_seconds);
    if (l.level == "nic" && l.host >= 0) {
      host_bytes[static_cast<std::size_t>(l.host)] += l.bytes;
      host_peak[static_cast<std::size_t>(l.host)] =
          std::max(host_peak[static_cast<std::size_t>(l.host)], l.peak_seconds);
    } else if (l.net_level >= 0) {
      auto& e = up[{l.net_level, l.group}];
      e.first += l.bytes;
      e.second = std::max(e.second, l.peak_seconds);
    }
  }
  for (double b : host_bytes) max_bytes = std::max(max_bytes, b);
  for (const auto& [k, v] : up) max_bytes = std::max(max_bytes, v.first);
  auto stroke = [&](double bytes) { return max_bytes > 0 ? 1 + 9 * bytes / max_bytes : 1.0; };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  o << "<text x=\"10\" y=\"18\" font-size=\"13\">topo-aware inspect: "
    << escape(std::to_string(s.slot_of_rank.size())) << " ranks on " << H << " hosts, modeled "
    << escape(seconds(s.cost.seconds)) << " of communication per step</text>\n";
  o << "<text x=\"10\" y=\"36\">bottleneck: " << escape(s.cost.bottleneck)
    << ". Line width: bytes per step; colour: the busiest dim's time on the link, as a share of "
       "the worst link's</text>\n";
  // Colour legend, top right.
  const double lx = width - 170;
  for (int i = 0; i < 10; ++i) {
    o << "<rect x=\"" << lx + 12 * i << "\" y=\"44\" width=\"12\" height=\"8\" fill=\""
      << color(i / 9.0) << "\"/>\n";
  }
  o << "<text x=\"" << lx - 4 << "\" y=\"52\" text-anchor=\"end\">idle</text>\n";
  o << "<text x=\"" << lx + 124 << "\" y=\"52\">worst</text>\n";
  // Group positions per level: mean x of their hosts.
  std::vector<std::vector<double>> gx(m.levels.size());
  for (std::size_t l = 0; l < m.levels.size(); ++l) {
    std::vector<double> sum(m.levels[l].uplink_gbps.size(), 0), n(sum.size(), 0);
    for (std::size_t h = 0; h < H; ++h) {
      sum[m.levels[l].group_of_host[h]] += hx[h];
      n[m.levels[l].group_of_host[h]] += 1;
    }
    gx[l].resize(sum.size());
    for (std::size_t g = 0; g < sum.size(); ++g) gx[l][g] = n[g] > 0 ? sum[g] / n[g] : 0;
  }
  auto level_y = [&](std::size_t l) { return base_y - row * static_cast<double>(l + 1); };
  for (std::size_t h = 0; h < H; ++h) {
    const std::string ranks = cpu_ranges(ranks_of_host[h]);
    if (!m.levels.empty()) {
      double x2 = gx[0][m.levels[0].group_of_host[h]];
      o << "<line x1=\"" << hx[h] << "\" y1=\"" << base_y << "\" x2=\"" << x2 << "\" y2=\""
        << level_y(0) << "\" stroke=\"" << color(worst > 0 ? host_peak[h] / worst : 0)
        << "\" stroke-width=\"" << stroke(host_bytes[h]) << "\"><title>" << escape(m.hosts[h])
        << " NICs: " << escape(gigabytes(host_bytes[h])) << " per step</title></line>\n";
    }
    o << "<rect x=\"" << hx[h] - dx * 0.4 << "\" y=\"" << base_y << "\" width=\"" << dx * 0.8
      << "\" height=\"14\" fill=\"#ddd\" stroke=\"#555\"><title>" << escape(m.hosts[h])
      << ": ranks " << escape(ranks) << "</title></rect>\n";
    if (host_labels) {
      o << "<text transform=\"translate(" << hx[h] + label_font * 0.35 << "," << base_y + 18
        << ") rotate(90)\" font-size=\"" << label_font << "\">" << escape(m.hosts[h]) << " "
        << escape(ranks.size() > 18 ? ranks.substr(0, 17) + "..." : ranks) << "</text>\n";
    }
  }
  for (std::size_t l = 0; l < m.levels.size(); ++l) {
    const auto& lv = m.levels[l];
    // Room for a label beside each group's node: the narrowest gap between neighbours.
    std::vector<double> xs(gx[l]);
    std::sort(xs.begin(), xs.end());
    double gap = width;
    for (std::size_t i = 1; i < xs.size(); ++i) gap = std::min(gap, xs[i] - xs[i - 1]);
    for (std::size_t g = 0; g < lv.uplink_gbps.size(); ++g) {
      auto it = up.find({static_cast<int>(l), static_cast<std::int64_t>(g)});
      double bytes = it == up.end() ? 0 : it->second.first;
      double peak = it == up.end() ? 0 : it->second.second;
      if (l + 1 < m.levels.size()) {
        // The parent group: that of any host in this group.
        double px = 0;
        for (std::size_t h = 0; h < H; ++h) {
          if (lv.group_of_host[h] == g) {
            px = gx[l + 1][m.levels[l + 1].group_of_host[h]];
            break;
          }
        }
        o << "<line x1=\"" << gx[l][g] << "\" y1=\"" << level_y(l) << "\" x2=\"" << px << "\" y2=\""
          << level_y(l + 1) << "\" stroke=\"" << color(worst > 0 ? peak / worst : 0)
          << "\" stroke-width=\"" << stroke(bytes) << "\"><title>" << escape(lv.group_label[g])
          << " uplink: " << escape(gigabytes(bytes)) << " per step at " << lv.uplink_gbps[g]
          << " GB/s</title></line>\n";
      }
      o << "<circle cx=\"" << gx[l][g] << "\" cy=\"" << level_y(l) << "\" r=\"6\" fill=\"#fff\" "
        << "stroke=\"#333\"><title>" << escape(lv.group_label[g]) << "</title></circle>\n";
      if (gap >= 70) {
        std::string label = lv.group_label[g];
        const std::size_t fits = static_cast<std::size_t>((gap - 14) / 6);
        if (label.size() > fits) label = label.substr(0, fits > 3 ? fits - 3 : 0) + "...";
        o << "<text x=\"" << gx[l][g] + 9 << "\" y=\"" << level_y(l) - 8 << "\" font-size=\"10\" "
          << "fill=\"#333\">" << escape(label) << "</text>\n";
      }
    }
    o << "<text x=\"4\" y=\"" << level_y(l) + 4 << "\" font-weight=\"bold\">" << escape(lv.name)
      << "</text>\n";
  }
  o << "<text x=\"4\" y=\"" << base_y + 11 << "\" font-weight=\"bold\">hosts</text>\n";
  o << "</svg>\n";
  return o.str();
}

std::string dims_table(const Scored& plan, const Scored& other, const std::string& other_name,
                       const mapper::Layout& layout) {
  std::vector<std::vector<std::string>> rows = {
      {"dim", "size", "in host", "in leaf", "across", "time", other_name, other_name + " groups"}};
  for (std::size_t i = 0; i < plan.cost.dims.size(); ++i) {
    const auto& d = plan.cost.dims[i];
    int size = 1;
    for (const auto& ld : layout.dims) {
      if (ld.name == d.dim) size = ld.size;
    }
    if (size <= 1 && d.dim != "matrix") continue;
    const auto& b = other.cost.dims[i];
    rows.push_back({d.dim, std::to_string(size), std::to_string(d.groups_in_host),
                    std::to_string(d.groups_in_leaf), std::to_string(d.groups_across),
                    seconds(d.seconds), seconds(b.seconds),
                    std::to_string(b.groups_in_host) + "/" + std::to_string(b.groups_in_leaf) +
                        "/" + std::to_string(b.groups_across)});
  }
  return text_table(rows);
}

// How good the plan's allocation is (mapper::assess): its spread and modeled time against the
// best allocation place() finds where the job could have gone -- the allocation's hosts and
// `free` when given, else an empty cluster. Every host is modeled as the plan's first host.
mapper::Quality allocation_quality(const Loaded& l, const std::string& free) {
  std::vector<char> flags;
  if (!free.empty()) {
    flags.assign(l.fabric.hosts.size(), 0);
    for (const auto& h : topology::expand_hostlist(free, "--free")) {
      const std::int64_t i = l.fabric.find_host(h);
      if (i < 0) {
        throw topology::Error(topology::ErrorCode::kBadInput, "--free",
                              "host " + h + " is not in the fabric (" + l.fabric.source + ")");
      }
      flags[static_cast<std::size_t>(i)] = 1;
    }
  }
  // Not judged (best_found false) where the hosts run different numbers of tasks, as in srun.
  return mapper::assess_step(l.fabric, l.nodes[0], l.request, flags);
}

std::string hostlist_of(const topology::Fabric& f, const std::vector<std::uint32_t>& hosts) {
  std::vector<std::string> n;
  for (std::uint32_t h : hosts) n.push_back(f.hosts[h].name);
  return topology::compress_hostlist(n);
}

}  // namespace

void add_inspect(CLI::App& app, Common& common) {
  auto o = std::make_shared<InspectOptions>();
  auto* sub = app.add_subcommand(
      "inspect",
      "Explain a plan from `map --of json`: traffic per dim and tier against block "
      "order, and a picture of the fabric with its load");
  sub->add_option("plan", o->plan, "PLAN.json written by `topo-aware map --of json`")->required();
  sub->add_option("--compare", o->compare,
                  "Order to compare with: block (default), cyclic, "
                  "random or topo");
  add_input_format_option(*sub, o->fabric_format, topology::InputKind::kFabric,
                          "the plan's fabric file (default: as the plan records it)");
  sub->add_option("--svg", o->svg, "Write an SVG picture of the fabric with the plan's traffic");
  sub->add_option("--of", o->format, "Output: text (default) or json");
  sub->add_option("--health-dir", o->health_dir,
                  "Score under the node doctor's reports in DIR instead of those the plan was "
                  "made with");
  sub->add_option("-o,--output", o->output, "Write to this file instead of stdout");
  sub->add_option("--free", o->free,
                  "Hosts that were free when the allocation was made (Slurm hostlist), besides "
                  "its own: its quality is judged against the best of these; default: an empty "
                  "cluster");
  sub->add_option("--oversubscription", o->oversubscription,
                  "Re-score under this oversubscription per tier (1,2: tier 1 non-blocking, tier "
                  "2 at 2:1) where the fabric gives no link speeds, instead of the plan's");
  sub->add_option("--routing", o->routing,
                  "Re-score with every tier routing adaptive or ecmp, instead of the plan's");
  sub->callback([o, &common] {
    (void)common;
    if (o->format != "text" && o->format != "json") {
      throw UsageError("--of " + o->format + ": expected text or json");
    }
    mapper::Algorithm other_algo = algorithm_from(o->compare);
    nlohmann::json j = read_plan(o->plan);
    if (!j.contains("inputs") || !j.contains("ranks") || !j["ranks"].is_array()) {
      throw topology::Error(topology::ErrorCode::kBadInput, o->plan,
                            "not a plan from `topo-aware map --of json` (no inputs/ranks)");
    }
    MapInputs in = inputs_from_json(j["inputs"], o->plan);
    if (!o->health_dir.empty()) in.health_dir = o->health_dir;
    if (!o->fabric_format.empty()) in.fabric_format = o->fabric_format;
    if (!o->oversubscription.empty()) in.oversubscription = o->oversubscription;
    if (!o->routing.empty()) in.routing = o->routing;
    Loaded l = load_inputs(in);
    if (j["ranks"].size() !=
        static_cast<std::size_t>(
            std::accumulate(l.request.tasks_per_host.begin(), l.request.tasks_per_host.end(), 0))) {
      throw topology::Error(topology::ErrorCode::kBadInput, o->plan,
                            "ranks do not match the tasks its inputs give");
    }
    Scored plan = score_plan(l, j["ranks"], o->plan);
    Scored other = score_algorithm(l, other_algo);
    double lb = mapper::lower_bound(plan.instance.machine, plan.instance.traffic);
    if (!o->svg.empty()) write_output(o->svg, render_svg(plan));
    const mapper::Quality q = allocation_quality(l, o->free);
    const std::string against = o->free.empty() ? "an empty cluster" : "the free hosts";
    std::string text;
    if (o->format == "json") {
      nlohmann::json out;
      out["plan"] = cost_to_json(plan.cost);
      out["compare"] = {{"algorithm", o->compare}, {"cost", cost_to_json(other.cost)}};
      out["lower_bound"] = lb;
      out["degraded"] = l.health;
      out["assumptions"] = plan.instance.machine.assumptions;
      nlohmann::json spread = nlohmann::json::object(), best_spread = nlohmann::json::object();
      const auto levels = mapper::group_levels(l.fabric);
      for (std::size_t i = 0; i < levels.size(); ++i) {
        const std::string& name = l.fabric.levels[levels[i]].name;
        if (i < q.allocation.spread.size()) spread[name] = q.allocation.spread[i];
        if (i < q.best.spread.size()) best_spread[name] = q.best.spread[i];
      }
      out["allocation"] = {{"spread", spread},
                           {"seconds", q.allocation.seconds},
                           {"against", o->free.empty() ? "empty-cluster" : "free-hosts"},
                           {"best_found", q.best_found},
                           {"best", {{"hosts", hostlist_of(l.fabric, q.best.hosts)},
                                     {"seconds", q.best.seconds},
                                     {"spread", best_spread}}},
                           {"slowdown", q.slowdown}};
      out["links"] = nlohmann::json::array();
      for (const auto& k : plan.loads) {
        out["links"].push_back({{"name", k.name},
                                {"level", k.level},
                                {"bytes", k.bytes},
                                {"gbps", k.gbps},
                                {"peak_seconds", k.peak_seconds}});
      }
      text = out.dump(2) + "\n";
    } else {
      std::ostringstream s;
      s << "plan " << o->plan << ": " << plan.slot_of_rank.size() << " ranks on "
        << plan.instance.machine.hosts.size() << " hosts, layout "
        << (plan.instance.layout.spec.empty() ? "(data parallel)" : plan.instance.layout.spec)
        << "\n";
      s << "modeled communication per step: " << seconds(plan.cost.seconds) << "; " << o->compare
        << " order " << seconds(other.cost.seconds) << " ("
        << (other.cost.seconds > 0 ? std::to_string(static_cast<int>(std::round(
                                         (1 - plan.cost.seconds / other.cost.seconds) * 100))) +
                                         "% less"
                                   : "-")
        << "); lower bound " << seconds(lb) << "\n";
      if (!plan.instance.machine.assumptions.empty()) {
        s << mapper::assumptions_line(plan.instance.machine.assumptions) << "\n";
      }
      if (!plan.cost.bottleneck.empty()) s << "bottleneck: " << plan.cost.bottleneck << "\n";
      if (q.best_found) {
        char x[32];
        std::snprintf(x, sizeof x, "%.2fx", q.slowdown);
        s << "allocation: " << mapper::spread_text(l.fabric, q.allocation)
          << "; the mapper's plan there "
          << seconds(q.allocation.seconds) << ", on the best allocation of " << against << " "
          << seconds(q.best.seconds) << " (" << hostlist_of(l.fabric, q.best.hosts) << ", "
          << mapper::spread_text(l.fabric, q.best) << "): " << x << "\n";
      }
      for (const auto& h : l.health) s << "degraded (health report): " << h << "\n";
      s << "\nper dim: groups whose traffic stays inside a host / inside a leaf group / crosses "
           "above\n"
        << dims_table(plan, other, o->compare, plan.instance.layout);
      std::vector<std::vector<std::string>> tiers = {{"tier", "bytes/step", o->compare}};
      for (std::size_t i = 0; i < plan.cost.tiers.size(); ++i) {
        tiers.push_back({plan.cost.tiers[i].tier, gigabytes(plan.cost.tiers[i].bytes),
                         gigabytes(other.cost.tiers[i].bytes)});
      }
      s << "\nbytes per tier:\n" << text_table(tiers);
      std::vector<mapper::LinkLoad> top = plan.loads;
      std::sort(top.begin(), top.end(),
                [](const auto& a, const auto& b) { return a.peak_seconds > b.peak_seconds; });
      if (top.size() > 8) top.resize(8);
      std::vector<std::vector<std::string>> links = {
          {"busiest links", "bytes/step", "GB/s", "time"}};
      for (const auto& k : top) {
        char bw[32];
        std::snprintf(bw, sizeof bw, "%.1f", k.gbps);
        links.push_back({k.name, gigabytes(k.bytes), bw, seconds(k.peak_seconds)});
      }
      s << "\n" << text_table(links);
      text = s.str();
    }
    write_output(o->output, text);
  });
}

}  // namespace topoaware::cli
