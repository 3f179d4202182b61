// The copies the backend makes between a stub's tensors and Triton's buffers when either side
// is GPU memory: a GPU_IPC output of the stub (mapped once through the session's IpcCache) into
// Triton's buffer on a GPU (device to device) or in host memory (device to host), and a host
// output into Triton's GPU buffer (host to device). Each copy is complete when the call returns
// and is counted in pybackend_gpu_copies_total. docs/gpu.md describes the design.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "backend/stub_session.h"
#include "ipc/codec.h"
#include "triton/tritonserver.h"

namespace pybackend {

// Copies output `t` (location GPU_IPC) into `dst`, a buffer of Triton's in memory `mem`
// (`mem_id`: its device when GPU). Throws BackendError naming model, instance and the output.
void CopyGpuOutput(StubSession& session, const ipc::TensorDesc& t, void* dst,
                   TRITONSERVER_MemoryType mem, int64_t mem_id);

// Runs fn(address here) for the bytes a GPU_IPC tensor of the stub's names: the stub's own
// allocation (mapped once through the session's IpcCache) or memory of ours it sends back
// (owner BACKEND: a view of a GPU input). Bounds-checked. `where` names the tensor.
void WithGpuTensor(StubSession& session, const ipc::TensorDesc& t, const std::string& where,
                   const std::function<void(const void*)>& fn);

// Copies `size` host bytes at `src` into `dst`, Triton's buffer on GPU `mem_id`.
void CopyHostToGpu(StubSession& session, const std::string& name, void* dst, int64_t mem_id,
                   const void* src, uint64_t size);

}  // namespace pybackend
