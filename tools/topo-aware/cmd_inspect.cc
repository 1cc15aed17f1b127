// `topo-aware inspect PLAN.json`: explains a plan written by `map --of json`. It reloads the
// inputs the plan names (fabric, hosts, node type, layout), scores the plan's own assignment
// with the cost model, and compares it with another order (block by default): per dim how many
// groups stay inside a host, inside a leaf group or cross above, bytes per tier, time; with
// --svg, a picture of the fabric with the plan's traffic drawn on its links.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include "cli.h"
#include "plan_io.h"
#include "text_table.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/topology/error.h"

namespace topoaware::cli {
namespace {

struct InspectOptions {
  std::string plan;
  std::string compare = "block";
  std::string svg;
  std::string format = "text";
  std::string output;
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

// Hosts along the bottom in locality order, one row of group nodes per network level above;
// each edge's colour is its busiest dim's load / bandwidth relative to the step's worst link,
// its width the bytes it carries per step.
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
  const double dx = std::max(6.0, std::min(60.0, 1400.0 / static_cast<double>(H)));
  const double width = 80 + dx * static_cast<double>(H);
  const double row = 90;
  const double height = 120 + row * static_cast<double>(m.levels.size() + 1);
  std::vector<double> hx(H);
  for (std::size_t i = 0; i < H; ++i) hx[order[i]] = 40 + dx * (static_cast<double>(i) + 0.5);
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
  o << "<text x=\"10\" y=\"18\">topo-aware inspect: "
    << escape(std::to_string(s.slot_of_rank.size())) << " ranks, modeled "
    << escape(seconds(s.cost.seconds))
    << " per step; colour = load/bandwidth of the busiest dim (red = the step's worst link), "
       "width = bytes</text>\n";
  const double base_y = height - 40;
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
    if (!m.levels.empty()) {
      double x2 = gx[0][m.levels[0].group_of_host[h]];
      o << "<line x1=\"" << hx[h] << "\" y1=\"" << base_y << "\" x2=\"" << x2 << "\" y2=\""
        << level_y(0) << "\" stroke=\"" << color(worst > 0 ? host_peak[h] / worst : 0)
        << "\" stroke-width=\"" << stroke(host_bytes[h]) << "\"><title>" << escape(m.hosts[h])
        << " NICs: " << escape(gigabytes(host_bytes[h])) << "</title></line>\n";
    }
    o << "<rect x=\"" << hx[h] - dx * 0.4 << "\" y=\"" << base_y << "\" width=\"" << dx * 0.8
      << "\" height=\"14\" fill=\"#ddd\" stroke=\"#555\"><title>" << escape(m.hosts[h])
      << "</title></rect>\n";
  }
  for (std::size_t l = 0; l < m.levels.size(); ++l) {
    const auto& lv = m.levels[l];
    for (std::size_t g = 0; g < lv.uplink_gbps.size(); ++g) {
      if (l + 1 < m.levels.size()) {
        // The parent group: that of any host in this group.
        double px = 0;
        for (std::size_t h = 0; h < H; ++h) {
          if (lv.group_of_host[h] == g) {
            px = gx[l + 1][m.levels[l + 1].group_of_host[h]];
            break;
          }
        }
        auto it = up.find({static_cast<int>(l), static_cast<std::int64_t>(g)});
        double bytes = it == up.end() ? 0 : it->second.first;
        double peak = it == up.end() ? 0 : it->second.second;
        o << "<line x1=\"" << gx[l][g] << "\" y1=\"" << level_y(l) << "\" x2=\"" << px << "\" y2=\""
          << level_y(l + 1) << "\" stroke=\"" << color(worst > 0 ? peak / worst : 0)
          << "\" stroke-width=\"" << stroke(bytes) << "\"><title>" << escape(lv.group_label[g])
          << " uplink: " << escape(gigabytes(bytes)) << " at " << lv.uplink_gbps[g]
          << " GB/s</title></line>\n";
      }
      o << "<circle cx=\"" << gx[l][g] << "\" cy=\"" << level_y(l) << "\" r=\"6\" fill=\"#fff\" "
        << "stroke=\"#333\"><title>" << escape(lv.group_label[g]) << "</title></circle>\n";
    }
    o << "<text x=\"4\" y=\"" << level_y(l) - 8 << "\">" << escape(lv.name) << "</text>\n";
  }
  o << "<text x=\"4\" y=\"" << base_y + 28 << "\">hosts</text>\n";
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
  sub->add_option("--svg", o->svg, "Write an SVG picture of the fabric with the plan's traffic");
  sub->add_option("--of", o->format, "Output: text (default) or json");
  sub->add_option("-o,--output", o->output, "Write to this file instead of stdout");
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
    Loaded l = load_inputs(inputs_from_json(j["inputs"], o->plan));
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
    std::string text;
    if (o->format == "json") {
      nlohmann::json out;
      out["plan"] = cost_to_json(plan.cost);
      out["compare"] = {{"algorithm", o->compare}, {"cost", cost_to_json(other.cost)}};
      out["lower_bound"] = lb;
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
      if (!plan.cost.bottleneck.empty()) s << "bottleneck: " << plan.cost.bottleneck << "\n";
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
