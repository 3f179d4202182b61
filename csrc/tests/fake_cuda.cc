// A stand-in for libcuda.so.1 for the native unit tests (ledger_test): "device memory" is host
// memory, an IPC handle carries the allocation's address, and opening one maps nothing. It
// counts what the backend allocates, frees, opens and closes, so the tests can check that each
// device hold is freed exactly once and every mapping is closed, on a machine without a GPU,
// and logs the calls that cost on a real GPU (all but context pushes and pops), so a test can
// check which driver calls a request makes (fake_cuda_calls).
// Built as libcuda.so.1 (soname too) into the build's fake_cuda/, loaded by path by the test
// before the driver's dlopen("libcuda.so.1") finds it by soname; never installed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "cuda/driver_api.h"

using pybackend::cuda::CUcontext;
using pybackend::cuda::CUdevice;
using pybackend::cuda::CUdeviceptr;
using pybackend::cuda::CUipcMemHandle;
using pybackend::cuda::CUresult;
using pybackend::cuda::CUstream;

namespace {

constexpr CUresult kInvalidValue = 1;  // CUDA_ERROR_INVALID_VALUE
std::mutex g_mu;
std::map<CUdeviceptr, size_t> g_allocs;  // base -> size
int g_frees = 0;
int g_open = 0;       // IPC mappings open
std::string g_calls;  // "cuMemAlloc cuIpcGetMemHandle ..." since the last fake_cuda_calls

void Log(const char* call) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_calls.empty()) g_calls += ' ';
  g_calls += call;
}

}  // namespace

extern "C" {

// What the tests read (dlsym).
int fake_cuda_live_allocations() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<int>(g_allocs.size());
}
int fake_cuda_frees() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_frees;
}
int fake_cuda_open_mappings() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_open;
}

// The calls logged since the last call, space-separated, into buf (cut at size); clears the log.
void fake_cuda_calls(char* buf, size_t size) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::snprintf(buf, size, "%s", g_calls.c_str());
  g_calls.clear();
}

CUresult cuInit(unsigned int) { return 0; }
CUresult cuGetErrorName(CUresult, const char** name) {
  *name = "CUDA_ERROR_INVALID_VALUE";
  return 0;
}
CUresult cuDeviceGetCount(int* count) {
  *count = 1;
  return 0;
}
CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  *device = ordinal;
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device) {
  *ctx = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(device) + 1);
  return 0;
}
CUresult cuCtxPushCurrent_v2(CUcontext) { return 0; }
CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  *ctx = nullptr;
  return 0;
}
CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  *stream = reinterpret_cast<CUstream>(uintptr_t{1});
  return 0;
}
CUresult cuStreamSynchronize(CUstream) {
  Log("cuStreamSynchronize");
  return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t size) {
  Log("cuMemAlloc");
  void* p = std::malloc(size);
  std::lock_guard<std::mutex> lock(g_mu);
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  g_allocs[*ptr] = size;
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr ptr) {
  Log("cuMemFree");
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.find(ptr);
  if (it == g_allocs.end()) return kInvalidValue;  // a double free shows up here
  g_allocs.erase(it);
  ++g_frees;
  std::free(reinterpret_cast<void*>(ptr));
  return 0;
}
CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  Log("cuMemGetAddressRange");
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.upper_bound(ptr);
  if (it == g_allocs.begin()) return kInvalidValue;
  --it;
  if (ptr >= it->first + it->second) return kInvalidValue;
  *base = it->first;
  *size = it->second;
  return 0;
}
CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr ptr) {
  Log("cuIpcGetMemHandle");
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  std::memcpy(handle->reserved, &ptr, sizeof(ptr));
  return 0;
}
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* ptr, CUipcMemHandle handle, unsigned int) {
  Log("cuIpcOpenMemHandle");
  std::memcpy(ptr, handle.reserved, sizeof(*ptr));
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_allocs.count(*ptr) == 0) return kInvalidValue;
  ++g_open;
  return 0;
}
CUresult cuIpcCloseMemHandle(CUdeviceptr) {
  Log("cuIpcCloseMemHandle");
  std::lock_guard<std::mutex> lock(g_mu);
  --g_open;
  return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t size, CUstream) {
  Log("cuMemcpyDtoDAsync");
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), size);
  return 0;
}
// The synchronous copy (benchmarks/gpu_copy_floor.py's yardstick; the backend never calls it).
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t size) {
  Log("cuMemcpyDtoD");
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), size);
  return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t size, CUstream) {
  Log("cuMemcpyDtoHAsync");
  std::memcpy(dst, reinterpret_cast<const void*>(src), size);
  return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t size, CUstream) {
  Log("cuMemcpyHtoDAsync");
  std::memcpy(reinterpret_cast<void*>(dst), src, size);
  return 0;
}

}  // extern "C"
