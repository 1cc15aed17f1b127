// Shared by the fabric importers (ibnetdiscover, Slurm topology.conf, TOML, JSON, Lingjun CSV):
// reading a text file with its BOM/CRLF quirks under a size bound, link-rate arithmetic, and a
// small builder that keeps the switch/host name indexes while a Fabric is filled. Not installed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "topoaware/topology/fabric.h"
#include "topoaware/topology/input_format.h"

namespace topoaware::topology::detail {

// Files larger than this are refused before reading (an ibnetdiscover dump of a 100k-host fabric
// is ~50 MB).
inline constexpr std::uintmax_t kMaxFabricFileBytes = 512ull << 20;

// Hosts one fabric file may name: 131,072 (a million GPUs at 8 per host, several times the
// largest cluster built). Building a fabric costs ~12 us and ~1.6 KiB per host, so this also bounds
// what a 30-byte hostlist can make slurmstepd spend (~1.5 s, ~210 MiB) on every step.
inline constexpr std::size_t kMaxFabricHosts = 1u << 17;

// Reads a whole file; strips a UTF-8 BOM. Throws Error(kNotFound/kSystem/kLimit).
std::string read_fabric_file(const std::string& path);

// Splits text into lines (LF or CRLF), without the line ends.
std::vector<std::string_view> split_lines(std::string_view text);

std::string_view trim(std::string_view s);

// "4xHDR" -> 25 (GB/s, one direction, data rate after encoding). Returns -1 when unknown.
double rate_gbps(std::string_view rate);

// Fills a Fabric while keeping name indexes. Hosts get a kHost vertex; every host port is a
// network link host -> switch, in the order the importer adds them (NIC order).
class FabricBuilder {
 public:
  explicit FabricBuilder(std::string source) { fabric_.source = std::move(source); }

  VertexId switch_named(const std::string& name) const;  // invalid when absent
  VertexId add_switch(const std::string& name, const std::string& guid = {},
                      const std::string& model = {}, int ports = -1);
  std::uint32_t host(const std::string& name);  // finds or adds
  bool has_host(const std::string& name) const { return fabric_.host_index.count(name) != 0; }
  // `assumed`: the source gives no speed and `gbps` is a placeholder (Link::speed_assumed).
  void connect_host(std::uint32_t host, VertexId sw, double gbps, const std::string& rate,
                    const std::string& nic, int host_port = -1, int switch_port = -1,
                    bool assumed = false);
  // `gbps` is one cable's; `cables` parallel cables of one kind become one Link with that count.
  // Cables whose ports are unknown (descriptions, topology.conf, Lingjun, JSON without ports) join
  // an earlier link a -> b of the same rate, speed and kind: a 2,048-host description with 64
  // cables per leaf-spine pair is then 8,192 switch links, not 524,288, and a node that reads it
  // in every step builds that much less. Cables with port numbers (ibnetdiscover) stay one Link
  // each, so an anomaly can name the port.
  void connect_switches(VertexId a, VertexId b, double gbps, const std::string& rate,
                        int port_a = -1, int port_b = -1, bool assumed = false, int cables = 1);

  Fabric& fabric() { return fabric_; }
  Fabric take() { return std::move(fabric_); }

 private:
  Fabric fabric_;
  std::unordered_map<std::string, VertexId> switches_;
  // The last port-less switch link a -> b, keyed by (a << 32 | b): where parallel cables merge.
  std::unordered_map<std::uint64_t, LinkId> portless_;
};

// What load_fabric() and load_fabric_text() share once the text is read and cleaned: the format
// (detected when kAuto), the importer, the reading notes, analyze().
Fabric load_fabric_input(InputText in, const std::string& path, const std::string& guid_map,
                         InputFormat format);

// The importers. Each returns an un-analyzed Fabric and throws Error naming path:line.
Fabric parse_ibnetdiscover(const std::string& path, std::string_view text,
                           const std::string& guid_map_path);
Fabric parse_slurm_topology(const std::string& path, std::string_view text);
Fabric parse_fabric_toml(const std::string& path, std::string_view text);
Fabric parse_fabric_json(const std::string& path, std::string_view text);
Fabric parse_lingjun_csv(const std::string& path, std::string_view text);

}  // namespace topoaware::topology::detail
