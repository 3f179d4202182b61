// Our own declarations of the few CUDA driver API types and functions the backend calls, with
// their real signatures (cuda.h). No CUDA toolkit is needed to build: libcuda.so.1 is opened
// with dlopen the first time a GPU tensor is met (csrc/cuda/driver.h). The *_v2 names are the
// 64-bit entry points cuda.h maps the plain names to.
#pragma once

#include <cstddef>

namespace pybackend::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // NOLINT(runtime/int): cuda.h's type
struct CUctx_st;
using CUcontext = CUctx_st*;
struct CUstream_st;
using CUstream = CUstream_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr unsigned int CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1;
constexpr unsigned int CU_STREAM_NON_BLOCKING = 0x1;
constexpr int CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11;
constexpr size_t CU_IPC_HANDLE_SIZE = 64;

struct CUipcMemHandle {
  char reserved[CU_IPC_HANDLE_SIZE];
};

struct DriverApi {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
  CUresult (*cuCtxPushCurrent_v2)(CUcontext ctx);
  CUresult (*cuCtxPopCurrent_v2)(CUcontext* ctx);
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned int flags);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuMemGetAddressRange_v2)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);
  CUresult (*cuIpcGetMemHandle)(CUipcMemHandle* handle, CUdeviceptr ptr);
  CUresult (*cuIpcOpenMemHandle_v2)(CUdeviceptr* ptr, CUipcMemHandle handle, unsigned int flags);
  CUresult (*cuIpcCloseMemHandle)(CUdeviceptr ptr);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, size_t size);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t size, CUstream stream);
  CUresult (*cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, size_t size, CUstream stream);
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void* src, size_t size, CUstream stream);
};

}  // namespace pybackend::cuda
