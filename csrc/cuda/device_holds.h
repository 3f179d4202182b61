// Device memory the backend hands to one stub, by hold id: buffers it allocated (a GPU input
// copied out of memory CUDA IPC cannot share, a BLS output on a GPU) are freed when the stub
// returns the hold (a FREE of owner BACKEND naming the BlockRef (GPU_HOLD_SEG, hold)) or when
// the session ends (stub exit, crash or restart). Memory of Triton's that CUDA IPC can share
// is described without a hold (hold 0): it is valid while its request is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/driver_api.h"
#include "ipc/codec.h"

namespace pybackend::cuda {

// Describes `ptr` (device memory on `device`) for the stub: the IPC handle of its allocation
// and its offset there, hold 0. False when CUDA IPC cannot share it (memory this process
// imported itself, such as a client's CUDA shared memory; virtual-memory allocations).
bool ShareExisting(int device, const void* ptr, const std::string& where, ipc::GpuRef* ref);

class DeviceHolds {
 public:
  DeviceHolds() = default;
  ~DeviceHolds() { ReleaseAll(); }
  DeviceHolds(const DeviceHolds&) = delete;
  DeviceHolds& operator=(const DeviceHolds&) = delete;

  // Allocates `size` bytes on `device` (cuMemAlloc), described for the stub in `ref` (owner
  // BACKEND, a fresh hold). Returns the allocation. Throws BackendError naming `where`.
  CUdeviceptr Allocate(int device, size_t size, const std::string& where, ipc::GpuRef* ref);
  // Frees the allocation of `hold`; false when there is none.
  bool Release(uint64_t hold);
  void ReleaseAll();
  size_t size();

 private:
  struct Held {
    int device;
    CUdeviceptr ptr;
  };
  void Free(const Held& h);
  std::mutex mu_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, Held> held_;
};

}  // namespace pybackend::cuda
