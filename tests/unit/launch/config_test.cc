// The site configuration's parser (the plugin's, and `topo-aware map --config`'s):
// etc/topo-aware.toml as shipped, plugstack overrides, and the strictness promised to admins
// (unknown keys and bad values name where they are).
#include "topoaware/launch/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "topoaware/launch/inputs.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/input_format.h"

namespace topoaware::launch {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "topo-aware-config-test";
  std::filesystem::create_directories(dir);
  auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::vector<std::string>& args) {
  try {
    parse_plugstack(args);
  } catch (const topology::Error& e) {
    return e.what();
  }
  return {};
}

TEST(Config, ShippedExampleParsesWithDocumentedDefaults) {
  Config c =
      parse_plugstack({std::string("config=") + TOPOAWARE_SOURCE_DIR + "/etc/topo-aware.toml"});
  EXPECT_EQ(c.policy, Policy::kFailOpen);
  EXPECT_EQ(c.gpu_binding, GpuBinding::kLocalRank);
  EXPECT_FALSE(c.overwrite_user_env);
  EXPECT_TRUE(c.bind_cpus);
  EXPECT_EQ(c.job_dir, "/tmp/topo-aware");
  ASSERT_FALSE(c.nodes.empty());
  EXPECT_EQ(capture_for(c, "node3").empty(), false);
}

TEST(Config, PathsAreRelativeToTheFileAndFirstMatchingNodeWins) {
  std::string path = write_temp("rel.toml",
                                "fabric = \"cluster.toml\"\n"
                                "[[node]]\nhosts = \"gpu-a*\"\ncapture = \"a.xml\"\n"
                                "[[node]]\nhosts = \"gpu-*\"\ncapture = \"/abs/b.xml\"\n");
  Config c = parse_plugstack({"config=" + path});
  auto dir = std::filesystem::path(path).parent_path();
  EXPECT_EQ(c.fabric, (dir / "cluster.toml").string());
  EXPECT_EQ(capture_for(c, "gpu-a7"), (dir / "a.xml").string());
  EXPECT_EQ(capture_for(c, "gpu-b1"), "/abs/b.xml");
  EXPECT_EQ(capture_for(c, "login1"), "");
}

TEST(Config, PlugstackOverridesWinOverTheFile) {
  std::string path =
      write_temp("ovr.toml", "policy = \"fail-open\"\ngpu_binding = \"local-rank\"\n");
  Config c = parse_plugstack({"policy=fail-closed", "config=" + path, "gpu_binding=one-gpu",
                              "master_port=29999", "overwrite_user_env=yes"});
  EXPECT_EQ(c.policy, Policy::kFailClosed);
  EXPECT_EQ(c.gpu_binding, GpuBinding::kOneGpu);
  EXPECT_EQ(c.master_port, "29999");
  EXPECT_TRUE(c.overwrite_user_env);
}

// Shadow mode: from the file or the plugstack line; a bad value names where it is.
TEST(Config, ShadowModeAndItsLog) {
  EXPECT_EQ(parse_plugstack({}).mode, Mode::kApply);
  EXPECT_EQ(parse_plugstack({}).shadow_log, "");
  std::string path =
      write_temp("shadow.toml", "mode = \"shadow\"\nshadow_log = \"/var/log/ta.log\"\n");
  Config c = parse_plugstack({"config=" + path});
  EXPECT_EQ(c.mode, Mode::kShadow);
  EXPECT_EQ(c.shadow_log, "/var/log/ta.log");
  EXPECT_STREQ(to_string(c.mode), "shadow");
  EXPECT_EQ(parse_plugstack({"config=" + path, "mode=apply"}).mode, Mode::kApply);
  EXPECT_EQ(parse_plugstack({"mode=shadow"}).mode, Mode::kShadow);
  EXPECT_EQ(error_of({"mode=dry-run"}),
            "plugstack argument 'mode=dry-run': mode must be apply or shadow, not 'dry-run'");
  EXPECT_NE(error_of({"shadow_log=ta.log"}).find("shadow_log must be an absolute path"),
            std::string::npos);
  std::string bad = write_temp("badmode.toml", "policy = \"fail-open\"\nmode = \"shadows\"\n");
  EXPECT_NE(error_of({"config=" + bad}).find(bad + ":2"), std::string::npos);
}

TEST(Config, OversubscriptionAndRoutingForFabricsWithoutSpeeds) {
  std::string path = write_temp("cap.toml", "oversubscription = [1, 2.5]\nrouting = \"ecmp\"\n");
  Config c = parse_plugstack({"config=" + path});
  EXPECT_EQ(c.oversubscription, (std::vector<double>{1, 2.5}));
  ASSERT_TRUE(c.routing.has_value());
  EXPECT_EQ(*c.routing, topology::Routing::kEcmp);
  // The plugstack line takes the same setting as text, and wins.
  Config o = parse_plugstack({"config=" + path, "oversubscription=1:1,4:1", "routing=adaptive"});
  EXPECT_EQ(o.oversubscription, (std::vector<double>{1, 4}));
  EXPECT_EQ(*o.routing, topology::Routing::kAdaptive);
  EXPECT_TRUE(parse_plugstack({}).oversubscription.empty());
  EXPECT_FALSE(parse_plugstack({}).routing.has_value());
  EXPECT_NE(error_of({"oversubscription=0.5"}).find("at least 1"), std::string::npos);
  EXPECT_NE(error_of({"routing=hash"}).find("adaptive"), std::string::npos);
  std::string bad = write_temp("badcap.toml", "oversubscription = [\"x\"]\n");
  EXPECT_NE(error_of({"config=" + bad}).find(bad + ":1"), std::string::npos);
}

// fabric_format / capture_format: the admin's word for a file whose head does not say what it is.
// A format that is forced is used as given: a topology.conf read as ibnetdiscover is refused by
// that reader, naming the file; the wrong kind of format is refused at the key.
TEST(Config, FabricAndCaptureFormatsOverrideDetection) {
  const std::string fixtures = TOPOAWARE_TEST_FIXTURES;
  const std::string conf = fixtures + "/slurm-topology/psmn-x5-tree-from-ibnetdiscover.topology.conf";
  Config detected = parse_plugstack({"fabric=" + conf});
  EXPECT_EQ(detected.fabric_format, topology::InputFormat::kAuto);
  const topology::Fabric as_detected = load_configured_fabric(detected);
  EXPECT_GT(as_detected.hosts.size(), 0u);

  Config named = parse_plugstack({"fabric=" + conf, "fabric_format=slurm-topology"});
  EXPECT_EQ(named.fabric_format, topology::InputFormat::kSlurmTopology);
  EXPECT_EQ(load_configured_fabric(named).hosts.size(), as_detected.hosts.size());

  Config wrong = parse_plugstack({"fabric=" + conf, "fabric_format=ibnetdiscover"});
  try {
    load_configured_fabric(wrong);
    ADD_FAILURE() << "a topology.conf read as ibnetdiscover loaded";
  } catch (const topology::Error& e) {
    EXPECT_NE(std::string(e.what()).find(conf), std::string::npos) << e.what();
  }

  std::string path = write_temp("fmt.toml", "capture_format = \"nccl-xml\"\n");
  EXPECT_EQ(parse_plugstack({"config=" + path}).capture_format, topology::InputFormat::kNcclXml);
  std::string msg = error_of({"fabric_format=hwloc-xml"});
  EXPECT_NE(msg.find("fabric_format"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ibnetdiscover"), std::string::npos) << msg;
  msg = error_of({"config=" + write_temp("fmt2.toml", "\n\ncapture_format = \"toml\"\n")});
  EXPECT_NE(msg.find(":3"), std::string::npos) << msg;
}

// One answer to "which capture for this host" for srun, slurmstepd and `map`: the [[node]]
// entry first, else the fabric node type's capture resolved against the fabric's folder.
TEST(Config, CaptureForAHostIsTheNodeEntryElseItsNodeType) {
  const std::string lab = std::string(TOPOAWARE_SOURCE_DIR) + "/etc/lab-cluster.toml";
  const topology::Fabric fabric = topology::load_fabric(lab, "");
  const Config none;
  const std::string by_type = capture_for(none, fabric, "node1");
  EXPECT_TRUE(std::filesystem::exists(by_type)) << by_type;
  EXPECT_NE(by_type.find("dgx-h100-topo.xml"), std::string::npos) << by_type;
  EXPECT_EQ(capture_for(none, fabric, "not-in-the-fabric"), "");
  std::string path =
      write_temp("nodes.toml", "[[node]]\nhosts = \"node[1-2]\"\ncapture = \"/x.xml\"\n");
  const Config with_node = parse_plugstack({"config=" + path});
  EXPECT_EQ(capture_for(with_node, fabric, "node2"), "/x.xml");
  EXPECT_EQ(capture_for(with_node, fabric, "node3"), by_type);
}

TEST(Config, UnknownKeysAndBadValuesNameTheirOrigin) {
  EXPECT_NE(error_of({"colour=blue"}).find("unknown key 'colour'"), std::string::npos);
  EXPECT_NE(error_of({"novalue"}).find("plugstack argument 'novalue'"), std::string::npos);
  EXPECT_NE(error_of({"policy=maybe"}).find("fail-open or fail-closed"), std::string::npos);
  EXPECT_NE(error_of({"master_port=70000"}).find("1-65535"), std::string::npos);
  EXPECT_NE(error_of({"job_dir=relative"}).find("absolute"), std::string::npos);
  std::string bad = write_temp("bad.toml", "fabric = \"x\"\n\nbind_cpu = true\n");
  std::string msg = error_of({"config=" + bad});
  EXPECT_NE(msg.find(bad + ":3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key 'bind_cpu'"), std::string::npos) << msg;
  std::string node = write_temp("node.toml", "[[node]]\nhosts = \"n*\"\n");
  EXPECT_NE(error_of({"config=" + node}).find("needs both hosts and capture"), std::string::npos);
}

TEST(Config, MalformedAndMissingFilesAreErrorsWithTheirPath) {
  std::string broken = write_temp("broken.toml", "fabric = \"unterminated\n");
  std::string msg = error_of({"config=" + broken});
  EXPECT_NE(msg.find(broken + ":1"), std::string::npos) << msg;
  msg = error_of({"config=/nonexistent/topo-aware.toml"});
  EXPECT_NE(msg.find("/nonexistent/topo-aware.toml"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not found"), std::string::npos) << msg;
}

}  // namespace
}  // namespace topoaware::launch
