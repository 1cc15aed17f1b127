#include "nccl_xml_reader.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "topoaware/topology/error.h"

namespace topoaware::topology::xml {

const std::string* Element::attr(std::string_view key) const {
  for (const auto& [k, v] : attrs) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == ':';
}

// A cursor over the text that counts lines as it goes, so every error names its line.
class Parser {
 public:
  Parser(std::string_view text, const std::string& path, const Limits& limits)
      : s_(text), path_(path), lim_(limits) {}

  Element document() {
    skip_misc(/*allow_prolog=*/true);
    if (eof()) fail("no root element (the file is empty or holds only comments)");
    if (s_[pos_] != '<') fail_unexpected("'<' (the root element)");
    Element root = element(0);
    skip_misc(/*allow_prolog=*/false);
    if (!eof()) fail("content after the root element </" + root.name + ">");
    return root;
  }

  std::string root() {
    skip_misc(/*allow_prolog=*/true);
    if (eof()) return {};
    if (s_[pos_] != '<') fail_unexpected("'<' (the root element)");
    ++pos_;
    return name();
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(ErrorCode::kBadInput, where(path_, line_), msg);
  }
  [[noreturn]] void fail_unexpected(const std::string& expected) const {
    if (eof()) fail("unexpected end of file, expected " + expected);
    unsigned char c = static_cast<unsigned char>(s_[pos_]);
    std::string got;
    if (c >= 0x20 && c < 0x7f) {
      got = std::string("'") + static_cast<char>(c) + "'";
    } else {
      static const char* hex = "0123456789abcdef";
      got = std::string("byte 0x") + hex[c >> 4] + hex[c & 15] + " (not text)";
    }
    fail("expected " + expected + ", got " + got);
  }

  bool eof() const { return pos_ >= s_.size(); }
  bool starts(std::string_view p) const { return s_.substr(pos_, p.size()) == p; }
  void advance(std::size_t n) {
    for (std::size_t i = 0; i < n && pos_ < s_.size(); ++i, ++pos_) {
      if (s_[pos_] == '\n') ++line_;
    }
  }
  void skip_space() {
    while (!eof() && is_space(s_[pos_])) advance(1);
  }
  // Skips to just past `end`, failing with `what` when the file ends first.
  void skip_past(std::string_view end, const char* what) {
    long start = line_;
    std::size_t at = s_.find(end, pos_);
    if (at == std::string_view::npos) {
      line_ = start;
      fail(std::string("unterminated ") + what);
    }
    advance(at + end.size() - pos_);
  }
  // Whitespace and comments; before the root also a prolog and a DOCTYPE.
  void skip_misc(bool allow_prolog) {
    for (;;) {
      skip_space();
      if (starts("<!--")) {
        skip_past("-->", "comment <!-- ... -->");
      } else if (allow_prolog && starts("<?")) {
        skip_past("?>", "prolog <? ... ?>");
      } else if (allow_prolog && starts("<!DOCTYPE")) {
        skip_past(">", "<!DOCTYPE ...>");
      } else {
        return;
      }
    }
  }

  std::string name() {
    if (eof() || !is_name_start(s_[pos_])) fail_unexpected("an element or attribute name");
    std::size_t b = pos_;
    while (!eof() && is_name_char(s_[pos_])) {
      ++pos_;
      if (pos_ - b > lim_.max_name) fail("name longer than " + std::to_string(lim_.max_name));
    }
    return std::string(s_.substr(b, pos_ - b));
  }

  Element element(std::size_t depth) {
    if (depth >= lim_.max_depth) {
      fail("elements nested deeper than " + std::to_string(lim_.max_depth));
    }
    if (++elements_ > lim_.max_elements) {
      throw Error(ErrorCode::kLimit, where(path_, line_),
                  "more than " + std::to_string(lim_.max_elements) + " elements");
    }
    Element e;
    e.line = line_;
    advance(1);  // '<'
    e.name = name();
    for (;;) {
      bool spaced = !eof() && is_space(s_[pos_]);
      skip_space();
      if (eof()) fail("unexpected end of file inside start tag <" + e.name + ">");
      if (starts("/>")) {
        advance(2);
        return e;
      }
      if (s_[pos_] == '>') {
        advance(1);
        break;
      }
      if (!spaced) fail_unexpected("a space, '>' or '/>' in <" + e.name + ">");
      std::string key = name();
      if (eof() || s_[pos_] != '=') fail_unexpected("'=' after attribute " + key);
      advance(1);
      if (eof() || (s_[pos_] != '"' && s_[pos_] != '\'')) {
        fail_unexpected("a quoted value for attribute " + key);
      }
      char q = s_[pos_];
      advance(1);
      std::size_t b = pos_;
      while (!eof() && s_[pos_] != q) {
        char c = s_[pos_];
        if (c == '<' || c == '\n' || c == '\r' || c == '\0') {
          fail("attribute " + key + " of <" + e.name + "> is not closed on its line");
        }
        unsigned char u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f) {
          // NCCL's files are ASCII; anything else is corruption, and would poison JSON output.
          fail_unexpected("printable ASCII in attribute " + key + " of <" + e.name + ">");
        }
        ++pos_;
        if (pos_ - b > lim_.max_value) {
          fail("attribute " + key + " longer than " + std::to_string(lim_.max_value));
        }
      }
      if (eof()) fail("unexpected end of file inside attribute " + key);
      std::string value(s_.substr(b, pos_ - b));
      advance(1);
      if (e.attr(key) != nullptr) fail("attribute " + key + " repeated in <" + e.name + ">");
      if (e.attrs.size() >= lim_.max_attrs) {
        fail("more than " + std::to_string(lim_.max_attrs) + " attributes in <" + e.name + ">");
      }
      e.attrs.emplace_back(std::move(key), std::move(value));
    }
    // Content: child elements, comments and whitespace only.
    for (;;) {
      skip_misc(/*allow_prolog=*/false);
      if (eof()) {
        fail("unexpected end of file: <" + e.name + "> opened at line " + std::to_string(e.line) +
             " is never closed");
      }
      if (starts("</")) {
        advance(2);
        std::string end = name();
        skip_space();
        if (eof() || s_[pos_] != '>') fail_unexpected("'>' to end </" + end + ">");
        advance(1);
        if (end != e.name) {
          fail("</" + end + "> closes <" + e.name + "> opened at line " + std::to_string(e.line));
        }
        return e;
      }
      if (s_[pos_] != '<') fail_unexpected("an element, a comment or </" + e.name + ">");
      if (starts("<!") || starts("<?")) fail("unsupported markup (CDATA, DOCTYPE or <?...?>)");
      e.children.push_back(element(depth + 1));
    }
  }

  std::string_view s_;
  const std::string& path_;
  const Limits& lim_;
  std::size_t pos_ = 0;
  long line_ = 1;
  std::size_t elements_ = 0;
};

}  // namespace

Element parse(std::string_view text, const std::string& path, const Limits& limits) {
  if (text.size() > limits.max_bytes) {
    throw Error(ErrorCode::kLimit, path,
                "document larger than " + std::to_string(limits.max_bytes) + " bytes");
  }
  return Parser(text, path, limits).document();
}

std::string root_name(std::string_view text, const std::string& path) {
  Limits limits;
  return Parser(text, path, limits).root();
}

}  // namespace topoaware::topology::xml
