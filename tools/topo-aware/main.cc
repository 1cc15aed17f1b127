// topo-aware: discover node and fabric topology, map ranks, explain plans offline.
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <system_error>

#include "cli.h"
#include "topoaware/launch/build.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/topology/error.h"

namespace topoaware::cli {

void write_output(const std::string& path, const std::string& text) {
  write_output(path, [&](std::ostream& os) { os << text; });
}

void write_output(const std::string& path, const std::function<void(std::ostream&)>& emit) {
  if (path.empty() || path == "-") {
    emit(std::cout);
    if (!std::cout.flush()) {
      throw topology::Error(topology::ErrorCode::kSystem, "standard output", "write failed");
    }
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    throw topology::Error(topology::ErrorCode::kSystem, path, "cannot open for writing");
  }
  try {
    emit(out);
    if (!out.flush()) throw topology::Error(topology::ErrorCode::kSystem, path, "write failed");
  } catch (...) {
    // What `emit` wrote before failing is no whole output: leave no partial file behind (a
    // regular file only: never /dev/stdout or a pipe).
    out.close();
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) std::filesystem::remove(path, ec);
    throw;
  }
}

}  // namespace topoaware::cli

int main(int argc, char** argv) {
  using namespace topoaware;
  CLI::App app{"topo-aware: topology-aware rank mapping for multi-node GPU training on Slurm",
               "topo-aware"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("topo-aware ") + launch::build_id());
  cli::Common common;
  app.add_flag("-v,--verbose", common.verbose, "More detail (repeatable)");
  app.add_flag("-q,--quiet", common.quiet, "Only errors");
  app.fallthrough();

  cli::add_discover(app, common);
  cli::add_nccl_topo(app, common);
  cli::add_fabric(app, common);
  cli::add_map(app, common);
  cli::add_inspect(app, common);
  cli::add_doctor(app, common);
  cli::add_nccl_check(app, common);
  cli::add_calibrate(app, common);
  cli::add_shadow_report(app, common);
  cli::add_place(app, common);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const cli::Exit& e) {
    return e.code;
  } catch (const cli::UsageError& e) {
    std::cerr << "topo-aware: " << e.what() << "\n";
    return 2;
  } catch (const topology::Error& e) {
    std::cerr << "topo-aware: " << e.what() << "\n";
    return 1;
  } catch (const mapper::Error& e) {
    std::cerr << "topo-aware: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "topo-aware: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
