// Shared pieces of the topo-aware command line. Each subcommand lives in its own cmd_*.cc and
// registers itself with add_<name>(); main() turns exceptions into exit codes at one place:
// 0 ok, 1 bad input (message names file:line / option), 2 usage (doctor adds 3: degraded).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include "topoaware/topology/input_format.h"

namespace topoaware::cli {

struct Common {
  int verbose = 0;
  bool quiet = false;
};

// Thrown by a subcommand for a usage problem CLI11 cannot see (exit 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by a subcommand whose outcome is an exit code other than 0 it has already explained
// (doctor: 3 for a degraded node; nccl-check: 77 skipped, 1 the views differ); main() returns
// `code` without a message.
struct Exit {
  int code = 0;
};

// Writes `text` to `path`, or to stdout when path is empty or "-". Throws topology::Error.
void write_output(const std::string& path, const std::string& text);
// The same for output too large to build as one string first: `emit` writes it to the stream.
void write_output(const std::string& path, const std::function<void(std::ostream&)>& emit);

// --format, the input file's format (overriding detection from its content), worded the same in
// every command that reads a file: "auto" or one of `kind`'s names (input_format.h).
inline CLI::Option* add_input_format_option(CLI::App& sub, std::string& format,
                                            topology::InputKind kind, const std::string& file) {
  std::vector<std::string> names = {"auto"};
  for (auto f : {topology::InputFormat::kIbnetdiscover, topology::InputFormat::kSlurmTopology,
                 topology::InputFormat::kFabricToml, topology::InputFormat::kFabricJson,
                 topology::InputFormat::kHwlocXml, topology::InputFormat::kNcclXml}) {
    if (topology::format_of_kind(f, kind)) names.emplace_back(topology::to_string(f));
  }
  return sub
      .add_option("--format", format,
                  "Format of " + file + ", instead of recognizing it from the content: " +
                      topology::format_names(kind))
      ->type_name("NAME")
      ->check(CLI::IsMember(names));
}

// Every subcommand sets its callback through this, so output and errors are uniform.
using Action = std::function<void()>;

void add_discover(CLI::App& app, Common& common);
void add_nccl_topo(CLI::App& app, Common& common);
void add_fabric(CLI::App& app, Common& common);
void add_map(CLI::App& app, Common& common);
void add_inspect(CLI::App& app, Common& common);
void add_doctor(CLI::App& app, Common& common);
void add_nccl_check(CLI::App& app, Common& common);
void add_calibrate(CLI::App& app, Common& common);
void add_shadow_report(CLI::App& app, Common& common);
void add_place(CLI::App& app, Common& common);

}  // namespace topoaware::cli
