// ibnetdiscover dumps (and ibdiagnet's "ibnetdiscover format" variant) into a Fabric.
//
// A dump is a list of node blocks: key=value lines (vendid, devid, sysimgguid, switchguid,
// caguid), a header `Switch|Ca|Rt <ports> "<name>" # "<description>" ... lid N lmc M`, and one line
// per connected port: `[p](guid?) "<peer>"[q](guid?) # ["lid N lmc M"] "<peer description>" lid N
// <width><speed>`. ibdiagnet writes `[p](p)` on switch ports and zero-padded GUIDs. Both ends of a
// cable are listed; the two halves must agree, or the dump is inconsistent (often: truncated).
//
// Hosts: a CA belongs to the host its GUID map entry names, else the host its node description
// names ("node012 HCA-1", "agpu1337 mlx5_0": the Linux default "<hostname> <hca>"), else it is a
// host of its own named like the CA ("H-<guid>", as ibmap2slurm writes them). SHARP aggregation
// nodes ("Mellanox Technologies Aggregation Node") are CAs inside switches, not hosts.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fabric_build.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::topology::detail {
namespace {

constexpr long kMaxUnicastLid = 0xBFFF;  // 49151: above are multicast / permissive LIDs
constexpr int kMaxPorts = 255;

enum class NodeKind { kSwitch, kCa, kRouter };

struct Port {
  int port = -1;
  std::string peer;  // quoted peer node name
  int peer_port = -1;
  std::string rate;  // "4xHDR"
  long line = 0;
};

struct Node {
  NodeKind kind{};
  int nports = 0;
  std::string name;  // quoted name: "S-0008f10500200b50", "H-..."
  std::string desc;  // node description
  std::string guid;  // normalized hex, no 0x, no leading zeros
  std::string sysimg;
  long line = 0;
  std::vector<Port> ports;
};

class Parser {
 public:
  explicit Parser(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(long line, const std::string& msg) const {
    throw Error(ErrorCode::kBadInput, where(path_, line), msg);
  }

  static std::string norm_guid(std::string_view s) {
    if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
    if (s.size() >= 2 && (s[0] == 'H' || s[0] == 'S' || s[0] == 'R') && s[1] == '-') {
      s.remove_prefix(2);
    }
    std::string out;
    for (char c : s) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return {};
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    std::size_t nz = out.find_first_not_of('0');
    return nz == std::string::npos ? std::string("0") : out.substr(nz);
  }

  // Reads a "quoted" string at s[i]; advances i past the closing quote.
  std::string quoted(std::string_view s, std::size_t& i, long line) const {
    if (i >= s.size() || s[i] != '"') fail(line, "expected a quoted name");
    std::size_t close = s.find('"', i + 1);
    if (close == std::string_view::npos) fail(line, "unterminated quoted name (truncated line?)");
    std::string out(s.substr(i + 1, close - i - 1));
    i = close + 1;
    return out;
  }

  static void skip_space(std::string_view s, std::size_t& i) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }

  int number(std::string_view s, std::size_t& i, long line, const char* what) const {
    std::size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    int v = 0;
    auto [p, ec] = std::from_chars(s.data() + start, s.data() + i, v);
    if (start == i || ec != std::errc() || p != s.data() + i) {
      fail(line, std::string("expected ") + what);
    }
    return v;
  }

  // "[p]" then an optional "(...)".
  int bracket_port(std::string_view s, std::size_t& i, long line) const {
    if (i >= s.size() || s[i] != '[') fail(line, "expected [port]");
    ++i;
    int p = number(s, i, line, "a port number");
    if (i >= s.size() || s[i] != ']') fail(line, "expected ']' after the port number");
    ++i;
    if (p < 0 || p > kMaxPorts) fail(line, "port " + std::to_string(p) + " out of range 0..255");
    if (i < s.size() && s[i] == '(') {
      std::size_t close = s.find(')', i);
      if (close == std::string_view::npos) fail(line, "unterminated '(' (truncated line?)");
      i = close + 1;
    }
    return p;
  }

  // Checks every "lid N" in a comment and returns the rate token, if any.
  std::string check_comment(std::string_view comment, long line) const {
    std::string rate;
    std::vector<std::string_view> tokens;
    std::size_t i = 0;
    while (i < comment.size()) {
      skip_space(comment, i);
      if (i >= comment.size()) break;
      if (comment[i] == '"') {
        std::size_t close = comment.find('"', i + 1);
        if (close == std::string_view::npos) fail(line, "unterminated quoted description");
        i = close + 1;
        tokens.push_back("\"");
        continue;
      }
      std::size_t start = i;
      while (i < comment.size() && comment[i] != ' ' && comment[i] != '\t') ++i;
      tokens.push_back(comment.substr(start, i - start));
    }
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      if (tokens[k] != "lid") continue;
      if (k + 1 >= tokens.size()) fail(line, "\"lid\" without a value (truncated line?)");
      std::string_view v = tokens[k + 1];
      long lid = -1;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), lid);
      if (ec != std::errc() || p != v.data() + v.size()) {
        fail(line, "invalid LID: \"lid\" is followed by \"" + std::string(v) +
                       "\", not a number 0..49151 (LID missing?)");
      }
      if (lid < 0 || lid > kMaxUnicastLid) {
        fail(line, "invalid LID " + std::string(v) + " (unicast LIDs are 0..49151 = 0xBFFF)");
      }
    }
    for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) {
      std::string_view t = *it;
      std::size_t x = t.find('x');
      if (x > 0 && x <= 2 && x + 1 < t.size() &&
          std::all_of(t.begin(), t.begin() + static_cast<long>(x),
                      [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        rate = std::string(t);
        break;
      }
    }
    return rate;
  }

  void parse(std::string_view text) {
    long line_no = 0;
    std::string pending_guid, pending_sysimg;
    Node* cur = nullptr;
    for (std::string_view raw : split_lines(text)) {
      ++line_no;
      std::string_view line = trim(raw);
      if (line.empty() || line[0] == '#') continue;
      if (line[0] == '[') {
        if (cur == nullptr) fail(line_no, "port line outside a Switch/Ca block");
        Port p = port_line(line, line_no, *cur);
        // Each port once: also keeps the cable cross-check below linear in the dump size.
        for (const Port& q : cur->ports) {
          if (q.port == p.port) {
            fail(line_no, "port [" + std::to_string(p.port) + "] of \"" + cur->name +
                              "\" listed twice (also line " + std::to_string(q.line) + ")");
          }
        }
        cur->ports.push_back(std::move(p));
        continue;
      }
      std::size_t eq = line.find('=');
      std::size_t sp = line.find_first_of(" \t");
      if (eq != std::string_view::npos && (sp == std::string_view::npos || eq < sp)) {
        std::string_view key = line.substr(0, eq);
        std::string_view val = line.substr(eq + 1);
        std::size_t paren = val.find('(');
        if (paren != std::string_view::npos) val = val.substr(0, paren);
        if (key == "switchguid" || key == "caguid" || key == "rtguid") {
          pending_guid = norm_guid(trim(val));
          if (pending_guid.empty()) fail(line_no, "malformed GUID in " + std::string(key));
        } else if (key == "sysimgguid") {
          pending_sysimg = norm_guid(trim(val));
        }
        cur = nullptr;  // key=value lines open the next node
        continue;
      }
      NodeKind kind;
      std::size_t i;
      if (line.rfind("Switch", 0) == 0) {
        kind = NodeKind::kSwitch;
        i = 6;
      } else if (line.rfind("Ca", 0) == 0) {
        kind = NodeKind::kCa;
        i = 2;
      } else if (line.rfind("Rt", 0) == 0) {
        kind = NodeKind::kRouter;
        i = 2;
      } else {
        std::string shown(line.substr(0, 60));
        fail(line_no, "unrecognized line \"" + shown + "\"");
      }
      if (i >= line.size() || (line[i] != ' ' && line[i] != '\t')) {
        fail(line_no, "unrecognized node header");
      }
      skip_space(line, i);
      Node n;
      n.kind = kind;
      n.line = line_no;
      n.nports = number(line, i, line_no, "a port count");
      if (n.nports < 1 || n.nports > kMaxPorts) {
        fail(line_no, "port count " + std::to_string(n.nports) + " out of range 1..255");
      }
      skip_space(line, i);
      n.name = quoted(line, i, line_no);
      if (n.name.empty()) fail(line_no, "empty node name");
      skip_space(line, i);
      if (i < line.size() && line[i] == '#') {
        ++i;
        skip_space(line, i);
        if (i < line.size() && line[i] == '"') n.desc = quoted(line, i, line_no);
        check_comment(line.substr(i), line_no);
      }
      n.guid = pending_guid.empty() ? norm_guid(n.name) : pending_guid;
      n.sysimg = pending_sysimg;
      pending_guid.clear();
      pending_sysimg.clear();
      auto [it, fresh] = index_.emplace(n.name, nodes_.size());
      if (!fresh) {
        fail(line_no, "node \"" + n.name + "\" is described twice (first at line " +
                          std::to_string(nodes_[it->second].line) + ")");
      }
      nodes_.push_back(std::move(n));
      cur = &nodes_.back();
    }
    if (nodes_.empty()) fail(0, "no Switch or Ca node in the dump");
  }

  Port port_line(std::string_view line, long line_no, const Node& owner) const {
    Port p;
    p.line = line_no;
    std::size_t i = 0;
    p.port = bracket_port(line, i, line_no);
    if (p.port > owner.nports) {
      fail(line_no, "port " + std::to_string(p.port) + " of \"" + owner.name + "\", which has " +
                        std::to_string(owner.nports) + " ports");
    }
    skip_space(line, i);
    p.peer = quoted(line, i, line_no);
    if (p.peer.empty()) fail(line_no, "empty peer name");
    p.peer_port = bracket_port(line, i, line_no);
    skip_space(line, i);
    if (i < line.size()) {
      if (line[i] != '#') fail(line_no, "unexpected text after the peer port");
      p.rate = check_comment(line.substr(i + 1), line_no);
    }
    return p;
  }

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node* find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &nodes_[it->second];
  }
  std::size_t index_of(const Node* n) const { return static_cast<std::size_t>(n - nodes_.data()); }

 private:
  const std::string& path_;
  std::vector<Node> nodes_;
  std::unordered_map<std::string, std::size_t> index_;
};

// GUID map: "<key> <name>" per line, '#' comments. A key is a node name as ibnetdiscover writes
// it ("H-003048c74e4a0000", "S-...") or a GUID ("0x0002c903000e0b7a"); the name may be quoted
// (ibnetdiscover's own --node-name-map format).
std::unordered_map<std::string, std::string> read_guid_map(const std::string& path) {
  std::string text = read_fabric_file(path);
  for (char c : std::string_view(text).substr(0, 4096)) {
    if (c == '\0') throw Error(ErrorCode::kBadInput, path, "binary data, not a GUID map");
  }
  std::unordered_map<std::string, std::string> map;
  std::unordered_map<std::string, long> first_line;
  long line_no = 0;
  for (std::string_view raw : split_lines(text)) {
    ++line_no;
    std::string_view line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    std::size_t sp = line.find_first_of(" \t");
    if (sp == std::string_view::npos) {
      throw Error(ErrorCode::kBadInput, where(path, line_no),
                  "expected \"<guid or H-guid> <hostname>\"");
    }
    std::string key = Parser::norm_guid(line.substr(0, sp));
    std::string_view name = trim(line.substr(sp));
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"') {
      name = name.substr(1, name.size() - 2);
    }
    if (key.empty() || name.empty()) {
      throw Error(ErrorCode::kBadInput, where(path, line_no),
                  "expected \"<guid or H-guid> <hostname>\"");
    }
    if (name.find_first_of(" \t") != std::string_view::npos) {
      // A description-style value ("node1 HCA-1"): the host is its first word.
      name = name.substr(0, name.find_first_of(" \t"));
    }
    auto [it, fresh] = first_line.emplace(key, line_no);
    if (!fresh) {
      throw Error(
          ErrorCode::kBadInput, where(path, line_no),
          "GUID " + key + " mapped twice (first at line " + std::to_string(it->second) + ")");
    }
    map.emplace(std::move(key), std::string(name));
  }
  return map;
}

// "agpu1337 mlx5_0" -> {"agpu1337", "mlx5_0"}; vendor strings give {}.
std::pair<std::string, std::string> host_from_description(const std::string& desc) {
  std::string_view d = trim(desc);
  std::size_t sp = d.find_last_of(" \t");
  if (sp == std::string_view::npos) return {};
  std::string_view last = d.substr(sp + 1);
  std::string_view first = trim(d.substr(0, sp));
  if (first.find_first_of(" \t") != std::string_view::npos || first.empty()) return {};
  bool hca = false;
  if (last.rfind("HCA-", 0) == 0 && last.size() > 4) {
    hca = std::all_of(last.begin() + 4, last.end(),
                      [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  } else {
    // mlx5_0, mlx4_1, hfi1_0, qib0, bnxt_re0, irdma1 ...
    std::size_t k = 0;
    while (k < last.size() &&
           (std::islower(static_cast<unsigned char>(last[k])) ||
            std::isdigit(static_cast<unsigned char>(last[k])) || last[k] == '_')) {
      ++k;
    }
    hca = k == last.size() && !last.empty() && std::islower(static_cast<unsigned char>(last[0])) &&
          std::isdigit(static_cast<unsigned char>(last.back()));
  }
  if (!hca) return {};
  return {std::string(first), std::string(last)};
}

}  // namespace

Fabric parse_ibnetdiscover(const std::string& path, std::string_view text,
                           const std::string& guid_map_path) {
  Parser parser(path);
  parser.parse(text);
  std::unordered_map<std::string, std::string> guid_map;
  if (!guid_map_path.empty()) guid_map = read_guid_map(guid_map_path);
  auto mapped = [&](const Node& n) -> const std::string* {
    if (guid_map.empty()) return nullptr;
    for (const std::string& key : {Parser::norm_guid(n.name), n.guid, n.sysimg}) {
      if (key.empty()) continue;
      auto it = guid_map.find(key);
      if (it != guid_map.end()) return &it->second;
    }
    return nullptr;
  };

  FabricBuilder b("ibnetdiscover:" + path);
  const auto& nodes = parser.nodes();
  std::vector<VertexId> switch_of(nodes.size());
  // Host and NIC of each CA; empty host: not a host (aggregation node).
  // Per CA: its host, and the NIC name the description gives ("mlx5_0", "HCA-1"; empty when it
  // names none: a GUID is no device name NCCL_IB_HCA could match).
  std::vector<std::pair<std::string, std::string>> ca_host(nodes.size());
  std::size_t cas = 0;
  std::unordered_map<std::string, std::size_t> switch_names;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = nodes[k];
    if (n.kind != NodeKind::kCa) {
      const std::string* m = mapped(n);
      std::string name = m ? *m : n.name;
      auto [it, fresh] = switch_names.emplace(name, k);
      if (!fresh) {
        throw Error(ErrorCode::kBadInput, where(path, n.line),
                    "switch name \"" + name + "\" is used twice (also line " +
                        std::to_string(nodes[it->second].line) + ")");
      }
      switch_of[k] =
          b.add_switch(name, n.guid.empty() ? std::string() : "0x" + n.guid, n.desc, n.nports);
      continue;
    }
    ++cas;
    if (n.desc.find("Aggregation Node") != std::string::npos) continue;
    const std::string* m = mapped(n);
    auto [dhost, dnic] = host_from_description(n.desc);
    std::string host = m ? *m : (!dhost.empty() ? dhost : n.name);
    ca_host[k] = {host, dnic};
  }

  // Links, each cable once; host ports collected, then added per host in NIC order.
  struct HostPort {
    std::string key;  // order among the host's CAs: the NIC name, else the CA's node name
    std::string nic;
    int ca_port;
    VertexId sw;
    int sw_port;
    double gbps;
    std::string rate;
  };
  std::unordered_map<std::string, std::vector<HostPort>> host_ports;
  std::vector<std::string> host_order;
  std::size_t self_loops = 0, unknown_rate = 0, ca_to_ca = 0;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = nodes[k];
    for (const Port& p : n.ports) {
      const Node* peer = parser.find(p.peer);
      if (peer == nullptr) {
        throw Error(ErrorCode::kBadInput, where(path, p.line),
                    "port [" + std::to_string(p.port) + "] of \"" + n.name + "\" links to \"" +
                        p.peer + "\", which the dump does not describe (truncated dump?)");
      }
      const Port* back = nullptr;
      for (const Port& q : peer->ports) {
        if (q.port == p.peer_port) back = &q;
      }
      if (back == nullptr) {
        throw Error(ErrorCode::kBadInput, where(path, p.line),
                    "port [" + std::to_string(p.port) + "] of \"" + n.name + "\" links to [" +
                        std::to_string(p.peer_port) + "] of \"" + peer->name + "\" (line " +
                        std::to_string(peer->line) +
                        "), which lists no such port (truncated dump?)");
      }
      if (back->peer != n.name || back->peer_port != p.port) {
        throw Error(ErrorCode::kBadInput, where(path, p.line),
                    "inconsistent dump: [" + std::to_string(p.port) + "] of \"" + n.name +
                        "\" links to [" + std::to_string(p.peer_port) + "] of \"" + peer->name +
                        "\", but line " + std::to_string(back->line) + " links that port to [" +
                        std::to_string(back->peer_port) + "] of \"" + back->peer + "\"");
      }
      std::size_t pk = parser.index_of(peer);
      if (pk < k || (pk == k && p.peer_port < p.port)) continue;  // listed from the other side
      double gbps = rate_gbps(p.rate);
      if (gbps < 0) {
        ++unknown_rate;
        gbps = 0;
      }
      bool n_sw = n.kind != NodeKind::kCa, peer_sw = peer->kind != NodeKind::kCa;
      if (n_sw && peer_sw) {
        if (pk == k) {
          ++self_loops;
          continue;
        }
        b.connect_switches(switch_of[k], switch_of[pk], gbps, p.rate, p.port, p.peer_port);
      } else if (n_sw != peer_sw) {
        std::size_t ca = n_sw ? pk : k;
        std::size_t sw = n_sw ? k : pk;
        int ca_port = n_sw ? p.peer_port : p.port;
        int sw_port = n_sw ? p.port : p.peer_port;
        const auto& [host, nic] = ca_host[ca];
        if (host.empty()) continue;
        auto [it, fresh] = host_ports.try_emplace(host);
        if (fresh) host_order.push_back(host);
        const std::string& key = nic.empty() ? nodes[ca].name : nic;
        it->second.push_back({key, nic, ca_port, switch_of[sw], sw_port, gbps, p.rate});
      } else {
        ++ca_to_ca;
      }
    }
  }
  // Hosts in order of first appearance in the dump (CA blocks), then their ports in NIC order.
  std::vector<std::string> ordered;
  {
    std::unordered_map<std::string, bool> seen;
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      const std::string& h = ca_host[k].first;
      if (!h.empty() && seen.emplace(h, true).second) ordered.push_back(h);
    }
  }
  for (const std::string& h : ordered) {
    std::uint32_t idx = b.host(h);
    auto it = host_ports.find(h);
    if (it == host_ports.end()) continue;
    auto& ports = it->second;
    std::stable_sort(ports.begin(), ports.end(), [](const HostPort& x, const HostPort& y) {
      if (x.key != y.key) return hostname_less(x.key, y.key);
      return x.ca_port < y.ca_port;
    });
    for (const HostPort& p : ports) {
      b.connect_host(idx, p.sw, p.gbps, p.rate, p.nic, p.ca_port, p.sw_port);
    }
  }
  Fabric f = b.take();
  f.channel_adapters = cas;
  if (self_loops > 0) {
    f.notes.push_back(std::to_string(self_loops) +
                      " cable(s) loop from a switch back to itself; left out of the model");
  }
  if (unknown_rate > 0) {
    f.notes.push_back(std::to_string(unknown_rate) +
                      " link(s) without a known width/speed; counted as 0 GB/s");
  }
  if (ca_to_ca > 0) {
    f.notes.push_back(std::to_string(ca_to_ca) +
                      " CA-to-CA cable(s) without a switch; left out of the model");
  }
  if (!guid_map_path.empty()) {
    std::size_t used = 0;
    for (const Node& n : nodes) used += mapped(n) ? 1 : 0;
    f.notes.push_back("GUID map " + guid_map_path + ": " + std::to_string(used) + " of " +
                      std::to_string(guid_map.size()) + " entries matched a node");
  }
  return f;
}

}  // namespace topoaware::topology::detail
