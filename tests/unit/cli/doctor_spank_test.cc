// `topo-aware doctor --spank`: the release a SPANK plugin file was built for, read from the file
// (plugin_file.h), against the Slurm installed here, with a verdict and an exit code an admin's
// script can use (0 loads, 3 does not or no Slurm answers, 1 not a plugin, 2 usage). The plugin
// file is a stand-in built in every build (fake_spank_plugin.c, Slurm 24.11.5); the installed
// Slurm is a stand-in `scontrol` first on PATH, as the probe asks it first.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_support.h"
#include "plugin_file.h"
#include "topoaware/topology/error.h"

namespace topoaware {
namespace {

namespace fs = std::filesystem;
using test::cli;
using test::CliRun;
using test::scratch;

const std::string kPlugin = TOPOAWARE_FAKE_SPANK_PLUGIN;

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A folder holding an `scontrol` that answers -V as Slurm `version` does; the shell prefix that
// puts it first on PATH.
std::string fake_slurm(const std::string& version) {
  const std::string bin = scratch("slurm-" + version);
  fs::create_directories(bin);
  {
    std::ofstream s(bin + "/scontrol");
    s << "#!/bin/sh\n[ \"$1\" = -V ] && echo 'slurm " << version << "'\n";
  }
  fs::permissions(bin + "/scontrol", fs::perms::owner_all);
  return "PATH='" + bin + "':\"$PATH\";";
}

TEST(PluginFile, ReadsThePluginVersionOfASharedObject) {
  const cli::PluginFile f = cli::read_plugin_file(kPlugin);
  EXPECT_EQ(f.plugin_version, 0x180b05u);
  EXPECT_EQ(f.release(), (topology::SlurmRelease{24, 11}));
}

TEST(PluginFile, ASharedObjectWithoutPluginVersionIsNotAPlugin) {
  try {
    (void)cli::read_plugin_file(TOPOAWARE_FAKE_CUDA_NCCL);
    ADD_FAILURE() << "read a plugin_version from a library without one";
  } catch (const topology::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no plugin_version"), std::string::npos) << e.what();
  }
}

// Every prefix of the file and every single byte set to 0xff or 0 either reads or is refused
// with the library's error: bounds are checked on each offset the file gives (the sanitizer
// build runs this too).
TEST(PluginFile, DamagedFilesAreRefusedNeverOverread) {
  const std::string good = bytes_of(kPlugin);
  ASSERT_GT(good.size(), 1000u);
  int refused = 0, read = 0;
  auto attempt = [&](const std::string& bytes) {
    try {
      (void)cli::parse_plugin_file(bytes, "damaged.so");
      ++read;
    } catch (const topology::Error&) {
      ++refused;
    }
  };
  for (std::size_t n = 0; n < good.size(); n += 1 + n / 8) attempt(good.substr(0, n));
  for (std::size_t i = 0; i < good.size(); i += 1 + good.size() / 4000) {
    for (char v : {'\xff', '\0'}) {
      std::string b = good;
      b[i] = v;
      attempt(b);
    }
  }
  EXPECT_GT(refused, 10);  // the truncations at least
  EXPECT_GT(read, 10);     // bytes the reader never looks at
}

TEST(DoctorSpank, SameReleaseLoadsExitZero) {
  CliRun r = cli("doctor --spank " + kPlugin, fake_slurm("24.11.3"));
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("built for  Slurm 24.11 (plugin_version 0x180b05)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("installed  Slurm 24.11 (scontrol -V)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict    OK"), std::string::npos) << r.out;
}

TEST(DoctorSpank, AnotherReleaseIsAMismatchWithSlurmsOwnWordsExitThree) {
  CliRun r = cli("doctor --spank " + kPlugin, fake_slurm("22.05.8"));
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(r.out.find("verdict    MISMATCH: Slurm 22.05 refuses it (\"Incompatible Slurm plugin " +
                       kPlugin + " version (24.11.5)\")"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("install the build for 22.05"), std::string::npos) << r.out;
  CliRun j = cli("doctor --spank " + kPlugin + " --of json", fake_slurm("22.05.8"));
  EXPECT_EQ(j.rc, 3) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["verdict"], "mismatch");
  EXPECT_EQ(doc["built_for"], "24.11");
  EXPECT_EQ(doc["installed"], "22.05");
  EXPECT_EQ(doc["installed_from"], "scontrol -V");
  EXPECT_EQ(doc["plugin_version"], "0x180b05");
}

TEST(DoctorSpank, NoSlurmHereIsUnknownExitThree) {
  CliRun r = cli("doctor --spank " + kPlugin, "PATH=/nonexistent;");
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(r.out.find("installed  none found"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict    UNKNOWN"), std::string::npos) << r.out;
}

TEST(DoctorSpank, FindsThePluginPlugstackConfNames) {
  const std::string dir = scratch("plugstack");
  fs::create_directories(dir + "/plugstack.conf.d");
  std::ofstream(dir + "/slurm.conf") << "ClusterName=x\nPlugStackConfig=" << dir
                                     << "/plugstack.conf\n";
  std::ofstream(dir + "/plugstack.conf") << "# site plugins\ninclude " << dir
                                         << "/plugstack.conf.d/*.conf\n";
  fs::copy_file(kPlugin, dir + "/topo_aware.so", fs::copy_options::overwrite_existing);
  std::ofstream(dir + "/plugstack.conf.d/topo-aware.conf")
      << "optional /usr/lib/x86_64-linux-gnu/slurm/pyxis.so\nrequired " << dir
      << "/topo_aware.so config=/etc/slurm/topo-aware.toml\n";
  CliRun r = cli("doctor --spank",
                 "export SLURM_CONF='" + dir + "/slurm.conf'; " + fake_slurm("23.11.1"));
  fs::remove_all(dir);
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(r.out.find("plugstack.conf.d/topo-aware.conf:2, required)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("as `required` every srun, sbatch and salloc here fails"),
            std::string::npos)
      << r.out;
}

// A relative plugstack line: the file is looked for in each of PluginDir's folders, as Slurm
// looks, and found in the second here.
TEST(DoctorSpank, ARelativePluginIsFoundInPluginDirsFolders) {
  const std::string dir = scratch("plugindir");
  fs::create_directories(dir + "/lib2");
  std::ofstream(dir + "/slurm.conf") << "PluginDir=" << dir << "/lib1:" << dir << "/lib2\n";
  std::ofstream(dir + "/plugstack.conf") << "required topo_aware.so\n";
  fs::copy_file(kPlugin, dir + "/lib2/topo_aware.so", fs::copy_options::overwrite_existing);
  CliRun r = cli("doctor --spank",
                 "export SLURM_CONF='" + dir + "/slurm.conf'; " + fake_slurm("24.11.2"));
  fs::remove_all(dir);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("plugin     " + dir + "/lib2/topo_aware.so (" + dir + "/plugstack.conf:1"),
            std::string::npos)
      << r.out;
}

TEST(DoctorSpank, WhatIsNotAPluginExitsOneNamingTheFile) {
  CliRun r = cli("doctor --spank ../../etc/lab-cluster.toml", fake_slurm("22.05.8"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.err.find("lab-cluster.toml: not an ELF file"), std::string::npos) << r.err;
  CliRun missing = cli("doctor --spank /nonexistent/topo_aware.so", fake_slurm("22.05.8"));
  EXPECT_EQ(missing.rc, 1) << missing.out;
  EXPECT_NE(missing.err.find("/nonexistent/topo_aware.so"), std::string::npos) << missing.err;
  CliRun usage = cli("doctor --spank " + kPlugin + " --slurm");
  EXPECT_EQ(usage.rc, 2) << usage.out;
  EXPECT_NE(usage.err.find("--spank checks a plugin file"), std::string::npos) << usage.err;
}

}  // namespace
}  // namespace topoaware
