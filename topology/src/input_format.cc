// Reading, cleaning and recognizing input files: see input_format.h for why.
#include "topoaware/topology/input_format.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include "topoaware/topology/error.h"

namespace topoaware::topology {
namespace {

struct FormatName {
  InputFormat format;
  const char* name;
  InputKind kind;
  const char* what;  // in messages: "an ibnetdiscover dump"
};

constexpr std::array<FormatName, 7> kFormats = {{
    {InputFormat::kIbnetdiscover, "ibnetdiscover", InputKind::kFabric, "an ibnetdiscover dump"},
    {InputFormat::kSlurmTopology, "slurm-topology", InputKind::kFabric, "a Slurm topology.conf"},
    {InputFormat::kFabricToml, "toml", InputKind::kFabric, "a TOML fabric description"},
    {InputFormat::kFabricJson, "json", InputKind::kFabric, "topo-aware's fabric JSON"},
    {InputFormat::kLingjunCsv, "lingjun-csv", InputKind::kFabric,
     "an Alibaba Lingjun topology CSV"},
    {InputFormat::kHwlocXml, "hwloc-xml", InputKind::kNode, "hwloc XML (lstopo --of xml)"},
    {InputFormat::kNcclXml, "nccl-xml", InputKind::kNode, "NCCL topology XML"},
}};

const FormatName* entry(InputFormat f) {
  for (const FormatName& n : kFormats) {
    if (n.format == f) return &n;
  }
  return nullptr;
}

// The head of a file that detection looks at: far more than any header, small enough that a
// 500 MB dump costs nothing extra.
constexpr std::size_t kHeadBytes = 256 * 1024;
// A prompt longer than this is not a prompt.
constexpr std::size_t kMaxPromptLine = 512;

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-';
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::strchr(" \t\r\n\f\v", s.front()) != nullptr && s.front() != '\0') {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::strchr(" \t\r\n\f\v", s.back()) != nullptr && s.back() != '\0') {
    s.remove_suffix(1);
  }
  return s;
}

// The line without terminal colour sequences (ESC [ ... letter), which a prompt copied through
// `script` or a coloured PS1 carries.
std::string strip_ansi(std::string_view line) {
  std::string out;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < line.size() && (std::isdigit(static_cast<unsigned char>(line[j])) != 0 ||
                                 line[j] == ';' || line[j] == '?')) {
        ++j;
      }
      i = j;  // the final letter (or the end) is skipped by the loop
      continue;
    }
    out.push_back(line[i]);
  }
  return out;
}

bool prompt_end(std::string_view rest) {
  // A prompt character, then the end of the line or a space before the command.
  if (rest.empty() || std::strchr("#$%>", rest[0]) == nullptr || rest[0] == '\0') return false;
  return rest.size() == 1 || rest[1] == ' ' || rest[1] == '\t';
}

// Programs whose output people save with the command line in front of it.
constexpr std::array<std::string_view, 9> kCommands = {
    "ibnetdiscover", "ibdiagnet", "lstopo",   "lstopo-no-graphics", "nvidia-smi",
    "sudo",          "cat",       "scontrol", "topo-aware"};

// Whether `line` is a shell prompt (with or without the command it echoes) or a bare command
// echo of one of the programs above. Only forms no input format can start with are taken.
bool is_prompt_line(std::string_view raw) {
  if (raw.size() > kMaxPromptLine) return false;
  // A prompt is text a terminal showed: no control bytes but tab and colour escapes. (A "sudo"
  // followed by binary junk was taken for one; found by fuzzing.)
  for (char c : raw) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t' && c != '\x1b' && c != '\r') || u == 0x7f) return false;
  }
  std::string owned = strip_ansi(raw);
  std::string_view line = trim(owned);
  if (line.empty()) return false;
  // [user@host dir]# cmd   [user@host ~]$   (the @ keeps TOML's [table] and ibnetdiscover's
  // [port] apart; TOML keys cannot hold an @ unquoted)
  if (line[0] == '[') {
    std::size_t close = line.find(']');
    if (close == std::string_view::npos) return false;
    std::string_view inside = line.substr(1, close - 1);
    if (inside.find('@') == std::string_view::npos) return false;
    for (char c : inside) {
      if (!is_word_char(c) && std::strchr("@ ~/:+", c) == nullptr) return false;
    }
    std::string_view rest = line.substr(close + 1);
    if (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
    return prompt_end(rest);
  }
  // user@host:~$ cmd   root@host:/tmp# cmd   user@host ~ % cmd   user@host$ cmd
  std::size_t i = 0;
  while (i < line.size() && is_word_char(line[i])) ++i;
  if (i > 0 && i < line.size() && line[i] == '@') {
    std::size_t h = ++i;
    while (i < line.size() && is_word_char(line[i])) ++i;
    if (i == h) return false;
    if (i < line.size() && (line[i] == ':' || line[i] == ' ')) {
      ++i;
      while (i < line.size() && line[i] != ' ' && std::strchr("#$%>", line[i]) == nullptr) ++i;
    }
    if (i < line.size() && line[i] == ' ') ++i;
    return prompt_end(line.substr(i));
  }
  // bash-5.1$ cmd   sh-4.2# cmd
  for (std::string_view shell : {"bash-", "sh-", "zsh-"}) {
    if (line.substr(0, shell.size()) == shell) {
      std::size_t j = shell.size();
      while (j < line.size() &&
             (std::isdigit(static_cast<unsigned char>(line[j])) != 0 || line[j] == '.')) {
        ++j;
      }
      if (j > shell.size() && prompt_end(line.substr(j))) return true;
    }
  }
  // $ cmd
  if (line.size() > 2 && line[0] == '$' && line[1] == ' ') return true;
  // A bare command echo: the program's name, then options (never "name = value", TOML).
  std::size_t word = 0;
  while (word < line.size() && line[word] != ' ' && line[word] != '\t') ++word;
  std::string_view first = line.substr(0, word);
  if (std::find(kCommands.begin(), kCommands.end(), first) != kCommands.end()) {
    std::string_view rest = trim(line.substr(word));
    return rest.empty() || rest[0] != '=';
  }
  return false;
}

std::string shown(std::string_view line) {
  std::string s = strip_ansi(trim(line));
  // Notes end up in JSON: anything but printable ASCII is shown as '?'.
  for (char& c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20) c = ' ';
    if (u >= 0x7f) c = '?';
  }
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

// Inflates gzip data (one or more members) under `max_bytes`.
std::string gunzip(std::string_view data, const std::string& path, std::uintmax_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    throw Error(ErrorCode::kSystem, path, "zlib: cannot start inflating");
  }
  std::string out;
  char buf[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  int rc = Z_OK;
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.append(buf, sizeof buf - z.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&z);
      throw Error(ErrorCode::kLimit, path,
                  "gzip data inflates to more than " + std::to_string(max_bytes >> 20) + " MiB");
    }
    if (rc == Z_STREAM_END) {
      // Concatenated members (gzip a; gzip b; cat) are one file to gunzip.
      if (z.avail_in == 0) break;
      if (inflateReset(&z) != Z_OK) break;
    }
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    throw Error(ErrorCode::kBadInput, path,
                "gzip data is corrupt or truncated (zlib: " +
                    std::string(z.msg != nullptr ? z.msg : "unexpected end") + ")");
  }
  return out;
}

bool is_gzip(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

std::string read_bytes(const std::string& path, std::uintmax_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw Error(ErrorCode::kNotFound, path, "no such file");
  if (fs::is_directory(st)) throw Error(ErrorCode::kBadInput, path, "is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(ErrorCode::kSystem, path, std::string("cannot open: ") + std::strerror(errno));
  }
  std::string data;
  // In chunks, so a FIFO or device without a size is bounded too.
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    data.append(buf, static_cast<std::size_t>(in.gcount()));
    if (data.size() > max_bytes) {
      throw Error(ErrorCode::kLimit, path,
                  "larger than " + std::to_string(max_bytes >> 20) +
                      " MiB; not an input this tool will read");
    }
  }
  if (in.bad()) throw Error(ErrorCode::kSystem, path, "read failed");
  return data;
}

// --- detection ---------------------------------------------------------------------------------

enum class Found : std::uint8_t {
  kNone,
  kIbnetdiscover,
  kSlurmTopology,
  kTomlStrong,  // one of the TOML description's own tables
  kTomlWeak,    // some TOML-looking line
  kJson,
  kLingjunCsv,
  kHwlocXml,
  kNcclXml,
  kNcclGraph,
  kOtherXml,
  kNvidiaSmi,
  kTopologyYaml,
  kGresConf,
};

struct Evidence {
  Found found = Found::kNone;
  long line = 0;
  std::string detail;  // the XML root's name for kOtherXml
};

// The name of the first element of an XML document (past a prolog, DOCTYPE and comments), when
// `text` from `pos` starts one.
std::string xml_root(std::string_view text, std::size_t pos) {
  while (pos < text.size()) {
    std::size_t lt = text.find('<', pos);
    if (lt == std::string_view::npos || lt + 1 >= text.size()) return {};
    std::string_view rest = text.substr(lt);
    if (rest.substr(0, 4) == "<!--") {
      std::size_t end = rest.find("-->");
      if (end == std::string_view::npos) return {};
      pos = lt + end + 3;
      continue;
    }
    if (rest[1] == '?' || rest[1] == '!') {
      std::size_t end = rest.find('>');
      if (end == std::string_view::npos) return {};
      pos = lt + end + 1;
      continue;
    }
    std::size_t n = 1;
    while (n < rest.size() && (is_word_char(rest[n]) || rest[n] == ':')) ++n;
    return std::string(rest.substr(1, n - 1));
  }
  return {};
}

// The header of Alibaba's Lingjun topology CSV: the columns ip, DSW, PSW and ASW in any order
// and case (the file as published has `ip,DSW,PSW,ASW`).
bool looks_like_lingjun_header(std::string_view line) {
  if (line.size() > 64) return false;
  unsigned seen = 0;
  std::size_t start = 0;
  int fields = 0;
  while (true) {
    std::size_t comma = line.find(',', start);
    std::string_view field =
        trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
    ++fields;
    const std::array<std::string_view, 4> names = {"ip", "dsw", "psw", "asw"};
    for (std::size_t k = 0; k < names.size(); ++k) {
      if (field.size() == names[k].size() && starts_with_ci(field, names[k])) seen |= 1u << k;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields == 4 && seen == 0xF;
}

bool looks_like_nvidia_smi(std::string_view line) {
  // The header row of `nvidia-smi topo -m`: GPU0 then more columns (GPU1, NICk, mlx5_k, CPU
  // Affinity); or its legend.
  if (line.substr(0, 4) == "GPU0" && line.size() > 4 && (line[4] == ' ' || line[4] == '\t')) {
    std::string_view rest = trim(line.substr(4));
    return rest.substr(0, 4) == "GPU1" || rest.substr(0, 3) == "NIC" ||
           rest.substr(0, 4) == "mlx5" || rest.substr(0, 12) == "CPU Affinity";
  }
  return line.substr(0, 7) == "Legend:" || line.substr(0, 11) == "NIC Legend:";
}

Evidence scan(std::string_view text) {
  std::string_view head = text.substr(0, kHeadBytes);
  Evidence weak;
  long line_no = 0;
  std::size_t pos = 0;
  bool ibd_header = false;
  long ibd_header_line = 0;
  while (pos < head.size()) {
    std::size_t nl = head.find('\n', pos);
    std::size_t end = nl == std::string_view::npos ? head.size() : nl;
    std::string_view raw = head.substr(pos, end - pos);
    std::size_t line_start = pos;
    pos = end + 1;
    ++line_no;
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    auto hit = [&](Found f) { return Evidence{f, line_no, {}}; };
    if (line[0] == '<') {
      std::string root = xml_root(text, line_start);
      if (root == "topology") return hit(Found::kHwlocXml);
      if (root == "system") return hit(Found::kNcclXml);
      if (root == "graphs") return hit(Found::kNcclGraph);
      if (!root.empty()) return Evidence{Found::kOtherXml, line_no, root};
      continue;
    }
    if (line[0] == '{') {
      if (head.find("\"topo-aware-fabric\"") != std::string_view::npos) return hit(Found::kJson);
      if (weak.found == Found::kNone) weak = hit(Found::kJson);
      continue;
    }
    if (line[0] == '#') {
      if (line.find("Topology file: generated") != std::string_view::npos ||
          line.find("generated by IBDIAG") != std::string_view::npos) {
        if (!ibd_header) ibd_header_line = line_no;
        ibd_header = true;
      }
      continue;
    }
    if (looks_like_nvidia_smi(line)) return hit(Found::kNvidiaSmi);
    if (looks_like_lingjun_header(line)) return hit(Found::kLingjunCsv);
    if (line == "---" || line.substr(0, 11) == "- topology:" || line.substr(0, 9) == "topology:") {
      return hit(Found::kTopologyYaml);
    }
    if (starts_with_ci(line, "SwitchName=") || starts_with_ci(line, "BlockName=") ||
        starts_with_ci(line, "BlockSizes=")) {
      return hit(Found::kSlurmTopology);
    }
    if (line.substr(0, 7) == "vendid=" || line.substr(0, 6) == "devid=" ||
        line.substr(0, 11) == "sysimgguid=" || line.substr(0, 11) == "switchguid=" ||
        line.substr(0, 7) == "caguid=") {
      return hit(Found::kIbnetdiscover);
    }
    for (std::string_view kw : {"Switch", "Ca", "Rt"}) {
      if (line.substr(0, kw.size()) == kw && line.size() > kw.size() + 1 &&
          (line[kw.size()] == ' ' || line[kw.size()] == '\t')) {
        std::string_view rest = trim(line.substr(kw.size()));
        if (!rest.empty() && std::isdigit(static_cast<unsigned char>(rest[0])) != 0) {
          return hit(Found::kIbnetdiscover);
        }
      }
    }
    if (starts_with_ci(line, "Name=") || starts_with_ci(line, "NodeName=") ||
        starts_with_ci(line, "AutoDetect=")) {
      return hit(Found::kGresConf);
    }
    if (line[0] == '[') {
      for (std::string_view t : {"[[unit]]", "[defaults]", "[node_types", "[[uplinks]]", "[[tier]]",
                                 "[[nvlink_domain]]", "[hosts"}) {
        if (line.substr(0, t.size()) == t) return hit(Found::kTomlStrong);
      }
      if (weak.found == Found::kNone) weak = hit(Found::kTomlWeak);
      continue;
    }
    std::size_t eq = line.find('=');
    if (eq != std::string_view::npos && eq > 0 && weak.found == Found::kNone) {
      weak = hit(Found::kTomlWeak);
    }
  }
  if (ibd_header) return Evidence{Found::kIbnetdiscover, ibd_header_line, {}};
  return weak;
}

void check_text(std::string_view text, const std::string& path, InputKind kind) {
  const char* noun = kind == InputKind::kFabric ? "a fabric description" : "a node capture";
  std::string_view head = text.substr(0, 4096);
  std::size_t control = 0;
  for (char c : head) {
    auto u = static_cast<unsigned char>(c);
    if (u == 0) {
      throw Error(ErrorCode::kBadInput, path, std::string("binary data (NUL bytes), not ") + noun);
    }
    if (u < 0x20 && c != '\n' && c != '\r' && c != '\t') ++control;
  }
  if (control * 50 > head.size() + 50) {
    throw Error(ErrorCode::kBadInput, path,
                std::string("binary data (control characters), not ") + noun);
  }
  if (trim(text).empty()) {
    throw Error(ErrorCode::kBadInput, path,
                kind == InputKind::kFabric
                    ? "empty file"
                    : "no root element (the file is empty or holds only comments)");
  }
}

}  // namespace

std::string_view to_string(InputFormat format) {
  if (const FormatName* n = entry(format)) return n->name;
  return "auto";
}

std::string format_names(InputKind kind) {
  std::string out = "auto";
  for (const FormatName& n : kFormats) {
    if (n.kind == kind) out += std::string(", ") + n.name;
  }
  return out;
}

bool format_of_kind(InputFormat format, InputKind kind) {
  const FormatName* n = entry(format);
  return n == nullptr || n->kind == kind;
}

InputFormat parse_input_format(std::string_view name, InputKind kind, const std::string& context) {
  if (name.empty() || name == "auto") return InputFormat::kAuto;
  for (const FormatName& n : kFormats) {
    if (name != n.name) continue;
    if (n.kind != kind) {
      throw Error(ErrorCode::kBadInput, context,
                  std::string(n.name) + " is a " +
                      (n.kind == InputKind::kNode ? "node capture" : "fabric description") +
                      " format, not one of this input's: " + format_names(kind));
    }
    return n.format;
  }
  throw Error(ErrorCode::kBadInput, context,
              "unknown format '" + std::string(name) + "' (known: " + format_names(kind) + ")");
}

InputText clean_input(std::string text, const std::string& name) {
  InputText out;
  if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  // CRLF to LF (a lone CR stays: it is data, or an error the parser names).
  if (text.find('\r') != std::string::npos) {
    std::string lf;
    lf.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
      lf.push_back(text[i]);
    }
    text.swap(lf);
  }
  // Line spans, for blanking prompt lines at both ends.
  std::vector<std::pair<std::size_t, std::size_t>> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    std::size_t end = nl == std::string::npos ? text.size() : nl;
    lines.emplace_back(pos, end);
    pos = end + 1;
  }
  auto view = [&](std::size_t i) {
    return std::string_view(text).substr(lines[i].first, lines[i].second - lines[i].first);
  };
  std::vector<std::size_t> blank;
  std::size_t first = 0;
  for (; first < lines.size(); ++first) {
    std::string_view l = view(first);
    if (trim(l).empty()) continue;
    if (!is_prompt_line(l)) break;
    blank.push_back(first);
    out.notes.push_back(where(name, static_cast<long>(first + 1)) +
                        ": skipped a shell prompt or command line before the data: `" + shown(l) +
                        "`");
  }
  for (std::size_t last = lines.size(); last-- > first;) {
    std::string_view l = view(last);
    if (trim(l).empty()) continue;
    if (!is_prompt_line(l)) break;
    blank.push_back(last);
    out.notes.push_back(where(name, static_cast<long>(last + 1)) +
                        ": skipped a shell prompt line after the data: `" + shown(l) + "`");
  }
  // Blank from the back so earlier spans stay valid; the newline stays, so line numbers hold.
  std::sort(blank.rbegin(), blank.rend());
  for (std::size_t i : blank) text.erase(lines[i].first, lines[i].second - lines[i].first);
  out.text = std::move(text);
  return out;
}

InputText read_input(const std::string& path, std::uintmax_t max_bytes) {
  // Compressed data is never larger than what it inflates to, so one bound serves both.
  std::string data = read_bytes(path, max_bytes);
  if (is_gzip(data)) data = gunzip(data, path, max_bytes);
  return clean_input(std::move(data), path);
}

InputFormat detect_format(std::string_view text, InputKind kind, const std::string& path) {
  const bool fabric = kind == InputKind::kFabric;
  check_text(text, path, kind);
  Evidence e = scan(text);
  const std::string at = where(path, e.line);
  const char* force = fabric ? "--format NAME (plugin config: fabric_format)"
                             : "--format NAME (plugin config: capture_format)";
  auto other_kind = [&](const char* what) {
    throw Error(ErrorCode::kUnsupported, at,
                std::string(what) +
                    (fabric ? ", a node capture, not a fabric description; give it as a node "
                              "type's capture (--node-type, [node_types] capture)"
                            : ", a fabric description, not a node capture; give it to "
                              "`fabric -i` or `map --fabric`"));
  };
  switch (e.found) {
    case Found::kIbnetdiscover:
      if (fabric) return InputFormat::kIbnetdiscover;
      other_kind("an ibnetdiscover dump");
      break;
    case Found::kSlurmTopology:
      if (fabric) return InputFormat::kSlurmTopology;
      other_kind("a Slurm topology.conf");
      break;
    case Found::kTomlStrong:
    case Found::kTomlWeak:
      if (fabric) return InputFormat::kFabricToml;
      if (e.found == Found::kTomlStrong) other_kind("a TOML fabric description");
      break;
    case Found::kJson:
      if (fabric) return InputFormat::kFabricJson;
      break;
    case Found::kLingjunCsv:
      if (fabric) return InputFormat::kLingjunCsv;
      other_kind("an Alibaba Lingjun topology CSV");
      break;
    case Found::kHwlocXml:
      if (!fabric) return InputFormat::kHwlocXml;
      other_kind("hwloc XML");
      break;
    case Found::kNcclXml:
      if (!fabric) return InputFormat::kNcclXml;
      other_kind("NCCL topology XML");
      break;
    case Found::kNcclGraph:
      throw Error(ErrorCode::kUnsupported, at,
                  "an NCCL graph file, not a topology file (root <graphs>: NCCL_GRAPH_FILE)");
    case Found::kOtherXml:
      throw Error(ErrorCode::kBadInput, at,
                  "XML with root element <" + e.detail +
                      ">: neither <system> (NCCL topology XML) nor <topology> (hwloc XML)" +
                      (fabric ? ", and no fabric description is XML" : ""));
    case Found::kNvidiaSmi:
      throw Error(ErrorCode::kUnsupported, at,
                  "this is `nvidia-smi topo -m` output, which has no PCI bus ids to key devices "
                  "by; give `lstopo --of xml` (hwloc) or an NCCL_TOPO_DUMP_FILE of that node");
    case Found::kTopologyYaml:
      throw Error(ErrorCode::kUnsupported, at,
                  "a Slurm topology.yaml (Slurm 25.05 and later) is not read; give the "
                  "topology.conf form (SwitchName=/BlockName= lines) or a TOML description");
    case Found::kGresConf:
      throw Error(ErrorCode::kUnsupported, at,
                  "a Slurm gres.conf (the GPUs of a node, not the network between nodes); "
                  "give an ibnetdiscover dump, a topology.conf or a TOML description");
    case Found::kNone:
      if (!fabric && trim(text).front() == '<') {
        throw Error(ErrorCode::kBadInput, path,
                    "no root element (the file is empty or holds only comments)");
      }
      break;
  }
  std::string tried;
  for (const FormatName& n : kFormats) {
    if (n.kind != kind) continue;
    tried += std::string(tried.empty() ? "" : ", ") + n.what + " (" + n.name + ")";
  }
  throw Error(
      ErrorCode::kBadInput, path,
      "unrecognized format: tried " + tried + "; if it is one of them, say which with " + force);
}

}  // namespace topoaware::topology
