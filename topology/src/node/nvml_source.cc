#include "topoaware/topology/nvml_source.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "topoaware/topology/paths.h"

namespace topoaware::topology {
namespace {

constexpr unsigned kMaxGpus = 1024;  // bounds a misbehaving library's count

std::string error_text(const NvmlApi& api, nvml::Return r) {
  std::string s = "error " + std::to_string(r);
  if (api.error_string != nullptr) {
    if (const char* e = api.error_string(r)) s += std::string(" (") + e + ")";
  }
  return s;
}

// A fixed-size C string from NVML, never read past its buffer.
template <std::size_t N>
std::string bounded(const char (&buf)[N]) {
  return std::string(buf, strnlen(buf, N));
}

std::string uuid_string(const unsigned char (&b)[16]) {
  if (std::all_of(std::begin(b), std::end(b), [](unsigned char c) { return c == 0; })) return {};
  char out[40];
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

// The kCpu vertex a vertex hangs from, or invalid.
VertexId cpu_above(const Graph& g, VertexId v) {
  for (int guard = 0; v.valid() && guard < 1024; ++guard) {
    if (g.vertex(v).kind == VertexKind::kCpu) return v;
    v = g.vertex(v).parent;
  }
  return {};
}

bool has_nvlink(const Graph& g, VertexId v) {
  const auto& ls = g.links_of(v);
  return std::any_of(ls.begin(), ls.end(),
                     [&](LinkId l) { return g.link(l).kind == LinkKind::kNvLink; });
}

class NvmlScan {
 public:
  NvmlScan(NodeTopology& node, const NvmlApi& api) : node_(node), api_(api) {}

  void run() {
    if (api_.init == nullptr || api_.device_count == nullptr || api_.handle_by_index == nullptr ||
        api_.pci_info == nullptr) {
      note("NVML seam incomplete; no GPU detail");
      return;
    }
    nvml::Return r = api_.init();
    if (r != nvml::kSuccess) {
      note("nvmlInit failed: " + error_text(api_, r) + "; no NVLink detail");
      return;
    }
    unsigned count = 0;
    r = api_.device_count(&count);
    if (r != nvml::kSuccess) {
      note("nvmlDeviceGetCount failed: " + error_text(api_, r));
    } else {
      if (count > kMaxGpus) {
        note("NVML reports " + std::to_string(count) + " GPUs; only " + std::to_string(kMaxGpus) +
             " read");
        count = kMaxGpus;
      }
      for (unsigned i = 0; i < count; ++i) read_gpu(i);
      // Decided before adding any: a peer's new link must not look like an admin's file.
      std::vector<bool> described;
      for (const auto& g : gpus_) described.push_back(has_nvlink(node_.graph, g.vertex));
      for (std::size_t i = 0; i < gpus_.size(); ++i) {
        if (!described[i]) read_nvlinks(gpus_[i]);
      }
    }
    if (api_.shutdown != nullptr) api_.shutdown();
  }

 private:
  struct NvmlGpu {
    unsigned index;
    nvml::Device device;
    VertexId vertex;
  };

  void note(std::string s) { node_.notes.push_back("nvml: " + std::move(s)); }

  void read_gpu(unsigned i) {
    nvml::Device dev = nullptr;
    nvml::Return r = api_.handle_by_index(i, &dev);
    if (r != nvml::kSuccess) {
      note("GPU " + std::to_string(i) + ": no handle: " + error_text(api_, r));
      return;
    }
    nvml::PciInfo pci{};
    r = api_.pci_info(dev, &pci);
    std::string busid = r == nvml::kSuccess ? normalize_busid(bounded(pci.bus_id)) : "";
    if (busid.empty()) {
      note("GPU " + std::to_string(i) + ": no PCI bus id; skipped");
      return;
    }
    VertexId v = node_.graph.find_busid(busid);
    if (!v.valid()) {
      note("GPU " + std::to_string(i) + " (" + busid + ") is not in the PCI model; skipped");
      return;
    }
    Vertex& x = node_.graph.vertex(v);
    if (x.kind == VertexKind::kPciDevice) x.kind = VertexKind::kGpu;
    if (x.kind != VertexKind::kGpu) {
      note("GPU " + std::to_string(i) + " (" + busid + ") is a " + std::string(to_string(x.kind)) +
           " in the model; skipped");
      return;
    }
    // Our own placeholder names follow NVML's index; a source's own names (hwloc's) stay.
    if (x.name.empty() || x.name.rfind("GPU", 0) == 0) x.name = "GPU" + std::to_string(i);
    x.gpu.dev = static_cast<int>(i);
    char text[nvml::kDeviceNameBuffer] = {};
    if (api_.name != nullptr && api_.name(dev, text, sizeof text) == nvml::kSuccess) {
      x.gpu.model = bounded(text);
    }
    char id[nvml::kDeviceUuidBuffer] = {};
    if (api_.uuid != nullptr && api_.uuid(dev, id, sizeof id) == nvml::kSuccess) {
      x.gpu.uuid = bounded(id);
    }
    int major = -1, minor = -1;
    if (api_.cuda_compute_capability != nullptr &&
        api_.cuda_compute_capability(dev, &major, &minor) == nvml::kSuccess && major >= 0 &&
        minor >= 0 && major < 100 && minor < 10) {
      x.gpu.sm = major * 10 + minor;
    }
    read_fabric(dev, x.gpu);
    gpus_.push_back({i, dev, v});
  }

  // Multi-node NVLink identity: only a completed, successful registration counts.
  void read_fabric(nvml::Device dev, GpuInfo& gpu) {
    unsigned char uuid[16] = {};
    unsigned clique = 0;
    bool ok = false;
    if (api_.gpu_fabric_info_v != nullptr) {
      nvml::GpuFabricInfoV2 info{};
      info.version = nvml::kGpuFabricInfoV2Version;
      if (api_.gpu_fabric_info_v(dev, &info) == nvml::kSuccess &&
          info.state == nvml::kFabricStateCompleted && info.status == nvml::kSuccess) {
        std::copy(std::begin(info.cluster_uuid), std::end(info.cluster_uuid), uuid);
        clique = info.clique_id;
        ok = true;
      }
    } else if (api_.gpu_fabric_info != nullptr) {
      nvml::GpuFabricInfo info{};
      if (api_.gpu_fabric_info(dev, &info) == nvml::kSuccess &&
          info.state == nvml::kFabricStateCompleted && info.status == nvml::kSuccess) {
        std::copy(std::begin(info.cluster_uuid), std::end(info.cluster_uuid), uuid);
        clique = info.clique_id;
        ok = true;
      }
    }
    if (!ok) return;
    std::string cluster = uuid_string(uuid);
    if (cluster.empty()) return;  // registered, but not part of a multi-node NVLink domain
    gpu.nvlink_cluster = cluster;
    gpu.nvlink_clique = clique <= 0x7fffffffu ? static_cast<int>(clique) : -1;
  }

  void read_nvlinks(const NvmlGpu& g) {
    if (api_.nvlink_state == nullptr || api_.nvlink_remote_pci_info == nullptr) return;
    Graph& graph = node_.graph;
    // Lanes per remote end; NVSwitch lanes all go to the one merged switch vertex, as in NCCL.
    std::map<std::string, int> gpu_lanes, cpu_lanes;
    int switch_lanes = 0;
    for (unsigned link = 0; link < nvml::kMaxNvLinks; ++link) {
      int enabled = 0;
      if (api_.nvlink_state(g.device, link, &enabled) != nvml::kSuccess) continue;
      if (enabled != nvml::kFeatureEnabled) continue;
      nvml::PciInfo remote{};
      if (api_.nvlink_remote_pci_info(g.device, link, &remote) != nvml::kSuccess) continue;
      std::string busid = normalize_busid(bounded(remote.bus_id));
      int type = nvml::kNvLinkDeviceUnknown;
      if (api_.nvlink_remote_device_type != nullptr &&
          api_.nvlink_remote_device_type(g.device, link, &type) != nvml::kSuccess) {
        type = nvml::kNvLinkDeviceUnknown;
      }
      if (type == nvml::kNvLinkDeviceUnknown) {
        // Older drivers: a peer we know as a GPU is one; anything else (an NVSwitch hidden from
        // a VM shows as an odd bus id) is taken as the switch, which is what NCCL assumes too.
        VertexId peer = busid.empty() ? VertexId() : graph.find_busid(busid);
        bool is_gpu = peer.valid() && graph.vertex(peer).kind == VertexKind::kGpu;
        type = is_gpu ? nvml::kNvLinkDeviceGpu : nvml::kNvLinkDeviceSwitch;
      }
      if (type == nvml::kNvLinkDeviceGpu && !busid.empty()) {
        ++gpu_lanes[busid];
      } else if (type == nvml::kNvLinkDeviceIbmNpu) {
        ++cpu_lanes[busid];
      } else {
        ++switch_lanes;
      }
    }
    int sm = graph.vertex(g.vertex).gpu.sm;
    for (const auto& [busid, lanes] : gpu_lanes) {
      VertexId peer = graph.find_busid(busid);
      if (!peer.valid() || graph.vertex(peer).kind != VertexKind::kGpu) {
        note(graph.vertex(g.vertex).name + ": NVLink peer " + busid + " is not a known GPU");
        continue;
      }
      // Both ends report the same bundle; keep it once, with the first end's lane count.
      auto key = std::minmax(g.vertex, peer);
      if (!gpu_pairs_.insert({key.first.value, key.second.value}).second) continue;
      add_nvlink(g.vertex, peer, lanes, sm, "0x030200");
    }
    if (switch_lanes > 0) add_nvlink(g.vertex, nvswitch(), switch_lanes, sm, "0x068000");
    for (const auto& [busid, lanes] : cpu_lanes) {
      VertexId cpu = cpu_above(graph, g.vertex);
      if (cpu.valid()) add_nvlink(g.vertex, cpu, lanes, sm, "0x068001");
    }
  }

  VertexId nvswitch() {
    if (!nvswitch_.valid()) {
      // One NVSwitch fabric per node: reuse the vertex another source made.
      auto existing = node_.graph.of_kind(VertexKind::kNvSwitch);
      if (!existing.empty()) return nvswitch_ = existing.front();
      Vertex v;
      v.kind = VertexKind::kNvSwitch;
      v.name = "NVSwitch";
      nvswitch_ = node_.graph.add_vertex(std::move(v));
    }
    return nvswitch_;
  }

  void add_nvlink(VertexId a, VertexId b, int lanes, int sm, const char* tclass) {
    Link l;
    l.a = a;
    l.b = b;
    l.kind = LinkKind::kNvLink;
    l.count = lanes;
    l.bandwidth = lanes * nvlink_lane_bandwidth(sm);
    l.nvlink_tclass = tclass;
    node_.graph.add_link(l);
  }

  NodeTopology& node_;
  const NvmlApi& api_;
  std::vector<NvmlGpu> gpus_;
  std::set<std::pair<std::uint32_t, std::uint32_t>> gpu_pairs_;
  VertexId nvswitch_;
};

template <class Fn>
bool bind(void* lib, Fn*& slot, std::initializer_list<const char*> symbols) {
  for (const char* s : symbols) {
    if (void* p = dlsym(lib, s)) {
      slot = reinterpret_cast<Fn*>(p);
      return true;
    }
  }
  return false;
}

struct LoadedNvml {
  NvmlApi api;
  bool ok = false;
  std::string why;
};

LoadedNvml load_nvml_once() {
  LoadedNvml out;
  // Kept open for the process lifetime; RTLD_LOCAL keeps NVML's symbols out of a host process.
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    out.why = "NVML (libnvidia-ml.so.1) not found: no NVLink detail";
    return out;
  }
  NvmlApi& a = out.api;
  std::string missing;
  auto need = [&](bool bound, const char* what) {
    if (!bound) missing += missing.empty() ? what : std::string(", ") + what;
  };
  need(bind(lib, a.init, {"nvmlInit_v2", "nvmlInit"}), "nvmlInit_v2");
  need(bind(lib, a.shutdown, {"nvmlShutdown"}), "nvmlShutdown");
  need(bind(lib, a.device_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}),
       "nvmlDeviceGetCount_v2");
  need(bind(lib, a.handle_by_index, {"nvmlDeviceGetHandleByIndex_v2"}),
       "nvmlDeviceGetHandleByIndex_v2");
  // No fallback to older PCI-info entry points: they fill a different struct layout (busId
  // first, 16 bytes), which this seam's PciInfo does not describe.
  need(bind(lib, a.pci_info, {"nvmlDeviceGetPciInfo_v3"}), "nvmlDeviceGetPciInfo_v3");
  need(bind(lib, a.name, {"nvmlDeviceGetName"}), "nvmlDeviceGetName");
  need(bind(lib, a.uuid, {"nvmlDeviceGetUUID"}), "nvmlDeviceGetUUID");
  need(bind(lib, a.cuda_compute_capability, {"nvmlDeviceGetCudaComputeCapability"}),
       "nvmlDeviceGetCudaComputeCapability");
  need(bind(lib, a.nvlink_state, {"nvmlDeviceGetNvLinkState"}), "nvmlDeviceGetNvLinkState");
  need(bind(lib, a.nvlink_remote_pci_info, {"nvmlDeviceGetNvLinkRemotePciInfo_v2"}),
       "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  bind(lib, a.nvlink_remote_device_type, {"nvmlDeviceGetNvLinkRemoteDeviceType"});
  bind(lib, a.gpu_fabric_info_v, {"nvmlDeviceGetGpuFabricInfoV"});
  bind(lib, a.gpu_fabric_info, {"nvmlDeviceGetGpuFabricInfo"});
  bind(lib, a.error_string, {"nvmlErrorString"});
  if (!missing.empty()) {
    out.why = "NVML (libnvidia-ml.so.1) lacks " + missing + ": no NVLink detail";
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace

const NvmlApi* load_nvml(std::string* why) {
  static const LoadedNvml loaded = load_nvml_once();
  if (!loaded.ok) {
    if (why != nullptr) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

void enrich_with_nvml(NodeTopology& node, const NvmlApi& api) { NvmlScan(node, api).run(); }

}  // namespace topoaware::topology
