#include "cuda/ipc_cache.h"

#include <cstring>

#include "backend/logging.h"
#include "cuda/driver.h"
#include "cuda/trace.h"

namespace pybackend::cuda {

void IpcCache::set_on_count(std::function<void(size_t)> on_count) {
  std::lock_guard<std::mutex> lock(mu_);
  on_count_ = std::move(on_count);
  Report();
}

void IpcCache::Report() {
  if (on_count_) on_count_(open_.size());
}

void IpcCache::With(const ipc::GpuRef& ref, const std::string& where,
                    const std::function<void(const Mapping&)>& fn) {
  Driver& driver = Driver::Get(where);
  int device = static_cast<int>(ref.device);
  std::lock_guard<std::mutex> lock(mu_);
  Key key{ref.device,
          std::string(reinterpret_cast<const char*>(ref.handle.data()), ref.handle.size())};
  auto it = open_.find(key);
  if (it != open_.end()) trace::Count("ipc_cache.hit");
  if (it == open_.end()) {
    trace::Stage stage("ipc_cache.open");
    CUipcMemHandle handle;
    std::memcpy(handle.reserved, ref.handle.data(), sizeof(handle.reserved));
    Mapping m;
    {
      ScopedDevice on(driver, device, where);
      driver.Check(
          driver.api().cuIpcOpenMemHandle_v2(&m.base, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
          "cuIpcOpenMemHandle", where,
          "the stub's GPU memory cannot be mapped here; CUDA IPC needs the stub and "
          "tritonserver on the same machine, in the same container, outside WSL");
      CUdeviceptr start = 0;
      CUresult rc = driver.api().cuMemGetAddressRange_v2(&start, &m.size, m.base);
      if (rc != CUDA_SUCCESS) {
        driver.api().cuIpcCloseMemHandle(m.base);
        driver.Check(rc, "cuMemGetAddressRange", where);
      }
    }
    stage.End();  // what follows is bookkeeping, and evictions (closes) when over the bounds
    it = open_.emplace(key, m).first;
    order_.push_back(key);
    bytes_ += m.size;
    // Over the bounds: close the oldest mappings, never the one about to be used.
    while ((open_.size() > kMaxOpen || bytes_ > kMaxBytes) && order_.front() != key) {
      Key oldest = order_.front();
      order_.pop_front();
      auto old = open_.find(oldest);
      if (old == open_.end()) continue;
      bytes_ -= old->second.size;
      CUdeviceptr base = old->second.base;
      open_.erase(old);
      ScopedDevice on(driver, static_cast<int>(oldest.first), where);
      CUresult rc = driver.api().cuIpcCloseMemHandle(base);
      if (rc != CUDA_SUCCESS) {
        PB_LOG_WARN(where + ": cuIpcCloseMemHandle failed with " + driver.ErrorName(rc));
      }
    }
    Report();
  }
  fn(it->second);
}

void IpcCache::CloseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_.empty()) return;
  Driver& driver = Driver::Get("closing CUDA IPC mappings");  // loaded: something was opened
  for (const auto& [key, m] : open_) {
    try {
      ScopedDevice on(driver, static_cast<int>(key.first), "closing CUDA IPC mappings");
      CUresult rc = driver.api().cuIpcCloseMemHandle(m.base);
      if (rc != CUDA_SUCCESS) {
        PB_LOG_WARN("cuIpcCloseMemHandle failed with " + driver.ErrorName(rc));
      }
    } catch (const std::exception& e) {
      PB_LOG_WARN(e.what());
    }
  }
  open_.clear();
  order_.clear();
  bytes_ = 0;
  Report();
}

size_t IpcCache::open_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return open_.size();
}

}  // namespace pybackend::cuda
