// Inputs as terminals and editors leave them (input_format.h): every real fixture, turned at run
// time into what an admin would save from a terminal session (a UTF-8 BOM, the shell prompt with
// the command in front, CRLF line ends, a prompt line after the data) or gzipped, loads into the
// same model as the clean file, with a note per skipped line; format detection, --format and the
// refusals of unknown formats.
#include "topoaware/topology/input_format.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "fabric_test_support.h"
#include "test_support.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/node_io.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::write_temp;

// What `ibnetdiscover > x` looks like when it was copied from a terminal on a Windows desktop.
std::string terminal_capture(const std::string& text, const std::string& command) {
  std::string crlf;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' && (i == 0 || text[i - 1] != '\r')) crlf += '\r';
    crlf += text[i];
  }
  if (!crlf.empty() && crlf.back() != '\n') crlf += "\r\n";
  return "\xEF\xBB\xBF[root@ufm01 dir]# " + command + "\r\n" + crlf + "[root@ufm01 dir]# \r\n";
}

std::string gzip(const std::string& text) {
  std::string path = write_temp("gz-tmp", "");
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  gzclose(f);
  return read_file(path);
}

std::set<std::string> names(const Fabric& f, VertexKind kind) {
  std::set<std::string> out;
  for (VertexId v : f.graph.of_kind(kind)) out.insert(f.graph.vertex(v).name);
  return out;
}

// The same switches, hosts and tiers, and each host on the same leaves.
void expect_same_fabric(const Fabric& a, const Fabric& b, const std::string& what) {
  EXPECT_EQ(names(a, VertexKind::kSwitch), names(b, VertexKind::kSwitch)) << what;
  EXPECT_EQ(names(a, VertexKind::kHost), names(b, VertexKind::kHost)) << what;
  EXPECT_EQ(a.tiers.size(), b.tiers.size()) << what;
  EXPECT_EQ(a.channel_adapters, b.channel_adapters) << what;
  EXPECT_EQ(test::leaf_membership(a), test::leaf_membership(b)) << what;
}

std::vector<std::string> fabric_fixtures() {
  std::vector<std::string> out = {
      test::fixture("ibnetdiscover/psmn-x5-qdr-voltaire-mellanox-100nodes.ibnetdiscover.txt"),
      test::fixture("lingjun/topo.csv")};
  for (const char* dir : {"ibnetdiscover", "slurm-topology"}) {
    std::string d = test::shared_fixture(dir);
    if (d.empty()) continue;
    for (const auto& e : fs::directory_iterator(d)) {
      std::string p = e.path().string();
      // The map is not a fabric; the others are refused for their own reasons (tested there).
      if (p.ends_with(".map") || p.ends_with(".yaml") || p.ends_with(".gres.conf") ||
          p.find("invalid-lid") != std::string::npos) {
        continue;
      }
      out.push_back(p);
    }
  }
  for (const char* toml :
       {"cluster-dgx-h100.toml", "cluster-gb200-nvl72.toml", "lab-cluster.toml"}) {
    out.push_back(std::string(TOPOAWARE_TEST_FIXTURES) + "/../../etc/" + toml);
  }
  return out;
}

TEST(InputFormat, TerminalCapturesOfEveryFabricLoadLikeTheCleanFile) {
  std::size_t n = 0;
  for (const std::string& path : fabric_fixtures()) {
    Fabric clean = load_fabric(path);
    std::string name = fs::path(path).filename().string();
    std::string term = write_temp("term-" + name, terminal_capture(read_file(path), "cat " + name));
    Fabric dirty = load_fabric(term);
    expect_same_fabric(clean, dirty, name);
    // One note per skipped line, each naming the line of the file.
    ASSERT_EQ(dirty.notes.size(), clean.notes.size() + 2) << name;
    EXPECT_NE(dirty.notes[0].find(term + ":1: skipped a shell prompt"), std::string::npos)
        << dirty.notes[0];
    EXPECT_NE(dirty.notes[0].find("`[root@ufm01 dir]# cat " + name + "`"), std::string::npos);
    EXPECT_NE(dirty.notes[1].find("after the data"), std::string::npos) << dirty.notes[1];
    // Gzipped, the same again.
    Fabric gz = load_fabric(write_temp("gz-" + name, gzip(read_file(term))));
    expect_same_fabric(clean, gz, name + ".gz");
    ++n;
  }
  EXPECT_GE(n, 4u);
}

// The reported failure: an ibnetdiscover dump whose first line is the prompt, taken for TOML.
TEST(InputFormat, PromptLineIsNotTakenForATomlTable) {
  std::string psmn =
      test::fixture("ibnetdiscover/psmn-x5-qdr-voltaire-mellanox-100nodes.ibnetdiscover.txt");
  for (const char* prompt :
       {"[root@ufm01 dir]# ibnetdiscover", "user@host:~$ ibnetdiscover -p",
        "root@ufm01:/var/tmp# ibnetdiscover --node-name-map=x.map", "bash-5.1$ ibnetdiscover",
        "$ ibnetdiscover", "ibnetdiscover -p", "sudo ibnetdiscover",
        "\x1b[01;32mroot@ufm01\x1b[00m:\x1b[01;34m~\x1b[00m# ibnetdiscover"}) {
    std::string p = write_temp("prompt.txt", std::string(prompt) + "\n" + read_file(psmn));
    Fabric f = load_fabric(p);
    EXPECT_EQ(test::switch_count(f), 11u) << prompt;
    ASSERT_FALSE(f.notes.empty()) << prompt;
    EXPECT_NE(f.notes[0].find(":1: skipped"), std::string::npos) << f.notes[0];
  }
}

TEST(InputFormat, CleaningKeepsLineNumbersAndLeavesDataAlone) {
  InputText t = clean_input(
      "\xEF\xBB\xBF[root@h dir]# cat x\r\n\r\nSwitchName=s1 Nodes=n1\r\nbad line\r\n"
      "[root@h dir]# \r\n",
      "f");
  EXPECT_EQ(t.text, "\n\nSwitchName=s1 Nodes=n1\nbad line\n\n");
  ASSERT_EQ(t.notes.size(), 2u);
  EXPECT_NE(t.notes[0].find("f:1:"), std::string::npos);
  EXPECT_NE(t.notes[1].find("f:5:"), std::string::npos);
  // So an error further down still names the line the user sees in the file.
  std::string p = write_temp("lines.conf", "[root@h dir]# cat x\nSwitchName=s1 Nodes=n1\nbad\n");
  try {
    load_fabric(p);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.context(), p + ":3") << e.what();
  }
  // Lines that only look a little like prompts are data: TOML tables (even with a comment
  // glued on), ibnetdiscover port lines, comments, a TOML value holding an @.
  for (const char* data :
       {"[defaults]#comment\nlink = \"4xNDR\"\n", "[1]\t\"H-0002\"[1] # \"x\" lid 4 4xQDR\n",
        "# ibnetdiscover\nSwitchName=s1 Nodes=n1\n", "user = \"root@host\"\n",
        "[ hosts ]\nexcluded = \"n1\"\n", "cat = 1\n"}) {
    InputText same = clean_input(data, "f");
    EXPECT_EQ(same.text, data) << data;
    EXPECT_TRUE(same.notes.empty()) << data;
  }
}

TEST(InputFormat, NodeCapturesLoadFromTerminalCapturesAndGzip) {
  std::vector<std::string> files;
  for (const char* dir : {"hwloc", "nccl-topo"}) {
    for (const auto& e : fs::directory_iterator(test::fixture(dir))) {
      files.push_back(e.path().string());
    }
  }
  std::size_t n = 0;
  for (const std::string& path : files) {
    if (path.find("graph") != std::string::npos) continue;
    NodeTopology clean = load_node_file(path);
    std::string name = fs::path(path).filename().string();
    std::string term = write_temp("term-" + name, terminal_capture(read_file(path), "lstopo -"));
    NodeTopology dirty = load_node_file(term);
    EXPECT_EQ(dirty.graph.vertex_count(), clean.graph.vertex_count()) << name;
    EXPECT_EQ(dirty.gpus().size(), clean.gpus().size()) << name;
    EXPECT_EQ(dirty.nics().size(), clean.nics().size()) << name;
    ASSERT_GE(dirty.notes.size(), 2u) << name;
    EXPECT_NE(dirty.notes[0].find(":1: skipped"), std::string::npos) << dirty.notes[0];
    // The NCCL XML written from either is the same (bus ids and attributes all kept).
    try {
      EXPECT_EQ(node_to_nccl_xml(dirty), node_to_nccl_xml(clean)) << name;
    } catch (const Error&) {
      EXPECT_THROW(node_to_nccl_xml(dirty), Error) << name;
    }
    NodeTopology gz = load_node_file(write_temp("gz-" + name, gzip(read_file(term))));
    EXPECT_EQ(gz.graph.vertex_count(), clean.graph.vertex_count()) << name;
    ++n;
  }
  EXPECT_GE(n, 20u);
}

TEST(InputFormat, GzipIsBoundedAndCorruptionNamed) {
  std::string big(4u << 20, 'x');
  std::string p = write_temp("bomb.gz", gzip(big));
  EXPECT_LT(fs::file_size(p), 64u * 1024);
  try {
    read_input(p, 1u << 20);
    ADD_FAILURE() << "inflated past the bound";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kLimit);
    EXPECT_NE(std::string(e.what()).find("inflates to more than 1 MiB"), std::string::npos);
  }
  std::string gz = gzip("SwitchName=s1 Nodes=n[1-4]\n");
  std::string cut = write_temp("cut.gz", gz.substr(0, gz.size() - 6));
  try {
    load_fabric(cut);
    ADD_FAILURE() << "loaded a truncated gzip file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find(cut + ": gzip data is corrupt or truncated"),
              std::string::npos)
        << e.what();
  }
}

TEST(InputFormat, SignaturesAnywhereInTheHead) {
  // A line of something else before the data does not hide the format; the parser then names
  // that line.
  std::string psmn = read_file(
      test::fixture("ibnetdiscover/psmn-x5-qdr-voltaire-mellanox-100nodes.ibnetdiscover.txt"));
  EXPECT_EQ(detect_format("Last login: Mon Jun  1 from 10.0.0.1\n" + psmn, InputKind::kFabric, "f"),
            InputFormat::kIbnetdiscover);
  EXPECT_EQ(
      detect_format("\n\n# site tree\n[x]\nswitchname=s1 nodes=n1\n", InputKind::kFabric, "f"),
      InputFormat::kSlurmTopology);
  EXPECT_EQ(detect_format("name = \"x\"\n[[unit]]\nhosts = \"n1\"\n", InputKind::kFabric, "f"),
            InputFormat::kFabricToml);
  EXPECT_EQ(detect_format("generated by a script\n<?xml version=\"1.0\"?>\n<topology "
                          "version=\"2.0\">\n",
                          InputKind::kNode, "f"),
            InputFormat::kHwlocXml);
  EXPECT_EQ(detect_format("<!-- p5 -->\n<system version=\"1\">\n", InputKind::kNode, "f"),
            InputFormat::kNcclXml);
}

TEST(InputFormat, UnknownAndWrongKindAreRefusedSayingWhatToDo) {
  std::string p = write_temp("unknown.txt", "hello world\nthis is not a fabric\n");
  try {
    load_fabric(p);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kBadInput);
    EXPECT_EQ(e.context(), p);
    for (const char* s : {"unrecognized format", "ibnetdiscover", "slurm-topology", "toml", "json",
                          "--format NAME", "fabric_format"}) {
      EXPECT_NE(m.find(s), std::string::npos) << s << ": " << m;
    }
  }
  try {
    load_node_file(p);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    std::string m = e.what();
    for (const char* s : {"unrecognized format", "hwloc-xml", "nccl-xml", "capture_format"}) {
      EXPECT_NE(m.find(s), std::string::npos) << s << ": " << m;
    }
  }
  // A node capture given as the fabric, and a fabric as the node, say which is which.
  std::string hwloc = test::fixture("hwloc/hwloc-v2fmt-4s-em64t-plain-cpu.xml");
  try {
    load_fabric(hwloc);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("hwloc XML, a node capture, not a fabric description"),
              std::string::npos)
        << e.what();
  }
  std::string conf = test::fixture("slurm-topology/psmn-x5-tree-from-ibnetdiscover.topology.conf");
  try {
    load_node_file(conf);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("a fabric description, not a node capture"),
              std::string::npos)
        << e.what();
  }
}

TEST(InputFormat, GivenFormatIsUsedAsGiven) {
  std::string psmn =
      test::fixture("ibnetdiscover/psmn-x5-qdr-voltaire-mellanox-100nodes.ibnetdiscover.txt");
  EXPECT_EQ(test::switch_count(load_fabric(psmn, {}, InputFormat::kIbnetdiscover)), 11u);
  // Read as TOML it fails as TOML does, at the line TOML stops.
  try {
    load_fabric(psmn, {}, InputFormat::kFabricToml);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TOML"), std::string::npos) << e.what();
  }
  // A partial dump (a CA record, no header, no Switch line) is still recognized.
  std::string ca = write_temp("ca-only.txt",
                              "Ca\t1 \"H-0002c903000e0b7a\"\t\t# \"n01 HCA-1\"\n"
                              "[1](2c903000e0b7b) \t\"H-0002c903000e0b7a\"[1]\n");
  EXPECT_EQ(detect_format(read_file(ca), InputKind::kFabric, ca), InputFormat::kIbnetdiscover);
  EXPECT_EQ(load_node_file(test::fixture("nccl-topo/dgx-h100-topo.xml"), InputFormat::kNcclXml)
                .gpus()
                .size(),
            8u);
  EXPECT_THROW(load_node_file(test::fixture("nccl-topo/dgx-h100-topo.xml"), InputFormat::kHwlocXml),
               Error);
  // Formats of the other kind are refused before anything is read.
  EXPECT_THROW(load_fabric(psmn, {}, InputFormat::kNcclXml), Error);
  EXPECT_THROW(load_node_file(psmn, InputFormat::kSlurmTopology), Error);
}

TEST(InputFormat, FormatNames) {
  EXPECT_EQ(format_names(InputKind::kFabric),
            "auto, ibnetdiscover, slurm-topology, toml, json, lingjun-csv");
  EXPECT_EQ(format_names(InputKind::kNode), "auto, hwloc-xml, nccl-xml");
  for (InputFormat f :
       {InputFormat::kIbnetdiscover, InputFormat::kSlurmTopology, InputFormat::kFabricToml,
        InputFormat::kFabricJson, InputFormat::kLingjunCsv}) {
    EXPECT_EQ(parse_input_format(to_string(f), InputKind::kFabric, "x"), f);
  }
  for (InputFormat f : {InputFormat::kHwlocXml, InputFormat::kNcclXml}) {
    EXPECT_EQ(parse_input_format(to_string(f), InputKind::kNode, "x"), f);
  }
  EXPECT_EQ(parse_input_format("auto", InputKind::kNode, "x"), InputFormat::kAuto);
  EXPECT_EQ(parse_input_format("", InputKind::kFabric, "x"), InputFormat::kAuto);
  try {
    parse_input_format("yaml", InputKind::kFabric, "fabric_format");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.context(), "fabric_format");
    EXPECT_NE(std::string(e.what()).find("known: auto, ibnetdiscover"), std::string::npos);
  }
  EXPECT_THROW(parse_input_format("hwloc-xml", InputKind::kFabric, "x"), Error);
}

}  // namespace
}  // namespace topoaware::topology
