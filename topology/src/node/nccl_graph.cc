// NCCL graph dumps (nccl_graph.h), read with the bounded XML reader of the topology files.
#include "topoaware/topology/nccl_graph.h"

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "nccl_xml_reader.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/input_format.h"

namespace topoaware::topology {
namespace {

// NCCL reads these with strtol(..., 0) (dev as hex, "0x1") and strtod.
double number(const xml::Element& e, const char* key, const std::string& path) {
  const std::string* s = e.attr(key);
  if (s == nullptr) return 0;
  errno = 0;
  char* end = nullptr;
  double v = s->rfind("0x", 0) == 0 ? static_cast<double>(std::strtol(s->c_str(), &end, 16))
                                    : std::strtod(s->c_str(), &end);
  if (s->empty() || *end != '\0' || errno == ERANGE) {
    throw Error(ErrorCode::kBadInput, where(path, e.line),
                "<" + e.name + " " + key + "=\"" + *s + "\"> is not a number");
  }
  return v;
}

std::string text(const xml::Element& e, const char* key) {
  const std::string* s = e.attr(key);
  return s == nullptr ? std::string() : *s;
}

}  // namespace

std::string nccl_graph_name(int id) {
  switch (id) {
    case 0:
      return "ring";
    case 1:
      return "tree";
    case 2:
      return "collnet-chain";
    case 3:
      return "nvls";
    case 4:
      return "collnet-direct";
    default:
      return "graph " + std::to_string(id);
  }
}

std::vector<NcclGraph> load_nccl_graphs(const std::string& path) {
  std::string data = read_input(path, xml::Limits{}.max_bytes).text;
  xml::Element root = xml::parse(data, path);
  if (root.name != "graphs") {
    throw Error(ErrorCode::kBadInput, where(path, root.line),
                "root element is <" + root.name + ">, expected <graphs> (NCCL_GRAPH_DUMP_FILE)");
  }
  std::vector<NcclGraph> out;
  for (const xml::Element& g : root.children) {
    if (g.name != "graph") continue;  // NCCL skips unknown elements too
    NcclGraph graph;
    graph.id = static_cast<int>(number(g, "id", path));
    graph.pattern = static_cast<int>(number(g, "pattern", path));
    graph.nchannels = static_cast<int>(number(g, "nchannels", path));
    graph.speed_intra = number(g, "speedintra", path);
    graph.speed_inter = number(g, "speedinter", path);
    graph.type_intra = text(g, "typeintra");
    graph.type_inter = text(g, "typeinter");
    graph.crossnic = static_cast<int>(number(g, "crossnic", path));
    for (const xml::Element& c : g.children) {
      if (c.name != "channel") continue;
      std::vector<std::string> hops;
      for (const xml::Element& h : c.children) {
        hops.push_back(h.name + " " + std::to_string(static_cast<long>(number(h, "dev", path))));
      }
      graph.channels.push_back(std::move(hops));
    }
    out.push_back(std::move(graph));
  }
  return out;
}

}  // namespace topoaware::topology
