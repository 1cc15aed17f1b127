// Node sources: every way topo-aware learns one node's hardware, all filling a NodeTopology.
//
// hwloc (live and XML through one code path), vendor NCCL topology XML, a sysfs tree (real or a
// fake root for tests) with NVML and libibverbs behind dlopen seams. Files are read through
// input_format.h (gzip, BOM, CRLF, shell prompt lines); load_node_file() detects the format from
// content unless told, so `-i FILE` takes any of them. All throw topology::Error naming the file.
#pragma once

#include <string>

#include "topoaware/topology/input_format.h"
#include "topoaware/topology/node.h"

namespace topoaware::topology {

struct NvmlApi;   // seam over libnvidia-ml.so.1 (nvml_source.h)
struct VerbsApi;  // seam over libibverbs.so.1 (rdma_source.h)

// hwloc XML export (v2 format; v1 where the installed hwloc reads it).
NodeTopology load_hwloc_xml(const std::string& path);
// Vendor NCCL topology XML (NCCL_TOPO_FILE dialect, also NCCL_TOPO_DUMP_FILE output).
NodeTopology load_nccl_xml(const std::string& path);
// Detects hwloc XML vs NCCL XML from the content (or takes `format`: kHwlocXml, kNcclXml; a
// fabric format is an Error) and loads it. Prompt lines skipped while reading are in notes.
NodeTopology load_node_file(const std::string& path, InputFormat format = InputFormat::kAuto);
// The same for a capture held in memory (cleaned like a file); `name` stands for the path.
NodeTopology load_node_text(std::string text, const std::string& name,
                            InputFormat format = InputFormat::kAuto);

// With a fake fsroot (not "/"), the tree always comes from sysfs and a null nvml/verbs means
// "none": a fake tree is never mixed with this machine's devices (see docs/live-discovery.md).
struct LiveOptions {
  std::string fsroot = "/";        // sysfs root ("/" on a real machine, a fake tree in tests)
  const NvmlApi* nvml = nullptr;   // nullptr: dlopen the real library (absent -> a note)
  const VerbsApi* verbs = nullptr; // nullptr: dlopen the real library (absent -> sysfs only)
  bool use_hwloc = true;           // false with a fake fsroot: build the tree from sysfs only
};
// This machine: hwloc live, enriched by NVML (GPUs, NVLink) and verbs+sysfs (HCAs, ports).
NodeTopology discover_live(const LiveOptions& options = {});

}  // namespace topoaware::topology
