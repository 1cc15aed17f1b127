// Slurm hostlist syntax: expansion, counting, the bound, compression round trips.
#include "topoaware/topology/hostlist.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "topoaware/topology/error.h"

namespace topoaware::topology {
namespace {

using V = std::vector<std::string>;

TEST(Hostlist, RangesPaddingAndCommaLists) {
  // The width belongs to each range, as in libslurm: "7" stays "node7".
  EXPECT_EQ(expand_hostlist("node[001-003,7],login1"),
            (V{"node001", "node002", "node003", "node7", "login1"}));
  EXPECT_EQ(expand_hostlist("n[8-11]"), (V{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[08-11]"), (V{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("tara-c-[001-004]").back(), "tara-c-004");
  EXPECT_EQ(expand_hostlist("single"), (V{"single"}));
  EXPECT_TRUE(expand_hostlist("").empty());
}

TEST(Hostlist, SeveralBracketGroupsExpandLeftmostSlowest) {
  // The order libslurm's hostlist_shift gives for the same string.
  EXPECT_EQ(expand_hostlist("gpu[1-2]-ib[0-1]"),
            (V{"gpu1-ib0", "gpu1-ib1", "gpu2-ib0", "gpu2-ib1"}));
  EXPECT_EQ(hostlist_count("rack[1-4]-node[01-18],x"), 73u);
}

TEST(Hostlist, MalformedInputIsRefusedWithContext) {
  for (const char* bad : {"n[1-3", "n]", "n[3-1]", "n[a-b]", "n[]", "n[1-[2]]", "n[1-2 ]", "a b"}) {
    try {
      expand_hostlist(bad, "topology.conf:7");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadInput) << bad;
      EXPECT_EQ(e.context(), "topology.conf:7");
      EXPECT_NE(std::string(e.what()).find("bad hostlist"), std::string::npos) << e.what();
    }
  }
}

TEST(Hostlist, HugeListsAreRefusedBeforeExpansion) {
  auto t0 = std::chrono::steady_clock::now();
  try {
    expand_hostlist("n[1-999999999]", "x:1");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kLimit);
    EXPECT_NE(std::string(e.what()).find("999999999 hosts"), std::string::npos) << e.what();
  }
  // A product of groups overflowing size_t saturates instead of wrapping around.
  EXPECT_THROW(expand_hostlist("a[1-999999999999999999]b[1-999999999999999999]c[1-99999]"), Error);
  EXPECT_EQ(hostlist_count("n[1-999999999]"), 999999999u);
  EXPECT_THROW(expand_hostlist("n[1-5]", {}, 4), Error);
  EXPECT_EQ(expand_hostlist("n[1-4]", {}, 4).size(), 4u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

TEST(Hostlist, CompressWritesSlurmRanges) {
  EXPECT_EQ(compress_hostlist({"node1", "node2", "node3", "node5"}), "node[1-3,5]");
  EXPECT_EQ(compress_hostlist({"n001", "n002", "n010"}), "n[001-002,010]");
  EXPECT_EQ(compress_hostlist({"a1", "b1", "b2", "login"}), "a1,b[1-2],login");
  EXPECT_EQ(compress_hostlist({"n9", "n10"}), "n[9-10]");
  EXPECT_EQ(compress_hostlist({"n09", "n10"}), "n[09-10]");
  EXPECT_EQ(compress_hostlist({}), "");
}

TEST(Hostlist, CompressThenExpandRoundTrips) {
  std::vector<V> cases = {
      {"sl390lin1", "sl390lin2", "sl390lin3", "sl390lin5", "r510gluster1", "x5570comp2"},
      {"n08", "n09", "n10", "n11", "n100", "n7"},
      {"H-78e7d1030024535c", "sl390lin22", "sl390lin28"},
      {"gpu1-ib0", "gpu1-ib1", "gpu2-ib0"},
      {"dgx001", "dgx002", "dgx0100", "dgx0101"},
  };
  for (const V& c : cases)
    EXPECT_EQ(expand_hostlist(compress_hostlist(c)), c) << compress_hostlist(c);
}

}  // namespace
}  // namespace topoaware::topology
