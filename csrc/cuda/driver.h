// The CUDA driver, opened at run time (dlopen of libcuda.so.1) the first time a GPU tensor is
// met: the backend builds without CUDA and a model that never sees a GPU tensor loads nothing
// and creates no CUDA context (UV-28). Every call runs in the *primary* context of its device
// (the one Triton's CUDA runtime and the stub's torch/cupy use), pushed for the call and
// popped after, and every result is checked: a failure throws BackendError naming who (model,
// instance), the call, the driver's error name and the fix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/driver_api.h"

namespace pybackend::cuda {

class Driver {
 public:
  // The process's driver, loaded on first use; throws BackendError (UNAVAILABLE) naming
  // `where` when libcuda.so.1 cannot be loaded or initialized.
  static Driver& Get(const std::string& where);

  const DriverApi& api() const { return api_; }
  std::string ErrorName(CUresult rc) const;
  // Throws BackendError (INTERNAL) for rc != CUDA_SUCCESS:
  // "<where>: CUDA driver call <call> failed with <CUDA_ERROR_...>: <fix>".
  void Check(CUresult rc, const char* call, const std::string& where,
             const std::string& fix = "") const;

  // `device`'s primary context (retained once, for the life of the process).
  CUcontext Context(int device, const std::string& where);
  // Our non-blocking stream on `device`, for copies we wait for at once.
  CUstream Stream(int device, const std::string& where);

 private:
  Driver() = default;
  DriverApi api_{};
  std::mutex mu_;
  std::unordered_map<int, CUcontext> contexts_;
  std::unordered_map<int, CUstream> streams_;
};

// Makes `device`'s primary context current on this thread while it lives.
class ScopedDevice {
 public:
  ScopedDevice(Driver& driver, int device, const std::string& where);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  Driver& driver_;
};

// What kind of memory each side of a copy is.
enum class Direction { kDeviceToDevice, kDeviceToHost, kHostToDevice };
const char* DirectionLabel(Direction d);  // "d2d", "d2h", "h2d" (the metric's label)

// Copies `size` bytes on `device`'s stream; complete when it returns.
void Copy(Driver& driver, int device, Direction dir, void* dst, const void* src, size_t size,
          const std::string& where);

}  // namespace pybackend::cuda
