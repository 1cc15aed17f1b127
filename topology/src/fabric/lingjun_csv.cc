// Alibaba's Lingjun topology CSV (alibaba-lingjun-dataset-2023, data/topo.csv) into a Fabric.
//
// The file is a header `ip,DSW,PSW,ASW` (any order, case-insensitive) and one row per host: a
// blinded host id (the `ip` column, a sha256 hex string) and the three switches above it in a
// 3-tier Clos. What the rows mean, as read here (tests/fixtures/lingjun/PROVENANCE.md):
//  - ASW labels repeat under different PSWs, so a ToR (leaf) is the pair (PSW, ASW), named
//    `<PSW>-<ASW>`; a PSW is an aggregation group (a pod), named as given; a DSW is a core
//    switch above the PSWs, named as given. A PSW seen under several DSWs uplinks to each.
//  - Hosts are named `lj<n>` by file order (row 1 is lj001; the width is 3 digits, more when
//    the file has 1,000 rows or more), so they form Slurm hostlists (`lj[001-847]`); the blinded
//    id stays on the host as HostInfo::source_id.
//  - The file gives no link speeds: every link carries the same 100 Gb/s placeholder the
//    topology.conf importer uses (Link::speed_assumed), and the notes say so.
// Each malformed row is an error naming its line: a wrong number of fields, an empty field, a
// switch label that cannot be a Slurm switch name, a host id given twice, a name used for two
// kinds of switch.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fabric_build.h"
#include "topoaware/topology/error.h"

namespace topoaware::topology::detail {
namespace {

constexpr double kDefaultLinkGbit = 100.0;  // as topology.conf's placeholder; said in the notes

std::string lower(std::string_view s) {
  std::string out;
  for (char c : s) out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  return out;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = line.find(',', start);
    out.push_back(
        trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// A label that can stand as a Slurm switch name and as part of one: printable, no space, none of
// the characters topology.conf and hostlists give a meaning to.
bool usable_label(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return false;
    if (c == '[' || c == ']' || c == ',' || c == '=' || c == '#' || c == '"' || c == '\'' ||
        c == '\\') {
      return false;
    }
  }
  return true;
}

std::string shown(std::string_view s) {
  return std::string(s.substr(0, 60)) + (s.size() > 60 ? "..." : "");
}

struct Row {
  long line = 0;
  std::string id, dsw, psw, asw;
};

}  // namespace

Fabric parse_lingjun_csv(const std::string& path, std::string_view text) {
  const std::vector<std::string_view> lines = split_lines(text);
  std::size_t i = 0;
  while (i < lines.size() && trim(lines[i]).empty()) ++i;
  if (i == lines.size()) throw Error(ErrorCode::kBadInput, path, "empty file");

  // Header: the four columns, each once, in any order.
  const long header_line = static_cast<long>(i + 1);
  int col_id = -1, col_dsw = -1, col_psw = -1, col_asw = -1;
  const std::vector<std::string_view> header = split_fields(lines[i]);
  for (std::size_t c = 0; c < header.size(); ++c) {
    std::string name = lower(header[c]);
    int* slot = nullptr;
    if (name == "ip") slot = &col_id;
    if (name == "dsw") slot = &col_dsw;
    if (name == "psw") slot = &col_psw;
    if (name == "asw") slot = &col_asw;
    if (slot == nullptr) {
      throw Error(ErrorCode::kBadInput, where(path, header_line),
                  "unknown column \"" + shown(header[c]) +
                      "\" (a Lingjun topology CSV has the columns ip,DSW,PSW,ASW)");
    }
    if (*slot >= 0) {
      throw Error(ErrorCode::kBadInput, where(path, header_line),
                  "column \"" + shown(header[c]) + "\" given twice");
    }
    *slot = static_cast<int>(c);
  }
  if (header.size() != 4) {
    throw Error(ErrorCode::kBadInput, where(path, header_line),
                "expected the header ip,DSW,PSW,ASW");
  }

  std::vector<Row> rows;
  std::unordered_map<std::string, long> id_line;
  for (++i; i < lines.size(); ++i) {
    const long at = static_cast<long>(i + 1);
    if (trim(lines[i]).empty()) continue;
    const std::string ctx = where(path, at);
    std::vector<std::string_view> fields = split_fields(lines[i]);
    if (fields.size() != 4) {
      throw Error(ErrorCode::kBadInput, ctx,
                  "expected 4 comma-separated fields (ip,DSW,PSW,ASW), got " +
                      std::to_string(fields.size()));
    }
    static const char* const kColumn[] = {"ip", "DSW", "PSW", "ASW"};
    const int cols[] = {col_id, col_dsw, col_psw, col_asw};
    for (int k = 0; k < 4; ++k) {
      std::string_view v = fields[static_cast<std::size_t>(cols[k])];
      if (v.empty()) throw Error(ErrorCode::kBadInput, ctx, std::string("empty ") + kColumn[k]);
      if (!usable_label(v)) {
        throw Error(ErrorCode::kBadInput, ctx,
                    std::string(kColumn[k]) + " \"" + shown(v) +
                        "\" is not one name (printable, no spaces, none of []=,#\"'\\)");
      }
    }
    if (rows.size() >= kMaxFabricHosts) {
      throw Error(
          ErrorCode::kLimit, ctx,
          "more than " + std::to_string(kMaxFabricHosts) + " hosts, the limit for one fabric");
    }
    Row r;
    r.line = at;
    r.id = std::string(fields[static_cast<std::size_t>(col_id)]);
    r.dsw = std::string(fields[static_cast<std::size_t>(col_dsw)]);
    r.psw = std::string(fields[static_cast<std::size_t>(col_psw)]);
    r.asw = std::string(fields[static_cast<std::size_t>(col_asw)]);
    auto [it, fresh] = id_line.emplace(r.id, at);
    if (!fresh) {
      throw Error(ErrorCode::kBadInput, ctx,
                  "host " + shown(r.id) + " is listed twice (also line " +
                      std::to_string(it->second) + ")");
    }
    rows.push_back(std::move(r));
  }
  if (rows.empty()) throw Error(ErrorCode::kBadInput, path, "a header and no host rows");

  FabricBuilder b("lingjun-csv:" + path);
  Fabric& f = b.fabric();
  f.hierarchical = true;
  const double gbps = kDefaultLinkGbit / 8.0;
  // Every switch name with the kind of switch it is and the line that made it, so that a name
  // standing for two kinds (a PSW called like another's ToR) is refused, not merged.
  enum class Kind { kCore, kPod, kLeaf };
  static const char* const kKindName[] = {"DSW (core switch)", "PSW (pod switch)", "ToR"};
  std::unordered_map<std::string, std::pair<Kind, long>> kind_of;
  auto ensure = [&](const std::string& name, Kind kind, long at) {
    auto [it, fresh] = kind_of.emplace(name, std::make_pair(kind, at));
    if (fresh) return b.add_switch(name);
    if (it->second.first != kind) {
      throw Error(ErrorCode::kBadInput, where(path, at),
                  "\"" + name + "\" names a " + kKindName[static_cast<int>(kind)] + " here and a " +
                      kKindName[static_cast<int>(it->second.first)] + " on line " +
                      std::to_string(it->second.second));
    }
    return b.switch_named(name);
  };
  std::unordered_map<std::string, bool> cabled;  // "DSW\nPSW" and "PSW\nToR" pairs already linked
  std::size_t width = 3;
  for (std::size_t n = rows.size(); n >= 1000; n /= 10) ++width;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const Row& r = rows[k];
    const std::string leaf = r.psw + "-" + r.asw;
    VertexId core = ensure(r.dsw, Kind::kCore, r.line);
    VertexId pod = ensure(r.psw, Kind::kPod, r.line);
    VertexId tor = ensure(leaf, Kind::kLeaf, r.line);
    if (cabled.emplace(r.dsw + '\n' + r.psw, true).second) {
      b.connect_switches(core, pod, gbps, {}, -1, -1, true);
    }
    if (cabled.emplace(r.psw + '\n' + leaf, true).second) {
      b.connect_switches(pod, tor, gbps, {}, -1, -1, true);
    }
    std::string number = std::to_string(k + 1);
    std::string name = "lj" + std::string(width - number.size(), '0') + number;
    std::uint32_t h = b.host(name);
    f.hosts[h].source_id = r.id;
    b.connect_host(h, tor, gbps, {}, {}, -1, -1, true);
  }
  f.notes.push_back(
      "Lingjun topology CSV: hosts are named lj" + std::string(width - 1, '0') + "1.. in file " +
      "order (the blinded ids are each host's source_id); a ToR is the pair (PSW, ASW), named "
      "<PSW>-<ASW>; a PSW is a pod switch and a DSW a core switch above it");
  f.notes.push_back(
      "Lingjun topology CSV has no link speeds: every link carries a placeholder of 100 Gb/s "
      "(12.5 GB/s); the mapper takes host NICs from the node capture and sizes uplinks from what "
      "they carry (non-blocking unless an oversubscription is declared)");
  return b.take();
}

}  // namespace topoaware::topology::detail
