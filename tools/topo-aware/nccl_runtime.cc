// dlopen of the CUDA runtime and NCCL (nccl_runtime.h).
#include "nccl_runtime.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

namespace topoaware::cli::gpu {
namespace {

template <class Fn>
bool bind(void* lib, Fn*& slot, const char* symbol) {
  void* p = dlsym(lib, symbol);
  if (p == nullptr) return false;
  slot = reinterpret_cast<Fn*>(p);
  return true;
}

// Opens the first loadable candidate; on failure, says what each gave.
void* open_first(const std::vector<std::string>& candidates, std::string* tried) {
  for (const auto& c : candidates) {
    // Kept open for the process lifetime; RTLD_LOCAL keeps their symbols to this seam.
    if (void* lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* err = dlerror();
    *tried += (tried->empty() ? "" : "; ") + (err ? std::string(err) : c + ": not loadable");
  }
  return nullptr;
}

std::vector<std::string> with_cuda_dirs(const std::vector<std::string>& sonames) {
  std::vector<std::string> out = sonames;
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) {
    dirs.push_back(std::string(home) + "/lib64");
    dirs.push_back(std::string(home) + "/lib");
  }
  dirs.push_back("/usr/local/cuda/lib64");
  dirs.push_back("/usr/local/cuda/lib");
  for (const auto& d : dirs) {
    for (const auto& s : sonames) out.push_back(d + "/" + s);
  }
  return out;
}

template <class Api>
struct Loaded {
  Api api;
  bool ok = false;
  std::string why;
};

Loaded<CudaApi> open_cudart(const std::string& path) {
  Loaded<CudaApi> out;
  std::string tried;
  void* lib =
      open_first(path.empty() ? cudart_candidates() : std::vector<std::string>{path}, &tried);
  if (lib == nullptr) {
    out.why = "the CUDA runtime (libcudart) cannot be loaded: " + tried;
    return out;
  }
  CudaApi& a = out.api;
  std::string missing;
  auto need = [&](bool bound, const char* what) {
    if (!bound) missing += (missing.empty() ? "" : ", ") + std::string(what);
  };
  need(bind(lib, a.get_device_count, "cudaGetDeviceCount"), "cudaGetDeviceCount");
  need(bind(lib, a.set_device, "cudaSetDevice"), "cudaSetDevice");
  need(bind(lib, a.malloc, "cudaMalloc"), "cudaMalloc");
  need(bind(lib, a.free, "cudaFree"), "cudaFree");
  need(bind(lib, a.memset, "cudaMemset"), "cudaMemset");
  need(bind(lib, a.stream_create, "cudaStreamCreate"), "cudaStreamCreate");
  need(bind(lib, a.stream_synchronize, "cudaStreamSynchronize"), "cudaStreamSynchronize");
  need(bind(lib, a.stream_destroy, "cudaStreamDestroy"), "cudaStreamDestroy");
  need(bind(lib, a.device_get_pci_bus_id, "cudaDeviceGetPCIBusId"), "cudaDeviceGetPCIBusId");
  need(bind(lib, a.runtime_get_version, "cudaRuntimeGetVersion"), "cudaRuntimeGetVersion");
  need(bind(lib, a.driver_get_version, "cudaDriverGetVersion"), "cudaDriverGetVersion");
  need(bind(lib, a.get_error_string, "cudaGetErrorString"), "cudaGetErrorString");
  if (!missing.empty()) {
    out.why = "the CUDA runtime lacks " + missing;
    return out;
  }
  out.ok = true;
  return out;
}

Loaded<NcclApi> open_nccl(const std::string& path) {
  Loaded<NcclApi> out;
  std::string tried;
  void* lib = open_first(path.empty() ? nccl_candidates() : std::vector<std::string>{path}, &tried);
  if (lib == nullptr) {
    out.why = "NCCL (libnccl) cannot be loaded: " + tried;
    return out;
  }
  NcclApi& a = out.api;
  std::string missing;
  auto need = [&](bool bound, const char* what) {
    if (!bound) missing += (missing.empty() ? "" : ", ") + std::string(what);
  };
  need(bind(lib, a.get_version, "ncclGetVersion"), "ncclGetVersion");
  need(bind(lib, a.comm_init_all, "ncclCommInitAll"), "ncclCommInitAll");
  need(bind(lib, a.comm_destroy, "ncclCommDestroy"), "ncclCommDestroy");
  need(bind(lib, a.all_reduce, "ncclAllReduce"), "ncclAllReduce");
  need(bind(lib, a.group_start, "ncclGroupStart"), "ncclGroupStart");
  need(bind(lib, a.group_end, "ncclGroupEnd"), "ncclGroupEnd");
  need(bind(lib, a.get_error_string, "ncclGetErrorString"), "ncclGetErrorString");
  if (!missing.empty()) {
    out.why = "NCCL lacks " + missing;
    return out;
  }
  out.ok = true;
  return out;
}

// One load per path for the process (a failed load is remembered too).
template <class Api, class Open>
const Api* cached(std::map<std::string, Loaded<Api>>& cache, const std::string& path,
                  std::string* why, Open open) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it == cache.end()) it = cache.emplace(path, open(path)).first;
  if (!it->second.ok) {
    if (why) *why = it->second.why;
    return nullptr;
  }
  return &it->second.api;
}

}  // namespace

std::vector<std::string> cudart_candidates() {
  return with_cuda_dirs({"libcudart.so.13", "libcudart.so.12", "libcudart.so"});
}

std::vector<std::string> nccl_candidates() {
  return with_cuda_dirs({"libnccl.so.2", "libnccl.so"});
}

const CudaApi* load_cudart(const std::string& path, std::string* why) {
  static std::map<std::string, Loaded<CudaApi>> cache;
  return cached(cache, path, why, open_cudart);
}

const NcclApi* load_nccl(const std::string& path, std::string* why) {
  static std::map<std::string, Loaded<NcclApi>> cache;
  return cached(cache, path, why, open_nccl);
}

std::string nccl_version_string(int code) {
  // NCCL_VERSION(X,Y,Z): X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before.
  int major, minor, patch;
  if (code >= 20900) {
    major = code / 10000;
    minor = code / 100 % 100;
    patch = code % 100;
  } else {
    major = code / 1000;
    minor = code / 100 % 10;
    patch = code % 100;
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string cuda_version_string(int code) {
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
}

}  // namespace topoaware::cli::gpu
