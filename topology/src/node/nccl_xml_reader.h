// A small, bounded XML reader for NCCL's topology dialect and for sniffing a file's root element.
//
// NCCL's own parser is a hand-written subset of XML; vendor files add what real editors leave
// behind (comments, an `<?xml?>` prolog in some dumps, CRLF line ends, the odd tab). This reader
// accepts exactly that subset -- elements, quoted attributes, comments, a prolog/DOCTYPE before
// the root -- and nothing more: no text content, no entities, no CDATA. Every limit (file size,
// depth, element and attribute counts, value length) is fixed so hostile input costs bounded
// time and memory, and every failure is a topology::Error naming path:line. Private to the
// topology library; NCCL-specific meaning is given by nccl_xml_source.cc.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace topoaware::topology::xml {

struct Element {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // in file order
  std::vector<Element> children;
  long line = 0;  // line of the start tag

  // The value of attribute `key`, or nullptr when absent.
  const std::string* attr(std::string_view key) const;
};

struct Limits {
  std::size_t max_bytes = 16u << 20;  // far above any real topology file (largest ~30 KB)
  std::size_t max_depth = 32;         // NCCL trees are at most ~8 deep
  std::size_t max_elements = 100000;
  std::size_t max_attrs = 64;
  std::size_t max_value = 4096;
  std::size_t max_name = 128;
};

// Parses a whole document. `path` is used only to name errors.
Element parse(std::string_view text, const std::string& path, const Limits& limits = {});

// The name of the root element (after whitespace, prolog, DOCTYPE and comments), or empty when
// the text holds no start tag. Throws for text that is not XML at all.
std::string root_name(std::string_view text, const std::string& path);

}  // namespace topoaware::topology::xml
