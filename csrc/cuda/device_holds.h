// Device memory the backend hands to one stub, by hold id: buffers it allocated (a GPU input
// copied out of memory CUDA IPC cannot share, a BLS output on a GPU) are freed when the stub
// returns the hold (a FREE of owner BACKEND naming the BlockRef (GPU_HOLD_SEG, hold)) or when
// the session ends (stub exit, crash or restart). Memory of Triton's that CUDA IPC can share
// is described without a hold (hold 0): it is valid while its request is.
//
// The lending pool (on unless PYBACKEND_GPU_LEND_POOL=0, docs/gpu.md "Where the time goes"):
// a returned hold's allocation is kept, with its IPC handle, for the next input of about its
// size instead of freed, so a request costs no cuMemAlloc, cuIpcGetMemHandle or cuMemFree,
// and the stub (which reads the same variable) keeps its mapping of that handle open instead
// of opening and closing it per request; and a pointer CUDA IPC refused to share (a client's
// CUDA shared memory, imported by Triton, is the same pointer request after request) is
// remembered, so the next input there goes straight to the copy (a stale entry costs a copy,
// never a wrong share; the last kMaxRefused kept). Bounded: kPoolMaxBuffers / kPoolMaxBytes idle,
// the oldest freed past them; all freed at teardown. On by default since an H200 run showed it
// faster with tests/gpu passing (docs/gpu.md "Runs"). What it costs: device memory stays
// allocated between requests (bounded as above), and memory the backend copies the next input
// into may still be read by work a model queued on an earlier input and never waited for, as
// with the original's CUDA memory pool, which it reuses the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "cuda/driver_api.h"
#include "cuda/ipc_cache.h"
#include "ipc/codec.h"

namespace pybackend::cuda {

class DeviceHolds {
 public:
  // Describes `ptr` (device memory on `device`) for the stub: the IPC handle of its
  // allocation and its offset there, hold 0. False when CUDA IPC cannot share it (memory this
  // process imported itself, such as a client's CUDA shared memory; virtual-memory
  // allocations).
  bool Share(int device, const void* ptr, const std::string& where, ipc::GpuRef* ref);
  DeviceHolds();  // the pool as PYBACKEND_GPU_LEND_POOL says
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
  // The lending pool (tests set it; the default is the environment's), and its idle buffers.
  static bool PoolFromEnv();
  void set_pool(bool on);
  size_t pooled();
  static constexpr size_t kPoolMaxBuffers = 8;
  static constexpr size_t kPoolMaxBytes = size_t{1} << 30;
  // Our allocation that `ref` (owner BACKEND: the stub sends back memory we shared, e.g. an
  // output that is a view of a GPU input) names. False when we shared no such allocation.
  bool Find(const ipc::GpuRef& ref, IpcCache::Mapping* out);

 private:
  using Key = std::pair<uint32_t, std::string>;  // device, handle bytes
  static Key KeyOf(const ipc::GpuRef& ref);
  void Remember(const ipc::GpuRef& ref, IpcCache::Mapping m);  // with mu_ held
  struct Held {
    int device;
    CUdeviceptr ptr;
    Key key;
    IpcCache::Mapping m;  // the whole allocation (what the pool reuses)
  };
  void Free(const Held& h);
  // An idle pooled allocation of at least `size` bytes on `device` and at most twice that,
  // taken out of the pool; false when none (with mu_ held).
  bool TakePooled(int device, size_t size, Held* out);
  std::mutex mu_;
  bool pool_ = false;
  std::deque<Held> idle_;  // the pool, oldest first
  size_t idle_bytes_ = 0;
  // Pointers (device, address) Share refused, under the pool (oldest first).
  static constexpr size_t kMaxRefused = 64;
  std::deque<std::pair<int, const void*>> refused_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, Held> held_;
  // What we shared, by handle (bounded: Triton's allocations come and go; the oldest entry
  // goes past kMaxShared, and a freed allocation's handle never comes back).
  static constexpr size_t kMaxShared = 256;
  std::map<Key, IpcCache::Mapping> shared_;
  std::deque<Key> shared_order_;
};

}  // namespace pybackend::cuda
