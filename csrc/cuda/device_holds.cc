#include "cuda/device_holds.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/logging.h"
#include "cuda/driver.h"
#include "cuda/trace.h"

namespace pybackend::cuda {
namespace {

// The IPC handle of the allocation holding `ptr` and `ptr`'s offset in it (context pushed).
CUresult HandleOf(Driver& d, CUdeviceptr ptr, ipc::GpuRef* ref, IpcCache::Mapping* m,
                  const char** failed) {
  CUdeviceptr& base = m->base;
  size_t& size = m->size;
  CUresult rc = d.api().cuMemGetAddressRange_v2(&base, &size, ptr);
  if (rc != CUDA_SUCCESS) {
    *failed = "cuMemGetAddressRange";
    return rc;
  }
  CUipcMemHandle handle;
  rc = d.api().cuIpcGetMemHandle(&handle, base);
  if (rc != CUDA_SUCCESS) {
    *failed = "cuIpcGetMemHandle";
    return rc;
  }
  std::memcpy(ref->handle.data(), handle.reserved, ref->handle.size());
  ref->offset = ptr - base;
  return CUDA_SUCCESS;
}

}  // namespace

bool DeviceHolds::PoolFromEnv() {
  // On by default since an H200 run (docs/gpu.md "Runs", 2026-11-29): the 64 MiB GPU
  // identity's backend time 980 -> 527 us, tests/gpu all passing with it. "0", "false",
  // "off" or "no" (any case) turn it off, as pybackend/stub/gpu.py reads it.
  const char* v = std::getenv("PYBACKEND_GPU_LEND_POOL");
  if (v == nullptr) return true;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s != "0" && s != "false" && s != "off" && s != "no";
}

DeviceHolds::DeviceHolds() : pool_(PoolFromEnv()) {}

void DeviceHolds::set_pool(bool on) {
  std::deque<Held> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pool_ = on;
    if (!on) {
      idle.swap(idle_);
      idle_bytes_ = 0;
      refused_.clear();
    }
  }
  for (const Held& h : idle) Free(h);
}

size_t DeviceHolds::pooled() {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

bool DeviceHolds::TakePooled(int device, size_t size, Held* out) {
  // Newest first: the allocation the stub used last is the likeliest to be mapped there.
  for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
    if (it->device == device && it->m.size >= size && it->m.size / 2 <= size) {
      *out = *it;
      idle_bytes_ -= it->m.size;
      idle_.erase(std::next(it).base());
      return true;
    }
  }
  return false;
}

DeviceHolds::Key DeviceHolds::KeyOf(const ipc::GpuRef& ref) {
  return {ref.device,
          std::string(reinterpret_cast<const char*>(ref.handle.data()), ref.handle.size())};
}

void DeviceHolds::Remember(const ipc::GpuRef& ref, IpcCache::Mapping m) {
  Key key = KeyOf(ref);
  if (shared_.count(key) == 0) {
    shared_order_.push_back(key);
    if (shared_order_.size() > kMaxShared) {
      shared_.erase(shared_order_.front());
      shared_order_.pop_front();
    }
  }
  shared_[key] = m;
}

bool DeviceHolds::Find(const ipc::GpuRef& ref, IpcCache::Mapping* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = shared_.find(KeyOf(ref));
  if (it == shared_.end()) return false;
  *out = it->second;
  return true;
}

bool DeviceHolds::Share(int device, const void* ptr, const std::string& where, ipc::GpuRef* ref) {
  trace::Stage stage("input.share");
  const std::pair<int, const void*> at{device, ptr};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pool_ && std::find(refused_.begin(), refused_.end(), at) != refused_.end()) {
      stage.Rename("input.share_refused_known");
      return false;
    }
  }
  Driver& d = Driver::Get(where);
  IpcCache::Mapping m;
  {
    ScopedDevice on(d, device, where);
    const char* failed = nullptr;
    if (HandleOf(d, reinterpret_cast<CUdeviceptr>(ptr), ref, &m, &failed) != CUDA_SUCCESS) {
      stage.Rename("input.share_refused");
      std::lock_guard<std::mutex> lock(mu_);
      if (pool_) {
        refused_.push_back(at);
        if (refused_.size() > kMaxRefused) refused_.pop_front();
      }
      return false;
    }
  }
  ref->owner = ipc::Owner::BACKEND;
  ref->device = static_cast<uint32_t>(device);
  ref->hold = 0;
  std::lock_guard<std::mutex> lock(mu_);
  Remember(*ref, m);
  return true;
}

CUdeviceptr DeviceHolds::Allocate(int device, size_t size, const std::string& where,
                                  ipc::GpuRef* ref) {
  ref->owner = ipc::Owner::BACKEND;
  ref->device = static_cast<uint32_t>(device);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Held h;
    if (pool_ && TakePooled(device, size == 0 ? 1 : size, &h)) {
      trace::Count("lend.pool_hit");
      std::memcpy(ref->handle.data(), h.key.second.data(), ref->handle.size());
      ref->offset = 0;
      ref->hold = next_++;
      held_[ref->hold] = h;
      Remember(*ref, h.m);
      return h.ptr;
    }
  }
  Driver& d = Driver::Get(where);
  ScopedDevice on(d, device, where);
  CUdeviceptr ptr = 0;
  trace::Stage alloc("lend.alloc");
  d.Check(d.api().cuMemAlloc_v2(&ptr, size == 0 ? 1 : size), "cuMemAlloc", where,
          "the GPU is out of memory");
  alloc.End();
  const char* failed = nullptr;
  IpcCache::Mapping m;
  trace::Stage handle("lend.handle");
  CUresult rc = HandleOf(d, ptr, ref, &m, &failed);
  handle.End();
  if (rc != CUDA_SUCCESS) {
    d.api().cuMemFree_v2(ptr);
    d.Check(rc, failed, where,
            "CUDA IPC is unavailable here; set the model parameter FORCE_CPU_ONLY_INPUT_TENSORS "
            "to \"yes\" and do not ask BLS for GPU outputs");
  }
  std::lock_guard<std::mutex> lock(mu_);
  ref->hold = next_++;
  held_[ref->hold] = Held{device, ptr, KeyOf(*ref), m};
  Remember(*ref, m);
  return ptr;
}

void DeviceHolds::Free(const Held& h) {
  trace::Stage stage("lend.free");
  try {
    Driver& d = Driver::Get("freeing GPU memory lent to a stub");
    ScopedDevice on(d, h.device, "freeing GPU memory lent to a stub");
    CUresult rc = d.api().cuMemFree_v2(h.ptr);
    if (rc != CUDA_SUCCESS) PB_LOG_WARN("cuMemFree failed with " + d.ErrorName(rc));
  } catch (const std::exception& e) {
    PB_LOG_WARN(e.what());
  }
}

bool DeviceHolds::Release(uint64_t hold) {
  std::vector<Held> freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = held_.find(hold);
    if (it == held_.end()) return false;
    Held h = it->second;
    held_.erase(it);
    shared_.erase(h.key);  // its order entry goes when it reaches the front
    if (!pool_) {
      freed.push_back(h);
    } else {
      // Kept for the next input; past the bounds the oldest idle ones go.
      idle_.push_back(h);
      idle_bytes_ += h.m.size;
      while (idle_.size() > kPoolMaxBuffers || idle_bytes_ > kPoolMaxBytes) {
        freed.push_back(idle_.front());
        idle_bytes_ -= idle_.front().m.size;
        idle_.pop_front();
      }
    }
  }
  for (const Held& h : freed) Free(h);
  return true;
}

void DeviceHolds::ReleaseAll() {
  std::vector<Held> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [hold, h] : held_) all.push_back(h);
    all.insert(all.end(), idle_.begin(), idle_.end());
    held_.clear();
    idle_.clear();
    idle_bytes_ = 0;
    shared_.clear();
    shared_order_.clear();
    refused_.clear();
  }
  for (const Held& h : all) Free(h);
}

size_t DeviceHolds::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

}  // namespace pybackend::cuda
