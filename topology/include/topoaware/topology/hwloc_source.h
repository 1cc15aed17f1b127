// hwloc as a node source: this machine live, or an hwloc XML export, through one conversion.
//
// Both entry points load an hwloc topology with every I/O object kept (PCI bridges, PCI devices,
// OS devices: CUDA/NVML/RSMI GPUs, OpenFabrics HCAs, network interfaces) and hand it to
// node_from_hwloc(), which maps it onto the model: NUMA nodes -> kCpu roots, PCIe switches ->
// kPciSwitch (a switch's upstream and downstream ports collapse into one vertex keyed by the
// upstream port, the way NCCL walks sysfs), GPUs/NICs/other functions below them, the
// NVLinkBandwidth distance matrix -> NVLink links and one merged kNvSwitch, and all-pairs kSmp
// links, with link bandwidths from paths.h. load_hwloc_xml() (sources.h) is the file entry point;
// it checks the file before hwloc sees it so that every refusal names a specific reason.
#pragma once

#include <hwloc.h>

#include <string>
#include <string_view>

#include "topoaware/topology/node.h"

namespace topoaware::topology {

// This machine, as hwloc sees it (disallowed PUs of the current cgroup included: the model
// describes the node, not this process's share of it). Throws Error(kSystem) if hwloc fails.
NodeTopology load_hwloc_live();

// hwloc XML held in memory; `name` is used in error contexts and in NodeTopology::source.
// Throws Error(kBadInput/kUnsupported/kLimit, name, reason).
NodeTopology load_hwloc_xml_buffer(std::string_view xml, const std::string& name);

// Converts an already-loaded topology (loaded with I/O objects kept, e.g. io types filter
// HWLOC_TYPE_FILTER_KEEP_ALL). Does not take ownership. `source` goes to NodeTopology::source.
NodeTopology node_from_hwloc(hwloc_topology_t topology, std::string source);

}  // namespace topoaware::topology
