/* A fake CUDA runtime and NCCL in one shared library, for `topo-aware nccl-check` on machines
 * without a GPU: the command dlopens it through --cudart/--nccl as it would the real ones.
 *
 * FAKE_CUDA_DEVICES (default 0): how many GPUs cudaGetDeviceCount reports; 0 answers
 *   cudaErrorNoDevice as the real runtime does on a machine without a GPU.
 * FAKE_NCCL_TOPO_SOURCE / FAKE_NCCL_GRAPH_SOURCE: files ncclCommInitAll copies to
 *   $NCCL_TOPO_DUMP_FILE / $NCCL_GRAPH_DUMP_FILE, as real NCCL writes its dumps while it
 *   initialises (a real NCCL dump from the fixtures stands for NCCL's view).
 * FAKE_NCCL_FAIL: ncclCommInitAll fails with ncclSystemError; FAKE_NCCL_CRASH: it dies of SIGTERM.
 * Device memory is host memory; collectives do nothing. The signatures are the C ABI of
 * cuda_runtime_api.h and nccl.h, as tools/topo-aware/nccl_runtime.h declares them. */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;
typedef void* cudaStream_t;
typedef int ncclResult_t;
typedef void* ncclComm_t;

static int devices(void) {
  const char* s = getenv("FAKE_CUDA_DEVICES");
  return s ? atoi(s) : 0;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = devices();
  return *count > 0 ? 0 : 100; /* cudaErrorNoDevice */
}
cudaError_t cudaSetDevice(int device) { return device >= 0 && device < devices() ? 0 : 101; }
cudaError_t cudaMalloc(void** ptr, size_t size) {
  *ptr = malloc(size ? size : 1);
  return *ptr ? 0 : 2; /* cudaErrorMemoryAllocation */
}
cudaError_t cudaFree(void* ptr) {
  free(ptr);
  return 0;
}
cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  memset(ptr, value, count);
  return 0;
}
static int stream_tokens;
cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = &stream_tokens;
  return 0;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return stream ? 0 : 400; }
cudaError_t cudaStreamDestroy(cudaStream_t stream) { return stream ? 0 : 400; }
cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int device) {
  snprintf(bus, (size_t)len, "0000:%02X:00.0", 0x10 + device);
  return 0;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return 0;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = devices() > 0 ? 13000 : 0;
  return 0;
}
const char* cudaGetErrorString(cudaError_t e) {
  return e == 100 ? "no CUDA-capable device is detected" : "fake CUDA error";
}

ncclResult_t ncclGetVersion(int* v) {
  *v = 22803;
  return 0;
}

static int copy_file(const char* from_env, const char* to_env) {
  const char* from = getenv(from_env);
  const char* to = getenv(to_env);
  if (!from || !to || !*to) return 0;
  FILE* in = fopen(from, "rb");
  FILE* out = fopen(to, "wb");
  int ok = in && out;
  char buf[4096];
  size_t n;
  while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
  if (in) fclose(in);
  if (out) fclose(out);
  return ok ? 0 : -1;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  (void)devlist;
  if (getenv("FAKE_NCCL_CRASH")) raise(SIGTERM); /* no core file left behind */
  if (getenv("FAKE_NCCL_FAIL")) return 2;        /* ncclSystemError */
  if (copy_file("FAKE_NCCL_TOPO_SOURCE", "NCCL_TOPO_DUMP_FILE") != 0) return 2;
  if (copy_file("FAKE_NCCL_GRAPH_SOURCE", "NCCL_GRAPH_DUMP_FILE") != 0) return 2;
  for (int i = 0; i < ndev; ++i) comms[i] = &stream_tokens;
  return 0;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return comm ? 0 : 4; }
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, int type, int op,
                           ncclComm_t comm, cudaStream_t stream) {
  (void)send, (void)recv, (void)count, (void)type, (void)op, (void)stream;
  return comm ? 0 : 4;
}
ncclResult_t ncclGroupStart(void) { return 0; }
ncclResult_t ncclGroupEnd(void) { return 0; }
const char* ncclGetErrorString(ncclResult_t r) {
  return r == 2 ? "unhandled system error (fake)" : "fake NCCL error";
}
