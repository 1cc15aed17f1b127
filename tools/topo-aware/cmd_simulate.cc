// `topo-aware simulate`: replay a job trace on a fabric under each placer (mapper/simulate.h)
// and report wait, completion time, modeled slowdown, spread, utilisation and fragmentation per
// placer, as a table or JSON. The I/O lives here: reading the trace and the fabric, progress on
// stderr; the replay itself is the mapper's pure replay().
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cli.h"
#include "svg_chart.h"
#include "text_table.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/simulate.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/mapper/trace.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"

namespace topoaware::cli {
namespace {

struct SimulateOptions {
  std::string trace;
  std::string trace_format = "auto";
  std::string fabric;
  std::string synthetic;
  int hosts = 1024;
  int hosts_per_leaf = 16;
  int gpus_per_host = 8;
  std::vector<std::string> placers = {"flat",  "tree",  "tree-switches",
                                      "block", "place", "place-load"};
  double comm_fraction = 0.3;
  double switch_wait_s = 300;
  double load = 1;  // submit times divided by this: the same jobs arrive this many times as fast
  std::string contention = "on";  // other jobs' traffic on a leaf's uplinks
  std::uint64_t seed = 1;
  std::size_t limit = 0;
  std::string format = "text";
  std::string output;
  std::string per_job;  // CSV of every job's outcome under every placer
  std::string svg_dir;  // pictures: CDFs of wait and slowdown, utilisation and fragmentation
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw topology::Error(topology::ErrorCode::kSystem, path, "cannot open for reading");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

topology::Fabric fabric_of(const SimulateOptions& o) {
  if (o.fabric.empty() == o.synthetic.empty()) {
    throw UsageError("give --fabric FILE or --synthetic tree4:1|tree2:1");
  }
  if (!o.fabric.empty()) return topology::load_fabric(o.fabric);
  mapper::FatTreeSpec s;
  s.hosts = o.hosts;
  s.hosts_per_leaf = o.hosts_per_leaf;
  s.gpus_per_host = o.gpus_per_host;
  s.ports_per_host = o.gpus_per_host;
  s.seed = o.seed;
  if (o.synthetic == "tree4:1") {
    s.leaf_oversub = 4;
  } else if (o.synthetic == "tree2:1") {
    s.leaf_oversub = 2;
  } else {
    throw UsageError("--synthetic " + o.synthetic + ": expected tree4:1 or tree2:1");
  }
  if (o.hosts < 1 || o.hosts_per_leaf < 1) {
    throw UsageError("--hosts and --hosts-per-leaf must be at least 1");
  }
  return mapper::make_fat_tree(s);
}

std::string fixed(double x, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// Seconds as people read a wait: s, min or h.
std::string duration(double s) {
  if (s < 120) return fixed(s, 0) + " s";
  if (s < 7200) return fixed(s / 60, 1) + " min";
  return fixed(s / 3600, 1) + " h";
}

struct Result {
  mapper::Placer placer;
  mapper::ReplaySummary summary;
  double wall_s = 0;
};

// What the pictures need of one placer's replay.
struct Curves {
  std::string placer;
  std::vector<double> waits, slowdowns;                      // every job; multi-host jobs
  std::vector<std::pair<double, double>> utilisation, frag;  // over days since the first submit
};

Curves curves_of(mapper::Placer p, const mapper::Replay& r,
                 const std::vector<mapper::TraceJob>& jobs, int gpus_per_host) {
  Curves c;
  c.placer = std::string(mapper::to_string(p));
  for (const mapper::JobOutcome& o : r.jobs) {
    c.waits.push_back(o.start - jobs[o.job].submit);
    if (o.hosts > 1) c.slowdowns.push_back(o.slowdown);
  }
  auto days = [&](double t) { return (t - r.first_submit) / 86400; };
  for (const auto& [t, u] : mapper::utilisation_over_time(r, jobs, gpus_per_host)) {
    c.utilisation.emplace_back(days(t), u);
  }
  for (const auto& [t, f] : r.fragmentation_over_time) c.frag.emplace_back(days(t), f);
  return c;
}

// The four pictures, one line per placer, into `dir` (made if absent).
void write_svgs(const std::string& dir, const std::string& what, const std::vector<Curves>& all) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw topology::Error(topology::ErrorCode::kSystem, dir, "cannot make: " + ec.message());
  // Every chart is drawn as steps, its y from 0 to 1; x from the points.
  Chart wait{.title = "Wait of every job: " + what,
             .x_label = "wait (s, log scale; no wait at the left edge)",
             .y_label = "share of jobs",
             .log_x = true,
             .steps = true,
             .y_hi = 1,
             .series = {}};
  Chart slow{.title = "Modeled slowdown of multi-host jobs: " + what,
             .x_label = "slowdown against the best allocation of an empty cluster",
             .y_label = "share of jobs",
             .steps = true,
             .y_hi = 1,
             .series = {}};
  Chart util{.title = "GPUs held by running jobs: " + what,
             .x_label = "days since the first submit",
             .y_label = "share of the cluster's GPUs",
             .steps = true,
             .y_hi = 1,
             .series = {}};
  Chart frag{.title = "Fragmentation of the free hosts after each start: " + what,
             .x_label = "days since the first submit",
             .y_label = "fragmentation (docs/placement.md)",
             .steps = true,
             .y_hi = 1,
             .series = {}};
  for (const Curves& c : all) {
    wait.series.push_back({c.placer, cdf_points(c.waits)});
    slow.series.push_back({c.placer, cdf_points(c.slowdowns)});
    util.series.push_back({c.placer, c.utilisation});
    frag.series.push_back({c.placer, c.frag});
  }
  const std::filesystem::path d(dir);
  write_output((d / "wait-cdf.svg").string(), svg_chart(wait));
  write_output((d / "slowdown-cdf.svg").string(), svg_chart(slow));
  write_output((d / "utilisation.svg").string(), svg_chart(util));
  write_output((d / "fragmentation.svg").string(), svg_chart(frag));
}

// One line per job and placer, in trace order within a placer.
void write_per_job(std::ostream& out, mapper::Placer placer, const mapper::Replay& r,
                   const std::vector<mapper::TraceJob>& jobs) {
  std::vector<const mapper::JobOutcome*> by_job(jobs.size(), nullptr);
  for (const mapper::JobOutcome& o : r.jobs) by_job[o.job] = &o;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const mapper::JobOutcome* o = by_job[i];
    out << mapper::to_string(placer) << ',' << jobs[i].id << ',' << fixed(jobs[i].submit, 0) << ','
        << jobs[i].gpus << ',';
    if (o == nullptr) {
      out << ",,,,,\n";
      continue;
    }
    out << fixed(o->start, 0) << ',' << fixed(o->end, 0) << ',' << o->hosts << ',' << o->leaves
        << ',' << o->spines << ',' << fixed(o->slowdown, 4) << '\n';
  }
}

std::string render_text(const SimulateOptions& o, const topology::Fabric& f,
                        const mapper::Trace& trace, std::size_t replayed,
                        const std::vector<Result>& results,
                        const std::vector<std::string>& left_out,
                        const mapper::SlowdownModel& model) {
  std::ostringstream out;
  out << "topo-aware simulate: " << replayed << " jobs of " << o.trace << " on " << f.hosts.size()
      << " hosts x " << o.gpus_per_host << " GPUs (" << f.source << "), comm fraction "
      << fixed(o.comm_fraction, 2) << (o.load != 1 ? ", load x" + fixed(o.load, 2) : "")
      << (o.contention == "on" ? "" : ", no contention between jobs") << "\n";
  if (trace.steps_skipped + trace.unfinished_skipped + trace.no_gpu_skipped > 0) {
    out << "skipped: " << trace.steps_skipped << " job steps, " << trace.unfinished_skipped
        << " unfinished jobs, " << trace.no_gpu_skipped << " jobs without GPUs\n";
  }
  if (!results.empty() && results.front().summary.too_large > 0) {
    out << "not replayed: " << results.front().summary.too_large
        << " jobs wanting more GPUs than the cluster has\n";
  }
  std::vector<std::vector<std::string>> rows = {
      {"placer", "jobs", "multi-host", "wait med", "wait p95", "JCT med", "JCT p95", "slowdown med",
       "slowdown p95", "shared", "leaves/job", "spines/job", "locality", "util", "frag", "wall"}};
  for (const Result& r : results) {
    const mapper::ReplaySummary& s = r.summary;
    rows.push_back({std::string(mapper::to_string(r.placer)), std::to_string(s.jobs),
                    std::to_string(s.multi_host), duration(s.wait_median_s), duration(s.wait_p95_s),
                    duration(s.jct_median_s), duration(s.jct_p95_s), fixed(s.slowdown_median, 4),
                    fixed(s.slowdown_p95, 4), std::to_string(s.shared), fixed(s.leaves_mean, 2),
                    fixed(s.spines_mean, 2),
                    fixed(s.locality_mean, 3),
                    fixed(s.utilisation * 100, 1) + "%", fixed(s.fragmentation_mean, 3),
                    fixed(r.wall_s, 1) + " s"});
  }
  out << text_table(rows);
  for (const std::string& why : left_out) out << "placer left out: " << why << "\n";
  for (const Result& r : results) {
    if (r.summary.never_placed > 0) {
      out << "not replayed under " << mapper::to_string(r.placer) << ": "
          << r.summary.never_placed << " jobs no block of the fabric could ever hold\n";
    }
  }
  out << "slowdown: modeled exposed communication of multi-host jobs against the best "
         "allocation of an empty cluster; shared: multi-host jobs charged for other jobs' "
         "traffic on their leaves' uplinks (--contention); leaves/job, spines/job (groups of "
         "the level above the leaves) and locality (the share of a job's hosts in its fullest "
         "leaf): of multi-host jobs; frag: fragmentation of the free hosts after each start, "
         "averaged; "
      << model.evaluations() << " model evaluations, " << model.cache_hits() << " cache hits\n";
  return out.str();
}

std::string render_json(const SimulateOptions& o, const topology::Fabric& f,
                        const mapper::Trace& trace, std::size_t replayed,
                        const std::vector<Result>& results,
                        const std::vector<std::string>& left_out,
                        const mapper::SlowdownModel& model) {
  nlohmann::ordered_json j;
  j["trace"] = o.trace;
  j["jobs"] = replayed;
  j["skipped"] = {{"steps", trace.steps_skipped},
                  {"unfinished", trace.unfinished_skipped},
                  {"no_gpu", trace.no_gpu_skipped}};
  j["fabric"] = f.source;
  j["hosts"] = f.hosts.size();
  j["gpus_per_host"] = o.gpus_per_host;
  j["comm_fraction"] = o.comm_fraction;
  j["switch_wait_s"] = o.switch_wait_s;
  j["load"] = o.load;
  j["contention"] = o.contention == "on";
  j["seed"] = o.seed;
  j["model_evaluations"] = model.evaluations();
  j["model_cache_hits"] = model.cache_hits();
  j["placers_left_out"] = left_out;
  j["placers"] = nlohmann::ordered_json::array();
  for (const Result& r : results) {
    const mapper::ReplaySummary& s = r.summary;
    nlohmann::ordered_json p;
    p["placer"] = mapper::to_string(r.placer);
    p["jobs"] = s.jobs;
    p["multi_host_jobs"] = s.multi_host;
    p["too_large"] = s.too_large;
    p["never_placed"] = s.never_placed;
    p["wait_s"] = {{"median", s.wait_median_s}, {"p95", s.wait_p95_s}};
    p["jct_s"] = {{"median", s.jct_median_s}, {"p95", s.jct_p95_s}};
    p["slowdown_multi_host"] = {{"median", s.slowdown_median}, {"p95", s.slowdown_p95}};
    p["leaves_per_multi_host_job"] = s.leaves_mean;
    p["spines_per_multi_host_job"] = s.spines_mean;
    p["multi_host_jobs_shared"] = s.shared;
    p["locality_multi_host"] = s.locality_mean;
    p["utilisation"] = s.utilisation;
    p["fragmentation_mean"] = s.fragmentation_mean;
    p["makespan_s"] = s.makespan_s;
    p["wall_s"] = r.wall_s;
    j["placers"].push_back(p);
  }
  return j.dump(2) + "\n";
}

void run(const SimulateOptions& o, const Common& common) {
  if (o.gpus_per_host < 1) throw UsageError("--gpus-per-host must be at least 1");
  if (o.comm_fraction < 0 || o.comm_fraction > 1) {
    throw UsageError("--comm-fraction must be in [0, 1]");
  }
  if (!(o.load > 0) || o.load > 1e6) throw UsageError("--load must be above 0 (and at most 1e6)");
  std::vector<mapper::Placer> placers;
  for (const std::string& p : o.placers) {
    try {
      placers.push_back(mapper::placer_from(p));
    } catch (const mapper::Error& e) {
      throw UsageError(std::string("--placers: ") + e.what());
    }
  }
  const std::string text = read_text(o.trace);
  const mapper::TraceFormat format = o.trace_format == "auto"
                                         ? mapper::detect_trace_format(text, o.trace)
                                         : mapper::trace_format_from(o.trace_format);
  mapper::Trace trace = mapper::read_trace(text, o.trace, format);
  if (o.limit > 0 && trace.jobs.size() > o.limit) trace.jobs.resize(o.limit);
  // A fabric is the size it is: --load raises the offered load instead, for a trace too light
  // for it. Run times stay as they were.
  for (mapper::TraceJob& j : trace.jobs) j.submit /= o.load;
  const topology::Fabric fabric = fabric_of(o);
  if (fabric.hosts.empty()) {
    throw topology::Error(topology::ErrorCode::kBadInput, fabric.source, "the fabric has no host");
  }
  const topology::NodeTopology node = mapper::make_node(o.gpus_per_host, o.gpus_per_host, 450, 50);
  mapper::SlowdownModel model(fabric, node, o.gpus_per_host);
  mapper::ReplayOptions ro;
  ro.gpus_per_host = o.gpus_per_host;
  ro.comm_fraction = o.comm_fraction;
  ro.switch_wait_s = o.switch_wait_s;
  ro.contention = o.contention == "on";
  std::vector<Result> results;
  std::vector<std::string> left_out;  // "placer: why" for placers that could not run
  std::vector<Curves> curves;
  std::ostringstream per_job;
  per_job << "placer,job,submit,gpus,start,end,hosts,leaves,spines,slowdown\n";
  for (mapper::Placer p : placers) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!common.quiet) {
      ro.progress = [&](std::size_t done, std::size_t total, double now) {
        const double wall =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "topo-aware: simulate %s: %zu of %zu jobs started, day %.1f, %.0f s\n",
                     std::string(mapper::to_string(p)).c_str(), done, total, now / 86400, wall);
      };
    }
    // A placer this fabric does not suit (topology/block over leaves of unequal sizes) is left
    // out with its reason, as long as another placer runs.
    mapper::Replay r;
    try {
      r = mapper::replay(fabric, node, trace.jobs, p, ro, model);
    } catch (const mapper::Error& e) {
      if (placers.size() == 1) throw;
      left_out.push_back(std::string(mapper::to_string(p)) + ": " + e.what());
      continue;
    }
    Result res{p, mapper::summarize(r, trace.jobs),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
    results.push_back(res);
    if (!o.per_job.empty()) write_per_job(per_job, p, r, trace.jobs);
    if (!o.svg_dir.empty()) curves.push_back(curves_of(p, r, trace.jobs, o.gpus_per_host));
  }
  if (results.empty()) throw mapper::Error(left_out.front());  // every placer was left out
  if (!o.per_job.empty()) write_output(o.per_job, per_job.str());
  if (!o.svg_dir.empty()) {
    const std::string what = std::to_string(trace.jobs.size()) + " jobs on " +
                             std::to_string(fabric.hosts.size()) + " hosts";
    write_svgs(o.svg_dir, what, curves);
  }
  const std::string out =
      o.format == "json"
          ? render_json(o, fabric, trace, trace.jobs.size(), results, left_out, model)
          : render_text(o, fabric, trace, trace.jobs.size(), results, left_out, model);
  write_output(o.output, out);
}

}  // namespace

void add_simulate(CLI::App& app, Common& common) {
  auto o = std::make_shared<SimulateOptions>();
  auto* sub = app.add_subcommand(
      "simulate", "Replay a job trace on a fabric under Slurm's placers and place, and compare");
  sub->footer(
      "One FIFO queue with EASY backfill for every placer; jobs of fewer GPUs than a host are\n"
      "packed best-fit onto shared hosts, larger ones take whole hosts chosen by the placer\n"
      "(flat, tree, tree-switches = tree with --switches=1@--switch-wait, block = Slurm's\n"
      "topology/block over the leaves as base blocks, place, and\n"
      "place-load = place scoring the fabric as the running jobs' traffic leaves it). Each job's\n"
      "run time is stretched by its modeled communication slowdown against the best allocation\n"
      "of an empty cluster, times --comm-fraction; with --contention on, a job that spans leaves\n"
      "is charged for other such jobs' expected traffic on its leaves' uplinks. Layout of a\n"
      "multi-host job: tp = GPUs per host, pp = the largest divisor of its hosts up to 8, dp the\n"
      "rest (docs/placement.md,\n"
      "\"Replaying a busy cluster\"). Nothing is random: the same inputs give the same report;\n"
      "--seed seeds the synthetic fabric.\n"
      "Exit codes: 0 done, 1 bad input, 2 usage.");
  sub->add_option("--trace", o->trace,
                  "Job trace: ElasticFlow CSV, Kalos converted CSV or "
                  "sacct --parsable2 export")
      ->required();
  sub->add_option("--format", o->trace_format, "Format of the trace (default: from its header)")
      ->check(CLI::IsMember({"auto", "elasticflow", "kalos", "sacct"}))
      ->capture_default_str();
  sub->add_option("--fabric", o->fabric,
                  "Fabric file (ibnetdiscover dump, topology.conf, TOML "
                  "or JSON)");
  sub->add_option("--synthetic", o->synthetic,
                  "A synthetic two-tier fat tree instead: tree4:1 or tree2:1 at the leaves");
  sub->add_option("--hosts", o->hosts, "Hosts of the synthetic tree")->capture_default_str();
  sub->add_option("--hosts-per-leaf", o->hosts_per_leaf, "Hosts per leaf of the synthetic tree")
      ->capture_default_str();
  sub->add_option("--gpus-per-host", o->gpus_per_host, "GPUs of every host")->capture_default_str();
  sub->add_option("--placers", o->placers, "Placers to replay, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--comm-fraction", o->comm_fraction,
                  "Share of a job's run time that is communication (scales the slowdown)")
      ->capture_default_str();
  sub->add_option("--switch-wait", o->switch_wait_s,
                  "tree-switches: seconds a job waits for one leaf (--switches=1@T)")
      ->capture_default_str();
  sub->add_option("--load", o->load,
                  "Offered load factor: submit times are divided by it, so the trace's jobs "
                  "arrive this many times as fast (run times unchanged); for a fabric the trace "
                  "is too light for")
      ->capture_default_str();
  sub->add_option("--contention", o->contention,
                  "Charge a job that spans leaves for other such jobs' traffic on its leaves' "
                  "uplinks (their hosts at full rate for --comm-fraction of the time)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the synthetic fabric")->capture_default_str();
  sub->add_option("--limit", o->limit, "Replay only the first N jobs (0: all)");
  sub->add_option("--of", o->format, "Output: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  sub->add_option("-o,--output", o->output, "Write to this file instead of stdout");
  sub->add_option("--per-job", o->per_job,
                  "Also write every job's start, end, hosts, leaves, spines and slowdown per "
                  "placer to this CSV file");
  sub->add_option("--svg", o->svg_dir,
                  "Also draw wait-cdf.svg, slowdown-cdf.svg, utilisation.svg and "
                  "fragmentation.svg into this folder, one line per placer");
  sub->callback([o, &common] { run(*o, common); });
}

}  // namespace topoaware::cli
