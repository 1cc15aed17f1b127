#include "topoaware/topology/graph.h"

#include <gtest/gtest.h>

#include <vector>

#include "topoaware/topology/error.h"

namespace topoaware::topology {
namespace {

TEST(NormalizeBusid, AcceptsNcclNvidiaSmiAndShortForms) {
  EXPECT_EQ(normalize_busid("0000:1b:00.0"), "0000:1b:00.0");
  EXPECT_EQ(normalize_busid("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(normalize_busid("1b:00.0"), "0000:1b:00.0");
  EXPECT_EQ(normalize_busid("0101:00:00.0"), "0101:00:00.0");
  EXPECT_EQ(normalize_busid("10001:00:00.0"), "10001:00:00.0");
}

TEST(NormalizeBusid, RejectsMalformed) {
  EXPECT_EQ(normalize_busid(""), "");
  EXPECT_EQ(normalize_busid("0000:1b:00"), "");
  EXPECT_EQ(normalize_busid("0000:1b:20.0"), "");  // device > 0x1f
  EXPECT_EQ(normalize_busid("0000:zz:00.0"), "");
  EXPECT_EQ(normalize_busid("0000:1b:00.8"), "");
}

TEST(Graph, LinksAreUndirectedAndChildrenFollowParents) {
  Graph g;
  Vertex cpu;
  cpu.kind = VertexKind::kCpu;
  VertexId c = g.add_vertex(cpu);
  Vertex gpu;
  gpu.kind = VertexKind::kGpu;
  gpu.busid = "0000:1b:00.0";
  gpu.parent = c;
  VertexId x = g.add_vertex(gpu);
  Link l;
  l.a = c;
  l.b = x;
  l.kind = LinkKind::kPcie;
  l.bandwidth = 24;
  LinkId id = g.add_link(l);
  ASSERT_EQ(g.links_of(c).size(), 1u);
  ASSERT_EQ(g.links_of(x).size(), 1u);
  EXPECT_EQ(g.other_end(id, c), x);
  EXPECT_EQ(g.other_end(id, x), c);
  EXPECT_EQ(g.children(c), std::vector<VertexId>{x});
  EXPECT_EQ(g.find_busid("00000000:1B:00.0"), x);
  EXPECT_EQ(g.of_kind(VertexKind::kGpu), std::vector<VertexId>{x});
  Link bad;
  bad.a = c;
  bad.b = VertexId(99);
  EXPECT_THROW(g.add_link(bad), Error);
}

}  // namespace
}  // namespace topoaware::topology
