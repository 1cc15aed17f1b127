// JSON export of a node: a stable summary scripts rely on (gpus, nics, cpus) followed by the
// complete graph (vertices, links), so nothing the model knows is lost.
//
// Contract (README / docs/topology-node.md): top-level `gpus` and `nics` arrays; each GPU has
// `busid` (lowercase dddd:bb:dd.f), `numa`, `nic` (nearest NIC's name, or its busid when it has
// no name; null when the node has no NIC) and `path_to_nic` (NCCL path class, null without a
// NIC); each NIC has `busid`, `numa`, and `name` / `speed_gbps` when known. Unknown numbers are
// written as null, never as -1, so a script cannot mistake them for values.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "topoaware/topology/node_io.h"
#include "topoaware/topology/paths.h"

namespace topoaware::topology {
namespace {

using nlohmann::ordered_json;

ordered_json int_or_null(int v) { return v >= 0 ? ordered_json(v) : ordered_json(nullptr); }
ordered_json str_or_null(const std::string& s) {
  return s.empty() ? ordered_json(nullptr) : ordered_json(s);
}

// What a script should call a NIC: its (first) port name, else its bus id.
std::string nic_label(const Vertex& v) {
  if (!v.name.empty()) return v.name;
  if (!v.nic.ports.empty() && !v.nic.ports.front().name.empty()) return v.nic.ports.front().name;
  return v.busid;
}

double nic_speed_mbps(const Vertex& v) {
  double best = -1;
  for (const NetPort& p : v.nic.ports) best = std::max(best, p.speed_mbps);
  return best;
}

ordered_json pci_json(const PciInfo& p) {
  ordered_json j = ordered_json::object();
  if (!p.pci_class.empty()) j["class"] = p.pci_class;
  if (!p.link_speed.empty()) j["link_speed"] = p.link_speed;
  if (p.link_width >= 0) j["link_width"] = p.link_width;
  if (!p.vendor.empty()) j["vendor"] = p.vendor;
  if (!p.device.empty()) j["device"] = p.device;
  if (!p.subsystem_vendor.empty()) j["subsystem_vendor"] = p.subsystem_vendor;
  if (!p.subsystem_device.empty()) j["subsystem_device"] = p.subsystem_device;
  return j;
}

ordered_json port_json(const NetPort& p) {
  ordered_json j;
  j["name"] = p.name;
  j["port"] = int_or_null(p.port);
  j["speed_mbps"] = p.speed_mbps > 0 ? ordered_json(p.speed_mbps) : ordered_json(nullptr);
  j["guid"] = str_or_null(p.guid);
  j["link_layer"] = str_or_null(p.link_layer);
  j["state"] = str_or_null(p.state);
  j["width"] = int_or_null(p.width);
  j["netdev"] = str_or_null(p.netdev);
  j["gdr"] = int_or_null(p.gdr);
  j["maxconn"] = int_or_null(p.maxconn);
  j["latency"] = int_or_null(p.latency);
  return j;
}

}  // namespace

std::string node_to_json(const NodeTopology& node) {
  const Graph& g = node.graph;
  ordered_json doc;
  doc["hostname"] = str_or_null(node.hostname);
  doc["source"] = node.source;
  doc["notes"] = node.notes;

  std::vector<GpuLocality> loc = gpu_locality(node);
  ordered_json gpus = ordered_json::array();
  for (VertexId id : node.gpus()) {
    const Vertex& v = g.vertex(id);
    ordered_json j;
    j["name"] = v.name;
    j["busid"] = v.busid;
    j["numa"] = int_or_null(v.numa);
    j["nic"] = nullptr;
    j["path_to_nic"] = nullptr;
    j["bandwidth_to_nic"] = nullptr;
    j["nearest_nics"] = ordered_json::array();
    j["local_cpus"] = ordered_json::array();
    for (const GpuLocality& l : loc) {
      if (l.gpu != id) continue;
      if (!l.nearest_nics.empty()) {
        j["nic"] = nic_label(g.vertex(l.nearest_nics.front()));
        j["path_to_nic"] = std::string(to_string(l.path_to_nic));
        j["bandwidth_to_nic"] = l.bandwidth_to_nic;
      }
      for (VertexId n : l.nearest_nics) j["nearest_nics"].push_back(nic_label(g.vertex(n)));
      j["local_cpus"] = l.local_pus;
      if (l.numa >= 0 && v.numa < 0) j["numa"] = l.numa;
    }
    j["dev"] = int_or_null(v.gpu.dev);
    j["sm"] = int_or_null(v.gpu.sm);
    j["gdr"] = int_or_null(v.gpu.gdr);
    j["uuid"] = str_or_null(v.gpu.uuid);
    j["model"] = str_or_null(v.gpu.model);
    j["nvlink_cluster"] = str_or_null(v.gpu.nvlink_cluster);
    j["nvlink_clique"] = int_or_null(v.gpu.nvlink_clique);
    ordered_json nvl = ordered_json::array();
    for (LinkId l : g.links_of(id)) {
      const Link& k = g.link(l);
      if (k.kind != LinkKind::kNvLink && k.kind != LinkKind::kC2C) continue;
      const Vertex& p = g.vertex(g.other_end(l, id));
      ordered_json e;
      e["kind"] = std::string(to_string(k.kind));
      e["peer_kind"] = std::string(to_string(p.kind));
      e["peer"] = p.busid.empty() ? p.name : p.busid;
      e["count"] = k.count;
      e["bandwidth"] = k.bandwidth;
      nvl.push_back(std::move(e));
    }
    j["nvlinks"] = std::move(nvl);
    j["pci"] = pci_json(v.pci);
    gpus.push_back(std::move(j));
  }
  doc["gpus"] = std::move(gpus);

  ordered_json nics = ordered_json::array();
  for (VertexId id : node.nics()) {
    const Vertex& v = g.vertex(id);
    ordered_json j;
    if (!v.name.empty()) j["name"] = v.name;
    j["busid"] = str_or_null(v.busid);
    j["numa"] = int_or_null(v.numa);
    double mbps = nic_speed_mbps(v);
    if (mbps > 0) j["speed_gbps"] = mbps / 1000.0;
    j["virtual"] = v.nic.virtual_nic;
    ordered_json ports = ordered_json::array();
    for (const NetPort& p : v.nic.ports) ports.push_back(port_json(p));
    j["ports"] = std::move(ports);
    j["pci"] = pci_json(v.pci);
    nics.push_back(std::move(j));
  }
  doc["nics"] = std::move(nics);

  ordered_json cpus = ordered_json::array();
  for (VertexId id : node.cpus()) {
    const Vertex& v = g.vertex(id);
    ordered_json j;
    j["name"] = v.name;
    j["numa"] = int_or_null(v.numa);
    j["affinity"] = str_or_null(v.cpu.affinity);
    j["arch"] = str_or_null(v.cpu.arch);
    j["vendor"] = str_or_null(v.cpu.vendor);
    j["family"] = int_or_null(v.cpu.family);
    j["model"] = int_or_null(v.cpu.model);
    j["pus"] = v.cpu.pus;
    cpus.push_back(std::move(j));
  }
  doc["cpus"] = std::move(cpus);

  ordered_json vertices = ordered_json::array();
  for (std::uint32_t i = 0; i < g.vertex_count(); ++i) {
    const Vertex& v = g.vertex(VertexId(i));
    ordered_json j;
    j["id"] = i;
    j["kind"] = std::string(to_string(v.kind));
    j["name"] = v.name;
    j["busid"] = str_or_null(v.busid);
    j["numa"] = int_or_null(v.numa);
    j["parent"] = v.parent.valid() ? ordered_json(v.parent.value) : ordered_json(nullptr);
    j["host"] = v.host.valid() ? ordered_json(v.host.value) : ordered_json(nullptr);
    ordered_json pci = pci_json(v.pci);
    if (!pci.empty()) j["pci"] = std::move(pci);
    if (v.kind == VertexKind::kSwitch) {
      j["switch"] = {{"guid", str_or_null(v.sw.guid)},
                     {"model", str_or_null(v.sw.model)},
                     {"ports", int_or_null(v.sw.ports)},
                     {"tier", int_or_null(v.sw.tier)}};
    }
    vertices.push_back(std::move(j));
  }
  doc["vertices"] = std::move(vertices);

  ordered_json links = ordered_json::array();
  for (const Link& k : g.links()) {
    ordered_json j;
    j["a"] = k.a.value;
    j["b"] = k.b.value;
    j["kind"] = std::string(to_string(k.kind));
    j["bandwidth"] = k.bandwidth;
    j["latency_us"] = k.latency_us;
    j["count"] = k.count;
    if (!k.nvlink_tclass.empty()) j["tclass"] = k.nvlink_tclass;
    if (!k.rate.empty()) j["rate"] = k.rate;
    if (k.port_a >= 0) j["port_a"] = k.port_a;
    if (k.port_b >= 0) j["port_b"] = k.port_b;
    links.push_back(std::move(j));
  }
  doc["links"] = std::move(links);
  // Strings from other sources (hwloc, sysfs) are not guaranteed UTF-8: replace, never throw.
  return doc.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace topoaware::topology
