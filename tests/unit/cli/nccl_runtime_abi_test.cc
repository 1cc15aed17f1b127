// The dlopen seam of nccl-check (tools/topo-aware/nccl_runtime.h) declares CUDA's and NCCL's
// entry points itself so that the binary builds without them. Where the real headers are
// installed, each declaration is checked against them here: a signature or constant that drifts
// would make nccl-check call NCCL wrongly on the GPU machine it exists for.
#include <gtest/gtest.h>

#include <type_traits>

#include "nccl_runtime.h"

#ifdef TOPOAWARE_HAVE_CUDA_HEADERS
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace topoaware::cli::gpu {
namespace {

TEST(NcclRuntimeAbi, DeclarationsMatchTheInstalledHeaders) {
#ifndef TOPOAWARE_HAVE_CUDA_HEADERS
  GTEST_SKIP() << "cuda_runtime_api.h / nccl.h not installed: nothing to check against";
#else
  // Enums are ints and handles pointers in the C ABI.
  static_assert(sizeof(cudaError_t) == sizeof(CudaError));
  static_assert(sizeof(ncclResult_t) == sizeof(NcclResult));
  static_assert(sizeof(ncclDataType_t) == sizeof(int));
  static_assert(sizeof(ncclRedOp_t) == sizeof(int));
  static_assert(sizeof(cudaStream_t) == sizeof(CudaStream));
  static_assert(sizeof(ncclComm_t) == sizeof(NcclComm));
  static_assert(cudaSuccess == kCudaSuccess);
  static_assert(ncclSuccess == kNcclSuccess);
  static_assert(ncclFloat32 == kNcclFloat32);
  static_assert(ncclSum == kNcclSum);
  // Same parameter and return types, with the header's enums and handles in place of ours.
  auto same = [](auto real, auto ours) { return std::is_same_v<decltype(real), decltype(ours)>; };
  EXPECT_TRUE(same(&cudaGetDeviceCount, static_cast<cudaError_t (*)(int*)>(nullptr)));
  EXPECT_TRUE(same(&cudaSetDevice, static_cast<cudaError_t (*)(int)>(nullptr)));
  EXPECT_TRUE(same(static_cast<cudaError_t (*)(void**, size_t)>(&cudaMalloc),
                   static_cast<cudaError_t (*)(void**, std::size_t)>(nullptr)));
  EXPECT_TRUE(same(&cudaFree, static_cast<cudaError_t (*)(void*)>(nullptr)));
  EXPECT_TRUE(same(&cudaMemset, static_cast<cudaError_t (*)(void*, int, size_t)>(nullptr)));
  EXPECT_TRUE(same(&cudaStreamCreate, static_cast<cudaError_t (*)(cudaStream_t*)>(nullptr)));
  EXPECT_TRUE(same(&cudaStreamSynchronize, static_cast<cudaError_t (*)(cudaStream_t)>(nullptr)));
  EXPECT_TRUE(same(&cudaStreamDestroy, static_cast<cudaError_t (*)(cudaStream_t)>(nullptr)));
  EXPECT_TRUE(same(&cudaDeviceGetPCIBusId, static_cast<cudaError_t (*)(char*, int, int)>(nullptr)));
  EXPECT_TRUE(same(&cudaRuntimeGetVersion, static_cast<cudaError_t (*)(int*)>(nullptr)));
  EXPECT_TRUE(same(&cudaDriverGetVersion, static_cast<cudaError_t (*)(int*)>(nullptr)));
  EXPECT_TRUE(same(&cudaGetErrorString, static_cast<const char* (*)(cudaError_t)>(nullptr)));
  EXPECT_TRUE(same(&ncclGetVersion, static_cast<ncclResult_t (*)(int*)>(nullptr)));
  EXPECT_TRUE(
      same(&ncclCommInitAll, static_cast<ncclResult_t (*)(ncclComm_t*, int, const int*)>(nullptr)));
  EXPECT_TRUE(same(&ncclCommDestroy, static_cast<ncclResult_t (*)(ncclComm_t)>(nullptr)));
  EXPECT_TRUE(same(&ncclAllReduce,
                   static_cast<ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t,
                                                ncclRedOp_t, ncclComm_t, cudaStream_t)>(nullptr)));
  EXPECT_TRUE(same(&ncclGroupStart, static_cast<ncclResult_t (*)()>(nullptr)));
  EXPECT_TRUE(same(&ncclGroupEnd, static_cast<ncclResult_t (*)()>(nullptr)));
  EXPECT_TRUE(same(&ncclGetErrorString, static_cast<const char* (*)(ncclResult_t)>(nullptr)));
#endif
}

TEST(NcclRuntimeAbi, VersionCodesReadAsTheLibrariesWriteThem) {
  EXPECT_EQ(nccl_version_string(22803), "2.28.3");
  EXPECT_EQ(nccl_version_string(2804), "2.8.4");
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12040), "12.4");
}

}  // namespace
}  // namespace topoaware::cli::gpu
