// `topo-aware calibrate`: the cost model against a site's own nccl-tests runs
// (scripts/calibrate.sh makes them; docs/calibration.md, "Correct the model with your runs").
//
// Each run (one nccl-tests invocation: its ranks' hosts from the "Rank N ... on HOST" lines, its
// table, NCCL's INFO lines) is modeled on the same hosts in the same rank order: the collective
// of each size the run measured, through the cost model's public API (make_instance, evaluate).
// Measured and modeled times are fitted alike (nccl_tests_log.h fit(): a latency and a
// bandwidth, and the plateau bus bandwidth), so their ratio compares like with like.
//
//   calibrate RESULTS...           fits one factor per (algorithm the model runs, tier the group
//                                  reaches): measured / modeled plateau bus bandwidth and fitted
//                                  latency, geometric means over the runs; writes the
//                                  calibration file (launch/calibration_file.h).
//   calibrate --check RESULTS...   per run, measured against modeled (with --calibration: the
//                                  corrected model), NCCL's algorithm against the model's, and
//                                  per case run in several host orders whether the model orders
//                                  them as measured; one verdict line. Exit 0 when the model
//                                  ranks every case as measured and every ratio is within
//                                  0.75-1.25, else 4.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "cli.h"
#include "text_table.h"
#include "topoaware/launch/calibration_file.h"
#include "topoaware/launch/config.h"
#include "topoaware/launch/inputs.h"
#include "topoaware/launch/nccl_tests_log.h"
#include "topoaware/mapper/busbw_model.h"
#include "topoaware/mapper/calibration.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/nccl_model.h"
#include "topoaware/mapper/request.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"
#include "topoaware/topology/paths.h"
#include "topoaware/topology/sources.h"

namespace topoaware::cli {
namespace {

namespace nt = launch::nccltests;
using mapper::Tier;

// Measured busbw differences under this share are run-to-run noise (nccl-tests repeats vary by a
// few percent): such a pair of host orders is not counted for or against the model.
constexpr double kOrderNoise = 0.05;
// --check's band, the one docs/calibration.md holds published figures to.
constexpr double kBandLow = 0.75;
constexpr double kBandHigh = 1.25;
// Exit code of --check when the model disagrees with the measurements.
constexpr int kDisagrees = 4;

struct CalibrateOptions {
  std::vector<std::string> results;
  bool check = false;
  std::string fabric;
  std::string config;
  std::string node_type;
  int gpus_per_node = 0;
  double nic_gbps = 50;
  std::string calibration;
  std::string nccl_version;
  std::string test;  // what the runs ran where their logs do not say
  std::string format = "table";
  std::string output;
};

// One run as calibrate uses it.
struct Case {
  nt::Run run;
  std::string file;
  std::map<std::string, std::string> header;  // scripts/calibrate.sh's "# topo-aware-calibrate"
  std::string order;                          // header order=, else the hosts in rank order
  std::vector<std::string> rank_hosts;        // per rank
  std::vector<std::string> hosts;             // distinct, first appearance
  int gpus_per_node = 0;
  mapper::busbw::Collective collective = mapper::busbw::Collective::kAllReduce;
  nt::Fit measured;
  nt::Fit modeled;     // the model as it is
  nt::Fit corrected;   // with --calibration (check), else = modeled
  std::string nccl_algo;   // what NCCL's TUNING lines say it ran at the plateau, else empty
  std::string model_algo;  // what the model runs at the largest size
  std::size_t cls = 0;
  Tier tier = Tier::kNvlink;
  std::string skipped;  // why it is left out
  bool hosts_assumed = false;  // the log named no hosts: --gpus-per-node's block order
  std::string label() const {
    std::string s = std::to_string(hosts.size()) + "n x " + std::to_string(gpus_per_node) + "g " +
                    nt::to_string(run.test);
    if (header.count("order")) s += " " + header.at("order");
    return s;
  }
};

// "# topo-aware-calibrate case=2n4g nodes=2 ... order=plan ..." -> its keys.
std::map<std::string, std::string> calibrate_header(const std::string& text) {
  std::map<std::string, std::string> out;
  const std::string tag = "# topo-aware-calibrate ";
  const std::size_t at = text.find(tag);
  if (at == std::string::npos) return out;
  const std::size_t end = text.find('\n', at);
  std::istringstream words(text.substr(at + tag.size(), end == std::string::npos
                                                            ? std::string::npos
                                                            : end - at - tag.size()));
  std::string w;
  while (words >> w) {
    const std::size_t eq = w.find('=');
    if (eq != std::string::npos && eq > 0) out[w.substr(0, eq)] = w.substr(eq + 1);
  }
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw topology::Error(topology::ErrorCode::kNotFound, path, "cannot read it");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The result files: each file named, and every file of a named folder that holds an nccl-tests
// table (scripts/calibrate.sh's manifest and notes are left out).
std::vector<std::pair<std::string, std::string>> result_files(const std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& a : args) {
    std::error_code ec;
    if (std::filesystem::is_directory(a, ec)) {
      std::vector<std::string> names;
      for (const auto& e : std::filesystem::directory_iterator(a, ec)) {
        if (e.is_regular_file(ec)) names.push_back(e.path().string());
      }
      std::sort(names.begin(), names.end());
      for (const auto& n : names) {
        std::string text = read_text(n);
        if (text.find("busbw") == std::string::npos) continue;
        out.emplace_back(n, std::move(text));
      }
      continue;
    }
    if (!std::filesystem::exists(a, ec)) {
      throw topology::Error(topology::ErrorCode::kNotFound, a, "no such result file or folder");
    }
    out.emplace_back(a, read_text(a));
  }
  if (out.empty()) throw UsageError("no nccl-tests result among RESULTS");
  return out;
}

// A plain node's GPUs by the name nccl-tests prints for them: NVLink per GPU is NCCL's per-lane
// figure for the compute capability times the lanes (docs/calibration.md, "How a case is
// computed"), which also picks NCCL's tables. Unknown names are taken for H100s, and the output
// says which was used.
struct Generation {
  const char* name;
  int sm;
  int lanes;
  double nvlink_gbps() const { return lanes * topology::nvlink_lane_bandwidth(sm); }
};
Generation generation_of(const std::string& gpu) {
  if (gpu.find("A100") != std::string::npos || gpu.find("A800") != std::string::npos) {
    return {"A100", 80, 12};
  }
  if (gpu.find("B200") != std::string::npos || gpu.find("B100") != std::string::npos ||
      gpu.find("B300") != std::string::npos) {
    return {"B200", 100, 18};
  }
  return {"H100", 90, 18};
}

// What the hardware is: the fabric and a node model per host.
class Hardware {
 public:
  Hardware(const CalibrateOptions& o, const std::vector<std::string>& all_hosts, int gpus,
           const std::map<std::string, std::string>& gpu_names) {
    launch::Config site;
    if (!o.config.empty()) site = launch::parse_plugstack({"config=" + o.config});
    if (!o.fabric.empty()) site.fabric = o.fabric;
    if (!o.node_type.empty()) {
      store_.push_back(
          std::make_unique<topology::NodeTopology>(topology::load_node_file(o.node_type)));
      plain_ = store_.back().get();
      gpus = std::max(gpus, static_cast<int>(plain_->gpus().size()));
    }
    if (!site.fabric.empty()) {
      fabric_ = launch::load_configured_fabric(site);
      for (const auto& h : all_hosts) {
        if (fabric_.find_host(h) < 0) {
          throw topology::Error(topology::ErrorCode::kBadInput, site.fabric,
                                "host " + h + " of the results is not in the fabric");
        }
      }
      if (plain_ == nullptr && o.gpus_per_node <= 0) {
        launch::NodeModels models = launch::load_nodes(site, fabric_, all_hosts);
        for (std::size_t i = 0; i < all_hosts.size(); ++i) by_host_[all_hosts[i]] = models.per_host[i];
        for (auto& [source, node] : models.by_source) store_.push_back(std::move(node));
      }
    } else {
      // No fabric: the runs' hosts under one non-blocking, rail-optimized leaf (a scalable
      // unit), NICs at --nic-gbps; said in the output.
      mapper::FatTreeSpec spec;
      spec.hosts = static_cast<int>(all_hosts.size());
      spec.hosts_per_leaf = spec.hosts;
      spec.gpus_per_host = gpus;
      spec.ports_per_host = gpus;
      spec.port_gbps = o.nic_gbps;
      spec.rail_optimized = true;
      fabric_ = mapper::make_fat_tree(spec);
      fabric_.host_index.clear();
      for (std::size_t i = 0; i < all_hosts.size(); ++i) {
        fabric_.hosts[i].name = all_hosts[i];
        fabric_.host_index[all_hosts[i]] = static_cast<std::uint32_t>(i);
      }
      assumed_ = "no fabric given: the hosts under one non-blocking rail-optimized leaf, " +
                 figure(o.nic_gbps) + " GB/s NICs";
    }
    if (plain_ == nullptr && by_host_.empty()) {
      // Plain nodes, each host's GPUs by the name its rank lines give them.
      const int g = o.gpus_per_node > 0 ? o.gpus_per_node : gpus;
      std::map<std::string, const topology::NodeTopology*> by_generation;
      for (const auto& h : all_hosts) {
        auto named = gpu_names.find(h);
        const std::string gpu = named == gpu_names.end() ? std::string() : named->second;
        const Generation gen = generation_of(gpu);
        auto [it, fresh] = by_generation.emplace(gen.name, nullptr);
        if (fresh) {
          store_.push_back(std::make_unique<topology::NodeTopology>(
              mapper::make_node(g, g, gen.nvlink_gbps(), o.nic_gbps, gen.sm)));
          it->second = store_.back().get();
          assumed_ += std::string(assumed_.empty() ? "" : "; ") + "plain nodes of " +
                      std::to_string(g) + " " + gen.name + " GPUs on an NVSwitch (" +
                      figure(gen.nvlink_gbps()) + " GB/s of NVLink each" +
                      (gpu.empty() ? std::string(", no GPU named in the runs")
                                   : ", from the runs' \"" + gpu + "\"") +
                      "), a " + figure(o.nic_gbps) + " GB/s NIC each";
        }
        by_host_[h] = it->second;
      }
    }
  }
  const topology::Fabric& fabric() const { return fabric_; }
  const topology::NodeTopology* node(const std::string& host) const {
    if (plain_) return plain_;
    return by_host_.at(host);
  }
  const std::string& assumed() const { return assumed_; }

 private:
  topology::Fabric fabric_;
  std::vector<std::unique_ptr<topology::NodeTopology>> store_;
  const topology::NodeTopology* plain_ = nullptr;
  std::map<std::string, const topology::NodeTopology*> by_host_;
  std::string assumed_;
};

mapper::nccl::Version version_of(const CalibrateOptions& o, const nt::Run& run) {
  const std::string& text = !o.nccl_version.empty() ? o.nccl_version : run.nccl_version;
  if (text.empty()) return mapper::nccl::kNewest;
  mapper::nccl::Version v;
  try {
    v = mapper::nccl::parse_version(text);
  } catch (const mapper::Error&) {
    // A release newer than the model's rules is modeled by the newest; older ones are refused.
    const auto dot = text.find('.');
    if (dot != std::string::npos && text.substr(0, dot) == "2" &&
        std::atoi(text.c_str() + dot + 1) > mapper::nccl::kNewest.minor) {
      return mapper::nccl::kNewest;
    }
    throw;
  }
  return v;
}

// How NCCL was set up for a run, from its log: its release, NCCL_ALGO, CollNet.
mapper::busbw::NcclSetup setup_of(const CalibrateOptions& o, const nt::Run& run) {
  mapper::busbw::NcclSetup setup;
  setup.version = version_of(o, run);
  auto env = run.nccl_env.find("NCCL_ALGO");
  if (env != run.nccl_env.end()) {
    const int cls = mapper::calibration_class(env->second);
    if (cls >= 0 && static_cast<std::size_t>(cls) < mapper::kP2pClass) {
      setup.algo = static_cast<mapper::nccl::Algo>(cls);
    }
  }
  auto coll = run.nccl_env.find("NCCL_COLLNET_ENABLE");
  setup.collnet = coll != run.nccl_env.end() && coll->second == "1";
  return setup;
}

// The modeled run: the same collective over the same ranks (busbw_model.h RankedRun) at each size
// the run measured, as nccl-tests rows (time and bus bandwidth), fitted like the measurement;
// NCCL's algorithm and the tier at the largest size.
struct Modeled {
  nt::Fit fit;
  std::string algo;
  Tier tier = Tier::kNvlink;
};

Modeled model_run(const mapper::busbw::RankedRun& ranked, const Case& c,
                  const mapper::busbw::NcclSetup& setup) {
  nt::Run rows = c.run;
  rows.calls.clear();
  Modeled out;
  double largest = 0;
  for (nt::Row& row : rows.rows) {
    if (row.bytes <= 0) continue;
    const mapper::busbw::ModeledBusbw m = ranked.model(c.collective, row.bytes, setup);
    const double us = m.seconds * 1e6;
    row.oop_time_us = row.ip_time_us = us;
    row.oop_algbw = row.ip_algbw = us > 0 ? row.bytes / us / 1e3 : 0;
    row.oop_busbw = row.ip_busbw = m.gbps;
    if (row.bytes >= largest) {
      largest = row.bytes;
      out.algo = m.nccl.empty() ? "p2p" : m.nccl;
      out.tier = m.tier;
    }
  }
  out.fit = nt::fit(rows);
  return out;
}

// NCCL's algorithm at the plateau (calls of the run's collective of at least a quarter of the
// largest size), by count; empty for alltoall and sendrecv, which NCCL does not tune. Lines
// before 2.23 name no function: they count for the run's.
std::string nccl_algorithm(const nt::Run& run) {
  const char* func = nullptr;
  switch (run.test) {
    case nt::Test::kAllReduce:
      func = "AllReduce";
      break;
    case nt::Test::kReduceScatter:
      func = "ReduceScatter";
      break;
    case nt::Test::kAllGather:
      func = "AllGather";
      break;
    case nt::Test::kAllToAll:
    case nt::Test::kSendRecv:
    case nt::Test::kOther:
      return {};
  }
  auto ours = [&](const nt::TunedCall& call) { return call.func.empty() || call.func == func; };
  double largest = 0;
  for (const auto& call : run.calls) {
    if (ours(call)) largest = std::max(largest, call.bytes);
  }
  std::map<std::string, int> votes;
  for (const auto& call : run.calls) {
    if (ours(call) && call.bytes >= largest / 4 && !call.algo.empty()) ++votes[call.algo];
  }
  std::string best;
  int most = 0;
  for (const auto& [a, v] : votes) {
    if (v > most) {
      most = v;
      best = a;
    }
  }
  return best;
}

std::vector<Case> load_cases(const CalibrateOptions& o) {
  std::vector<Case> cases;
  for (auto& [file, text] : result_files(o.results)) {
    const auto header = calibrate_header(text);
    for (nt::Run& run : nt::parse(text, file)) {
      Case c;
      c.file = file;
      c.header = header;
      c.run = std::move(run);
      // What ran: the log's name, else scripts/calibrate.sh's header, else --test.
      if (c.run.test == nt::Test::kOther && c.header.count("test")) {
        c.run.test = nt::test_from_name(c.header.at("test"));
      }
      if (c.run.test == nt::Test::kOther && !o.test.empty()) {
        c.run.test = nt::test_from_name(o.test);
      }
      std::vector<std::pair<int, std::string>> by_rank;
      for (const auto& r : c.run.ranks) by_rank.emplace_back(r.rank, r.host);
      std::sort(by_rank.begin(), by_rank.end());
      bool whole = static_cast<int>(by_rank.size()) == c.run.nranks;
      for (std::size_t i = 0; whole && i < by_rank.size(); ++i) {
        whole = by_rank[i].first == static_cast<int>(i) && !by_rank[i].second.empty();
      }
      if (whole) {
        for (const auto& [rank, host] : by_rank) c.rank_hosts.push_back(host);
      } else if (c.run.nranks > 1) {
        // Rank lines elided (published logs often keep a few): the hosts from the header, else
        // as many as the ranks fill at --gpus-per-node, each host's ranks in a row (block order).
        std::vector<std::string> named;
        if (c.header.count("hosts")) {
          std::istringstream list(c.header.at("hosts"));
          std::string h;
          while (std::getline(list, h, ',')) {
            if (!h.empty()) named.push_back(h);
          }
        }
        int per = 0;
        if (!named.empty() && c.run.nranks % static_cast<int>(named.size()) == 0) {
          per = c.run.nranks / static_cast<int>(named.size());
        } else if (named.empty() && o.fabric.empty() && o.config.empty() && o.gpus_per_node > 0 &&
                   c.run.nranks % o.gpus_per_node == 0) {
          per = o.gpus_per_node;
          for (int h = 0; h < c.run.nranks / per; ++h) {
            named.push_back("host" + std::to_string(h + 1));
          }
          c.hosts_assumed = true;
        }
        if (per > 0) {
          for (int r = 0; r < c.run.nranks; ++r) {
            c.rank_hosts.push_back(named[static_cast<std::size_t>(r / per)]);
          }
        }
      }
      std::set<std::string> seen;
      for (const auto& h : c.rank_hosts) {
        if (seen.insert(h).second) c.hosts.push_back(h);
      }
      if (c.run.test == nt::Test::kOther) {
        c.skipped = "not one of all_reduce, reduce_scatter, all_gather, alltoall, sendrecv";
      } else if (c.rank_hosts.size() < 2) {
        c.skipped =
            "its \"Rank N ... on HOST\" lines do not name every rank's host (give --gpus-per-node "
            "to take them in block order)";
      } else if (c.run.rows.size() < 2) {
        c.skipped = "fewer than two sizes measured";
      }
      if (c.skipped.empty()) {
        std::map<std::string, int> count;
        for (const auto& h : c.rank_hosts) ++count[h];
        int most = 0, least = 1 << 30;
        for (const auto& [h, k] : count) {
          most = std::max(most, k);
          least = std::min(least, k);
        }
        if (most != least) c.skipped = "hosts run different numbers of ranks";
        c.gpus_per_node = most;
      }
      c.collective = nt::model_collective(c.run.test);
      c.order = c.header.count("order") ? c.header.at("order") : std::string();
      if (c.order.empty()) {
        for (const auto& h : c.hosts) c.order += (c.order.empty() ? "" : ",") + h;
      }
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", r);
  return buf;
}

std::string now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Models every usable case (the model as it is, and corrected by `calibration`).
void model_cases(std::vector<Case>& cases, const CalibrateOptions& o,
                 const mapper::Calibration& calibration, std::string* assumed) {
  std::set<std::string> hosts;
  int gpus = 1;
  std::map<std::string, std::string> gpu_names;  // per host, as its rank lines name its GPUs
  for (const Case& c : cases) {
    if (!c.skipped.empty()) continue;
    hosts.insert(c.hosts.begin(), c.hosts.end());
    gpus = std::max(gpus, c.gpus_per_node);
    std::string any;
    for (const auto& r : c.run.ranks) {
      if (r.gpu.empty()) continue;
      gpu_names.emplace(r.host, r.gpu);
      any = r.gpu;
    }
    // Hosts taken in block order (no rank lines name them) take the run's GPUs.
    for (const auto& h : c.hosts) {
      if (!any.empty()) gpu_names.emplace(h, any);
    }
  }
  if (hosts.empty()) return;
  const Hardware hw(o, std::vector<std::string>(hosts.begin(), hosts.end()), gpus, gpu_names);
  *assumed = hw.assumed();
  for (const Case& c : cases) {
    if (c.skipped.empty() && c.hosts_assumed) {
      *assumed += "; runs whose logs name no hosts: " + std::to_string(o.gpus_per_node) +
                  " ranks a host in block order (--gpus-per-node)";
      break;
    }
  }
  for (Case& c : cases) {
    if (!c.skipped.empty()) continue;
    c.measured = nt::fit(c.run);
    const mapper::busbw::RankedRun ranked(hw.fabric(), c.rank_hosts,
                                          [&](const std::string& h) { return hw.node(h); });
    mapper::busbw::NcclSetup setup = setup_of(o, c.run);
    const Modeled m = model_run(ranked, c, setup);
    c.modeled = m.fit;
    c.model_algo = m.algo;
    c.tier = m.tier;
    setup.calibration = calibration;
    c.corrected = calibration.measured() ? model_run(ranked, c, setup).fit : m.fit;
    c.nccl_algo = nccl_algorithm(c.run);
    const int cls = mapper::calibration_class(c.model_algo);
    if (cls < 0) {
      c.skipped = "the model runs \"" + c.model_algo + "\" (more than one algorithm)";
      continue;
    }
    c.cls = static_cast<std::size_t>(cls);
    if (c.measured.plateau_busbw_GBps <= 0 || c.modeled.plateau_busbw_GBps <= 0) {
      c.skipped = "no bus bandwidth at its plateau";
    }
  }
}

// --- calibrate: the fit -------------------------------------------------------------------------

void run_fit(const CalibrateOptions& o) {
  std::vector<Case> cases = load_cases(o);
  std::string assumed;
  model_cases(cases, o, mapper::Calibration{}, &assumed);
  std::map<std::pair<std::size_t, Tier>, std::vector<const Case*>> groups;
  for (const Case& c : cases) {
    if (c.skipped.empty()) groups[{c.cls, c.tier}].push_back(&c);
  }
  if (groups.empty()) {
    std::string why;
    for (const Case& c : cases) why += "\n  " + c.file + ": " + c.skipped;
    throw topology::Error(topology::ErrorCode::kBadInput, "calibrate",
                          "no run can be compared with the model:" + why);
  }
  mapper::Calibration cal;
  launch::CalibrationMeta meta;
  meta.created = now_iso();
  std::set<std::string> versions;
  int used = 0;
  for (const Case& c : cases) {
    if (!c.skipped.empty()) continue;
    ++used;
    if (!c.run.nccl_version.empty()) versions.insert(c.run.nccl_version);
  }
  meta.runs = used;
  if (versions.size() == 1) meta.nccl = *versions.begin();
  if (!assumed.empty()) meta.comments.push_back("hardware as modeled: " + assumed);
  nlohmann::json jentries = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {
      {"algorithm", "tier", "runs", "bandwidth", "latency", "measured GB/s", "modeled GB/s"}};
  for (const auto& [key, list] : groups) {
    std::vector<double> bw, lat;
    double measured = 0, modeled = 0;
    std::string names;
    for (const Case* c : list) {
      bw.push_back(c->measured.plateau_busbw_GBps / c->modeled.plateau_busbw_GBps);
      if (c->measured.latency_us > 0 && c->modeled.latency_us > 0) {
        lat.push_back(c->measured.latency_us / c->modeled.latency_us);
      }
      measured += c->measured.plateau_busbw_GBps;
      modeled += c->modeled.plateau_busbw_GBps;
      names += (names.empty() ? "" : ", ") + c->label();
    }
    mapper::Calibration::Entry& e = cal.at(key.first, key.second);
    e.cases = static_cast<int>(list.size());
    e.bandwidth = std::clamp(geomean(bw), 0.01, 100.0);
    e.latency = lat.empty() ? 1.0 : std::clamp(geomean(lat), 0.01, 100.0);
    meta.entry_comments.push_back("from " + names);
    const std::string cls(mapper::calibration_class_name(key.first));
    const std::string tier(mapper::to_string(key.second));
    const double k = static_cast<double>(list.size());
    rows.push_back({cls, tier, std::to_string(list.size()), ratio_text(e.bandwidth),
                    ratio_text(e.latency), figure(measured / k), figure(modeled / k)});
    jentries.push_back({{"algorithm", cls},
                        {"tier", tier},
                        {"cases", e.cases},
                        {"bandwidth", e.bandwidth},
                        {"latency", e.latency}});
  }
  const std::string file = launch::write_calibration(cal, meta);
  if (o.format == "json") {
    nlohmann::json j;
    j["entries"] = jentries;
    j["runs"] = used;
    j["skipped"] = nlohmann::json::array();
    for (const Case& c : cases) {
      if (!c.skipped.empty()) j["skipped"].push_back({{"file", c.file}, {"why", c.skipped}});
    }
    if (!assumed.empty()) j["assumptions"] = assumed;
    if (!o.output.empty()) write_output(o.output, file);
    write_output("", j.dump(2) + "\n");
    return;
  }
  if (o.output.empty() || o.output == "-") {
    write_output("", file);
    return;
  }
  write_output(o.output, file);
  std::string text = "topo-aware calibrate: " + std::to_string(used) + " runs fitted into " +
                     std::to_string(groups.size()) + " entries, written to " + o.output + "\n" +
                     text_table(rows);
  for (const Case& c : cases) {
    if (!c.skipped.empty()) text += "left out " + c.file + ": " + c.skipped + "\n";
  }
  if (!assumed.empty()) text += "figures assume: " + assumed + "\n";
  write_output("", text);
}

// --- calibrate --check -------------------------------------------------------------------------

void run_check(const CalibrateOptions& o) {
  std::vector<Case> cases = load_cases(o);
  mapper::Calibration cal;
  if (!o.calibration.empty()) cal = launch::read_calibration(o.calibration);
  std::string assumed;
  model_cases(cases, o, cal, &assumed);

  // Per run.
  std::vector<std::vector<std::string>> rows = {{"run", "measured GB/s", "modeled GB/s", "model/measured",
                                                 "NCCL ran", "model runs", "tier", "file"}};
  nlohmann::json jruns = nlohmann::json::array();
  double worst = 1;
  const Case* worst_case = nullptr;
  int algo_same = 0, algo_known = 0, outside = 0;
  for (const Case& c : cases) {
    if (!c.skipped.empty()) continue;
    const double ratio = c.corrected.plateau_busbw_GBps / c.measured.plateau_busbw_GBps;
    if (std::max(ratio, 1 / ratio) > std::max(worst, 1 / worst)) {
      worst = ratio;
      worst_case = &c;
    }
    if (ratio < kBandLow || ratio > kBandHigh) ++outside;
    std::string same;
    if (!c.nccl_algo.empty()) {
      ++algo_known;
      const bool agree = mapper::calibration_class(c.nccl_algo) ==
                         mapper::calibration_class(c.model_algo);
      algo_same += agree ? 1 : 0;
    }
    rows.push_back({c.label(), figure(c.measured.plateau_busbw_GBps),
                    figure(c.corrected.plateau_busbw_GBps), ratio_text(ratio),
                    c.nccl_algo.empty() ? "-" : c.nccl_algo, c.model_algo,
                    std::string(mapper::to_string(c.tier)),
                    std::filesystem::path(c.file).filename().string()});
    jruns.push_back({{"file", c.file},
                     {"first_line", c.run.first_line},
                     {"test", nt::to_string(c.run.test)},
                     {"nodes", c.hosts.size()},
                     {"gpus_per_node", c.gpus_per_node},
                     {"order", c.order},
                     {"measured_busbw_gbps", c.measured.plateau_busbw_GBps},
                     {"modeled_busbw_gbps", c.corrected.plateau_busbw_GBps},
                     {"uncalibrated_busbw_gbps", c.modeled.plateau_busbw_GBps},
                     {"ratio", ratio},
                     {"measured_latency_us", c.measured.latency_us},
                     {"modeled_latency_us", c.corrected.latency_us},
                     {"nccl_algorithm", c.nccl_algo},
                     {"model_algorithm", c.model_algo},
                     {"tier", std::string(mapper::to_string(c.tier))}});
  }
  if (jruns.empty()) {
    std::string why;
    for (const Case& c : cases) why += "\n  " + c.file + ": " + c.skipped;
    throw topology::Error(topology::ErrorCode::kBadInput, "calibrate --check",
                          "no run can be compared with the model:" + why);
  }

  // Per case run in several host orders: does the model order them as measured?
  std::map<std::tuple<int, std::size_t, int, double>, std::vector<const Case*>> by_case;
  for (const Case& c : cases) {
    if (!c.skipped.empty()) continue;
    double largest = 0;
    for (const auto& r : c.run.rows) largest = std::max(largest, r.bytes);
    by_case[{static_cast<int>(c.run.test), c.hosts.size(), c.gpus_per_node, largest}].push_back(&c);
  }
  std::vector<std::vector<std::string>> order_rows = {
      {"case", "orders", "measured best", "modeled best", "ranked as measured"}};
  nlohmann::json jcases = nlohmann::json::array();
  int ranked = 0, compared = 0;
  for (const auto& [key, list] : by_case) {
    std::set<std::string> orders;
    for (const Case* c : list) orders.insert(c->order);
    if (orders.size() < 2) continue;
    ++compared;
    int pairs = 0, agree = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
      for (std::size_t j = i + 1; j < list.size(); ++j) {
        const double mi = list[i]->measured.plateau_busbw_GBps;
        const double mj = list[j]->measured.plateau_busbw_GBps;
        if (list[i]->order == list[j]->order) continue;
        if (std::abs(mi - mj) <= kOrderNoise * std::max(mi, mj)) continue;
        ++pairs;
        const double pi = list[i]->corrected.plateau_busbw_GBps;
        const double pj = list[j]->corrected.plateau_busbw_GBps;
        if ((mi > mj) == (pi > pj) && std::abs(pi - pj) > 1e-9 * std::max(pi, pj)) ++agree;
      }
    }
    const bool ok = agree == pairs;
    ranked += ok ? 1 : 0;
    // By a named reference: clang before 16 cannot capture a structured binding (P1091).
    auto best = [&same = list](bool measured) {
      const Case* b = same.front();
      for (const Case* c : same) {
        const double v = measured ? c->measured.plateau_busbw_GBps
                                  : c->corrected.plateau_busbw_GBps;
        const double bv = measured ? b->measured.plateau_busbw_GBps
                                   : b->corrected.plateau_busbw_GBps;
        if (v > bv) b = c;
      }
      return b->order;
    };
    const Case& first = *list.front();
    const std::string name = std::to_string(first.hosts.size()) + "n x " +
                             std::to_string(first.gpus_per_node) + "g " +
                             nt::to_string(first.run.test);
    std::string order_list;
    for (const auto& x : orders) order_list += (order_list.empty() ? "" : ",") + x;
    order_rows.push_back({name, order_list, best(true), best(false),
                          pairs == 0 ? "yes (measured alike)"
                                     : (ok ? "yes" : "no") + std::string(" (") +
                                           std::to_string(agree) + " of " +
                                           std::to_string(pairs) + " pairs)"});
    jcases.push_back({{"case", name},
                      {"orders", std::vector<std::string>(orders.begin(), orders.end())},
                      {"pairs", pairs},
                      {"pairs_agreeing", agree},
                      {"ranked_as_measured", ok},
                      {"measured_best", best(true)},
                      {"modeled_best", best(false)}});
  }

  char worst_text[256] = "";
  if (worst_case) {
    std::snprintf(worst_text, sizeof worst_text, "worst ratio %.2f at %zu node%s x %d GPUs, %s",
                  worst, worst_case->hosts.size(), worst_case->hosts.size() == 1 ? "" : "s",
                  worst_case->gpus_per_node, nt::to_string(worst_case->run.test));
  }
  std::string verdict =
      compared > 0 ? "the model ranks orders as measured in " + std::to_string(ranked) + " of " +
                         std::to_string(compared) + " cases; " + worst_text
                   : std::string("no case ran in two host orders or more, so the ranking is not "
                                 "checked; ") +
                         worst_text;
  if (!o.calibration.empty()) verdict += " (model corrected by " + o.calibration + ")";
  const bool agrees = ranked == compared && outside == 0;

  if (o.format == "json") {
    nlohmann::json j;
    j["runs"] = jruns;
    j["cases"] = jcases;
    j["verdict"] = verdict;
    j["agrees"] = agrees;
    j["ratio_band"] = {kBandLow, kBandHigh};
    j["outside_band"] = outside;
    j["algorithm_agrees"] = algo_same;
    j["algorithm_known"] = algo_known;
    if (!o.calibration.empty()) j["calibration"] = o.calibration;
    if (!assumed.empty()) j["assumptions"] = assumed;
    j["skipped"] = nlohmann::json::array();
    for (const Case& c : cases) {
      if (!c.skipped.empty()) j["skipped"].push_back({{"file", c.file}, {"why", c.skipped}});
    }
    write_output(o.output, j.dump(2) + "\n");
  } else {
    std::string text = "topo-aware calibrate --check: " + std::to_string(jruns.size()) +
                       " runs, measured against modeled at the plateau (bus bandwidth)\n" +
                       text_table(rows);
    if (algo_known > 0) {
      text += "NCCL's algorithm is the model's in " + std::to_string(algo_same) + " of " +
              std::to_string(algo_known) + " runs whose log has NCCL's TUNING lines\n";
    } else {
      text += "no run's log has NCCL's TUNING lines (NCCL_DEBUG_SUBSYS=TUNING): NCCL's "
              "algorithm is not compared\n";
    }
    if (compared > 0) text += "\nhost orders:\n" + text_table(order_rows);
    for (const Case& c : cases) {
      if (!c.skipped.empty()) text += "left out " + c.file + ": " + c.skipped + "\n";
    }
    if (!assumed.empty()) text += "figures assume: " + assumed + "\n";
    text += "verdict: " + verdict + "\n";
    write_output(o.output, text);
  }
  if (!agrees) throw Exit{kDisagrees};
}

}  // namespace

void add_calibrate(CLI::App& app, Common& common) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* sub = app.add_subcommand(
      "calibrate",
      "Fit the cost model to this site's nccl-tests runs (scripts/calibrate.sh), or check it "
      "against them (--check)");
  sub->add_option("RESULTS", o->results,
                  "nccl-tests outputs (with NCCL_DEBUG=INFO lines where recorded): files, or "
                  "folders of them (scripts/calibrate.sh's out folder)")
      ->required();
  sub->add_flag("--check", o->check,
                "Compare instead of fitting: per run measured vs modeled, NCCL's algorithm vs the "
                "model's, and whether the model orders each case's host orders as measured; exit "
                "4 when it does not, or a ratio leaves 0.75-1.25");
  sub->add_option("--fabric", o->fabric,
                  "The cluster's fabric file (default: the --config's; without either, the runs' "
                  "hosts under one non-blocking leaf)");
  sub->add_option("--config", o->config,
                  "The SPANK plugin's config: its fabric and [[node]] captures, as a launch reads "
                  "them");
  sub->add_option("--node-type", o->node_type, "Node capture (hwloc or NCCL XML) of every host");
  sub->add_option("--gpus-per-node", o->gpus_per_node,
                  "GPUs of a plain node model (NVSwitch, a NIC per GPU at --nic-gbps); for "
                  "logs whose rank lines name no hosts, the ranks a host, in block order");
  sub->add_option("--nic-gbps", o->nic_gbps,
                  "NIC speed of plain nodes and of the no-fabric leaf, GB/s (default 50: 400 Gb/s)");
  sub->add_option("--calibration", o->calibration,
                  "With --check: a calibration file to check (the model corrected by it)");
  sub->add_option("--nccl-version", o->nccl_version,
                  "The NCCL release the model follows (default: each run's, from its log)");
  sub->add_option("--test", o->test,
                  "What runs whose logs do not say ran: all_reduce, reduce_scatter, all_gather, "
                  "alltoall or sendrecv (nccl-tests before 2.17 does not print it)")
      ->check(CLI::IsMember({"all_reduce", "reduce_scatter", "all_gather", "alltoall",
                             "sendrecv"}));
  sub->add_option("--of", o->format, "Output: table (default) or json");
  sub->add_option("-o,--output", o->output,
                  "Write the calibration file (or --check's report) here instead of stdout");
  sub->callback([o, &common] {
    (void)common;
    if (o->format != "table" && o->format != "json") {
      throw UsageError("--of " + o->format + ": expected table or json");
    }
    if (!o->calibration.empty() && !o->check) {
      throw UsageError("--calibration is for --check (a fit starts from the model as it is)");
    }
    if (o->nic_gbps <= 0) throw UsageError("--nic-gbps must be positive");
    if (!o->node_type.empty() && o->gpus_per_node > 0) {
      throw UsageError("give --gpus-per-node or --node-type, not both");
    }
    if (o->check) {
      run_check(*o);
    } else {
      run_fit(*o);
    }
  });
}

}  // namespace topoaware::cli
