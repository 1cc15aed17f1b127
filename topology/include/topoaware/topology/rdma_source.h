// RDMA NICs of a node: libibverbs for what the port says now (state, rate, width, link layer)
// and sysfs for where the HCA sits (PCI function, NUMA node, netdev, node GUID).
//
// libibverbs is reached through VerbsApi, a struct of function pointers filled once per process
// by dlopen("libibverbs.so.1"), so a node without the library (or a test) still works: tests pass
// a fake through the same seam. Without verbs, sysfs alone describes the ports (a note says so).
// Sysfs is read below a configurable root (LiveOptions::fsroot) so fake trees describe hardware
// this machine lacks. Plain Ethernet netdevs of PCI NICs (sys/class/net) are recorded too, since
// NCCL's socket transport and NCCL_SOCKET_IFNAME name them.
#pragma once

#include <cstdint>
#include <string>

#include "topoaware/topology/node.h"

struct ibv_device;
struct ibv_context;
struct ibv_device_attr;
struct ibv_port_attr;

namespace topoaware::topology {

// The libibverbs entry points discovery uses, with the library's own C signatures.
// `query_port` is the exported `ibv_query_port` symbol (verbs.h wraps it in an inline of the same
// name); it fills the leading, long-stable part of ibv_port_attr, which is all we read.
struct VerbsApi {
  ibv_device** (*get_device_list)(int* num_devices) = nullptr;
  void (*free_device_list)(ibv_device** list) = nullptr;
  const char* (*get_device_name)(ibv_device* device) = nullptr;
  ibv_context* (*open_device)(ibv_device* device) = nullptr;
  int (*close_device)(ibv_context* context) = nullptr;
  int (*query_device)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  int (*query_port)(ibv_context* context, std::uint8_t port, ibv_port_attr* attr) = nullptr;
};

// libibverbs.so.1 loaded once per process (thread-safe). nullptr when the library or one of the
// symbols above is missing; *why (if given) then says which.
const VerbsApi* load_verbs(std::string* why = nullptr);

// A port's data rate in Gb/s from verbs' active_speed and active_width codes (NCCL's per-lane
// table: SDR 2.5 ... NDR 100, XDR 200; widths 1x/2x/4x/8x/12x). -1 for codes we do not know.
double ib_rate_gbps(int active_speed, int active_width);
// Lanes of a verbs active_width code (1, 2, 4, 8, 12); -1 when unknown.
int ib_width_lanes(int active_width);

// Names the NICs of `node` after their RDMA devices and fills their ports: sysfs under fsroot
// first, then verbs (when given) overriding state/rate/width/link layer. RDMA devices whose PCI
// function is not in the model, unreadable files and verbs failures leave notes, never throw.
void enrich_with_rdma(NodeTopology& node, const std::string& fsroot, const VerbsApi* verbs);

}  // namespace topoaware::topology
