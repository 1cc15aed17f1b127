// `topo-aware shadow-report LOG...`: what a period of shadow mode (docs/spank.md, "Shadow mode")
// says about turning topo-aware on: how many steps, what apply mode would have done with them,
// the predicted savings' distribution, and the refusals by reason. It reads the lines srun wrote
// (launch/shadow.h, the one reader of the format).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "text_table.h"
#include "topoaware/launch/shadow.h"
#include "topoaware/topology/error.h"

namespace topoaware::cli {
namespace {

using launch::ShadowRecord;
using launch::ShadowVerdict;

// Histogram buckets of the predicted saving, in percent: [from, to).
struct Bucket {
  std::optional<double> from, to;
  std::string label;
};
const std::vector<Bucket>& buckets() {
  static const std::vector<Bucket> b = {
      {std::nullopt, 0, "< 0%"},   {0, 5, "0-5%"},     {5, 10, "5-10%"},
      {10, 20, "10-20%"},          {20, 30, "20-30%"}, {30, 50, "30-50%"},
      {50, std::nullopt, ">= 50%"}};
  return b;
}

struct Report {
  std::vector<std::string> logs;
  std::vector<ShadowRecord> steps;
  std::size_t skipped = 0;
  std::string first_skipped;  // the first malformed line's error (--lenient)
};

// Nearest rank: the smallest value with at least p% of the values at or below it.
double percentile(const std::vector<double>& sorted, double p) {
  const auto rank =
      static_cast<std::size_t>(std::ceil(p / 100 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<std::size_t>(rank, 1)) - 1];
}

// More spread than the fabric allows at some level ("leaf:2/1": used > fewest).
bool over_spread(const std::string& spread) {
  const auto levels = launch::parse_spread(spread);
  return std::any_of(levels.begin(), levels.end(),
                     [](const launch::SpreadLevel& l) { return l.used > l.fewest; });
}

// The text output's reasons per verdict: the most frequent; --of json lists all.
constexpr std::size_t kMaxReasons = 10;

// text_table pads an empty last cell (a histogram bucket without steps).
std::string without_trailing_blanks(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + (end < text.size() ? "\n" : "");
    start = end + 1;
  }
  return out;
}

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", v);
  return buf;
}

Report read_logs(const std::vector<std::string>& paths, bool lenient) {
  Report r;
  r.logs = paths;
  for (const auto& path : paths) {
    std::ifstream in(path);
    if (!in) throw topology::Error(topology::ErrorCode::kNotFound, path, "cannot read it");
    std::string line;
    long number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank
      try {
        r.steps.push_back(launch::parse_shadow_line(line, topology::where(path, number)));
      } catch (const topology::Error& e) {
        if (!lenient) throw;
        if (r.skipped++ == 0) r.first_skipped = e.what();
      }
    }
  }
  return r;
}

struct Summary {
  std::map<ShadowVerdict, std::size_t> verdicts;
  std::vector<double> savings;  // sorted
  std::vector<std::size_t> histogram;
  std::size_t without_plan = 0;  // would-apply steps srun made no plan for
  std::size_t spread = 0;        // steps on allocations more spread than the fabric allows
  std::map<std::string, std::size_t> refusals, errors;
  std::string first, last;
};

Summary summarize(const Report& report) {
  Summary s;
  for (auto v : {ShadowVerdict::kWouldApply, ShadowVerdict::kWouldRefuse, ShadowVerdict::kError}) {
    s.verdicts[v] = 0;
  }
  s.histogram.assign(buckets().size(), 0);
  for (const auto& step : report.steps) {
    ++s.verdicts[step.verdict];
    // The time format sorts as text.
    if (s.first.empty() || step.time < s.first) s.first = step.time;
    if (s.last.empty() || step.time > s.last) s.last = step.time;
    if (over_spread(step.spread)) ++s.spread;
    if (step.verdict == ShadowVerdict::kWouldRefuse) ++s.refusals[step.reason];
    if (step.verdict == ShadowVerdict::kError) ++s.errors[step.reason];
    if (step.verdict != ShadowVerdict::kWouldApply) continue;
    if (!step.saving_pct) {
      ++s.without_plan;
      continue;
    }
    const double v = *step.saving_pct;
    s.savings.push_back(v);
    for (std::size_t b = 0; b < buckets().size(); ++b) {
      const Bucket& k = buckets()[b];
      if ((!k.from || v >= *k.from) && (!k.to || v < *k.to)) ++s.histogram[b];
    }
  }
  std::sort(s.savings.begin(), s.savings.end());
  return s;
}

// Reasons, most frequent first (then alphabetical, so the output is stable).
std::vector<std::pair<std::string, std::size_t>> by_count(
    const std::map<std::string, std::size_t>& reasons) {
  std::vector<std::pair<std::string, std::size_t>> v(reasons.begin(), reasons.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return v;
}

std::string to_text(const Report& report, const Summary& s) {
  std::string out = "topo-aware shadow report: " + std::to_string(report.steps.size()) + " steps";
  if (!report.steps.empty()) out += " from " + s.first + " to " + s.last;
  out += " (" + std::to_string(report.logs.size()) + (report.logs.size() == 1 ? " log" : " logs") +
         ")\n";
  std::vector<std::vector<std::string>> rows = {{"verdict", "steps"}};
  for (const auto& [v, n] : s.verdicts) rows.push_back({launch::to_string(v), std::to_string(n)});
  out += text_table(rows);
  if (s.spread > 0) {
    out += "on allocations more spread than the fabric allows: " + std::to_string(s.spread) +
           " steps\n";
  }
  out += "predicted saving over Slurm's order: " + std::to_string(s.savings.size()) +
         " steps with a plan";
  if (s.without_plan > 0) {
    // A step on part of its allocation: srun cannot know its hosts, the nodes plan it.
    out += ", " + std::to_string(s.without_plan) + " would-apply without one";
  }
  out += "\n";
  if (!s.savings.empty()) {
    out += "  min " + pct(s.savings.front()) + "  median " + pct(percentile(s.savings, 50)) +
           "  p90 " + pct(percentile(s.savings, 90)) + "  max " + pct(s.savings.back()) + "\n";
    rows = {{"saving", "steps", ""}};
    const std::size_t most = *std::max_element(s.histogram.begin(), s.histogram.end());
    for (std::size_t b = 0; b < buckets().size(); ++b) {
      // Bars of up to 40 marks, at least one for a bucket that holds any step.
      const std::size_t n = s.histogram[b];
      const std::size_t marks = n == 0 ? 0 : std::max<std::size_t>(1, n * 40 / most);
      rows.push_back({buckets()[b].label, std::to_string(n), std::string(marks, '#')});
    }
    out += without_trailing_blanks(text_table(rows));
  }
  for (const auto& [title, reasons] :
       {std::pair<std::string, const std::map<std::string, std::size_t>*>{"would refuse",
                                                                          &s.refusals},
        {"errors (fail-open would run them unmodified)", &s.errors}}) {
    if (reasons->empty()) continue;
    out += title + ", by reason:\n";
    rows = {{"steps", "reason"}};
    const auto counted = by_count(*reasons);
    for (std::size_t i = 0; i < counted.size() && i < kMaxReasons; ++i) {
      rows.push_back({std::to_string(counted[i].second), counted[i].first});
    }
    out += text_table(rows);
    if (counted.size() > kMaxReasons) {
      out += "  ... and " + std::to_string(counted.size() - kMaxReasons) +
             " other reasons (--of json lists all)\n";
    }
  }
  if (report.skipped > 0) {
    out += "skipped " + std::to_string(report.skipped) +
           " malformed lines (--lenient); first: " + report.first_skipped + "\n";
  }
  return out;
}

std::string to_json(const Report& report, const Summary& s) {
  nlohmann::ordered_json j;
  j["logs"] = report.logs;
  j["steps"] = report.steps.size();
  j["first"] = report.steps.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s.first);
  j["last"] = report.steps.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s.last);
  for (const auto& [v, n] : s.verdicts) j["verdicts"][launch::to_string(v)] = n;
  j["over_spread"] = s.spread;
  auto& saving = j["saving"];
  saving["steps"] = s.savings.size();
  saving["without_plan"] = s.without_plan;
  if (!s.savings.empty()) {
    saving["min"] = s.savings.front();
    saving["median"] = percentile(s.savings, 50);
    saving["p90"] = percentile(s.savings, 90);
    saving["max"] = s.savings.back();
  }
  saving["histogram"] = nlohmann::ordered_json::array();
  for (std::size_t b = 0; b < buckets().size(); ++b) {
    nlohmann::ordered_json h;
    h["from"] = buckets()[b].from ? nlohmann::ordered_json(*buckets()[b].from) : nullptr;
    h["to"] = buckets()[b].to ? nlohmann::ordered_json(*buckets()[b].to) : nullptr;
    h["steps"] = s.histogram[b];
    saving["histogram"].push_back(h);
  }
  for (const auto& [key, reasons] :
       {std::pair<const char*, const std::map<std::string, std::size_t>*>{"refusals", &s.refusals},
        {"errors", &s.errors}}) {
    j[key] = nlohmann::ordered_json::array();
    for (const auto& [reason, n] : by_count(*reasons)) {
      j[key].push_back({{"reason", reason}, {"steps", n}});
    }
  }
  j["skipped"] = report.skipped;
  return j.dump(2) + "\n";
}

}  // namespace

void add_shadow_report(CLI::App& app, Common&) {
  struct Options {
    std::vector<std::string> logs;
    std::string format = "text";
    bool lenient = false;
  };
  auto opt = std::make_shared<Options>();
  auto* sub = app.add_subcommand("shadow-report",
                                 "Summarize shadow-mode logs: steps, predicted savings, refusals");
  sub->footer(
      "Reads the lines srun wrote in shadow mode (the plugin's shadow_log; docs/spank.md,\n"
      "\"Shadow mode\") and summarizes the period they cover: steps per verdict (would-apply,\n"
      "would-refuse, error), the predicted saving over Slurm's order of the steps srun planned\n"
      "(min, median, p90, max: nearest rank; and a histogram), and the refusals and errors by\n"
      "reason. A malformed line is refused (exit 1) naming file:line; --lenient skips and counts\n"
      "it instead (a log an interrupted srun or another tool wrote into). Blank lines are "
      "ignored.\n"
      "Exit codes: 0 ok, 1 bad input, 2 usage.");
  sub->add_option("LOG", opt->logs, "Shadow logs (several: one period split over rotated files)")
      ->required();
  sub->add_option("--of", opt->format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  sub->add_flag("--lenient", opt->lenient, "Skip and count malformed lines instead of failing");
  sub->callback([opt] {
    const Report report = read_logs(opt->logs, opt->lenient);
    const Summary s = summarize(report);
    write_output("", opt->format == "json" ? to_json(report, s) : to_text(report, s));
  });
}

}  // namespace topoaware::cli
