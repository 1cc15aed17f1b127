// A node model built from a sysfs tree alone: the fallback when hwloc is not wanted and the way
// tests describe hardware this machine lacks (a fake tree under a configurable root).
//
// Reads <fsroot>/sys/bus/pci/devices (whose symlinks into sys/devices give the PCI tree),
// <fsroot>/sys/devices/system/node (NUMA domains and their CPUs), <fsroot>/proc/cpuinfo (CPU
// vendor/family/model) and <fsroot>/etc/hostname. PCIe switches are modelled as NCCL's sysfs
// walk sees them: a device's parent is the bridge two levels up (the switch's upstream port,
// skipping the downstream port), so a GPU and a NIC under one switch share a parent and meet at
// PIX. Kept PCI functions: bridges leading to kept devices, display/3D controllers (NVIDIA ones
// become GPUs), network controllers (NICs) and processing accelerators; the rest is left out.
// Throws topology::Error (kNotFound) only when the root itself is missing; anything malformed
// below it degrades the model and leaves a note in NodeTopology::notes.
#pragma once

#include <string>

#include "topoaware/topology/node.h"

namespace topoaware::topology {

NodeTopology load_sysfs_node(const std::string& fsroot);

}  // namespace topoaware::topology
