// discover_live(): this machine (or a fake sysfs root) through every node source we have.
//
// On a real root the PCI/CPU tree comes from hwloc (or, with use_hwloc off or hwloc failing, from
// the sysfs builder) and is enriched by NVML (GPUs, NVLink) and by verbs + sysfs (HCA ports,
// netdevs). A fake root always goes through the sysfs builder (hwloc here reads only the real
// /sys) and only the fakes handed in are used: a test's tree must never be mixed with this
// machine's devices, so a null seam there means "none".
#include <filesystem>
#include <string>

#include "topoaware/topology/error.h"
#include "topoaware/topology/hwloc_source.h"
#include "topoaware/topology/nvml_source.h"
#include "topoaware/topology/rdma_source.h"
#include "topoaware/topology/sources.h"
#include "topoaware/topology/sysfs_source.h"

namespace topoaware::topology {

NodeTopology discover_live(const LiveOptions& options) {
  const std::string root = options.fsroot.empty() ? "/" : options.fsroot;
  const bool real_root = std::filesystem::path(root).lexically_normal() == "/";
  NodeTopology node;
  if (real_root && options.use_hwloc) {
    try {
      node = load_hwloc_live();
    } catch (const Error& e) {
      node = load_sysfs_node(root);
      node.notes.push_back(std::string("hwloc failed (") + e.what() + "); PCI tree from sysfs");
    }
  } else {
    node = load_sysfs_node(root);
    if (!real_root && options.use_hwloc) {
      node.notes.push_back("hwloc reads only this machine; the fake root was read from sysfs");
    }
  }

  const NvmlApi* nvml = options.nvml;
  if (nvml == nullptr && real_root) {
    std::string why;
    nvml = load_nvml(&why);
    if (nvml == nullptr) node.notes.push_back(why);
  } else if (nvml == nullptr) {
    node.notes.push_back("nvml: not used with a fake root; no NVLink detail");
  }
  if (nvml != nullptr) enrich_with_nvml(node, *nvml);

  const VerbsApi* verbs = options.verbs;
  if (verbs == nullptr && real_root) {
    std::string why;
    verbs = load_verbs(&why);
    if (verbs == nullptr) node.notes.push_back("rdma: " + why + "; port data from sysfs only");
  }
  enrich_with_rdma(node, root, verbs);
  return node;
}

}  // namespace topoaware::topology
