// GPUs and NVLink of a node as NVML reports them, behind a dlopen seam.
//
// NVML is reached through NvmlApi, a struct of function pointers filled once per process by
// dlopen("libnvidia-ml.so.1"); nothing links against NVML, so a node without a driver (and every
// CI machine) still builds and discovers, and tests drive enrich_with_nvml() through a fake of the
// same struct. The few NVML types used are declared here with the driver's ABI (nvml.h is not
// needed to build): 4-byte enums, the v3 PCI info layout, the v2 versioned fabric info. Newer
// entry points are optional: a driver that lacks nvmlDeviceGetNvLinkRemoteDeviceType or the
// fabric-info calls still yields GPUs and NVLink, just without multi-node NVLink identity.
#pragma once

#include <string>

#include "topoaware/topology/node.h"

namespace topoaware::topology {

namespace nvml {
using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorFunctionNotFound = 13;

struct DeviceSt;
using Device = DeviceSt*;  // nvmlDevice_t

inline constexpr unsigned kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS
inline constexpr unsigned kDeviceNameBuffer = 96;
inline constexpr unsigned kDeviceUuidBuffer = 96;

// nvmlPciInfo_t (the layout of nvmlDeviceGetPciInfo_v3 / nvmlDeviceGetNvLinkRemotePciInfo_v2).
struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];  // "00000000:1B:00.0"
};

// nvmlEnableState_t and nvmlIntNvLinkDeviceType_t values.
inline constexpr int kFeatureEnabled = 1;
inline constexpr int kNvLinkDeviceGpu = 0x00;
inline constexpr int kNvLinkDeviceIbmNpu = 0x01;
inline constexpr int kNvLinkDeviceSwitch = 0x02;
inline constexpr int kNvLinkDeviceUnknown = 0xff;

inline constexpr unsigned char kFabricStateCompleted = 3;  // NVML_GPU_FABRIC_STATE_COMPLETED

// nvmlGpuFabricInfo_t (nvmlDeviceGetGpuFabricInfo, R525+).
struct GpuFabricInfo {
  unsigned char cluster_uuid[16];
  Return status;
  unsigned clique_id;
  unsigned char state;
};

// nvmlGpuFabricInfo_v2_t (nvmlDeviceGetGpuFabricInfoV, R535+); `version` must be set.
struct GpuFabricInfoV2 {
  unsigned version;
  unsigned char cluster_uuid[16];
  Return status;
  unsigned clique_id;
  unsigned char state;
  unsigned health_mask;
};
inline constexpr unsigned kGpuFabricInfoV2Version =
    static_cast<unsigned>(sizeof(GpuFabricInfoV2)) | (2u << 24);

// The driver's sizes (x86_64 and aarch64 alike): a mismatch would misread every field after it.
static_assert(sizeof(PciInfo) == 68);
static_assert(sizeof(GpuFabricInfo) == 28);
static_assert(kGpuFabricInfoV2Version == 0x02000024);
}  // namespace nvml

// The NVML entry points discovery uses, with NVML's C signatures; the symbol each is loaded
// from is named beside it. Optional entries may be null.
struct NvmlApi {
  nvml::Return (*init)() = nullptr;                         // nvmlInit_v2
  nvml::Return (*shutdown)() = nullptr;                     // nvmlShutdown
  nvml::Return (*device_count)(unsigned* count) = nullptr;  // nvmlDeviceGetCount_v2
  nvml::Return (*handle_by_index)(unsigned index, nvml::Device* device) = nullptr;  // ..._v2
  nvml::Return (*pci_info)(nvml::Device, nvml::PciInfo*) = nullptr;  // nvmlDeviceGetPciInfo_v3
  nvml::Return (*name)(nvml::Device, char* name, unsigned length) = nullptr;  // nvmlDeviceGetName
  nvml::Return (*uuid)(nvml::Device, char* uuid, unsigned length) = nullptr;  // nvmlDeviceGetUUID
  nvml::Return (*cuda_compute_capability)(nvml::Device, int* major, int* minor) = nullptr;
  nvml::Return (*nvlink_state)(nvml::Device, unsigned link, int* enabled) = nullptr;
  nvml::Return (*nvlink_remote_pci_info)(nvml::Device, unsigned link,
                                         nvml::PciInfo* pci) = nullptr;  // ..._v2
  // Optional (newer drivers).
  nvml::Return (*nvlink_remote_device_type)(nvml::Device, unsigned link, int* type) = nullptr;
  nvml::Return (*gpu_fabric_info_v)(nvml::Device, nvml::GpuFabricInfoV2* info) = nullptr;
  nvml::Return (*gpu_fabric_info)(nvml::Device, nvml::GpuFabricInfo* info) = nullptr;
  const char* (*error_string)(nvml::Return result) = nullptr;  // nvmlErrorString
};

// libnvidia-ml.so.1 loaded once per process (thread-safe). nullptr when the library or a
// required symbol is missing; *why (if given) then says which.
const NvmlApi* load_nvml(std::string* why = nullptr);

// Fills the GPUs of `node` from NVML: NVML index (dev), compute capability (sm), UUID, model name,
// NVLink links (to a peer GPU, or to one merged kNvSwitch vertex, lanes counted per peer,
// bandwidth = lanes x nvlink_lane_bandwidth(sm)) and the NVLink fabric cluster UUID / clique.
// A GPU that NVML reports but the model lacks, and a PCI device NVML names as a GPU, are handled
// with a note; NVML failures leave notes and never throw. GPUs that already have NVLink links
// (an admin's file) keep them: the file wins.
void enrich_with_nvml(NodeTopology& node, const NvmlApi& api);

}  // namespace topoaware::topology
