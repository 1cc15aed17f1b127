// The CUDA runtime and NCCL behind a dlopen seam, for `topo-aware nccl-check`.
//
// Nothing links against libcudart or libnccl: the binary builds and runs everywhere (CI has
// neither a GPU nor a driver), and where a library or a GPU is missing the check says so and
// exits 77 ("skipped") instead of failing to start. The few types and entry points used are
// declared here with their C ABI (enums are ints, handles are opaque pointers), as
// topology/nvml_source.h does for NVML; tests/unit/cli/nccl_runtime_abi_test.cc checks every
// signature against cuda_runtime_api.h and nccl.h where those headers are installed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace topoaware::cli::gpu {

using CudaError = int;  // cudaError_t
inline constexpr CudaError kCudaSuccess = 0;
struct CudaStreamSt;
using CudaStream = CudaStreamSt*;  // cudaStream_t

using NcclResult = int;  // ncclResult_t
inline constexpr NcclResult kNcclSuccess = 0;
struct NcclCommSt;
using NcclComm = NcclCommSt*;           // ncclComm_t
inline constexpr int kNcclFloat32 = 7;  // ncclFloat32
inline constexpr int kNcclSum = 0;      // ncclSum

struct CudaApi {
  CudaError (*get_device_count)(int* count) = nullptr;                     // cudaGetDeviceCount
  CudaError (*set_device)(int device) = nullptr;                           // cudaSetDevice
  CudaError (*malloc)(void** ptr, std::size_t size) = nullptr;             // cudaMalloc
  CudaError (*free)(void* ptr) = nullptr;                                  // cudaFree
  CudaError (*memset)(void* ptr, int value, std::size_t count) = nullptr;  // cudaMemset
  CudaError (*stream_create)(CudaStream* stream) = nullptr;                // cudaStreamCreate
  CudaError (*stream_synchronize)(CudaStream stream) = nullptr;            // cudaStreamSynchronize
  CudaError (*stream_destroy)(CudaStream stream) = nullptr;                // cudaStreamDestroy
  CudaError (*device_get_pci_bus_id)(char* bus_id, int len, int device) = nullptr;
  CudaError (*runtime_get_version)(int* version) = nullptr;    // cudaRuntimeGetVersion
  CudaError (*driver_get_version)(int* version) = nullptr;     // cudaDriverGetVersion
  const char* (*get_error_string)(CudaError error) = nullptr;  // cudaGetErrorString
};

struct NcclApi {
  NcclResult (*get_version)(int* version) = nullptr;  // ncclGetVersion
  NcclResult (*comm_init_all)(NcclComm* comms, int ndev, const int* devlist) = nullptr;
  NcclResult (*comm_destroy)(NcclComm comm) = nullptr;  // ncclCommDestroy
  NcclResult (*all_reduce)(const void* send, void* recv, std::size_t count, int datatype, int op,
                           NcclComm comm, CudaStream stream) = nullptr;  // ncclAllReduce
  NcclResult (*group_start)() = nullptr;                                 // ncclGroupStart
  NcclResult (*group_end)() = nullptr;                                   // ncclGroupEnd
  const char* (*get_error_string)(NcclResult result) = nullptr;          // ncclGetErrorString
};

// The libraries tried, in order, when no path is given: the soname, then CUDA's own folders.
std::vector<std::string> cudart_candidates();
std::vector<std::string> nccl_candidates();

// Loads the library (`path`, or the candidates when empty) and every entry point. nullptr with
// *why saying what was tried and what failed. Loaded once per process and path.
const CudaApi* load_cudart(const std::string& path, std::string* why);
const NcclApi* load_nccl(const std::string& path, std::string* why);

// "2.28.3" from ncclGetVersion's 22803 (or 2803 before 2.9); "13.0" from CUDA's 13000.
std::string nccl_version_string(int code);
std::string cuda_version_string(int code);

}  // namespace topoaware::cli::gpu
