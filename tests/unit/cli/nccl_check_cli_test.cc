// `topo-aware nccl-check` without a GPU: the skip path (exit 77 and its reason) on any machine,
// and the whole comparison flow driven through a fake CUDA runtime + NCCL (fake_cuda_nccl.c)
// whose ncclCommInitAll "dumps" a real NCCL dump from the fixtures, as NCCL would.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_support.h"
#include "test_support.h"

namespace topoaware {
namespace {

namespace fs = std::filesystem;
using test::cli;
using test::CliRun;

const std::string kFake = TOPOAWARE_FAKE_CUDA_NCCL;
const std::string kLibs = " --cudart '" + kFake + "' --nccl '" + kFake + "'";
// A dump NCCL wrote on an 8x RTX 3090 node with one ConnectX-6 (tests/fixtures/nccl-topo).
const char* kDump = "nccl-topo/panlichen-8xRTX3090-plx-cx6-fdr-topo.xml";

std::string fake_env(int devices, const std::string& topo, const std::string& graph = {}) {
  std::string e = "FAKE_CUDA_DEVICES=" + std::to_string(devices);
  if (!topo.empty()) e += " FAKE_NCCL_TOPO_SOURCE='" + test::fixture(topo) + "'";
  if (!graph.empty()) e += " FAKE_NCCL_GRAPH_SOURCE='" + test::fixture(graph) + "'";
  return e + " ";
}

TEST(NcclCheckCli, HelpNamesTheSkipExitCode) {
  CliRun r = cli("nccl-check --help");
  EXPECT_EQ(r.rc, 0);
  for (const char* s : {"--allreduce", "--cudart", "--nccl", "77", "NCCL_TOPO_DUMP_FILE"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  EXPECT_EQ(r.out.find("--worker"), std::string::npos) << "the worker option is internal";
}

// This machine as it is: without a GPU (CI) the command skips and says why; with one it runs.
TEST(NcclCheckCli, ThisMachineSkipsWithAReasonWhenItHasNoGpu) {
  CliRun r = cli("nccl-check");
  if (r.rc != 77) GTEST_SKIP() << "this machine has a GPU and NCCL (rc " << r.rc << ")";
  EXPECT_EQ(r.err.rfind("topo-aware: nccl-check: skipped: ", 0), 0u) << r.err;
  EXPECT_TRUE(r.err.find("no usable GPU") != std::string::npos ||
              r.err.find("cannot be loaded") != std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line:\n" << r.err;
}

TEST(NcclCheckCli, NoGpuIsASkipNamingCudasOwnAnswer) {
  CliRun r = cli("nccl-check" + kLibs, "env " + fake_env(0, ""));
  EXPECT_EQ(r.rc, 77) << r.out << r.err;
  EXPECT_EQ(
      r.err,
      "topo-aware: nccl-check: skipped: no usable GPU: cudaGetDeviceCount: no CUDA-capable device "
      "is detected (100)\n");
}

TEST(NcclCheckCli, AMissingLibraryIsASkipNamingWhatWasTried) {
  CliRun cuda = cli("nccl-check --cudart /nonexistent/libcudart.so.13");
  EXPECT_EQ(cuda.rc, 77) << cuda.err;
  EXPECT_NE(cuda.err.find("skipped: the CUDA runtime (libcudart) cannot be loaded: "
                          "/nonexistent/libcudart.so.13"),
            std::string::npos)
      << cuda.err;
  CliRun nccl = cli("nccl-check --cudart '" + kFake + "' --nccl /nonexistent/libnccl.so.2",
                    "env " + fake_env(2, ""));
  EXPECT_EQ(nccl.rc, 77) << nccl.err;
  EXPECT_NE(nccl.err.find("skipped: NCCL (libnccl) cannot be loaded: /nonexistent/libnccl.so.2"),
            std::string::npos)
      << nccl.err;
}

// Our model is the node NCCL dumped: every comparison agrees, exit 0.
TEST(NcclCheckCli, WhenOurModelIsNcclsViewAllThreeComparisonsAgree) {
  CliRun r = cli(std::string("nccl-check -i ") + kDump + kLibs,
                 "env " + fake_env(8, kDump, "nccl-topo/azure-ncv4-a100-4gpu-graph.xml"));
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  for (const char* s : {"GPUs: 8 visible to CUDA; CUDA runtime 13.0, driver 13.0; NCCL 2.28.3",
                        "our node model (nccl-xml:", "vs NCCL's view: agree (8 GPUs, 1 NICs",
                        "our NCCL_TOPO_FILE vs NCCL's view: agree",
                        "NCCL given our file vs NCCL alone: agree", "ring", "2 x 12.0 GB/s"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  EXPECT_EQ(r.err, "");
}

// Our model is another machine than the one NCCL dumped: mismatches listed, exit 1.
TEST(NcclCheckCli, WhenTheViewsDifferTheMismatchesAreListedAndItFails) {
  CliRun r = cli("nccl-check -i nccl-topo/dgx-h100-topo.xml --limit 3" + kLibs,
                 "env " + fake_env(8, kDump));
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("DIFFER"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MISMATCH GPU0 0000:0f:00.0 present: ours -, NCCL yes"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("... "), std::string::npos) << "--limit caps the list\n" << r.out;
  EXPECT_NE(r.err.find("topo-aware: nccl-check: NCCL's view differs from ours"), std::string::npos)
      << r.err;
}

TEST(NcclCheckCli, AllreducePrintsMeasuredAndModeledBusBandwidth) {
  CliRun r = cli(std::string("nccl-check -i ") + kDump +
                     " --allreduce --bytes 1048576,4194304 --iters 2 --warmup 1" + kLibs,
                 "env " + fake_env(8, kDump));
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  for (const char* s : {"all_reduce on 8 GPUs", "busbw GB/s", "with our file", "modeled",
                        "        1048576 ", "        4194304 ",
                        // PCIe GPUs: NCCL's own ring over PCIe times the collective.
                        "bottleneck NCCL's Ring bandwidth"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
}

TEST(NcclCheckCli, JsonCarriesEveryDifferenceAndTheSweep) {
  CliRun r =
      cli("nccl-check -i nccl-topo/dgx-h100-topo.xml --of json --allreduce --bytes 1048576 "
          "--iters 1 --warmup 0" +
              kLibs,
          "env " + fake_env(8, kDump, "nccl-topo/azure-ncv4-a100-4gpu-graph.xml"));
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus"], 8);
  EXPECT_EQ(j["nccl"], "2.28.3");
  EXPECT_EQ(j["cuda_devices"][0], "0000:10:00.0");
  ASSERT_EQ(j["comparisons"].size(), 3u);
  EXPECT_FALSE(j["comparisons"][0]["agree"]);
  EXPECT_EQ(j["comparisons"][0]["mismatches"], 12);
  EXPECT_EQ(j["comparisons"][0]["differences"].size(), 27u) << "all of them, not --limit's";
  EXPECT_TRUE(j["comparisons"][2]["agree"]);
  EXPECT_EQ(j["graphs"][0]["graph"], "ring");
  EXPECT_EQ(j["graphs"][0]["alone"]["channels"], 2);
  ASSERT_EQ(j["allreduce"]["rows"].size(), 1u);
  EXPECT_EQ(j["allreduce"]["rows"][0]["bytes"], 1048576);
  EXPECT_GT(j["allreduce"]["rows"][0]["modeled_busbw_gbps"].get<double>(), 0);
  EXPECT_TRUE(j["dumps"].is_null());
}

TEST(NcclCheckCli, NcclFailingToInitialiseIsAFailureWithNcclsWords) {
  CliRun r = cli(std::string("nccl-check -i ") + kDump + kLibs,
                 "env FAKE_NCCL_FAIL=1 " + fake_env(8, kDump));
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("NCCL initialisation failed (exit 1): ncclCommInitAll: unhandled system "
                       "error (fake) (2)"),
            std::string::npos)
      << r.err;
}

TEST(NcclCheckCli, ACrashingNcclIsAFailureNamingTheSignal) {
  CliRun r = cli(std::string("nccl-check -i ") + kDump + kLibs,
                 "env FAKE_NCCL_CRASH=1 " + fake_env(8, kDump));
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("NCCL initialisation was killed by signal 15"), std::string::npos) << r.err;
}

TEST(NcclCheckCli, KeepLeavesTheDumpsAndOurFile) {
  std::string keep = test::scratch("nccl-check-keep");
  fs::remove_all(keep);
  CliRun r = cli(std::string("nccl-check -i ") + kDump + " --keep '" + keep + "'" + kLibs,
                 "env " + fake_env(8, kDump));
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  for (const char* f : {"ours-topo.xml", "nccl-topo-dump.xml", "nccl-topo-dump-with-ours.xml"}) {
    EXPECT_TRUE(fs::exists(fs::path(keep) / f)) << f;
  }
  fs::remove_all(keep);
}

}  // namespace
}  // namespace topoaware
