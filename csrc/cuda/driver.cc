#include "cuda/driver.h"

#include <dlfcn.h>

#include "backend/error.h"
#include "cuda/trace.h"

namespace pybackend::cuda {
namespace {

constexpr const char* kLibrary = "libcuda.so.1";

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *fn != nullptr;
}

}  // namespace

Driver& Driver::Get(const std::string& where) {
  // Loaded once; a failed load is remembered (the reason does not change while we run).
  static std::once_flag once;
  static Driver* driver = nullptr;
  static std::string& failure = *new std::string();  // never destroyed: read at exit too
  std::call_once(once, [] {
    void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      failure = std::string("cannot load the NVIDIA driver library ") + kLibrary + " (" +
                (e != nullptr ? e : "unknown error") +
                "): GPU tensors need an NVIDIA GPU and its driver on this machine";
      return;
    }
    auto* d = new Driver();  // never deleted: the library stays loaded for the process
    DriverApi& a = d->api_;
    std::string missing;
    Resolve(lib, "cuInit", &a.cuInit, &missing);
    Resolve(lib, "cuGetErrorName", &a.cuGetErrorName, &missing);
    Resolve(lib, "cuDeviceGet", &a.cuDeviceGet, &missing);
    Resolve(lib, "cuDevicePrimaryCtxRetain", &a.cuDevicePrimaryCtxRetain, &missing);
    Resolve(lib, "cuCtxPushCurrent_v2", &a.cuCtxPushCurrent_v2, &missing);
    Resolve(lib, "cuCtxPopCurrent_v2", &a.cuCtxPopCurrent_v2, &missing);
    Resolve(lib, "cuStreamCreate", &a.cuStreamCreate, &missing);
    Resolve(lib, "cuStreamSynchronize", &a.cuStreamSynchronize, &missing);
    Resolve(lib, "cuMemGetAddressRange_v2", &a.cuMemGetAddressRange_v2, &missing);
    Resolve(lib, "cuIpcGetMemHandle", &a.cuIpcGetMemHandle, &missing);
    Resolve(lib, "cuIpcOpenMemHandle_v2", &a.cuIpcOpenMemHandle_v2, &missing);
    Resolve(lib, "cuIpcCloseMemHandle", &a.cuIpcCloseMemHandle, &missing);
    Resolve(lib, "cuMemAlloc_v2", &a.cuMemAlloc_v2, &missing);
    Resolve(lib, "cuMemFree_v2", &a.cuMemFree_v2, &missing);
    Resolve(lib, "cuMemcpyDtoDAsync_v2", &a.cuMemcpyDtoDAsync_v2, &missing);
    Resolve(lib, "cuMemcpyDtoHAsync_v2", &a.cuMemcpyDtoHAsync_v2, &missing);
    Resolve(lib, "cuMemcpyHtoDAsync_v2", &a.cuMemcpyHtoDAsync_v2, &missing);
    if (!missing.empty()) {
      failure = std::string(kLibrary) + " lacks " + missing + ": update the NVIDIA driver";
      delete d;
      return;
    }
    CUresult rc = a.cuInit(0);
    if (rc != CUDA_SUCCESS) {
      failure = "cuInit failed with " + d->ErrorName(rc) +
                ": is a GPU visible to tritonserver (CUDA_VISIBLE_DEVICES, container flags)?";
      delete d;
      return;
    }
    driver = d;
  });
  if (driver == nullptr) Throw(TRITONSERVER_ERROR_UNAVAILABLE, where + ": " + failure);
  return *driver;
}

std::string Driver::ErrorName(CUresult rc) const {
  const char* name = nullptr;
  if (api_.cuGetErrorName == nullptr || api_.cuGetErrorName(rc, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    return "CUDA error " + std::to_string(rc);
  }
  return name;
}

void Driver::Check(CUresult rc, const char* call, const std::string& where,
                   const std::string& fix) const {
  if (rc == CUDA_SUCCESS) return;
  std::string text = where + ": CUDA driver call " + call + " failed with " + ErrorName(rc);
  if (!fix.empty()) text += ": " + fix;
  Throw(TRITONSERVER_ERROR_INTERNAL, text);
}

CUcontext Driver::Context(int device, const std::string& where) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = contexts_.find(device);
  if (it != contexts_.end()) return it->second;
  CUdevice dev = 0;
  Check(api_.cuDeviceGet(&dev, device), "cuDeviceGet", where,
        "device " + std::to_string(device) + " is not visible to tritonserver");
  CUcontext ctx = nullptr;
  Check(api_.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", where);
  contexts_[device] = ctx;
  return ctx;
}

CUstream Driver::Stream(int device, const std::string& where) {
  CUcontext ctx = Context(device, where);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(device);
  if (it != streams_.end()) return it->second;
  Check(api_.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent", where);
  CUstream stream = nullptr;
  CUresult rc = api_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
  CUcontext popped = nullptr;
  api_.cuCtxPopCurrent_v2(&popped);
  Check(rc, "cuStreamCreate", where);
  streams_[device] = stream;
  return stream;
}

ScopedDevice::ScopedDevice(Driver& driver, int device, const std::string& where) : driver_(driver) {
  driver.Check(driver.api().cuCtxPushCurrent_v2(driver.Context(device, where)), "cuCtxPushCurrent",
               where);
}

ScopedDevice::~ScopedDevice() {
  CUcontext popped = nullptr;
  driver_.api().cuCtxPopCurrent_v2(&popped);
}

const char* DirectionLabel(Direction d) {
  switch (d) {
    case Direction::kDeviceToDevice:
      return "d2d";
    case Direction::kDeviceToHost:
      return "d2h";
    case Direction::kHostToDevice:
      return "h2d";
  }
  return "?";
}

void Copy(Driver& driver, int device, Direction dir, void* dst, const void* src, size_t size,
          const std::string& where) {
  if (size == 0) return;
  // The stages of the GPU trace (cuda/trace.h), by direction.
  static constexpr const char* kEnqueue[] = {"copy.d2d.enqueue", "copy.d2h.enqueue",
                                             "copy.h2d.enqueue"};
  static constexpr const char* kSync[] = {"copy.d2d.sync", "copy.d2h.sync", "copy.h2d.sync"};
  trace::Stage enqueue(kEnqueue[static_cast<int>(dir)]);
  CUstream stream = driver.Stream(device, where);
  ScopedDevice on(driver, device, where);
  const DriverApi& a = driver.api();
  auto d = reinterpret_cast<CUdeviceptr>(dst);
  auto s = reinterpret_cast<CUdeviceptr>(src);
  switch (dir) {
    case Direction::kDeviceToDevice:
      driver.Check(a.cuMemcpyDtoDAsync_v2(d, s, size, stream), "cuMemcpyDtoDAsync", where);
      break;
    case Direction::kDeviceToHost:
      driver.Check(a.cuMemcpyDtoHAsync_v2(dst, s, size, stream), "cuMemcpyDtoHAsync", where);
      break;
    case Direction::kHostToDevice:
      driver.Check(a.cuMemcpyHtoDAsync_v2(d, src, size, stream), "cuMemcpyHtoDAsync", where);
      break;
  }
  enqueue.End();
  trace::Stage sync(kSync[static_cast<int>(dir)]);
  driver.Check(a.cuStreamSynchronize(stream), "cuStreamSynchronize", where);
}

}  // namespace pybackend::cuda
