// The stub's device allocations one session has mapped with cuIpcOpenMemHandle, by handle.
// Opening costs a driver round trip and maps memory, so each is opened once and reused while
// the stub lives (torch's and cupy's caching allocators hand out the same allocations again and
// again); all are closed when the session ends (stub exit, crash or restart). Bounded: past
// kMaxOpen mappings or kMaxBytes mapped the oldest are closed, since a freed allocation's
// handle never comes back and a mapping keeps the stub's memory from returning to the driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "cuda/driver_api.h"
#include "ipc/codec.h"

namespace pybackend::cuda {

class IpcCache {
 public:
  static constexpr size_t kMaxOpen = 64;
  static constexpr size_t kMaxBytes = size_t{2} << 30;
  using Key = std::pair<uint32_t, std::string>;  // device, handle bytes

  IpcCache() = default;
  ~IpcCache() { CloseAll(); }
  IpcCache(const IpcCache&) = delete;
  IpcCache& operator=(const IpcCache&) = delete;

  // Called with the number of open mappings after every change (the gauge).
  void set_on_count(std::function<void(size_t)> on_count);
  struct Mapping {
    CUdeviceptr base = 0;  // the allocation's first byte in this process
    size_t size = 0;       // its size, to bounds-check what the stub names
  };
  // Runs fn(mapping) with the allocation `ref` names mapped on ref.device, opening it on
  // first use. Serialized with every other use of the cache, so no mapping is closed while fn
  // copies from it. Throws BackendError naming `where`.
  void With(const ipc::GpuRef& ref, const std::string& where,
            const std::function<void(const Mapping&)>& fn);
  // Closes every mapping (errors are logged: the stub may be gone already).
  void CloseAll();
  size_t open_count();

 private:
  void Report();  // with mu_ held
  std::mutex mu_;
  std::map<Key, Mapping> open_;
  std::deque<Key> order_;  // oldest first
  size_t bytes_ = 0;       // mapped in all
  std::function<void(size_t)> on_count_;
};

}  // namespace pybackend::cuda
