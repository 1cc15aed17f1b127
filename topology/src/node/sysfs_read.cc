#include "sysfs_read.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <system_error>
#include <utility>

namespace topoaware::topology::sysfs {
namespace {

constexpr std::size_t kMaxFileBytes =
    std::size_t{64} * 1024;                       // sysfs attributes are one page at most
constexpr std::size_t kMaxDirEntries = 1 << 16;   // more PCI functions than any real node
constexpr int kMaxLinkHops = 40;                  // the kernel's own symlink limit
constexpr std::uint32_t kMaxCpuIndex = 1u << 20;  // far above any real PU count
constexpr std::size_t kMaxCpus = 1u << 17;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return s;
}

}  // namespace

std::optional<std::string> read_line(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::string buf(kMaxFileBytes, '\0');
  in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  buf.resize(static_cast<std::size_t>(in.gcount()));
  std::size_t nl = buf.find('\n');
  if (nl != std::string::npos) buf.resize(nl);
  return std::string(trim(buf));
}

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end && names.size() < kMaxDirEntries; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<fs::path> resolve(const fs::path& root, const fs::path& below_root) {
  fs::path rel = below_root;
  // Accept paths that already carry the root prefix.
  std::string r = root.lexically_normal().string();
  std::string b = below_root.lexically_normal().string();
  if (r != "/" && b.rfind(r, 0) == 0) rel = fs::path(b.substr(r.size()));
  // Work on a list of pending components; the resolved part is a list of names below root.
  std::vector<std::string> pending;
  for (const auto& part : rel.relative_path()) pending.push_back(part.string());
  std::reverse(pending.begin(), pending.end());
  std::vector<std::string> done;
  int hops = 0;
  auto current = [&] {
    fs::path p = root;
    for (const auto& d : done) p /= d;
    return p;
  };
  while (!pending.empty()) {
    std::string name = std::move(pending.back());
    pending.pop_back();
    if (name.empty() || name == ".") continue;
    if (name == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    fs::path candidate = current() / name;
    std::error_code ec;
    auto st = fs::symlink_status(candidate, ec);
    if (ec || !fs::exists(st)) return std::nullopt;
    if (!fs::is_symlink(st)) {
      done.push_back(std::move(name));
      continue;
    }
    if (++hops > kMaxLinkHops) return std::nullopt;
    fs::path target = fs::read_symlink(candidate, ec);
    if (ec) return std::nullopt;
    if (target.is_absolute()) done.clear();
    std::vector<std::string> parts;
    for (const auto& part : target.relative_path()) parts.push_back(part.string());
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) pending.push_back(*it);
  }
  return current();
}

std::optional<long> parse_long(std::string_view s, int base) {
  s = trim(s);
  bool neg = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    neg = s.front() == '-';
    s.remove_prefix(1);
  }
  if (base == 0) {
    base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
      base = 16;
      s.remove_prefix(2);
    }
  }
  if (s.empty()) return std::nullopt;
  long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return neg ? -v : v;
}

std::optional<std::vector<std::uint32_t>> parse_cpulist(std::string_view s) {
  std::vector<std::uint32_t> out;
  s = trim(s);
  if (s.empty()) return out;  // a memory-only NUMA node lists no CPUs
  while (!s.empty()) {
    std::size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    std::size_t dash = item.find('-');
    auto lo = parse_long(item.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : parse_long(item.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi >= static_cast<long>(kMaxCpuIndex)) {
      return std::nullopt;
    }
    if (out.size() + static_cast<std::size_t>(*hi - *lo + 1) > kMaxCpus) return std::nullopt;
    for (long i = *lo; i <= *hi; ++i) out.push_back(static_cast<std::uint32_t>(i));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string pcie_speed(std::string_view v) {
  v = trim(v);
  std::size_t sp = v.find(' ');
  if (sp == std::string_view::npos || v.substr(sp + 1).rfind("GT/s", 0) != 0) return {};
  std::string num(v.substr(0, sp));
  // Only the rates PCIe defines; anything else is not a speed we can vouch for.
  static constexpr std::pair<const char*, const char*> kRates[] = {
      {"2.5", "2.5"},   {"5", "5.0"},   {"5.0", "5.0"},   {"8", "8.0"},
      {"8.0", "8.0"},   {"16", "16.0"}, {"16.0", "16.0"}, {"32", "32.0"},
      {"32.0", "32.0"}, {"64", "64.0"}, {"64.0", "64.0"}};
  for (const auto& [in, out] : kRates) {
    if (num == in) return std::string(out) + " GT/s PCIe";
  }
  return {};
}

bool is_busid(std::string_view s) {
  // dddd:bb:dd.f with a domain of 4 or more hex digits.
  std::size_t c1 = s.find(':');
  if (c1 == std::string_view::npos || c1 < 4 || s.size() != c1 + 8) return false;
  auto hex = [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; };
  for (std::size_t i = 0; i < c1; ++i) {
    if (!hex(s[i])) return false;
  }
  std::string_view t = s.substr(c1);
  return t[0] == ':' && hex(t[1]) && hex(t[2]) && t[3] == ':' && hex(t[4]) && hex(t[5]) &&
         t[6] == '.' && t[7] >= '0' && t[7] <= '7';
}

std::string excerpt(std::string_view s) {
  constexpr std::size_t kMax = 40;
  std::string out;
  for (char c : s.substr(0, kMax)) {
    out.push_back(std::isprint(static_cast<unsigned char>(c)) ? c : '?');
  }
  if (s.size() > kMax) out += "...";
  return out;
}

std::string guid_from_sysfs(std::string_view s) {
  s = trim(s);
  std::string hex;
  for (char c : s) {
    if (c == ':') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return {};
    hex.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (hex.empty() || hex.size() > 16) return {};
  return "0x" + hex;
}

}  // namespace topoaware::topology::sysfs
