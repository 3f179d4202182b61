#include "backend/gpu_transfer.h"

#include "backend/error.h"
#include "cuda/driver.h"
#include "cuda/ipc_cache.h"

namespace pybackend {
namespace {

std::string Where(StubSession& session, const std::string& name) {
  return "model '" + session.options().model_name + "', instance '" +
         session.options().instance_name + "', output '" + name + "'";
}

}  // namespace

void WithGpuTensor(StubSession& session, const ipc::TensorDesc& t, const std::string& where,
                   const std::function<void(const void*)>& fn) {
  auto check = [&](const cuda::IpcCache::Mapping& m) {
    if (t.gpu.offset > m.size || t.byte_size > m.size - t.gpu.offset) {
      Throw(TRITONSERVER_ERROR_INTERNAL, where + ": names bytes [" + std::to_string(t.gpu.offset) +
                                             ", " + std::to_string(t.gpu.offset + t.byte_size) +
                                             ") of a GPU allocation of " + std::to_string(m.size) +
                                             " bytes");
    }
    fn(reinterpret_cast<const void*>(m.base + t.gpu.offset));
  };
  if (t.gpu.owner == ipc::Owner::BACKEND) {
    cuda::IpcCache::Mapping m;
    if (!session.ledger().FindLentDevice(t.gpu, &m)) {
      Throw(TRITONSERVER_ERROR_INTERNAL,
            where +
                ": names GPU memory of the backend's that it does not know (a GPU input "
                "kept after its request ended?)");
    }
    check(m);
    return;
  }
  session.ledger().WithStubDevice(t.gpu, where, check);
}

void CopyGpuOutput(StubSession& session, const ipc::TensorDesc& t, void* dst,
                   TRITONSERVER_MemoryType mem, int64_t mem_id) {
  const std::string where = Where(session, t.name);
  cuda::Driver& driver = cuda::Driver::Get(where);
  WithGpuTensor(session, t, where, [&](const void* src) {
    if (mem == TRITONSERVER_MEMORY_GPU) {
      cuda::Copy(driver, static_cast<int>(mem_id), cuda::Direction::kDeviceToDevice, dst, src,
                 t.byte_size, where);
      session.CountGpuCopy(cuda::Direction::kDeviceToDevice);
    } else {
      cuda::Copy(driver, static_cast<int>(t.gpu.device), cuda::Direction::kDeviceToHost, dst, src,
                 t.byte_size, where);
      session.CountGpuCopy(cuda::Direction::kDeviceToHost);
    }
  });
}

void CopyHostToGpu(StubSession& session, const std::string& name, void* dst, int64_t mem_id,
                   const void* src, uint64_t size) {
  const std::string where = Where(session, name);
  cuda::Driver& driver = cuda::Driver::Get(where);
  cuda::Copy(driver, static_cast<int>(mem_id), cuda::Direction::kHostToDevice, dst, src, size,
             where);
  session.CountGpuCopy(cuda::Direction::kHostToDevice);
}

}  // namespace pybackend
