// The calibration file (calibration_file.h): what `topo-aware calibrate` writes reads back the
// same; a file an admin edits is held to the configuration's strictness (every mistake named
// file:line); the plugin's `calibration = PATH` reaches the request every launch plans from.
#include "topoaware/launch/calibration_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "topoaware/launch/config.h"
#include "topoaware/launch/inputs.h"
#include "topoaware/launch/request.h"
#include "topoaware/mapper/calibration.h"
#include "topoaware/mapper/launch.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/topology/error.h"

namespace topoaware::launch {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "topo-aware-calibration-test";
  std::filesystem::create_directories(dir);
  auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::string& text) {
  const std::string path = write_temp("bad.toml", text);
  try {
    read_calibration(path);
  } catch (const topology::Error& e) {
    return e.what();
  }
  return {};
}

TEST(CalibrationFile, WhatIsWrittenReadsBack) {
  mapper::Calibration c;
  c.at(static_cast<std::size_t>(mapper::nccl::Algo::kRing), mapper::Tier::kLeaf) = {0.9123, 1.75,
                                                                                    3};
  c.at(mapper::kP2pClass, mapper::Tier::kSpine) = {0.5, 2, 1};
  CalibrationMeta meta;
  meta.created = "2026-12-07T08:00:00Z";
  meta.nccl = "2.21.5";
  meta.runs = 4;
  meta.comments = {"hardware as modeled: plain nodes"};
  meta.entry_comments = {"from 2n x 8g all_reduce block", "from 3n x 8g alltoall block"};
  const std::string text = write_calibration(c, meta);
  EXPECT_NE(text.find("# from 2n x 8g all_reduce block\n[[entry]]\nalgorithm = \"Ring\"\n"
                      "tier = \"leaf\"\nbandwidth = 0.9123\nlatency = 1.7500\ncases = 3\n"),
            std::string::npos)
      << text;
  const std::string path = write_temp("round.toml", text);
  CalibrationMeta back_meta;
  const mapper::Calibration back = read_calibration(path, &back_meta);
  EXPECT_EQ(back.source, path);
  EXPECT_EQ(back_meta.created, meta.created);
  EXPECT_EQ(back_meta.nccl, "2.21.5");
  EXPECT_EQ(back_meta.runs, 4);
  for (std::size_t cls = 0; cls < mapper::kCalibrationClasses; ++cls) {
    for (mapper::Tier t : {mapper::Tier::kNvlink, mapper::Tier::kLeaf, mapper::Tier::kSpine}) {
      EXPECT_EQ(back.at(cls, t).cases, c.at(cls, t).cases);
      EXPECT_DOUBLE_EQ(back.at(cls, t).bandwidth, c.at(cls, t).bandwidth);
      EXPECT_DOUBLE_EQ(back.at(cls, t).latency, c.at(cls, t).latency);
    }
  }
}

TEST(CalibrationFile, MistakesAreNamedWhereTheyAre) {
  const std::string head = "format = 1\n";
  EXPECT_NE(error_of(head + "[[entry]]\nalgorithm = \"Ring\"\ntier = \"leaf\"\nbandwith = 0.9\n")
                .find("bad.toml:5: unknown key 'bandwith' in [[entry]]"),
            std::string::npos);
  EXPECT_NE(error_of(head + "[[entry]]\nalgorithm = \"Butterfly\"\ntier = \"leaf\"\n"
                            "bandwidth = 0.9\n")
                .find("bad.toml:3: algorithm 'Butterfly' is not one NCCL runs"),
            std::string::npos);
  EXPECT_NE(error_of(head + "[[entry]]\nalgorithm = \"Ring\"\ntier = \"pod\"\nbandwidth = 0.9\n")
                .find("bad.toml:4: tier 'pod' is not nvlink, leaf or spine"),
            std::string::npos);
  EXPECT_NE(error_of(head + "[[entry]]\nalgorithm = \"Ring\"\ntier = \"leaf\"\nbandwidth = 0\n")
                .find("bad.toml:5: bandwidth must be between 0.01 and 100"),
            std::string::npos);
  EXPECT_NE(error_of(head + "[[entry]]\nalgorithm = \"Ring\"\ntier = \"leaf\"\n")
                .find("needs algorithm, tier and bandwidth"),
            std::string::npos);
  const std::string ring = "[[entry]]\nalgorithm = \"Ring\"\ntier = \"leaf\"\nbandwidth = 0.9\n";
  EXPECT_NE(error_of(head + ring + ring).find("a second [[entry]] for Ring/leaf"),
            std::string::npos);
  EXPECT_NE(error_of(ring).find("no 'format = 1'"), std::string::npos);
  EXPECT_NE(error_of("format = 2\n").find("bad.toml:1: format must be 1"), std::string::npos);
  EXPECT_NE(error_of(head + "fabric = \"x\"\n").find("bad.toml:2: unknown key 'fabric'"),
            std::string::npos);
  EXPECT_NE(error_of(head + "runs = [\n").find("bad.toml:"), std::string::npos);
  try {
    read_calibration("/nonexistent/calibration.toml");
    FAIL() << "a missing file reads";
  } catch (const topology::Error& e) {
    EXPECT_EQ(e.code(), topology::ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/calibration.toml"), std::string::npos);
  }
}

// `calibration = PATH` in the plugin's config (relative to the config file) reaches the request:
// srun, every node and `map --config` plan with the same correction.
TEST(CalibrationFile, TheConfigsCalibrationReachesTheRequest) {
  write_temp("site-calibration.toml",
             "format = 1\n[[entry]]\nalgorithm = \"Ring\"\ntier = \"spine\"\nbandwidth = 0.7\n"
             "latency = 1.2\ncases = 2\n");
  const std::string config = write_temp("site.toml", "calibration = \"site-calibration.toml\"\n");
  const Config c = parse_plugstack({"config=" + config});
  EXPECT_EQ(c.calibration,
            (std::filesystem::path(config).parent_path() / "site-calibration.toml").string());
  topology::NodeTopology node = mapper::make_node(8, 8, 450, 50);
  StepShape shape;
  shape.hosts = {"node1", "node2"};
  shape.tasks = {8, 8};
  const mapper::LaunchSpec spec = parse_spec("tp=8");
  shape.gpus_per_host = workers_per_host(spec, {&node, &node}, {});
  const StepRequest r = make_request(c, spec, shape);
  const auto& e = r.request.calibration.at(static_cast<std::size_t>(mapper::nccl::Algo::kRing),
                                           mapper::Tier::kSpine);
  EXPECT_EQ(e.cases, 2);
  EXPECT_DOUBLE_EQ(e.bandwidth, 0.7);
  EXPECT_DOUBLE_EQ(e.latency, 1.2);
  EXPECT_NE(std::string(
                [&] {
                  try {
                    parse_plugstack({"calibration=relative.toml"});
                  } catch (const topology::Error& err) {
                    return std::string(err.what());
                  }
                  return std::string();
                }())
                .find("calibration must be an absolute path"),
            std::string::npos);
}

}  // namespace
}  // namespace topoaware::launch
