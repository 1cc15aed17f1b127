// Slurm's node selection (slurm_select.h) against the real slurmctld: every case recorded by
// tests/lab/select-check.sh (tests/fixtures/slurm-select/slurm-<release>-<mode>.txt: the free
// nodes, the job's node count, the nodes slurmctld gave it) replayed through select_tree
// (mode tree, with the recording's topology.conf) or select_flat (mode none), following the
// recorded release's rules (Settings::release). A case must agree exactly unless the line after
// it explains why it does not (`# differs: ...`); an explained case that agrees fails too, so
// the explanations stay true. docs/placement.md, "Checked against slurmctld", has the counts.
// TOPOAWARE_SLURM_SELECT_DIR replays another folder of recordings (scripts/release-check.sh
// records a fresh one there: slurm-*.txt and the topology.conf they were made with).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "topoaware/mapper/slurm_select.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::mapper::slurm {
namespace {

std::string recordings_dir() {
  const char* dir = std::getenv("TOPOAWARE_SLURM_SELECT_DIR");
  return dir != nullptr && *dir != '\0' ? std::string(dir)
                                        : std::string(TOPOAWARE_TEST_FIXTURES) + "/slurm-select";
}

struct RecordedCase {
  int line = 0;
  std::string text;         // the case line as recorded
  std::string free;         // hostlist of the free nodes
  std::uint32_t nodes = 0;  // sbatch -N
  std::string slurm;        // the allocation slurmctld made, or pending(REASON)
  std::string differs;      // why the model does not agree; empty: it must
};

struct Recording {
  std::string version;        // "22.05.8"
  std::uint32_t release = 0;  // 2205
  std::string mode;           // tree | none
  bool patterns = false;      // cases from a patterns file, not random ones
  std::vector<RecordedCase> cases;
};

std::string after(const std::string& line, const std::string& prefix) {
  return line.rfind(prefix, 0) == 0 ? line.substr(prefix.size()) : std::string();
}

// The value of `key=` in a case line (values hold no spaces).
std::string field(const std::string& line, const std::string& key) {
  std::size_t at = line.find(key + "=");
  if (at == std::string::npos) return {};
  at += key.size() + 1;
  return line.substr(at, line.find(' ', at) - at);
}

Recording read_recording(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  Recording r;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (std::string v = after(line, "# slurm: "); !v.empty()) {
      r.version = v;
      if (std::optional<topology::SlurmRelease> rel = topology::parse_slurm_release(v)) {
        r.release = static_cast<std::uint32_t>(rel->major * 100 + rel->minor);
      }
    } else if (std::string m = after(line, "# mode: "); !m.empty()) {
      r.mode = m;
    } else if (line.rfind("# patterns: ", 0) == 0) {
      r.patterns = true;
    } else if (std::string d = after(line, "# differs: "); !d.empty()) {
      EXPECT_FALSE(r.cases.empty()) << path << ":" << n << ": a # differs: line before any case";
      if (!r.cases.empty()) r.cases.back().differs = d;
    } else if (line.rfind("free=", 0) == 0) {
      RecordedCase c;
      c.line = n;
      c.text = line;
      c.free = field(line, "free");
      c.nodes = static_cast<std::uint32_t>(std::stoul(field(line, "nodes")));
      c.slurm = field(line, "slurm");
      r.cases.push_back(c);
    }
  }
  return r;
}

// What the model answers for a case, in the recording's own words: a hostlist, or "pending".
std::string model_answer(const Recording& r, const RecordedCase& c,
                         const std::vector<Node>& all_nodes, const std::vector<Switch>& switches) {
  std::vector<Node> nodes = all_nodes;
  const std::vector<std::string> free = topology::expand_hostlist(c.free);
  for (Node& n : nodes) n.free = std::find(free.begin(), free.end(), n.name) != free.end();
  Job job;
  job.nodes = c.nodes;
  Settings settings;
  settings.release = r.release;
  const Selection s =
      r.mode == "none" ? select_flat(nodes, job) : select_tree(nodes, switches, job, settings);
  if (s.outcome != Outcome::kSelected) return "pending";
  std::vector<std::string> names;
  for (std::uint32_t i : s.nodes) names.push_back(nodes[i].name);
  return topology::compress_hostlist(names);
}

std::string slurm_answer(const std::string& recorded) {
  if (recorded.rfind("pending", 0) == 0) return "pending";
  return topology::compress_hostlist(topology::expand_hostlist(recorded));
}

// The recordings' cluster: topology.conf's leaves list node1..node12 in slurm.conf order, so the
// importer's host order is Slurm's node index order; its switch order is Slurm's too.
TEST(SlurmSelectRecorded, TheLabTopologyIsInSlurmsOrder) {
  topology::Fabric f = topology::load_fabric(recordings_dir() + "/topology.conf");
  std::vector<Node> nodes = nodes_of(f);
  ASSERT_EQ(nodes.size(), 12u);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(nodes[i].name, "node" + std::to_string(i + 1));
  }
  std::vector<Switch> switches = switches_of(f);
  ASSERT_EQ(switches.size(), 7u);
  EXPECT_EQ(switches[0].name, "leaf1");
  EXPECT_EQ(switches[1].nodes, (std::vector<std::uint32_t>{3, 4}));
  EXPECT_EQ(switches[6].name, "top");
}

TEST(SlurmSelectRecorded, EveryRecordingAgreesWithSlurmctld) {
  topology::Fabric f = topology::load_fabric(recordings_dir() + "/topology.conf");
  const std::vector<Node> nodes = nodes_of(f);
  const std::vector<Switch> switches = switches_of(f);
  std::vector<std::filesystem::path> files;
  const std::string dir = recordings_dir();
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("slurm-", 0) == 0 && e.path().extension() == ".txt") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 2u) << "the 22.05 tree and none recordings are missing from " << dir;
  for (const std::filesystem::path& path : files) {
    SCOPED_TRACE(path.filename().string());
    const Recording r = read_recording(path);
    ASSERT_GE(r.release, 2205u) << "no # slurm: line";
    ASSERT_TRUE(r.mode == "tree" || r.mode == "none") << "mode '" << r.mode << "'";
    ASSERT_GE(r.cases.size(), r.patterns ? 1u : 50u);
    std::size_t agree = 0;
    for (const RecordedCase& c : r.cases) {
      const std::string ours = model_answer(r, c, nodes, switches);
      const bool same = ours == slurm_answer(c.slurm);
      agree += same ? 1 : 0;
      if (c.differs.empty()) {
        EXPECT_TRUE(same) << path.filename().string() << ":" << c.line << ": " << c.text
                          << "\n  model: " << ours << " (a new disagreement: fix the model, "
                          << "or explain it with a # differs: line)";
      } else {
        EXPECT_FALSE(same) << path.filename().string() << ":" << c.line << ": " << c.text
                           << " agrees now; its # differs: line is stale";
      }
    }
    // At least 95% exactly as slurmctld chose.
    EXPECT_GE(agree * 100, r.cases.size() * 95)
        << agree << " of " << r.cases.size() << " cases agree";
  }
}

}  // namespace
}  // namespace topoaware::mapper::slurm
