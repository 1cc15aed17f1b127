// A fake NVML behind the NvmlApi seam: describes GPUs this machine does not have.
//
// NvmlApi holds plain C function pointers, so the fake's state lives in one active instance
// (FakeNvml::Activate) that static functions read; a device handle is the GPU index + 1. Two
// descriptions of real machines are provided: a DGX H100 (8 x H100-SXM5, 18 NVLink lanes each into
// the NVSwitch fabric) and one compute tray of a GB200 NVL72 rack (4 GPUs, 18 lanes each into the
// rack's NVSwitches, registered in an NVLink fabric clique).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "topoaware/topology/nvml_source.h"

namespace topoaware::test {

struct FakeNvLink {
  std::string remote_busid;  // NVML's form, "00000000:05:00.0"
  int remote_type;           // nvml::kNvLinkDevice*
  bool active = true;
};

struct FakeGpu {
  std::string busid;  // NVML's form
  std::string name;
  std::string uuid;
  int major = 9, minor = 0;
  std::vector<FakeNvLink> links;
  bool fabric = false;
  unsigned char cluster[16] = {};
  unsigned clique = 0;
};

class FakeNvml {
 public:
  std::vector<FakeGpu> gpus;
  int init_result = topology::nvml::kSuccess;
  bool has_remote_type = true;  // a driver without nvmlDeviceGetNvLinkRemoteDeviceType
  bool has_fabric_v = true;
  int init_calls = 0, shutdown_calls = 0;

  // The seam, pointing at this fake (which must outlive its use).
  topology::NvmlApi api() {
    active() = this;
    topology::NvmlApi a;
    a.init = [] {
      ++active()->init_calls;
      return active()->init_result;
    };
    a.shutdown = [] {
      ++active()->shutdown_calls;
      return topology::nvml::kSuccess;
    };
    a.device_count = [](unsigned* n) {
      *n = static_cast<unsigned>(active()->gpus.size());
      return topology::nvml::kSuccess;
    };
    a.handle_by_index = [](unsigned i, topology::nvml::Device* d) {
      if (i >= active()->gpus.size()) return topology::nvml::kErrorInvalidArgument;
      *d = reinterpret_cast<topology::nvml::Device>(static_cast<std::uintptr_t>(i) + 1);
      return topology::nvml::kSuccess;
    };
    a.pci_info = [](topology::nvml::Device d, topology::nvml::PciInfo* p) {
      return fill_pci(gpu(d).busid, p);
    };
    a.name = [](topology::nvml::Device d, char* buf, unsigned len) {
      return copy(gpu(d).name, buf, len);
    };
    a.uuid = [](topology::nvml::Device d, char* buf, unsigned len) {
      return copy(gpu(d).uuid, buf, len);
    };
    a.cuda_compute_capability = [](topology::nvml::Device d, int* major, int* minor) {
      *major = gpu(d).major;
      *minor = gpu(d).minor;
      return topology::nvml::kSuccess;
    };
    a.nvlink_state = [](topology::nvml::Device d, unsigned l, int* on) {
      const FakeGpu& g = gpu(d);
      if (l >= g.links.size()) return topology::nvml::kErrorInvalidArgument;
      *on = g.links[l].active ? topology::nvml::kFeatureEnabled : 0;
      return topology::nvml::kSuccess;
    };
    a.nvlink_remote_pci_info = [](topology::nvml::Device d, unsigned l,
                                  topology::nvml::PciInfo* p) {
      const FakeGpu& g = gpu(d);
      if (l >= g.links.size()) return topology::nvml::kErrorInvalidArgument;
      return fill_pci(g.links[l].remote_busid, p);
    };
    if (has_remote_type) {
      a.nvlink_remote_device_type = [](topology::nvml::Device d, unsigned l, int* t) {
        const FakeGpu& g = gpu(d);
        if (l >= g.links.size()) return topology::nvml::kErrorInvalidArgument;
        *t = g.links[l].remote_type;
        return topology::nvml::kSuccess;
      };
    }
    if (has_fabric_v) {
      a.gpu_fabric_info_v = [](topology::nvml::Device d, topology::nvml::GpuFabricInfoV2* f) {
        if (f->version != topology::nvml::kGpuFabricInfoV2Version) {
          return topology::nvml::kErrorInvalidArgument;  // what a real driver says
        }
        const FakeGpu& g = gpu(d);
        if (!g.fabric) return topology::nvml::kErrorNotSupported;
        std::memcpy(f->cluster_uuid, g.cluster, sizeof g.cluster);
        f->clique_id = g.clique;
        f->state = topology::nvml::kFabricStateCompleted;
        f->status = topology::nvml::kSuccess;
        return topology::nvml::kSuccess;
      };
    }
    a.error_string = [](topology::nvml::Return) { return "fake NVML error"; };
    return a;
  }

  // DGX H100: GPU bus ids as nvidia-smi prints them on that machine; every lane to NVSwitch.
  static FakeNvml dgx_h100() {
    FakeNvml f;
    const char* buses[] = {"1B", "43", "52", "61", "9D", "C3", "D1", "DF"};
    for (int i = 0; i < 8; ++i) {
      FakeGpu g;
      g.busid = std::string("00000000:") + buses[i] + ":00.0";
      g.name = "NVIDIA H100 80GB HBM3";
      g.uuid = "GPU-0000000" + std::to_string(i) + "-h100-fake";
      g.major = 9;
      g.minor = 0;
      for (int l = 0; l < 18; ++l) {
        // Four NVSwitch chips behind lanes 0-4, 5-8, 9-13, 14-17 (5/4/5/4 as on the board).
        int chip = l < 5 ? 0 : l < 9 ? 1 : l < 14 ? 2 : 3;
        g.links.push_back(
            {"00000000:06:0" + std::to_string(chip) + ".0", topology::nvml::kNvLinkDeviceSwitch});
      }
      f.gpus.push_back(std::move(g));
    }
    return f;
  }

  // One GB200 NVL72 compute tray: 4 Blackwell GPUs (sm 100), 18 lanes each to the rack's
  // NVSwitch trays (invisible to the host: NVML gives their bus ids as all ones), registered in
  // the rack's NVLink fabric with one cluster UUID and clique.
  static FakeNvml nvl72_tray(unsigned clique) {
    FakeNvml f;
    const char* busids[] = {"00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0",
                            "00000019:01:00.0"};
    for (int i = 0; i < 4; ++i) {
      FakeGpu g;
      g.busid = busids[i];
      g.name = "NVIDIA GB200";
      g.uuid = "GPU-1000000" + std::to_string(i) + "-gb200-fake";
      g.major = 10;
      g.minor = 0;
      for (int l = 0; l < 18; ++l) {
        g.links.push_back({"FFFFFFFF:FF:FF.0", topology::nvml::kNvLinkDeviceSwitch});
      }
      g.fabric = true;
      for (int b = 0; b < 16; ++b) g.cluster[b] = static_cast<unsigned char>(0xa0 + b);
      g.clique = clique;
      f.gpus.push_back(std::move(g));
    }
    return f;
  }

 private:
  static FakeNvml*& active() {
    static FakeNvml* a = nullptr;
    return a;
  }
  static const FakeGpu& gpu(topology::nvml::Device d) {
    return active()->gpus.at(reinterpret_cast<std::uintptr_t>(d) - 1);
  }
  static topology::nvml::Return fill_pci(const std::string& busid, topology::nvml::PciInfo* p) {
    *p = {};
    std::snprintf(p->bus_id, sizeof p->bus_id, "%s", busid.c_str());
    return topology::nvml::kSuccess;
  }
  static topology::nvml::Return copy(const std::string& s, char* buf, unsigned len) {
    if (len <= s.size()) return topology::nvml::kErrorInvalidArgument;
    std::memcpy(buf, s.c_str(), s.size() + 1);
    return topology::nvml::kSuccess;
  }
};

}  // namespace topoaware::test
