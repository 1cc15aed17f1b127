// Asking scontrol for the nodes' state (slurm_state.h).
#include "slurm_state.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "slurm_node.h"
#include "topoaware/topology/error.h"

namespace topoaware::cli {
namespace {

using topology::Error;
using topology::ErrorCode;

// A node record is under 1 KiB; 16,384 nodes fit.
constexpr std::size_t kMaxNodesOutput = std::size_t{64} << 20;

std::string last_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::size_t nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

// scontrol's stdout for `args`, or an Error saying why there is none.
std::string ask(const std::string& scontrol, const std::vector<std::string>& args, int timeout_s) {
  std::vector<std::string> argv = {scontrol};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string what = scontrol;
  for (const std::string& a : args) what += " " + a;
  ProgramOptions o;
  o.timeout_s = timeout_s;
  o.stderr_to = StderrTo::kCapture;
  o.max_output = kMaxNodesOutput;
  ProgramRun r = run_program(argv, o);
  if (!r.error.empty()) {
    bool missing = r.error.find("No such file") != std::string::npos;
    throw Error(missing ? ErrorCode::kNotFound : ErrorCode::kSystem, what,
                r.error + (missing ? " (install slurm-client, or name it with --scontrol)" : ""));
  }
  if (r.rc != 0) {
    std::string said = last_line(r.err);
    throw Error(ErrorCode::kSystem, what,
                "exit " + std::to_string(r.rc) + (said.empty() ? "" : ": " + said));
  }
  if (r.truncated) {
    throw Error(ErrorCode::kLimit, what,
                "more than " + std::to_string(kMaxNodesOutput >> 20) + " MiB of output");
  }
  return r.out;
}

}  // namespace

SlurmState slurm_state(const std::string& scontrol, const std::string& partition, int timeout_s) {
  SlurmState s;
  s.partition = partition;
  if (s.partition.empty()) {
    s.partition =
        launch::default_partition(ask(scontrol, {"show", "partitions", "--oneliner"}, timeout_s));
    if (s.partition.empty()) {
      throw Error(ErrorCode::kNotFound, "--partition",
                  "Slurm has no default partition: name one with --partition");
    }
  }
  std::vector<launch::SlurmNode> all = launch::parse_scontrol_nodes(
      ask(scontrol, {"show", "nodes", "--details", "--oneliner"}, timeout_s),
      "scontrol show nodes");
  for (launch::SlurmNode& n : all) {
    if (n.in_partition(s.partition)) s.nodes.push_back(std::move(n));
  }
  if (s.nodes.empty()) {
    throw Error(ErrorCode::kNotFound, "--partition",
                "partition '" + s.partition + "' has no nodes in Slurm");
  }
  return s;
}

}  // namespace topoaware::cli
