// A strict checker of NCCL's topology XML rules (reference nccl-topology.md section 1), written
// independently of the library's reader and writer so a test can hold the writer to them.
//
// Two severities. kError: something NCCL's parser rejects or misreads (prolog, tab, text, a tag
// across lines, unquoted or spaced attributes, over-long values, more than 16 attributes, 32
// children or 255 elements, zero-padded or non-decimal integers, upper-case or short bus ids, a
// wrong version, missing required keys, elements outside NCCL's nesting table). Counts are the
// smallest across NCCL releases still in use: 255 elements (256 slots, and the loader wants a
// free one before reading the closing </system>), 32 children (MAX_SUBS before 2.21). kIncomplete:
// allowed, but an attribute NCCL would then fill per rank (cpu affinity/arch/vendor/family/
// model, pci class/link_speed/link_width), which the fusion rule of section 2 warns about.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace topoaware::test {

struct LintIssue {
  enum Severity { kError, kIncomplete } severity;
  long line;
  std::string key;      // "pci 0000:10:00.0 link_speed": what is missing or wrong, stable
  std::string message;  // for people
};

class NcclXmlLint {
 public:
  std::vector<LintIssue> check(const std::string& text) {
    issues_.clear();
    s_ = text;
    pos_ = 0;
    line_ = 1;
    elements_ = 0;
    busids_.clear();
    if (text.find('\t') != std::string::npos) error("tab", "a TAB character (NCCL: fatal)");
    skip_misc();
    if (pos_ >= s_.size()) {
      error("empty", "no root element");
      return issues_;
    }
    if (s_.compare(pos_, 2, "<?") == 0 || s_.compare(pos_, 2, "<!") == 0) {
      error("prolog", "prolog or DOCTYPE (NCCL: \"expected >, got '?'\")");
      return issues_;
    }
    element("", 0);
    skip_misc();
    if (pos_ < s_.size()) error("trailing", "content after the root element");
    if (elements_ > 255) {
      error("nodes", std::to_string(elements_) + " elements, NCCL's loader takes at most 255");
    }
    return issues_;
  }

  static std::vector<LintIssue> errors(const std::vector<LintIssue>& all) {
    std::vector<LintIssue> out;
    for (const auto& i : all) {
      if (i.severity == LintIssue::kError) out.push_back(i);
    }
    return out;
  }
  static std::set<std::string> incomplete_keys(const std::vector<LintIssue>& all) {
    std::set<std::string> out;
    for (const auto& i : all) {
      if (i.severity == LintIssue::kIncomplete) out.insert(i.key);
    }
    return out;
  }

 private:
  void error(const std::string& key, const std::string& msg) {
    issues_.push_back({LintIssue::kError, line_, key, msg});
  }
  void incomplete(const std::string& key, const std::string& msg) {
    issues_.push_back({LintIssue::kIncomplete, line_, key, msg});
  }
  void adv() {
    if (s_[pos_] == '\n') ++line_;
    ++pos_;
  }
  // Between tags NCCL skips space, \n and \r only; comments are allowed.
  void skip_misc() {
    for (;;) {
      while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r')) adv();
      if (s_.compare(pos_, 4, "<!--") == 0) {
        std::size_t e = s_.find("-->", pos_);
        if (e == std::string::npos) {
          error("comment", "unterminated comment");
          pos_ = s_.size();
          return;
        }
        while (pos_ < e + 3) adv();
        continue;
      }
      return;
    }
  }

  static bool allowed_child(const std::string& parent, const std::string& child) {
    static const std::map<std::string, std::set<std::string>> table = {
        {"", {"system"}},           {"system", {"cpu"}},
        {"cpu", {"pci", "nic"}},    {"pci", {"pci", "gpu", "nic", "pcilink"}},
        {"gpu", {"nvlink", "c2c"}}, {"nic", {"net"}},
    };
    auto it = table.find(parent);
    return it != table.end() && it->second.count(child) != 0;
  }

  // Hand-written rather than std::regex: GCC 12's regex trips -Wmaybe-uninitialized under ASan.
  static bool is_decimal(const std::string& v) {
    std::size_t i = (!v.empty() && v[0] == '-') ? 1 : 0;
    if (i >= v.size()) return false;
    if (v[i] == '0') return i + 1 == v.size();
    for (; i < v.size(); ++i) {
      if (v[i] < '0' || v[i] > '9') return false;
    }
    return true;
  }
  static bool is_lower_hex_digits(const std::string& v, std::size_t from, std::size_t to) {
    if (from >= to || to > v.size()) return false;
    for (std::size_t i = from; i < to; ++i) {
      char c = v[i];
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
  }
  static bool is_hex(const std::string& v) {
    return v.size() > 2 && v[0] == '0' && v[1] == 'x' && is_lower_hex_digits(v, 2, v.size());
  }

 public:
  // Lowercase dddd:bb:dd.f with a 4- to 8-digit domain, as NCCL formats bus ids.
  static bool is_busid(const std::string& v) {
    std::size_t c1 = v.find(':');
    if (c1 == std::string::npos || c1 < 4 || c1 > 8) return false;
    return v.size() == c1 + 8 && is_lower_hex_digits(v, 0, c1) && v[c1 + 3] == ':' &&
           is_lower_hex_digits(v, c1 + 1, c1 + 3) && is_lower_hex_digits(v, c1 + 4, c1 + 6) &&
           v[c1 + 6] == '.' && v[c1 + 7] >= '0' && v[c1 + 7] <= '7';
  }

 private:
  void check_attrs(const std::string& name,
                   const std::vector<std::pair<std::string, std::string>>& a,
                   const std::string& parent_tclass_hint) {
    (void)parent_tclass_hint;
    std::map<std::string, std::string> m(a.begin(), a.end());
    auto has = [&](const char* k) { return m.count(k) != 0; };
    static const std::set<std::string> ints = {
        "numaid", "familyid", "modelid", "link_width", "dev",   "sm", "gdr",
        "count",  "port",     "maxconn", "latency",    "speed", "bw", "rank"};
    static const std::set<std::string> hexes = {
        "class", "vendor", "device", "subsystem_vendor", "subsystem_device", "tclass", "guid"};
    std::string id = name;
    if (has("busid")) id += " " + m["busid"];
    if (has("numaid")) id += " " + m["numaid"];
    if (has("name")) id += " " + m["name"];
    for (const auto& [k, v] : a) {
      // NCCL's own dumps write link_width="" where sysfs has none; NCCL reads it as x16.
      if (ints.count(k) && !is_decimal(v) && !(k == "link_width" && v.empty())) {
        error(id + " " + k, k + "=\"" + v + "\" is not a plain decimal integer (no zero padding)");
      }
      if (hexes.count(k) && !(name == "cpu" && k == "vendor") && !is_hex(v)) {
        error(id + " " + k, k + "=\"" + v + "\" is not lowercase 0x-prefixed hex");
      }
    }
    if (name == "system") {
      if (!has("version"))
        error("system version", "no version (NCCL: error)");
      else if (m["version"] != "1")
        error("system version", "version must be 1");
    } else if (name == "cpu") {
      if (!has("numaid")) error(id + " numaid", "cpu without numaid (required)");
      for (const char* k : {"affinity", "arch"}) {
        if (!has(k) || m[k].empty()) incomplete(id + " " + k, std::string("cpu without ") + k);
      }
      if (has("arch") && m["arch"] == "x86_64" && !has("vendor")) {
        incomplete(id + " vendor", "x86 cpu without vendor");
      }
      if ((!has("vendor") || m["vendor"] == "GenuineIntel") &&
          (!has("familyid") || !has("modelid"))) {
        incomplete(id + " familyid", "Intel (or unknown) cpu without familyid/modelid");
      }
      if (has("arch") && m["arch"] != "x86_64" && m["arch"] != "arm64" && m["arch"] != "ppc64") {
        error(id + " arch", "arch must be x86_64, arm64 or ppc64");
      }
    } else if (name == "pci") {
      if (!has("busid")) {
        error("pci busid", "pci without busid");
      } else {
        if (!is_busid(m["busid"])) {
          error(id + " busid", "busid not lowercase dddd:bb:dd.f");
        }
        if (!busids_.insert(m["busid"]).second) error(id + " busid", "duplicate busid");
      }
      if (!has("class")) incomplete(id + " class", "pci without class");
      if (!has("link_speed") || m["link_speed"].empty()) {
        incomplete(id + " link_speed", "pci without link_speed");
      }
      if (!has("link_width")) incomplete(id + " link_width", "pci without link_width");
    } else if (name == "nvlink") {
      if (!has("count") || !has("tclass")) error(id + " count", "nvlink needs count and tclass");
      if (has("tclass") && m["tclass"].rfind("0x03", 0) == 0) {
        if (!has("target") || !is_busid(m["target"])) {
          error(id + " target", "GPU nvlink needs a lowercase busid target");
        }
      }
    } else if (name == "c2c") {
      if (!has("bw") || !has("count")) error(id + " bw", "c2c needs bw and count");
    } else if (name == "net") {
      if (!has("name") || m["name"].empty()) error("net name", "net without name");
    } else if (name == "pcilink") {
      if (!has("target")) error("pcilink target", "pcilink without target");
    }
  }

  // At '<' of a start tag. Returns after its end tag (or "/>").
  void element(const std::string& parent, int depth) {
    ++elements_;
    long start_line = line_;
    adv();  // '<'
    std::string name;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
      name += s_[pos_];
      adv();
    }
    if (name.empty()) {
      error("tag", "a tag without a name");
      pos_ = s_.size();
      return;
    }
    if (!allowed_child(parent, name)) {
      error("nesting " + parent + ">" + name, "<" + name + "> is not allowed in <" + parent + ">");
    }
    std::vector<std::pair<std::string, std::string>> attrs;
    bool self_close = false;
    for (;;) {
      if (pos_ >= s_.size()) {
        error("eof", "end of file inside a start tag");
        return;
      }
      char c = s_[pos_];
      if (c == '\n' || c == '\r') {
        error("multiline " + name, "start tag <" + name + "> spans lines");
        adv();
        continue;
      }
      if (c == '>') {
        adv();
        break;
      }
      if (c == '/' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '>') {
        adv();
        adv();
        self_close = true;
        break;
      }
      if (c != ' ') {
        error("attr-sep " + name, "attributes must be separated by a single space");
        pos_ = s_.size();
        return;
      }
      adv();
      if (pos_ < s_.size() && s_[pos_] == ' ') error("double-space " + name, "two spaces in a tag");
      std::string key;
      while (pos_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
        key += s_[pos_];
        adv();
      }
      if (key.empty()) continue;  // a space before '>' or '/>'
      if (pos_ >= s_.size() || s_[pos_] != '=') {
        error("attr " + key, "attribute " + key + " without '=' directly after it");
        pos_ = s_.size();
        return;
      }
      adv();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) {
        error("attr " + key, "attribute " + key + " value not quoted");
        pos_ = s_.size();
        return;
      }
      char q = s_[pos_];
      adv();
      std::string value;
      while (pos_ < s_.size() && s_[pos_] != q) {
        value += s_[pos_];
        adv();
      }
      if (pos_ < s_.size()) adv();
      if (value.size() >= 254) error("attr " + key, "value of " + key + " over 253 characters");
      if (value.find('&') != std::string::npos) error("attr " + key, "entity in " + key);
      attrs.emplace_back(key, value);
    }
    if (attrs.size() > 16) error("attrs " + name, "more than 16 attributes");
    long saved = line_;
    line_ = start_line;
    check_attrs(name, attrs, "");
    line_ = saved;
    if (self_close) return;
    int children = 0;
    for (;;) {
      skip_misc();
      if (pos_ >= s_.size()) {
        error("eof", "<" + name + "> never closed");
        return;
      }
      if (s_[pos_] != '<') {
        error("text", "text content inside <" + name + "> (NCCL: fatal)");
        while (pos_ < s_.size() && s_[pos_] != '<') adv();
        continue;
      }
      if (s_.compare(pos_, 2, "</") == 0) {
        std::size_t e = s_.find('>', pos_);
        std::string end = s_.substr(pos_ + 2, e == std::string::npos ? 0 : e - pos_ - 2);
        if (end != name) error("end " + name, "</" + end + "> closes <" + name + ">");
        while (pos_ < s_.size() && s_[pos_] != '>') adv();
        if (pos_ < s_.size()) adv();
        break;
      }
      if (++children > 32) error("children " + name, "more than 32 children (NCCL < 2.21)");
      element(name, depth + 1);
    }
  }

  std::vector<LintIssue> issues_;
  std::string s_;
  std::size_t pos_ = 0;
  long line_ = 1;
  int elements_ = 0;
  std::set<std::string> busids_;
};

}  // namespace topoaware::test
