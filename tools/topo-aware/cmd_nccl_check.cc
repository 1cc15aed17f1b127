// `topo-aware nccl-check`: NCCL in the loop. Starts NCCL on this node's GPUs with
// NCCL_TOPO_DUMP_FILE and compares NCCL's own view of the node (GPUs, NICs, paths, bandwidths)
// with our node model and with the NCCL_TOPO_FILE we would write; `--allreduce` adds an
// nccl-tests-style all-reduce timing on the local GPUs beside the cost model's figure.
//
// Every CUDA and NCCL call runs in a child process (this binary re-executed with the hidden
// `--worker` option): NCCL reads its environment at initialisation, each pass needs its own
// (with and without our file), and CUDA must not be initialised in a process that forks. The
// parent never loads CUDA. Where there is no GPU, or libcudart/libnccl cannot be loaded, the
// command says why and exits 77 (skipped), so scripts and test harnesses tell "skipped" from
// "failed".
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <system_error>
#include <utility>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "nccl_runtime.h"
#include "node_input.h"
#include "topoaware/mapper/busbw_model.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/nccl_graph.h"
#include "topoaware/topology/node_compare.h"
#include "topoaware/topology/node_io.h"
#include "topoaware/topology/sources.h"

namespace topoaware::cli {

using mapper::busbw::Collective;
using mapper::busbw::ModeledBusbw;

namespace {

namespace fs = std::filesystem;

constexpr int kSkipped = 77;

struct Options {
  std::string input, input_format, fsroot;
  std::string cudart, nccl;  // library paths; empty: the usual names
  std::string keep;          // folder for the dumps (kept); empty: a temporary one, removed
  bool allreduce = false;
  std::vector<double> sizes = {1 << 30};  // all-reduce sizes, bytes per GPU
  int iters = 20, warmup = 5;
  int timeout_s = 300;
  int limit = 40;  // differences listed per comparison (text)
  std::string format = "text";
  std::string worker;  // hidden: probe | dump | allreduce
};

// A status and a message; thrown to this subcommand's own catch, which says it and ends with
// cli::Exit.
struct Stop {
  int code;
  std::string message;
};

// --- worker side: the only code that touches CUDA and NCCL ----------------------------------

struct Libraries {
  const gpu::CudaApi* cuda = nullptr;
  const gpu::NcclApi* nccl = nullptr;
  int devices = 0;
};

std::string cuda_error(const gpu::CudaApi& cuda, gpu::CudaError e) {
  const char* s = cuda.get_error_string ? cuda.get_error_string(e) : nullptr;
  return (s ? std::string(s) : std::string("error")) + " (" + std::to_string(e) + ")";
}

std::string nccl_error(const gpu::NcclApi& nccl, gpu::NcclResult r) {
  const char* s = nccl.get_error_string ? nccl.get_error_string(r) : nullptr;
  return (s ? std::string(s) : std::string("error")) + " (" + std::to_string(r) + ")";
}

// Loads both libraries and counts GPUs; anything missing is a skip (exit 77) with the reason.
Libraries open_libraries(const Options& o) {
  Libraries l;
  std::string why;
  l.cuda = gpu::load_cudart(o.cudart, &why);
  if (l.cuda == nullptr) throw Stop{kSkipped, "skipped: " + why};
  gpu::CudaError e = l.cuda->get_device_count(&l.devices);
  if (e != gpu::kCudaSuccess) {
    throw Stop{kSkipped, "skipped: no usable GPU: cudaGetDeviceCount: " + cuda_error(*l.cuda, e)};
  }
  if (l.devices <= 0) throw Stop{kSkipped, "skipped: no usable GPU: CUDA sees 0 devices"};
  l.nccl = gpu::load_nccl(o.nccl, &why);
  if (l.nccl == nullptr) throw Stop{kSkipped, "skipped: " + why};
  return l;
}

void check_cuda(const Libraries& l, gpu::CudaError e, const char* what) {
  if (e != gpu::kCudaSuccess) throw Stop{1, std::string(what) + ": " + cuda_error(*l.cuda, e)};
}
void check_nccl(const Libraries& l, gpu::NcclResult r, const char* what) {
  if (r != gpu::kNcclSuccess) throw Stop{1, std::string(what) + ": " + nccl_error(*l.nccl, r)};
}

// probe: what is there, one "key value" per line.
void worker_probe(const Options& o) {
  Libraries l = open_libraries(o);
  int v = 0;
  std::printf("devices %d\n", l.devices);
  if (l.cuda->runtime_get_version(&v) == gpu::kCudaSuccess) {
    std::printf("cuda-runtime %s\n", gpu::cuda_version_string(v).c_str());
  }
  if (l.cuda->driver_get_version(&v) == gpu::kCudaSuccess) {
    std::printf("cuda-driver %s\n", gpu::cuda_version_string(v).c_str());
  }
  if (l.nccl->get_version(&v) == gpu::kNcclSuccess) {
    std::printf("nccl %s\n", gpu::nccl_version_string(v).c_str());
  }
  for (int d = 0; d < l.devices; ++d) {
    char bus[64] = {};
    if (l.cuda->device_get_pci_bus_id(bus, sizeof bus, d) == gpu::kCudaSuccess) {
      std::printf("gpu %d %s\n", d, topology::normalize_busid(bus).c_str());
    }
  }
}

// One communicator over every visible GPU (NCCL writes its dumps while it initialises).
std::vector<gpu::NcclComm> init_all(const Libraries& l) {
  std::vector<gpu::NcclComm> comms(static_cast<std::size_t>(l.devices), nullptr);
  std::vector<int> devs(static_cast<std::size_t>(l.devices));
  for (int d = 0; d < l.devices; ++d) devs[static_cast<std::size_t>(d)] = d;
  check_nccl(l, l.nccl->comm_init_all(comms.data(), l.devices, devs.data()), "ncclCommInitAll");
  return comms;
}

void worker_dump(const Options& o) {
  Libraries l = open_libraries(o);
  for (gpu::NcclComm c : init_all(l)) l.nccl->comm_destroy(c);
  std::printf("ranks %d\n", l.devices);
}

// nccl-tests' all_reduce_perf over the given sizes: float sum, out of place; per size `warmup`
// untimed iterations, then `iters` timed back to back and synchronised once at the end. One
// "size BYTES TIME_US ALGBW BUSBW" line per size.
void worker_allreduce(const Options& o) {
  Libraries l = open_libraries(o);
  std::vector<std::size_t> counts;
  for (double b : o.sizes) counts.push_back(static_cast<std::size_t>(b) / sizeof(float));
  const std::size_t most = *std::max_element(counts.begin(), counts.end()) * sizeof(float);
  const auto n = static_cast<std::size_t>(l.devices);
  std::vector<void*> send(n, nullptr), recv(n, nullptr);
  std::vector<gpu::CudaStream> streams(n, nullptr);
  for (std::size_t d = 0; d < n; ++d) {
    check_cuda(l, l.cuda->set_device(static_cast<int>(d)), "cudaSetDevice");
    check_cuda(l, l.cuda->malloc(&send[d], most), "cudaMalloc");
    check_cuda(l, l.cuda->malloc(&recv[d], most), "cudaMalloc");
    check_cuda(l, l.cuda->memset(send[d], 0, most), "cudaMemset");
    check_cuda(l, l.cuda->stream_create(&streams[d]), "cudaStreamCreate");
  }
  std::vector<gpu::NcclComm> comms = init_all(l);
  auto round = [&](std::size_t count) {
    check_nccl(l, l.nccl->group_start(), "ncclGroupStart");
    for (std::size_t d = 0; d < n; ++d) {
      check_nccl(l,
                 l.nccl->all_reduce(send[d], recv[d], count, gpu::kNcclFloat32, gpu::kNcclSum,
                                    comms[d], streams[d]),
                 "ncclAllReduce");
    }
    check_nccl(l, l.nccl->group_end(), "ncclGroupEnd");
  };
  auto sync = [&] {
    for (std::size_t d = 0; d < n; ++d) {
      check_cuda(l, l.cuda->set_device(static_cast<int>(d)), "cudaSetDevice");
      check_cuda(l, l.cuda->stream_synchronize(streams[d]), "cudaStreamSynchronize");
    }
  };
  std::printf("ranks %zu\n", n);
  for (std::size_t count : counts) {
    for (int i = 0; i < o.warmup; ++i) round(count);
    sync();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) round(count);
    sync();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.iters;
    const std::size_t bytes = count * sizeof(float);
    const double algbw = static_cast<double>(bytes) / seconds / 1e9;
    std::printf("size %zu %.2f %.3f %.3f\n", bytes, seconds * 1e6, algbw,
                algbw * mapper::busbw::busbw_factor(Collective::kAllReduce, l.devices));
    std::fflush(stdout);
  }
  for (gpu::NcclComm c : comms) l.nccl->comm_destroy(c);
  for (std::size_t d = 0; d < n; ++d) {
    l.cuda->set_device(static_cast<int>(d));
    l.cuda->stream_destroy(streams[d]);
    l.cuda->free(send[d]);
    l.cuda->free(recv[d]);
  }
}

// --- parent side ------------------------------------------------------------------------------

struct Child {
  int status = -1;  // exit status; -1 when killed or not exited
  int signal = 0;   // the signal that ended it, if one did
  bool timed_out = false;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// This binary again with `args`, the environment changed by `env` (empty value: unset), stdout
// and stderr to files in `dir`. Waits at most `timeout_s`.
Child run_self(const std::vector<std::string>& args,
               const std::vector<std::pair<std::string, std::string>>& env, const fs::path& dir,
               const std::string& tag, int timeout_s) {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = std::any_of(env.begin(), env.end(), [&](auto& p) { return p.first == key; });
    if (!replaced) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) {
    if (!v.empty()) envs.push_back(k + "=" + v);
  }
  std::vector<std::string> argv_s = {"topo-aware"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  const fs::path out = dir / (tag + ".out"), err = dir / (tag + ".err");
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw Stop{1, std::string("fork: ") + std::strerror(errno)};
  if (pid == 0) {
    int fo = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int fe = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(126);
    execve("/proc/self/exe", argv.data(), envp.data());
    _exit(127);
  }
  Child c;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw Stop{1, std::string("waitpid: ") + std::strerror(errno)};
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      c.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!c.timed_out && WIFEXITED(status)) c.status = WEXITSTATUS(status);
  if (!c.timed_out && WIFSIGNALED(status)) c.signal = WTERMSIG(status);
  c.out = slurp(out);
  c.err = slurp(err);
  return c;
}

std::vector<std::string> library_args(const Options& o) {
  std::vector<std::string> a;
  if (!o.cudart.empty()) a.insert(a.end(), {"--cudart", o.cudart});
  if (!o.nccl.empty()) a.insert(a.end(), {"--nccl", o.nccl});
  return a;
}

// The probe's "key value" lines into a map ("gpu 3" -> its bus id). Other lines (NCCL writes its
// NCCL_DEBUG output to stdout) are ignored.
std::map<std::string, std::string> keyed(const std::string& text) {
  std::map<std::string, std::string> m;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, a, b, extra;
    words >> key >> a;
    if (key == "gpu" && (words >> b) && !(words >> extra)) {
      m["gpu " + a] = b;
    } else if ((key == "devices" || key == "cuda-runtime" || key == "cuda-driver" ||
                key == "nccl") &&
               !(words >> extra)) {
      m[key] = a;
    }
  }
  return m;
}

struct Timing {
  double bytes = 0, time_us = 0, busbw = 0;
};

// The "size ..." lines of the all-reduce worker.
std::vector<Timing> timings(const std::string& text) {
  std::vector<Timing> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, extra;
    Timing t;
    double algbw = 0;
    if ((words >> key) && key == "size" && (words >> t.bytes >> t.time_us >> algbw >> t.busbw) &&
        !(words >> extra)) {
      out.push_back(t);
    }
  }
  return out;
}

// A worker that did not succeed: its own reason (the last line of its stderr: NCCL may have
// printed before it), and 77 passed on as a skip.
[[noreturn]] void fail(const Child& c, const std::string& what) {
  if (c.timed_out) throw Stop{1, what + " did not finish in time (--timeout)"};
  std::string msg = c.err;
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.pop_back();
  auto nl = msg.rfind('\n');
  std::string last = nl == std::string::npos ? msg : msg.substr(nl + 1);
  const std::string prefix = "topo-aware: nccl-check: ";
  if (last.rfind(prefix, 0) == 0) last = last.substr(prefix.size());
  if (c.status == kSkipped) throw Stop{kSkipped, last.empty() ? "skipped" : last};
  if (c.signal != 0) {
    throw Stop{1, what + " was killed by signal " + std::to_string(c.signal) + " (" +
                      strsignal(c.signal) + ")" + (last.empty() ? "" : ": " + last)};
  }
  throw Stop{1, what + " failed (exit " + std::to_string(c.status) + ")" +
                    (last.empty() ? "" : ": " + last)};
}

// A temporary folder, removed at the end unless the user asked to keep one.
class WorkDir {
 public:
  explicit WorkDir(const std::string& keep) {
    if (!keep.empty()) {
      path_ = keep;
      fs::create_directories(path_);
      return;
    }
    std::string tmpl = (fs::temp_directory_path() / "topo-aware-nccl-check-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      throw Stop{1, std::string("mkdtemp: ") + std::strerror(errno)};
    }
    path_ = tmpl;
    remove_ = true;
  }
  ~WorkDir() {
    std::error_code ec;
    if (remove_) fs::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool remove_ = false;
};

nlohmann::json graph_json(const topology::NcclGraph& g) {
  return {{"channels", g.nchannels},           {"speed_intra_gbps", g.speed_intra},
          {"speed_inter_gbps", g.speed_inter}, {"type_intra", g.type_intra},
          {"type_inter", g.type_inter},        {"crossnic", g.crossnic}};
}

// NCCL's search, alone and given our file: printed (text) and returned (JSON).
nlohmann::json report_graphs(const fs::path& alone, const fs::path& with_ours, bool text) {
  auto read = [](const fs::path& p) {
    std::vector<topology::NcclGraph> g;
    if (fs::exists(p)) g = topology::load_nccl_graphs(p.string());
    return g;
  };
  auto a = read(alone), b = read(with_ours);
  nlohmann::json out = nlohmann::json::array();
  if (a.empty()) {
    if (text) std::printf("NCCL's search (NCCL_GRAPH_DUMP_FILE): not written\n");
    return out;
  }
  if (text) {
    std::printf("NCCL's search (per graph: channels x GB/s per channel, intra/inter path class)\n");
    std::printf("  %-15s %-28s %s\n", "graph", "NCCL alone", "NCCL given our topology file");
  }
  auto fmt = [](const topology::NcclGraph& x) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%d x %.1f GB/s %s/%s", x.nchannels, x.speed_intra,
                  x.type_intra.c_str(), x.type_inter.c_str());
    return std::string(buf);
  };
  for (const auto& g : a) {
    const topology::NcclGraph* other = nullptr;
    for (const auto& h : b) {
      if (h.id == g.id) other = &h;
    }
    out.push_back({{"graph", topology::nccl_graph_name(g.id)},
                   {"alone", graph_json(g)},
                   {"with_our_file", other ? graph_json(*other) : nlohmann::json()}});
    if (text) {
      std::printf("  %-15s %-28s %s\n", topology::nccl_graph_name(g.id).c_str(), fmt(g).c_str(),
                  other ? fmt(*other).c_str() : "-");
    }
  }
  return out;
}

// One comparison: printed (text) and appended to `out` (JSON). Returns its mismatches.
int compare_pass(const topology::NodeTopology& ours, const topology::NodeTopology& nccl,
                 const std::string& ours_label, const std::string& nccl_label, const Options& o,
                 nlohmann::json& out) {
  using Severity = topology::NodeDifference::Severity;
  topology::NodeComparison c = topology::compare_nodes(ours, nccl);
  if (o.format == "text") {
    std::cout << topology::format_comparison(c, ours_label, nccl_label,
                                             static_cast<std::size_t>(std::max(0, o.limit)));
  }
  nlohmann::json diffs = nlohmann::json::array();
  for (const auto& d : c.differences) {
    diffs.push_back({{"severity", std::string(topology::to_string(d.severity))},
                     {"subject", d.subject},
                     {"attribute", d.attribute},
                     {"ours", d.ours},
                     {"nccl", d.nccl}});
  }
  out.push_back({{"ours", ours_label},
                 {"nccl", nccl_label},
                 {"agree", c.agrees()},
                 {"gpus_matched", c.gpus_matched},
                 {"nics_matched", c.nics_matched},
                 {"paths_compared", c.paths_compared},
                 {"mismatches", c.count(Severity::kMismatch)},
                 {"warnings", c.count(Severity::kWarning)},
                 {"notes", c.count(Severity::kNote)},
                 {"differences", diffs}});
  return c.count(Severity::kMismatch);
}

// The cost model's all-reduce busbw on this node: one host of the node's GPUs.
ModeledBusbw modeled_allreduce(const topology::NodeTopology& node, int ranks, double bytes) {
  mapper::FatTreeSpec s;
  s.hosts = 1;
  s.gpus_per_host = ranks;
  s.ports_per_host = std::max<int>(1, static_cast<int>(node.nics().size()));
  topology::Fabric fabric = mapper::make_fat_tree(s);
  return mapper::busbw::model_busbw(fabric, node, 1, ranks, Collective::kAllReduce, bytes);
}

int run_check(const Options& o) {
  WorkDir dir(o.keep);
  const std::vector<std::string> libs = library_args(o);
  // 1. What is there (skip with the reason when no GPU or library).
  std::vector<std::string> probe_args = {"nccl-check", "--worker", "probe"};
  probe_args.insert(probe_args.end(), libs.begin(), libs.end());
  Child probe = run_self(probe_args, {}, dir.path(), "probe", o.timeout_s);
  if (probe.status != 0) fail(probe, "the GPU probe");
  auto facts = keyed(probe.out);
  const int ranks = std::atoi(facts["devices"].c_str());
  const bool text = o.format == "text";
  nlohmann::json report = {{"gpus", ranks},
                           {"cuda_runtime", facts["cuda-runtime"]},
                           {"cuda_driver", facts["cuda-driver"]},
                           {"nccl", facts["nccl"]}};
  nlohmann::json busids = nlohmann::json::array();
  for (int d = 0; d < ranks; ++d) busids.push_back(facts["gpu " + std::to_string(d)]);
  report["cuda_devices"] = busids;
  if (text) {
    std::printf("GPUs: %d visible to CUDA; CUDA runtime %s, driver %s; NCCL %s\n", ranks,
                facts["cuda-runtime"].c_str(), facts["cuda-driver"].c_str(), facts["nccl"].c_str());
  }

  // 2. Our model, and the NCCL_TOPO_FILE we would write from it.
  topology::NodeTopology ours = load_node(o.input, o.input_format, o.fsroot);
  const fs::path ours_xml = dir.path() / "ours-topo.xml";
  write_output(ours_xml.string(), topology::node_to_nccl_xml(ours));

  // 3. NCCL alone, then NCCL given our file; each dumps its view and its search.
  const fs::path view = dir.path() / "nccl-topo-dump.xml";
  const fs::path graph = dir.path() / "nccl-graph-dump.xml";
  const fs::path view_ours = dir.path() / "nccl-topo-dump-with-ours.xml";
  const fs::path graph_ours = dir.path() / "nccl-graph-dump-with-ours.xml";
  std::vector<std::string> dump_args = {"nccl-check", "--worker", "dump"};
  dump_args.insert(dump_args.end(), libs.begin(), libs.end());
  Child alone = run_self(dump_args,
                         {{"NCCL_TOPO_FILE", ""},
                          {"NCCL_GRAPH_FILE", ""},
                          {"NCCL_TOPO_DUMP_FILE", view.string()},
                          {"NCCL_TOPO_DUMP_FILE_RANK", "0"},
                          {"NCCL_GRAPH_DUMP_FILE", graph.string()},
                          {"NCCL_GRAPH_DUMP_FILE_RANK", "0"}},
                         dir.path(), "nccl-alone", o.timeout_s);
  if (alone.status != 0) fail(alone, "NCCL initialisation");
  Child given = run_self(dump_args,
                         {{"NCCL_TOPO_FILE", ours_xml.string()},
                          {"NCCL_GRAPH_FILE", ""},
                          {"NCCL_TOPO_DUMP_FILE", view_ours.string()},
                          {"NCCL_TOPO_DUMP_FILE_RANK", "0"},
                          {"NCCL_GRAPH_DUMP_FILE", graph_ours.string()},
                          {"NCCL_GRAPH_DUMP_FILE_RANK", "0"}},
                         dir.path(), "nccl-with-ours", o.timeout_s);
  if (given.status != 0) fail(given, "NCCL initialisation with our NCCL_TOPO_FILE");
  if (!fs::exists(view)) throw Stop{1, "NCCL wrote no NCCL_TOPO_DUMP_FILE (" + view.string() + ")"};

  // 4. The comparisons.
  topology::NodeTopology nccl_view = topology::load_nccl_xml(view.string());
  int mismatches = 0;
  nlohmann::json comparisons = nlohmann::json::array();
  mismatches += compare_pass(ours, nccl_view, "our node model (" + ours.source + ")", "NCCL's view",
                             o, comparisons);
  mismatches += compare_pass(topology::load_nccl_xml(ours_xml.string()), nccl_view,
                             "our NCCL_TOPO_FILE", "NCCL's view", o, comparisons);
  if (fs::exists(view_ours)) {
    mismatches += compare_pass(topology::load_nccl_xml(view_ours.string()), nccl_view,
                               "NCCL given our file", "NCCL alone", o, comparisons);
  }
  report["comparisons"] = comparisons;
  report["graphs"] = report_graphs(graph, graph_ours, text);

  // 5. Optionally, all-reduce bandwidth: measured (NCCL alone, NCCL given our file) vs modeled.
  if (o.allreduce) {
    std::string sizes;
    for (double b : o.sizes) {
      sizes += (sizes.empty() ? "" : ",") + std::to_string(static_cast<long long>(b));
    }
    std::vector<std::string> ar_args = {"nccl-check",
                                        "--worker",
                                        "allreduce",
                                        "--bytes",
                                        sizes,
                                        "--iters",
                                        std::to_string(o.iters),
                                        "--warmup",
                                        std::to_string(o.warmup)};
    ar_args.insert(ar_args.end(), libs.begin(), libs.end());
    Child m1 = run_self(ar_args, {{"NCCL_TOPO_FILE", ""}}, dir.path(), "allreduce", o.timeout_s);
    if (m1.status != 0) fail(m1, "the all-reduce");
    Child m2 = run_self(ar_args, {{"NCCL_TOPO_FILE", ours_xml.string()}}, dir.path(),
                        "allreduce-with-ours", o.timeout_s);
    if (m2.status != 0) fail(m2, "the all-reduce with our NCCL_TOPO_FILE");
    std::vector<Timing> alone_t = timings(m1.out), ours_t = timings(m2.out);
    if (text) {
      std::printf(
          "all_reduce on %d GPUs, float sum, out of place; busbw = algbw x 2(n-1)/n as "
          "nccl-tests:\n  %14s %12s %12s %16s %12s %8s\n",
          ranks, "bytes", "time us", "busbw GB/s", "with our file", "modeled", "model/m");
    }
    std::string bottleneck;
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t i = 0; i < alone_t.size(); ++i) {
      const Timing& t = alone_t[i];
      const double with_ours = i < ours_t.size() ? ours_t[i].busbw : 0;
      ModeledBusbw model = modeled_allreduce(ours, ranks, t.bytes);
      bottleneck = model.bottleneck;
      const double ratio = t.busbw > 0 ? model.gbps / t.busbw : 0.0;
      rows.push_back({{"bytes", t.bytes},
                      {"modeled_algorithm", model.nccl},
                      {"time_us", t.time_us},
                      {"busbw_gbps", t.busbw},
                      {"busbw_with_our_file_gbps", with_ours},
                      {"modeled_busbw_gbps", model.gbps},
                      {"model_over_measured", ratio}});
      if (text) {
        std::printf("  %14.0f %12.1f %12.1f %16.1f %12.1f %8.2f\n", t.bytes, t.time_us, t.busbw,
                    with_ours, model.gbps, ratio);
      }
    }
    report["allreduce"] = {{"ranks", ranks}, {"rows", rows}, {"model_bottleneck", bottleneck}};
    if (text) {
      std::printf(
          "  modeled: the cost model's all-reduce on one host of these GPUs, the algorithm NCCL's "
          "tuning picks for each size (modeled_algorithm in JSON); bottleneck %s\n",
          bottleneck.c_str());
    }
  }
  report["dumps"] = o.keep.empty() ? nlohmann::json() : nlohmann::json(dir.path().string());
  if (text && !o.keep.empty()) std::printf("dumps kept in %s\n", dir.path().c_str());
  if (!text) std::printf("%s\n", report.dump(2).c_str());
  if (mismatches > 0) {
    throw Stop{
        1, "NCCL's view differs from ours (" + std::to_string(mismatches) + " mismatches above)"};
  }
  return 0;
}

}  // namespace

void add_nccl_check(CLI::App& app, Common&) {
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("nccl-check",
                                 "Run NCCL on this node's GPUs and compare its view with ours");
  sub->footer(
      "Starts NCCL on every GPU CUDA sees with NCCL_TOPO_DUMP_FILE and NCCL_GRAPH_DUMP_FILE,\n"
      "once alone and once given the NCCL_TOPO_FILE we write, and compares NCCL's view (GPUs,\n"
      "NICs, paths and bandwidths by NCCL's rules) with our node model (live discovery, or -i)\n"
      "and with our file. --allreduce adds an all-reduce timing beside the cost model's figure.\n"
      "libcudart and libnccl are loaded at run time (--cudart/--nccl name them).\n"
      "Exit codes: 0 the views agree, 1 they differ or NCCL failed (message says which),\n"
      "2 usage, 77 skipped: no GPU, or CUDA/NCCL libraries cannot be loaded.");
  add_node_input_options(*sub, o->input, o->input_format, o->fsroot);
  sub->add_flag("--allreduce", o->allreduce, "Also time an all-reduce on the local GPUs");
  sub->add_option("--bytes", o->sizes,
                  "All-reduce sizes in bytes per GPU, comma-separated (default 1073741824)")
      ->delimiter(',')
      ->check(CLI::Range(4.0, 64.0 * (1 << 30)));
  sub->add_option("--iters", o->iters, "Timed all-reduce iterations (default 20)")
      ->check(CLI::Range(1, 100000));
  sub->add_option("--warmup", o->warmup, "Untimed iterations first (default 5)")
      ->check(CLI::Range(0, 100000));
  sub->add_option("--keep", o->keep, "Keep the dumps and our XML in DIR")->type_name("DIR");
  sub->add_option("--cudart", o->cudart, "Path of libcudart to load")->type_name("LIB");
  sub->add_option("--nccl", o->nccl, "Path of libnccl to load")->type_name("LIB");
  sub->add_option("--timeout", o->timeout_s, "Seconds each NCCL run may take (default 300)")
      ->check(CLI::Range(1, 86400));
  sub->add_option("--of", o->format, "Output: text (default) or json (every difference)")
      ->check(CLI::IsMember({"text", "json"}));
  sub->add_option("--limit", o->limit, "Differences listed per comparison in text (0: all)")
      ->check(CLI::Range(0, 1000000));
  sub->add_option("--worker", o->worker)
      ->group("")
      ->check(CLI::IsMember({"probe", "dump", "allreduce"}));
  sub->callback([o] {
    int code = 0;
    std::string message;
    try {
      if (o->worker == "probe") {
        worker_probe(*o);
      } else if (o->worker == "dump") {
        worker_dump(*o);
      } else if (o->worker == "allreduce") {
        worker_allreduce(*o);
      } else {
        code = run_check(*o);
      }
    } catch (const Stop& e) {
      code = e.code;
      message = e.message;
    }
    std::fflush(stdout);
    if (!message.empty()) std::cerr << "topo-aware: nccl-check: " << message << "\n";
    if (code != 0) throw cli::Exit{code};
  });
}

}  // namespace topoaware::cli
